"""A run's HTML sections from its summary, without plots: the tables the console shows too."""

from __future__ import annotations

from basht.report.html import run_sections
from tests.report.test_console import _summary


def _phase(name: str, duration: float, aborted: bool = False) -> dict:
    return {"name": name, "duration_s": duration, "aborted": aborted}


def test_a_resumed_runs_phases_say_which_attempt_was_cut_short():
    """Its run phase is listed once per attempt: the page says, as the console does, which
    one was aborted, rather than two run rows that read as one run phase split in two."""
    summary = _summary(
        phases=[_phase("run", 3.4, aborted=True), _phase("undeploy", 0.1), _phase("run", 4.0)]
    )
    page = "".join(run_sections(summary, None))
    assert "<th>ended</th>" in page
    assert '<td>run</td><td class="num">3.400</td><td>aborted</td>' in page
    assert '<td>run</td><td class="num">4.000</td><td>done</td>' in page
    # A run that nothing cut short keeps the two columns.
    page = "".join(run_sections(_summary(phases=[_phase("run", 4.0)]), None))
    assert "ended" not in page


def test_only_numbers_are_aligned_as_numbers():
    """A metric's unit and source are words, as on the console; the result table is labels and
    values, with no row of empty headings above it."""
    metrics = {"JCT": {"value": 9887.0, "unit": "ms", "source": None}}
    metrics["WR"] = {"value": 73.92, "unit": "%", "source": "estimate"}
    page = "".join(run_sections(_summary(metrics=metrics), None))
    assert '<td>JCT</td><td class="num">9887</td><td>ms</td><td></td>' in page
    assert '<td>WR</td><td class="num">73.92</td><td>%</td><td>estimate</td>' in page
    assert "<th></th>" not in page and "<table><tbody><tr><td>status</td>" in page
