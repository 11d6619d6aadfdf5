"""Other tuning frameworks as systems under test: Optuna, Ray Tune and Syne Tune, measured as
native is.

Each runs the same Basht workload, space, seeds, budgets and trial limit through the seven phases,
and writes its trials, reports and timings to the store through a `TrialRecorder`, so every table,
metric and plot reads them exactly as it reads native's. Optuna, Ray and Syne Tune are imported
only when such a system is deployed (extra `peers`). `run_comparison` runs several systems in turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.bench.systems.compare import parse_systems, run_comparison
    from basht.bench.systems.optuna_system import OptunaSystem
    from basht.bench.systems.peer import SYSTEMS
    from basht.bench.systems.raytune_system import RayTuneSystem
    from basht.bench.systems.recorder import TrialRecorder
    from basht.bench.systems.synetune_system import SyneTuneSystem

__all__ = [
    "OptunaSystem",
    "RayTuneSystem",
    "SYSTEMS",
    "SyneTuneSystem",
    "TrialRecorder",
    "parse_systems",
    "run_comparison",
]

__getattr__, __dir__ = lazy_exports(__name__)
