"""Trials as Ray actors: the executor, the session that starts or joins Ray (the one way Basht
starts and stops a local Ray, for `executor: ray` and for Ray Tune), its watchdog, and the
per-node energy meters and node ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.engine.ray.executor import RayExecutor
    from basht.engine.ray.session import RaySession

__all__ = ["RayExecutor", "RaySession"]

__getattr__, __dir__ = lazy_exports(__name__)
