# Hand-written tool module (not generated from a notebook).
"""Exercises a reader solves in a chapter and checks there, with one line: `check("2.1", masked_softmax)`.

Each check runs the reader's answer against properties and references (never against the text of a solution)
and says in one sentence what is wrong, that it passes, or, while the stub still raises NotImplementedError (or the
answer is still None), that it is not solved yet. It tries fixed cases, whose failures name the classic slips, and
cases drawn afresh at every check, so that an answer written for the fixed cases fails. Worked solutions are in
`solutions/`; `tests/test_exercises.py` proves that each passes its check (through 25 draws) and that the mistakes a
learner makes fail it with the intended sentence.

A chapter's checks live in transformer_lib.exercises.chNN and are imported when `check` first meets one of that
chapter's numbers, so that chapter 2's `check` imports nothing of chapter 10 (all_exercises() imports them all).
"""

from transformer_lib.exercises.core import EXERCISES, Wrong, all_exercises, check, verdict

__all__ = ["Wrong", "EXERCISES", "all_exercises", "verdict", "check"]
