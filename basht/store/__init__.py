"""The one store: SQLAlchemy schema and the repository that every other part writes through."""

from basht.store.repository import TRIAL_STATES, Store
from basht.store.schema import (
    CheckpointRow,
    DecisionRow,
    EnergyAccountRow,
    ExperimentRow,
    MetricRow,
    PhaseRow,
    PowerSampleRow,
    RunRow,
    TrialReportRow,
    TrialRow,
)

__all__ = [
    "TRIAL_STATES",
    "CheckpointRow",
    "DecisionRow",
    "EnergyAccountRow",
    "ExperimentRow",
    "MetricRow",
    "PhaseRow",
    "PowerSampleRow",
    "RunRow",
    "Store",
    "TrialReportRow",
    "TrialRow",
]
