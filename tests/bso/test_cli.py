"""`basht bso serve` and `basht bso migrate` as a user runs them: bad input is one line, exit 2."""

from __future__ import annotations

import importlib.util
import os
import socket
import sqlite3
import sys

import pytest

from basht import cli


@pytest.fixture
def basht(monkeypatch, capsys):
    """`basht ARGS...` in this process, through the real entry point; (exit code, out, err)."""
    for name in list(os.environ):
        if name.startswith("BASHT_BSO_"):
            monkeypatch.delenv(name)

    def run(*args: str, **env: str) -> tuple[int, str, str]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sys, "argv", ["basht", *args])
        with pytest.raises(SystemExit) as exited:
            cli.main()
        out = capsys.readouterr()
        return exited.value.code, out.out, out.err

    return run


def one_line_error(result: tuple[int, str, str]) -> str:
    code, _, err = result
    assert code == 2, result
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_migrate_creates_the_tables_once(basht, tmp_path):
    url = f"sqlite:///{tmp_path / 'nested' / 'bso.db'}"
    code, out, _ = basht("bso", "migrate", "--db", url)
    assert code == 0 and "migrated from empty to revision 0004" in out
    code, out, _ = basht("bso", "migrate", "--db", url)
    assert code == 0 and "already at revision 0004" in out
    with sqlite3.connect(tmp_path / "nested" / "bso.db") as db:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    assert {"bso_jobs", "bso_arms", "bso_trials", "bso_alembic_version"} <= tables


def test_migrate_takes_the_database_from_the_environment(basht, tmp_path):
    code, _, _ = basht("bso", "migrate", BASHT_BSO_DB=f"sqlite:///{tmp_path / 'env.db'}")
    assert code == 0
    assert (tmp_path / "env.db").exists()


def test_serve_binds_the_loopback_address_unless_told_otherwise_and_says_so(serve):
    import psutil

    server = serve()  # no --host, no BASHT_BSO_HOST
    port = int(server.url.rsplit(":", 1)[1])
    listening = {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process(server.process.pid).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert listening == {("127.0.0.1", port)}
    start = [line for line in server.log.read_text().splitlines() if line.startswith("basht bso:")]
    assert start[0].startswith(f"basht bso: http://127.0.0.1:{port} (this machine only; ")
    assert "no token" in start[0]


def test_serving_migrates_an_embedded_database_on_first_start(serve, tmp_path):
    server = serve(db=f"sqlite:///{tmp_path / 'first.db'}")
    with server.client() as c:
        assert c.get("/health").json() == {"status": "ok"}
    assert "at revision 0004" in server.log.read_text()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--db", "nonsense"], "not a SQLAlchemy URL"),
        (["--db", "sqlite://"], "in-memory SQLite"),
        (["--db", "oracle://u@h/db"], "no async driver known for 'oracle'"),
        (["--db", "postgresql://u:hunter2@127.0.0.1:1/x"], "cannot connect"),
        (["--port", "70000"], "port 70000"),
        (["--workers", "0"], "workers 0"),
        (["--log-level", "loud"], "log level 'loud'"),
        (["--trial-timeout", "-1"], "trial timeout -1: expected seconds, 0 or more"),
        (["--trial-timeout", "inf"], "trial timeout inf"),
        (["--port", "{taken}"], "cannot listen on 127.0.0.1 port {taken}: Address already in use"),
        (["--host", "no-such-host.invalid"], "host 'no-such-host.invalid': cannot resolve"),
    ],
)
def test_bad_serve_settings_are_one_line_errors(basht, tmp_path, args, fragment):
    with socket.socket() as taken:  # a port some other server already listens on
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = [a.replace("{taken}", port) for a in args]
        db = [] if "--db" in args else ["--db", f"sqlite:///{tmp_path / 'x.db'}"]
        line = one_line_error(basht("bso", "serve", *db, *args))
    assert fragment.replace("{taken}", port) in line
    assert "hunter2" not in line  # passwords never printed
    assert not (tmp_path / "x.db").exists()  # refused before the database was touched


def test_a_missing_database_driver_names_the_package_that_brings_it(basht):
    if importlib.util.find_spec("asyncmy") is not None:
        pytest.skip("asyncmy is installed here")
    line = one_line_error(basht("bso", "migrate", "--db", "mysql://u:hunter2@127.0.0.1/x"))
    assert line.endswith("(No module named 'asyncmy'); pip install 'asyncmy'"), line
    assert "hunter2" not in line


def test_bad_environment_values_are_named(basht, tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    line = one_line_error(basht("bso", "serve", BASHT_BSO_PORT="eighty", BASHT_BSO_DB=db))
    assert "BASHT_BSO_PORT" in line and "integer" in line


@pytest.mark.integration
@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_a_database_path_that_cannot_be_opened_is_one_line(tmp_path, command):
    """A folder where the SQLite file should be: the async driver's worker thread used to print
    two tracebacks after the error (in a subprocess: they came after the event loop closed)."""
    from tests.bso.support import basht as run_basht
    from tests.postgres import free_port

    (tmp_path / "bso.db").mkdir()
    args = ["--port", str(free_port())] if command == "serve" else []
    proc = run_basht("bso", command, "--db", f"sqlite:///{tmp_path / 'bso.db'}", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot open it" in lines[0], proc.stderr
