"""Other tuning frameworks as systems under test: Optuna and Ray Tune, measured as native is.

Each runs the same Basht workload, space, seeds, budgets and trial limit through the seven phases,
and writes its trials, reports and timings to the store through a `TrialRecorder`, so every table,
metric and plot reads them exactly as it reads native's. Optuna and Ray are imported only when
such a system is deployed (extra `peers`). `run_comparison` runs several systems in turn.
"""

from basht.bench.systems.compare import parse_systems, run_comparison
from basht.bench.systems.optuna_system import OptunaSystem
from basht.bench.systems.peer import SYSTEMS
from basht.bench.systems.raytune_system import RayTuneSystem
from basht.bench.systems.recorder import TrialRecorder

__all__ = [
    "SYSTEMS",
    "OptunaSystem",
    "RayTuneSystem",
    "TrialRecorder",
    "parse_systems",
    "run_comparison",
]
