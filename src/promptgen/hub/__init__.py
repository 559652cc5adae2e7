"""The Hub-ready dataset folder: the writer (`folder`), the readers (`read`), what a builder hands it (`draft`),
the card (`cards`).

May import `promptgen.core`, `recipe` and `sources`; never a probe package, not even for a type.
"""
