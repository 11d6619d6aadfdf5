"""Tuning algorithms behind ask/tell, and the Tuner loop that joins one to an executor."""

from basht.tune.base import Algorithm, Decision, Suggestion
from basht.tune.basic import FullBudgetSearch, GridSearch, RandomSearch
from basht.tune.samplers import GridSampler, RandomSampler
from basht.tune.tuner import Tuner, TunerStatus, trial_seed

__all__ = [
    "Algorithm",
    "Decision",
    "FullBudgetSearch",
    "GridSampler",
    "GridSearch",
    "RandomSampler",
    "RandomSearch",
    "Suggestion",
    "Tuner",
    "TunerStatus",
    "trial_seed",
]
