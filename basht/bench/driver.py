"""Who drives a run, and where its store is: what `basht resume` needs after a SIGKILL.

A killed driver prints nothing and leaves its run `running` in the store. Two records let the
next `basht resume` take over at once and without flags:

- the driver's identity (host, pid and the process's start time) in the run's `host` record: on
  the same host, a driver whose process is gone (or whose pid now names another process) is known
  to be dead, with no need to wait for its records to fall silent;
- a pointer file in the run's results folder naming the store, so that `basht resume RUN` run in
  the folder the run was started from finds the store the experiment named.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import psutil

#: The run's results folder holds this file: the run's id and store URL.
POINTER = ".basht-run.json"
#: The key of the driver's identity in the run's `host` record.
DRIVER = "driver"


def this_driver() -> dict[str, Any]:
    """This process as a run's driver: host, pid, and its start time (pids are reused)."""
    return {
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "started": psutil.Process().create_time(),
    }


def driver_state(host: dict[str, Any] | None) -> str:
    """`alive` or `gone` for a driver on this host; `unknown` for one elsewhere or not recorded
    (a run from an older Basht): then only its silence tells."""
    driver = (host or {}).get(DRIVER)
    if not isinstance(driver, dict) or driver.get("hostname") != socket.gethostname():
        return "unknown"
    try:
        process = psutil.Process(int(driver["pid"]))
        same = abs(process.create_time() - float(driver["started"])) < 1.0
    except psutil.NoSuchProcess:
        return "gone"
    except (psutil.Error, KeyError, TypeError, ValueError):
        return "unknown"
    return "alive" if same and process.status() != psutil.STATUS_ZOMBIE else "gone"


def with_driver(host: dict[str, Any] | None) -> dict[str, Any]:
    """The run's `host` record naming this process as its driver."""
    return {**(host or {}), DRIVER: this_driver()}


def write_pointer(results_dir: Path, run_id: str, store_url: str) -> None:
    """Name the run's store in its results folder (owner-only: a URL may hold a password). A
    relative SQLite path is made absolute, so the pointer holds from any folder."""
    target = results_dir / POINTER
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"run": run_id, "store": absolute_sqlite(store_url)}, f)
    os.replace(tmp, target)


def absolute_sqlite(url: str) -> str:
    """`sqlite:///relative.db` as `sqlite:////abs/relative.db`; any other URL as it is."""
    prefix = "sqlite:///"
    path = url[len(prefix) :] if url.startswith(prefix) else None
    if not path or path.startswith("/") or path.startswith(":memory:") or "?" in path:
        return url
    return prefix + str(Path(path).resolve())


def locate_run(run: str, results_root: Path) -> tuple[str, str | None]:
    """Run `run` (an id, a unique prefix, `latest`, or the run's results folder) as the id to
    ask the store for, and its store as the pointers under `results_root` name it: None when
    none names one store. For `latest`, the run whose pointer was written last."""
    folder = Path(run)
    if (folder / POINTER).is_file():
        pointed = _read_pointer(folder / POINTER)
        return (pointed or {}).get("run", folder.name), (pointed or {}).get("store")
    if not results_root.is_dir():
        return run, None
    pointers = [
        p / POINTER
        for p in results_root.iterdir()
        if (run == "latest" or p.name.startswith(run)) and (p / POINTER).is_file()
    ]
    if run == "latest":
        newest = max(pointers, key=lambda p: p.stat().st_mtime, default=None)
        return run, (_read_pointer(newest) or {}).get("store") if newest else None
    exact = [p for p in pointers if p.parent.name == run]
    stores = {(_read_pointer(p) or {}).get("store") for p in exact or pointers} - {None}
    return run, stores.pop() if len(stores) == 1 else None


def _read_pointer(path: Path) -> dict[str, str] | None:
    """The run and store a pointer names; None for one that cannot be read (then the default
    store is tried, and says what it lacks)."""
    try:
        pointed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(pointed, dict):
        return None
    return {k: v for k, v in pointed.items() if k in ("run", "store") and isinstance(v, str)}
