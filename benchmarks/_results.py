"""What every benchmark writes beside its table: one JSON file, with the machine it ran on."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any


def machine(**extra: Any) -> dict[str, Any]:
    """This machine, as far as timings depend on it."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        **extra,
    }


def write_results(
    out: Path,
    benchmark: str,
    results: dict[str, Any],
    *,
    machine_extra: dict[str, Any] | None = None,
) -> None:
    """Write `results` to `out` as JSON, under the benchmark's name and this machine's."""
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": benchmark, "machine": machine(**(machine_extra or {})), **results}
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")
