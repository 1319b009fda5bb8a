# Hand-written tool module (not generated from a notebook).
"""Exercises a reader solves in a chapter and checks there, with one line: `check("2.1", masked_softmax)`.

Each check runs the reader's answer against properties and references (never against the text of a solution)
and says in one sentence what is wrong, that it passes, or, while the stub still raises NotImplementedError (or the
answer is still None), that it is not solved yet. Worked solutions are in `solutions/`; `tests/test_exercises.py`
proves that each passes its check and that the mistakes a learner makes fail it with the intended sentence.
"""

from transformer_lib.exercises.core import EXERCISES, Wrong, check, verdict
from transformer_lib.exercises import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11  # noqa: F401  (each registers its checks)

__all__ = ["Wrong", "EXERCISES", "verdict", "check"]
