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
    assert '<td>run</td><td class="num">3.400</td><td class="num">aborted</td>' in page
    assert '<td>run</td><td class="num">4.000</td><td class="num">done</td>' in page
    # A run that nothing cut short keeps the two columns.
    page = "".join(run_sections(_summary(phases=[_phase("run", 4.0)]), None))
    assert "ended" not in page
