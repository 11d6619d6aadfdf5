"""Tuning algorithms behind ask/tell, and the Tuner loop that joins one to an executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.tune.asha import ASHA, AsyncHyperband, AsyncSuccessiveHalving
    from basht.tune.base import Algorithm, Decision, Suggestion
    from basht.tune.basic import FullBudgetSearch, GridSearch, RandomSearch
    from basht.tune.hyperband import SHA, Hyperband, SynchronousHyperband
    from basht.tune.replay import ReplayError, replay
    from basht.tune.rungs import rung_levels
    from basht.tune.samplers import GridSampler, RandomSampler
    from basht.tune.tpe import TPESampler
    from basht.tune.tuner import Tuner, TunerStatus, trial_seed

__all__ = [
    "ASHA",
    "Algorithm",
    "AsyncHyperband",
    "AsyncSuccessiveHalving",
    "Decision",
    "FullBudgetSearch",
    "GridSampler",
    "GridSearch",
    "Hyperband",
    "RandomSampler",
    "RandomSearch",
    "ReplayError",
    "SHA",
    "Suggestion",
    "SynchronousHyperband",
    "TPESampler",
    "Tuner",
    "TunerStatus",
    "replay",
    "rung_levels",
    "trial_seed",
]

__getattr__, __dir__ = lazy_exports(__name__)
