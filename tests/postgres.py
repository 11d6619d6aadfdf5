"""A throwaway PostgreSQL server for the tests: a fresh cluster (initdb) started with pg_ctl on a
free port on 127.0.0.1, trust auth, TCP only, removed afterwards.

`postgres_server()` skips the test when the PostgreSQL binaries are not there (and, as root, when
there is no `postgres` user to run them as); outside pytest (benchmarks/bso_load.py reuses it) it
raises RuntimeError instead. Databases are made with the server's own `createdb`,
so no Python driver is needed to set one up.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.tools import need_tool, skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_cluster_owner() -> tuple[list[str], str | None]:
    """PostgreSQL refuses to run as root: run its server tools as `postgres` then."""
    if os.geteuid() != 0:
        return [], None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        skip("running as root and there is no `postgres` user to run PostgreSQL as")
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
    skip("running as root without runuser or setpriv to drop to the `postgres` user")


@dataclass
class Postgres:
    """A running server; `url` is its `postgres` database as the `postgres` superuser."""

    bindir: Path
    port: int
    _names: Iterator[int] = field(default_factory=itertools.count)
    #: How to run its server tools (as the cluster's owner) on its data folder; see `restart`.
    _ctl: list[str] = field(default_factory=list)

    def restart(self, down_s: float = 2.0) -> None:
        """Stop the server (fast: connections are cut, as a crash or an upgrade cuts them), stay
        down `down_s` seconds, then start it again on the same port and data."""
        run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
        subprocess.run([*self._ctl, "-m", "fast", "-w", "stop"], **run)
        time.sleep(down_s)
        subprocess.run([*self._ctl, "-w", "-t", "60", "start"], **run)

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def create_database(self, prefix: str = "basht") -> str:
        """A new, empty database (named `<prefix>_<n>`, unique on this server); its URL."""
        name = f"{prefix}_{next(self._names)}"
        client = ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        createdb = self.bindir / "createdb"
        proc = subprocess.run(
            [str(createdb) if createdb.exists() else "createdb", *client, name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"createdb {name} failed: {proc.stderr.strip()}")
        return self.database_url(name)


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """Start a fresh PostgreSQL cluster; stop and remove it afterwards."""
    bindir = Path(need_tool("postgresql"))
    prefix, owner = _as_cluster_owner()
    home = Path(tempfile.mkdtemp(prefix="basht-pg-"))
    if owner is not None:
        shutil.chown(home, owner, owner)
    data, log = home / "data", home / "postgres.log"
    port = free_port()
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120, "cwd": home}
    try:
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
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='' -c fsync=off"
        )
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
        ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log)]
        try:
            yield Postgres(bindir, port, _ctl=ctl)
        finally:
            with contextlib.suppress(subprocess.SubprocessError):
                subprocess.run(
                    [
                        *prefix,
                        str(bindir / "pg_ctl"),
                        "-D",
                        str(data),
                        "-m",
                        "immediate",
                        "-w",
                        "stop",
                    ],
                    **run,
                )
    finally:
        shutil.rmtree(home, ignore_errors=True)
