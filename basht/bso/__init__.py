"""Zeus-style batch size optimizer for recurring training jobs: bandit, server, client, simulator,
and optionally the GPU power limit per batch size (Zeus's just-in-time power limit optimizer).

`basht bso serve` runs the server (Zeus's wire protocol, so Zeus clients work unchanged);
`BatchSizeOptimizer` is the client a training script uses. The server stack (FastAPI, SQLAlchemy
async drivers) is only imported when used, so `import basht.bso` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.bso.client import BatchSizeOptimizer
    from basht.bso.cost import zeus_cost
    from basht.bso.errors import BSOError, BSOOrderError, BSOServerError, TrainFailError
    from basht.bso.http import BSOClient
    from basht.bso.power import NvmlPowerLimits, PowerLimitError, PowerLimits
    from basht.bso.spec import Assignment, JobSpec, ReportResponse, TrialId

__all__ = [
    "Assignment",
    "BSOClient",
    "BSOError",
    "BSOOrderError",
    "BSOServerError",
    "BatchSizeOptimizer",
    "JobSpec",
    "NvmlPowerLimits",
    "PowerLimitError",
    "PowerLimits",
    "ReportResponse",
    "TrainFailError",
    "TrialId",
    "zeus_cost",
]

__getattr__, __dir__ = lazy_exports(__name__)
