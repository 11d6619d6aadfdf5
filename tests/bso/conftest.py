"""Real servers for the BSO tests: `basht bso serve` in a subprocess, and a throwaway PostgreSQL.

Every server binds 127.0.0.1 on a free port and is stopped by the fixture that started it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

MISSING_EXTRA = any(importlib.util.find_spec(m) is None for m in ("fastapi", "httpx", "uvicorn"))
if MISSING_EXTRA:
    collect_ignore_glob = ["test_*.py"]
else:
    from tests.bso.support import free_port, pg_bindir, start_server

if TYPE_CHECKING:
    import httpx

    from tests.bso.support import Server


def pytest_report_header() -> str | None:
    if MISSING_EXTRA:
        return "tests/bso NOT RUN: the `bso` extra is not installed (pip install -e '.[bso]')"
    return None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start servers with any arguments; all are stopped after the test."""
    started: list[Server] = []

    def start(*args: str, db: str | None = None, env: dict[str, str] | None = None) -> Server:
        n = len(started)
        server = start_server(
            db or f"sqlite:///{tmp_path / f'bso{n}.db'}",
            *args,
            log=tmp_path / f"server{n}.log",
            env=env,
        )
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One SQLite-backed server shared by a module's tests (each test uses its own job ids)."""
    tmp = tmp_path_factory.mktemp("bso")
    s = start_server(f"sqlite:///{tmp / 'bso.db'}", log=tmp / "server.log")
    yield s
    s.stop()


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


# -- PostgreSQL ---------------------------------------------------------------------------------


def _as_cluster_owner() -> tuple[list[str], str | None]:
    """PostgreSQL refuses to run as root: run its tools as `postgres` then."""
    if os.geteuid() != 0:
        return [], None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"], "postgres"
    if shutil.which("setpriv"):
        entry = pwd.getpwnam("postgres")
        return [
            "setpriv",
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--init-groups",
        ], "postgres"
    pytest.skip("running as root without runuser or setpriv to drop to the `postgres` user")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, TCP only), removed afterwards."""
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    prefix, owner = _as_cluster_owner()
    home = Path(tempfile.mkdtemp(prefix="basht-pg-"))
    if owner is not None:
        shutil.chown(home, owner, owner)
    data, log = home / "data", home / "postgres.log"
    port = free_port()
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120, "cwd": home}
    subprocess.run(
        [
            *prefix,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        **run,
    )
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='' -c fsync=off"
    try:
        subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(log),
                "-w",
                "-t",
                "60",
                "start",
            ],
            **run,
        )
    except subprocess.CalledProcessError as err:
        text = log.read_text() if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {err.stderr}\n{text}") from None
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                **run,
            )
        shutil.rmtree(home, ignore_errors=True)
