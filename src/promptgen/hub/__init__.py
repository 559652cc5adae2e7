"""The Hub-ready dataset folder: the writer (`folder`), the readers (`read`), what a builder hands it (`build_plan`),
the card (`cards`).

May import `promptgen.core`, `recipe` and `sources`; never a probe package (the build options
name the probes' extra inputs only as types).
"""
