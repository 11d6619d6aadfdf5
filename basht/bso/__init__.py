"""Zeus-style batch size optimizer for recurring training jobs: bandit, server, client, simulator.

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
    from basht.bso.spec import JobSpec, ReportResponse, TrialId

__all__ = [
    "BSOClient",
    "BSOError",
    "BSOOrderError",
    "BSOServerError",
    "BatchSizeOptimizer",
    "JobSpec",
    "ReportResponse",
    "TrainFailError",
    "TrialId",
    "zeus_cost",
]

__getattr__, __dir__ = lazy_exports(__name__)
