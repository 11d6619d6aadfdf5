"""What every peer system checks before it starts: its framework is there, the run is its kind."""

from __future__ import annotations

import importlib
from typing import Any

from basht.bench.lifecycle import RunContext
from basht.errors import BashtError
from basht.experiment import peer_limit

#: Every system under test `system:` (and `basht compare --systems`) can name.
SYSTEMS = ("native", "optuna", "raytune", "synetune")
PEERS = "pip install 'basht[peers]'"
#: How to install a peer that the `peers` extra does not bring.
INSTALL = {
    "synetune": "pip install 'basht[synetune]' && pip install --no-deps 'syne-tune>=0.16,<0.17'"
}


def require(module: str, system: str) -> Any:
    """Import a peer framework, or say in one line how to get it."""

    try:
        return importlib.import_module(module)
    except ImportError:
        raise BashtError(
            f"system: {system} needs {module}, which is not installed ({INSTALL.get(system, PEERS)})"
        ) from None


def check_peer_experiment(ctx: RunContext, system: str) -> None:
    """What a peer system cannot do, said before anything starts."""
    exp = ctx.experiment
    limit = peer_limit(exp, system)
    if limit is not None:
        raise BashtError(": ".join(limit))
    if ctx.resume:
        raise BashtError(
            f"basht resume continues native runs only; run {exp.name} on {system} again"
        )
