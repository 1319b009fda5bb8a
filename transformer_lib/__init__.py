# Hand-written tool module (not generated from a notebook).
"""transformer_lib: the Transformer of "Attention Is All You Need", built chapter by chapter.

Each module is generated from a chapter in notebooks/ (book.yml says which), except the hand-written
tool modules `book`, `runtime`, `checks`, `files`, `claims`, `train`, `translate` and `evaluate`, which say so on
their first line. Edit the notebook, then run `python -m transformer_lib.book export`.
"""
__version__ = "0.1.0"
