"""A run's driver and store, as `basht resume` finds them after a SIGKILL left no hint."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from basht.bench.driver import (
    POINTER,
    absolute_sqlite,
    driver_state,
    locate_run,
    with_driver,
    write_pointer,
)


def test_this_process_is_alive_and_a_reaped_one_is_gone():
    assert driver_state(with_driver(None)) == "alive"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    started = with_driver(None)["driver"]["started"]
    gone = {"driver": {"hostname": socket.gethostname(), "pid": child.pid, "started": started}}
    assert driver_state(gone) == "gone"


def test_a_reused_pid_is_a_gone_driver():
    """The pid now names another process (this one, started at another time)."""
    host = with_driver(None)
    host["driver"]["started"] -= 3600
    assert driver_state(host) == "gone"


def test_a_driver_elsewhere_or_unrecorded_is_unknown():
    elsewhere = with_driver(None)
    elsewhere["driver"]["hostname"] = "another-host"
    assert driver_state(elsewhere) == "unknown"
    assert driver_state({"hostname": socket.gethostname()}) == "unknown"  # an older run
    assert driver_state(None) == "unknown"
    assert driver_state({"driver": {"hostname": socket.gethostname(), "pid": "x"}}) == "unknown"


def _run_folder(root, run_id, store):
    folder = root / run_id
    folder.mkdir(parents=True)
    write_pointer(folder, run_id, store)
    return folder


def test_a_run_is_found_by_id_prefix_folder_or_latest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results"
    first = _run_folder(root, "exp-20261127-010101-aaaa", "sqlite:///stores/a.db")
    os.utime(first / POINTER, (1, 1))
    _run_folder(root, "exp-20261127-020202-bbbb", "postgresql://u:pw@127.0.0.1/db")

    a_db = f"sqlite:///{tmp_path / 'stores' / 'a.db'}"  # made absolute when written
    assert locate_run("exp-20261127-010101-aaaa", root) == ("exp-20261127-010101-aaaa", a_db)
    assert locate_run("exp-20261127-01", root) == ("exp-20261127-01", a_db)
    assert locate_run("latest", root)[1] == "postgresql://u:pw@127.0.0.1/db"
    assert locate_run(str(first), tmp_path / "nowhere") == ("exp-20261127-010101-aaaa", a_db)
    # A prefix two stores match names none; so does a run nobody pointed to.
    assert locate_run("exp-", root) == ("exp-", None)
    assert locate_run("other", root) == ("other", None)
    assert locate_run("latest", tmp_path / "nowhere") == ("latest", None)


def test_the_pointer_is_private_and_a_broken_one_is_ignored(tmp_path):
    folder = _run_folder(tmp_path, "r1", "sqlite:////abs/x.db")
    assert os.stat(folder / POINTER).st_mode & 0o777 == 0o600
    assert json.loads((folder / POINTER).read_text()) == {
        "run": "r1",
        "store": "sqlite:////abs/x.db",
    }
    (folder / POINTER).write_bytes(b"\xff not json")
    assert locate_run("r1", tmp_path) == ("r1", None)
    assert locate_run(str(folder), tmp_path) == ("r1", None)


def test_only_relative_sqlite_paths_change():
    assert absolute_sqlite("sqlite:///:memory:") == "sqlite:///:memory:"
    assert absolute_sqlite("sqlite://") == "sqlite://"
    assert absolute_sqlite("postgresql://h/db") == "postgresql://h/db"
    assert absolute_sqlite("sqlite:///a.db").startswith("sqlite:////")
