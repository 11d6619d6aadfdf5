"""A function workload that reports which heavy modules its worker process has imported.

It imports nothing itself, so what it sees is what the worker loaded to run a trial.
"""

from __future__ import annotations

import sys
from typing import Any

#: What a trial worker has no use for: the store, the console, the reports, the CLI, the schema.
DRIVER_ONLY_PACKAGES = ("sqlalchemy", "rich", "typer", "pydantic", "yaml")
DRIVER_ONLY_MODULES = ("basht.report", "basht.store", "basht.cli")


def probe(config: dict[str, Any], trial: Any) -> None:
    loaded = [
        name
        for name in sys.modules
        if name.split(".")[0] in DRIVER_ONLY_PACKAGES or name.startswith(DRIVER_ONLY_MODULES)
    ]
    basht_modules = sum(name.startswith("basht") for name in sys.modules)
    trial.report(1, driver_only=float(len(loaded)), basht_modules=float(basht_modules))
