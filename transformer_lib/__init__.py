# Hand-written tool module (not generated from a notebook).
"""transformer_lib: the Transformer of "Attention Is All You Need", built chapter by chapter.

Each module but `book`, `runtime` and `train` is generated from a chapter in notebooks/
(see book.yml for which); edit the notebook, then run
`python -m transformer_lib.book export`.
"""
__version__ = "0.1.0"
