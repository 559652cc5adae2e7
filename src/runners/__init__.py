"""Prompt datasets + a model -> per-model result datasets (see DESIGN section 6 and 7).

The backends and the run loop land with the runners issue; nothing here is imported by
the prompt-dataset builders.
"""
