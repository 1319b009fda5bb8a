# Hand-written tool package (not generated from a notebook).
"""Input checks for every public entry point of transformer_lib, kept out of the chapters' way.

A class of the book spends one line on its inputs, a call into this package; the check raises a ValueError or
TypeError that names the argument and what was expected, before anything changes. docs/bad_inputs.md lists every
mistake tried and the message it gets (generated from tests/bad_inputs.py).

The package is organised like the chapters: `core` holds the checks every chapter shares (numbers, tensors, files,
dtypes and devices) and imports no chapter; `embeddings`, `attention`, `blocks`, `model`, `training`, `data`,
`decoding`, `translation`, `gpt` and `modern` hold the checks of the chapter module of the same name, and import
only `core`, earlier chapters' checks and, where a check needs a chapter's class, that earlier chapter's module.
Import from the module, e.g. `from transformer_lib.checks.attention import check_qkv`. Reading a checkpoint back
is the checkpoint format's business: transformer_lib.checkpoint.
"""
