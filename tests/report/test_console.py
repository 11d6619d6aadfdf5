"""The console tables: what a terminal of the usual width shows whole."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

from rich.console import Console

from basht.report import runs_table


def test_the_runs_list_fits_80_columns_with_a_long_run_id():
    """A run id is there to be copied, so it must not wrap; nor may a header be cut short."""
    run = SimpleNamespace(
        id="digits-random-20261123-022919-37c2",
        system="native",
        status="completed",
        started_at=datetime(2026, 11, 23, 2, 29),
        best_value=0.9805,
        best_trial=1,
    )
    console = Console(width=80, record=True)
    console.print(runs_table([run]))
    lines = console.export_text().splitlines()
    assert lines[1].split() == ["run", "system", "status", "started", "best", "trial"]
    assert lines[2].split() == [run.id, "native", "completed", "11-23", "02:29", "0.9805", "1"]
