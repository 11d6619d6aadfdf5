"""Removes a Ray of our own when its driver dies without closing it (`kill -9`, a lost machine).

`ray.init` ties the GCS and the raylet to the driver, but Ray's agents outlive a raylet: a driver
killed outright leaves them running, and its temp folder behind. `RaySession` starts this
watchdog in a session of its own with a pipe from the driver. When the pipe closes, by `close()`
or by the driver's death, the watchdog ends every process that still holds the Ray's temp folder
(other than the driver) and removes the folder.

    python path/to/watchdog.py TEMP_DIR DRIVER_PID
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
from pathlib import Path

import psutil

GRACE_S = 5.0


def session_processes(temp_dir: Path, exclude: set[int] = frozenset()) -> list[psutil.Process]:
    """Processes of the Ray whose files live in `temp_dir`: named in their command line (the
    GCS, the raylet) or holding a file there (the agents, whose command line Ray rewrites)."""
    root = str(temp_dir)
    found = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        with contextlib.suppress(psutil.Error):
            if root in " ".join(proc.cmdline()) or any(
                f.path.startswith(root) for f in proc.open_files()
            ):
                found.append(proc)
    return found


def end(processes: list[psutil.Process], timeout_s: float = GRACE_S) -> None:
    """SIGTERM, then SIGKILL whatever is still there after `timeout_s`."""
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _gone, alive = psutil.wait_procs(processes, timeout=timeout_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=timeout_s)


def main() -> None:
    temp_dir, driver = Path(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    sys.stdin.buffer.read()  # returns when the driver closes the pipe or dies
    end(session_processes(temp_dir, exclude={driver, psutil.Process().pid}))
    shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
