"""A run's plots drawn in a process of its own, started when `basht run` starts.

Drawn by the driver after the run, the four plots kept the user waiting for matplotlib's import
(a third of a second or more) and then every figure in turn. The plotter process imports
matplotlib while the run starts up (on another core), then waits; once the run is stored the
driver reads what the plots show and hands it over, and the plotter draws them while the driver
writes and prints the results, two figures at a time where the platform can fork. The plotter
never opens the store, so it imports none of it. The plots come out the same; only when and
where they are drawn changes.

    plotter = Plotter.start()          # None without matplotlib: nothing to draw with
    ...                                # the run
    plotter.request(run_plot_jobs(store, run_id))  # once it is stored
    ...                                # write and print the results meanwhile
    paths = plotter.result()           # {name: path}, or a PlotError saying why not
    plotter.close()
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from basht.errors import BashtError

if TYPE_CHECKING:
    from basht.report.plots import PlotJob

#: How long `result` waits for the plots at most: a store of millions of rows takes seconds.
_RESULT_TIMEOUT_S = 600.0


class PlotError(BashtError):
    """The plots could not be drawn (the reason is the plotter's)."""


class Plotter:
    """The driver's handle on its plotter process."""

    def __init__(self, process: Any, conn: Connection):
        self._process, self._conn = process, conn
        self._asked = self._answered = False

    @classmethod
    def start(cls) -> Plotter | None:
        """Start the plotter process, or None when there is no matplotlib to draw with."""
        if importlib.util.find_spec("matplotlib") is None:
            return None
        import multiprocessing as mp

        from basht.engine.local import start_leaving_ctrl_c

        ctx = mp.get_context("spawn")  # not forked: the driver's threads and locks stay its own
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child,), daemon=True, name="basht-plotter")
        start_leaving_ctrl_c(process)  # Ctrl-C is the driver's, also while the plotter imports
        child.close()
        return cls(process, parent)

    @property
    def asked(self) -> bool:
        """Whether plots were asked for and `result` has not answered yet."""
        return self._asked

    def request(self, jobs: dict[str, PlotJob]) -> bool:
        """Ask for these plots to be drawn (a run's: `plots.run_plot_jobs`), which `result`
        answers; False if the plotter is gone (draw them another way)."""
        try:
            self._conn.send(("plot", jobs))
        except OSError:
            return False
        self._asked = True
        return True

    def result(self) -> dict[str, Path]:
        """The plots `request` asked for, once drawn; PlotError if they could not be."""
        if not self._asked:
            raise PlotError("no plots were asked for")
        try:
            if not self._conn.poll(_RESULT_TIMEOUT_S):
                raise PlotError(f"the plotter drew nothing in {_RESULT_TIMEOUT_S:.0f} s")
            kind, answer = self._conn.recv()
        except (EOFError, OSError):
            raise PlotError(f"the plotter exited (exit code {self._process.exitcode})") from None
        self._asked, self._answered = False, True
        if kind != "ok":
            raise PlotError(answer)
        return {name: Path(path) for name, path in answer.items()}

    def close(self) -> None:
        """End the plotter. Once it has answered it exits by itself when its pipe closes;
        before that it is stopped at once: still importing (the run failed before it was
        stored), or drawing plots nobody waits for (the run was interrupted). Safe to call
        twice."""
        with contextlib.suppress(OSError):
            self._conn.close()
        if self._answered:
            self._process.join(1.0)
        if self._process.is_alive():
            self._process.kill()
        self._process.join()


def _serve(conn: Connection) -> None:
    """The plotter process: import what drawing needs, then draw what is asked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # drawing says what is wrong, when it is asked to
        _warm_up()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            _exit()  # the driver is done with it (or gone)
        _, jobs = message
        try:
            reply: tuple[str, Any] = ("ok", _draw(jobs))
        except Exception as err:
            reply = ("error", str(err) or type(err).__name__)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            _exit()


def _exit() -> NoReturn:
    """Exit at once: the plots are written and closed, and tearing down an interpreter that
    holds matplotlib takes a tenth of a second or more that the driver would wait for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _warm_up() -> None:
    """Import what drawing needs: matplotlib's figure and Agg canvas (its font list with them),
    the plots and what their data is made of. Drawing a figure beforehand would save nothing
    more."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    import basht.report.plots  # noqa: F401
    import basht.report.timeline  # noqa: F401


_FORKED = ("timeline", "best_so_far")


def _draw(jobs: dict[str, PlotJob]) -> dict[str, str]:
    # Two halves that take about as long: the timeline (a bar and a label per trial segment)
    # with the best-so-far curve, and the energy (a bar per trial) with the phases.
    there = [job.draw for name, job in jobs.items() if name in _FORKED]
    draw_split([job.draw for name, job in jobs.items() if name not in _FORKED], there)
    return {name: str(job.path) for name, job in jobs.items()}


def draw_split(ours: list[Callable[[], Any]], theirs: list[Callable[[], Any]]) -> None:
    """Call every job: `theirs` in a forked copy of this process while this one calls `ours`,
    where the platform forks and there is a second core (figures are drawn one at a time in a
    process, so two processes draw them in about half the time); else one after the other.
    Only for a process with no threads of its own (the plotter), as a fork copies only the
    thread that forks."""
    if not ours or not theirs or not _can_fork():
        for job in ours + theirs:
            job()
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked copy: draw its share, say what went wrong if anything, exit
        os.close(read)
        code = 0
        try:
            for job in theirs:
                job()
        except BaseException as err:
            os.write(write, (str(err) or type(err).__name__).encode()[:4000])
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    try:
        for job in ours:
            job()
    finally:
        with os.fdopen(read, "rb") as pipe:
            error = pipe.read().decode(errors="replace")
        _, status = os.waitpid(pid, 0)
    if error or status:
        raise PlotError(error or f"a plot process exited with status {status}")


def _can_fork() -> bool:
    """Linux forks safely (a process without threads) and says which cores this one may use."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) > 1
