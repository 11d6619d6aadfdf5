"""Failpoints: named places where a fault-injection run makes this process die, to prove that a
kill there loses nothing (as storage engines test crash consistency).

Off unless `BASHT_FAILPOINTS` names some: `deploy=0.5,report=0.02` kills the process with
SIGKILL at `deploy` half the times it gets there, and at 2% of `report`s. `BASHT_FAILPOINTS_SEED`
makes the draws repeatable. When it is unset, a failpoint costs one dictionary lookup.
"""

from __future__ import annotations

import os
import random
import signal
import sys

#: Where the coordinator can be told to die, in the order a run reaches them.
POINTS = ("deploy", "dispatch", "report", "promotion", "checkpoint", "finish", "collect", "test")


def _parse(spec: str) -> dict[str, float]:
    chances = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, chance = item.partition("=")
        if name not in POINTS:
            raise SystemExit(f"BASHT_FAILPOINTS: unknown failpoint {name!r} (one of {POINTS})")
        try:
            chances[name] = float(chance or 1.0)
        except ValueError:
            raise SystemExit(f"BASHT_FAILPOINTS: {item!r} is not name=chance") from None
    return chances


_CHANCES = _parse(os.environ.get("BASHT_FAILPOINTS", ""))
_DRAW = random.Random(os.environ.get("BASHT_FAILPOINTS_SEED"))


def failpoint(name: str) -> None:
    """Die here, at once and without cleanup, if this failpoint is on and its draw says so."""
    chance = _CHANCES.get(name)
    if chance is not None and _DRAW.random() < chance:
        sys.stderr.write(f"failpoint {name}: killed\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
