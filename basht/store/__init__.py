"""The one store: SQLAlchemy schema and the repository that every other part writes through."""

from basht.store.repository import TRIAL_STATES, Store
from basht.store.schema import (
    CheckpointRow,
    DecisionRow,
    EnergyAccountRow,
    ExperimentRow,
    InstanceRow,
    MetricRow,
    PhaseRow,
    PowerSampleRow,
    RunRow,
    StageRow,
    TrialReportRow,
    TrialRow,
)

__all__ = [
    "TRIAL_STATES",
    "CheckpointRow",
    "DecisionRow",
    "EnergyAccountRow",
    "ExperimentRow",
    "InstanceRow",
    "MetricRow",
    "PhaseRow",
    "PowerSampleRow",
    "RunRow",
    "StageRow",
    "Store",
    "TrialReportRow",
    "TrialRow",
]
