"""Zeus-style batch size optimizer for recurring training jobs: bandit, server, client, simulator.

`basht bso serve` runs the server (Zeus's wire protocol, so Zeus clients work unchanged);
`BatchSizeOptimizer` is the client a training script uses. The server stack (FastAPI, SQLAlchemy
async drivers) is only imported when used, so `import basht.bso` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from basht.bso.cost import zeus_cost
from basht.bso.errors import BSOError, BSOOrderError, BSOServerError, TrainFailError
from basht.bso.spec import JobSpec, ReportResponse, TrialId

if TYPE_CHECKING:
    from basht.bso.client import BatchSizeOptimizer
    from basht.bso.http import BSOClient

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

_LAZY = {"BatchSizeOptimizer": "basht.bso.client", "BSOClient": "basht.bso.http"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'basht.bso' has no attribute {name!r}")
