"""Replay a decision log: the same calls in the same order rebuild an algorithm's state exactly.

Algorithms draw random numbers only inside `suggest()` and decide only from what they were told,
so the log of calls is a complete record of their state, random state included. A replay checks
every answer against the log and stops at the first difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from basht.errors import BashtError
from basht.tune.base import Algorithm


class ReplayError(BashtError):
    """The algorithm answered differently from the log (another seed, version or experiment)."""


def replay(algorithm: Algorithm, decisions: Iterable[Any]) -> Algorithm:
    """Feed logged calls (objects with op, trial, budget, value, result, and scores where the
    algorithm ranks several objectives) to a fresh algorithm."""
    for d in decisions:
        if d.op == "suggest":
            s = algorithm.suggest()
            got = None if s is None else (s.trial_id, s.budget, "resume" if s.resume else "new")
            if got != (d.trial, d.budget, d.result):
                raise ReplayError(
                    f"decision log diverges at step {d.seq}: logged suggestion "
                    f"{(d.trial, d.budget, d.result)}, the algorithm gives {got}"
                )
        elif d.op == "report":
            # An algorithm of several objectives was told a score (stored beside the value).
            told = tuple(d.scores) if getattr(d, "scores", None) is not None else d.value
            decision = algorithm.report(d.trial, d.budget, told)
            if decision.value != d.result:
                raise ReplayError(
                    f"decision log diverges at step {d.seq}: trial {d.trial} at budget {d.budget} "
                    f"was told {d.result!r}, the algorithm now says {decision.value!r}"
                )
        elif d.op == "complete":
            algorithm.complete(d.trial)
        elif d.op == "fail":
            algorithm.fail(d.trial)
        else:
            raise ReplayError(f"unknown operation {d.op!r} at step {d.seq} of the decision log")
    return algorithm
