"""Live progress of a run: trials by state, the best so far, the time spent, the current phase."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text


def print_metrics_url(console: Console, url: str) -> None:
    """The line that says where a run serves its live metrics (`measure.prometheus_port`)."""
    console.print(f"metrics: {url}", highlight=False, soft_wrap=True)


class LiveProgress:
    """A one-line rich display refreshed at most `refresh_per_s` times a second.

    Pass the object itself as a run's `on_update`: it is called with each TunerStatus, and its
    `metrics_served` prints where the live metrics are as soon as the exporter serves them.
    """

    def __init__(self, console: Console | None = None, refresh_per_s: float = 4.0):
        self.console = console or Console()
        self.live = Live(
            Text("starting"),
            console=self.console,
            refresh_per_second=refresh_per_s,
            transient=False,
        )
        self.phase = "deploy"
        self._last = 0.0
        self._min_gap = 1.0 / refresh_per_s
        self._status: Any = None
        self._line = Text("starting")

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None and self._status is None:
            # Ended before the search began: the phase lines and the error say it all.
            self.live.transient = True
            self.live.__exit__(*exc)
            return
        if exc[0] is not None and issubclass(exc[0], KeyboardInterrupt):
            self.phase = "interrupted"  # not "done": the run did not finish
        self._render(force=True)
        if self.console.is_terminal:
            self.live.__exit__(*exc)
            return
        # A file or a pipe gets the last line once, whole: rich would wrap it to the width.
        self.live.transient = True
        self.live.__exit__(*exc)
        self.console.print(self._line, soft_wrap=True)

    def on_phase(self, timing: Any) -> None:
        flag = " (aborted)" if timing.aborted else ""
        self.console.print(f"[dim]phase[/dim] {timing.name:<16} {timing.duration_s:8.3f} s{flag}")
        order = ["deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy"]
        i = order.index(timing.name) if timing.name in order else -1
        self.phase = order[i + 1] if 0 <= i < len(order) - 1 else "done"
        self._render(force=True)

    def on_update(self, status: Any) -> None:
        self._status = status
        self._render()

    __call__ = on_update

    def metrics_served(self, url: str) -> None:
        print_metrics_url(self.console, url)  # above the live line, as the phase lines are

    def _render(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._min_gap:
            return
        self._last = now
        text = Text(f"[{self.phase}] ", style="bold")
        s = self._status
        if s is not None:
            c = s.counts
            text.append(
                f"done {c['completed']}  running {c['running']}  paused {c['paused']}  "
                f"stopped {c['stopped']}  failed {c['failed']}  "
            )
            if c["aborted"]:  # Ctrl-C: the trials it cut short, so that the counts add up
                text.append(f"aborted {c['aborted']}  ")
            best = "-" if s.best_value is None else f"{s.best_value:.4g} (trial {s.best_trial})"
            text.append(f"best {best}  ", style="green")
            text.append(f"elapsed {s.elapsed_s:6.1f} s")
        self._line = text
        self.live.update(text)


class QuietProgress:
    """`--quiet`: no live display; only where the live metrics are, which nothing else says."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console()

    def __call__(self, status: Any) -> None:
        pass

    def metrics_served(self, url: str) -> None:
        print_metrics_url(self.console, url)
