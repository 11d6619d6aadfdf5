"""Tuning algorithms behind ask/tell, and the Tuner loop that joins one to an executor."""

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
    "SHA",
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
    "Suggestion",
    "SynchronousHyperband",
    "TPESampler",
    "Tuner",
    "TunerStatus",
    "replay",
    "rung_levels",
    "trial_seed",
]
