"""The Hub-ready dataset folder: the writer (`folder`), what a builder hands it (`draft`), the card (`cards`).

May import `promptgen.core`, `recipe` and `sources`; never a probe package (the build options
name the probes' extra inputs only as types).
"""
