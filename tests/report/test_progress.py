"""The live progress line: what a file or a terminal is left with when the run ends."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

from rich.console import Console

from basht.errors import RunInterrupted
from basht.report.progress import LiveProgress


def _status(**counts: int) -> SimpleNamespace:
    return SimpleNamespace(counts=Counter(counts), best_value=0.3213, best_trial=0, elapsed_s=3.4)


def _interrupted(feed: Callable[[LiveProgress], None]) -> str:
    """What the progress display leaves in a file when Ctrl-C ends the run after `feed`."""
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200))
    try:
        with progress:
            feed(progress)
            raise RunInterrupted("r", "sqlite:///basht.db")
    except RunInterrupted:
        pass
    return out.getvalue()


def test_ctrl_c_leaves_a_last_line_whose_counts_add_up_to_the_trials():
    """Trials cut short by Ctrl-C are aborted: the last line counts them, and does not say done."""
    out = _interrupted(lambda progress: progress.on_update(_status(completed=2, aborted=2)))
    last = out.splitlines()[-1]
    assert last.startswith("[interrupted] done 2  running 0")
    assert "aborted 2" in last


def test_piped_output_gets_the_last_line_whole_however_narrow():
    """A file has no width to wrap to: the line is one line, not cut mid-way to 80 columns."""
    out = io.StringIO()
    console = Console(file=out, width=40)
    with LiveProgress(console) as progress:
        progress.on_update(_status(completed=32))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("[deploy] done 32  running 0")
    assert lines[0].endswith("elapsed    3.4 s")


def test_ctrl_c_before_the_search_began_leaves_no_empty_progress_line():
    """Interrupted in deploy, after its phase line: no "[interrupted]" line with nothing in it."""

    def phases(progress: LiveProgress) -> None:
        progress.on_phase(SimpleNamespace(name="deploy", duration_s=1.5, aborted=True))
        progress.on_phase(SimpleNamespace(name="undeploy", duration_s=0.1, aborted=False))

    out = _interrupted(phases)
    assert [line.split()[1] for line in out.splitlines()] == ["deploy", "undeploy"]
