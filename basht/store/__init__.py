"""The one store: SQLAlchemy schema and the repository that every other part writes through."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.store.repository import Store
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

__getattr__, __dir__ = lazy_exports(__name__)
