# Hand-written tool module (not generated from a notebook).
"""python -m transformer_lib.book: the book's command line (transformer_lib.book.cli)."""
import sys

from transformer_lib.book.cli import main

sys.exit(main())
