"""`basht dashboard`: a local web page of the store's runs, each drawn live while it runs.

Read-only: the store is opened so that nothing can be written through it (SQLite `mode=ro`, a
read-only PostgreSQL session). The run's charts and their data are the HTML report's
(`basht.report.charts`); the server stack (FastAPI, uvicorn) is imported only when it serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.dashboard.app import create_app
    from basht.dashboard.data import comparison_detail, comparisons, run_detail, runs_list
    from basht.dashboard.server import Dashboard, open_dashboard

__all__ = [
    "Dashboard",
    "comparison_detail",
    "comparisons",
    "create_app",
    "open_dashboard",
    "run_detail",
    "runs_list",
]

__getattr__, __dir__ = lazy_exports(__name__)
