"""`basht runs`, `report` and `resume` only read a store: a file that is not one (empty, another
program's database, not SQLite at all, cut short) is one line naming it, and is left as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from basht.errors import StoreError
from basht.store import Store
from tests.cli import basht


def _foreign(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()
    return path


@pytest.mark.parametrize("kind", ["empty", "foreign"])
def test_a_reader_does_not_make_a_store_of_an_empty_or_unrelated_database(tmp_path, kind):
    path = tmp_path / "other.db"
    if kind == "empty":
        path.touch()
    else:
        _foreign(path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"^store 'sqlite:///.*other\.db': not a Basht store"):
        Store(f"sqlite:///{path}", create=False)
    assert path.read_bytes() == before


@pytest.mark.integration
def test_a_file_that_is_not_sqlite_is_one_line_and_exit_code_2(tmp_path):
    path = tmp_path / "basht.db"
    path.write_bytes(b"not a database, but something of the user's\n" * 100)
    before = path.read_bytes()
    for create in (False, True):  # a reader, and `basht run`
        with pytest.raises(StoreError, match=r"cannot open \(file is not a database\)$"):
            Store(f"sqlite:///{path}", create=create)
    done = basht("runs", "--store", f"sqlite:///{path}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: store 'sqlite:///{path}': cannot open (file is not a database)"
    )
    assert path.read_bytes() == before


def test_a_store_a_reader_opens_is_read_as_it_is(tmp_path):
    url = f"sqlite:///{tmp_path / 'basht.db'}"
    writer = Store(url)
    run = writer.create_run(writer.add_experiment("exp", {}), "exp", "native", "local", tmp_path)
    writer.close()
    assert [r.id for r in Store(url, create=False).list_runs()] == [run.id]
