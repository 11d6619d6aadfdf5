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


def _summary(**over):
    summary = {
        "run_id": "t-1",
        "status": "completed",
        "error": None,
        "system": "native",
        "executor": "local",
        "algorithm": "random sampling, pruner none",
        "workload": {"name": "my.wl:W", "dataset": "[red]data", "model": "net [/x]"},
        "space_size": 2,
        "best": {
            "trial": 1,
            "config": {"tag": "[/b]", "x": 0.5},
            "value": 0.3,
            "metric": "accuracy",
            "mode": "max",
        },
        "test_metrics": {"loss[/i]": 0.1},
        "trial_counts": {"completed": 1},
        "stop_reason": None,
        "results_dir": "results/t-1",
        "phases": [],
        "metrics": {},
    }
    return summary | over


def test_the_final_table_shows_user_strings_as_they_are_not_as_markup():
    """A config value, a workload's description, a test metric's name or an error is the user's
    text: "[/b]" in it is shown, not read as a closing tag that ends the run in a traceback."""
    from basht.report import result_tables

    console = Console(width=200, record=True)
    console.print(result_tables(_summary(status="failed", error="boom [bold]x[/bold] [/red]")))
    text = console.export_text()
    assert "failed (boom [bold]x[/bold] [/red])" in text
    assert "'tag': '[/b]'" in text
    assert "[red]data; net [/x]" in text
    assert "test loss[/i]" in text


def test_the_comparison_table_shows_settings_and_errors_as_they_are():
    from basht.report.compare import Row, compare_table
    from basht.report.comparison import Comparison

    comparison = Comparison("compare-x", "a vs b", ["native"], [0], "sqlite://", None, "/tmp", "")
    comparison.columns = ["a", "b"]
    rows = [
        Row("space.tag.values", text={"a": "[/b]", "b": "[red]"}, section="experiment"),
        Row("error", text={"a": "seed 0: bad [/x]"}),
    ]
    console = Console(width=120, record=True)
    console.print(compare_table(comparison, rows))
    text = console.export_text()
    assert "[/b]" in text and "[red]" in text and "seed 0: bad [/x]" in text


def test_why_trials_failed_is_a_row_per_reason_and_a_few_of_them():
    from basht.report.console import trial_errors

    trials = [{"trial": n, "state": "failed", "error": "OOM"} for n in range(10)]
    trials += [{"trial": 10 + n, "state": "failed", "error": f"bad {n}"} for n in range(5)]
    trials += [{"trial": 15, "state": "aborted", "error": None}]
    assert trial_errors(trials) == [
        ("failed (trials 0, 1, 2, 3, 4, 5, 6, 7 and 2 more)", "OOM"),
        ("failed (trial 10)", "bad 0"),
        ("failed (trial 11)", "bad 1"),
        ("failed (trial 12)", "bad 2"),
        ("…", "2 more reasons, in results.json"),
    ]
    assert trial_errors(trials[:1] + trials[-1:]) == [("failed (trial 0)", "OOM")]
