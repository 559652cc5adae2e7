"""Sources -> prompt datasets.

Everything here is deterministic: the same recipe and the same source bytes give
byte-identical parquet files and the same fingerprint.
"""
