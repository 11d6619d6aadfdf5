"""Finding a run by a prefix of its id, as git finds commits."""

from __future__ import annotations

import pytest

from basht.errors import StoreError
from basht.store import Store


def test_a_prefix_finds_one_run_and_an_ambiguous_one_names_the_newest_matches(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    experiment = store.add_experiment("exp", {})
    runs = [store.create_run(experiment, "exp", "native", "local", tmp_path) for _ in range(7)]
    other = store.create_run(experiment, "other_x", "native", "local", tmp_path)
    assert store.get_run(runs[3].id).id == runs[3].id
    assert store.get_run(other.id[:8]).id == other.id
    with pytest.raises(StoreError) as err:
        store.get_run("exp-")
    message = str(err.value)
    assert message.startswith("7 runs matching 'exp-' in ") and message.endswith(
        "and 2 more; give more of the id"
    )
    assert sum(run.id in message for run in runs) == 5
    with pytest.raises(StoreError, match="no run matching 'other%'"):
        store.get_run("other%")  # taken literally, not as a SQL wildcard


def test_runs_of_one_name_started_in_one_second_with_one_suffix_get_unique_ids(
    monkeypatch, tmp_path
):
    """The suffix is 4 hex digits: runs started together (a job array) can draw the same one."""
    from datetime import datetime

    from basht.store import repository

    class OneSecond(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)

    suffixes = iter(["abcd", "abcd", "ef01"])
    monkeypatch.setattr(repository, "datetime", OneSecond)
    monkeypatch.setattr(repository.secrets, "token_hex", lambda n: next(suffixes))
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    experiment = store.add_experiment("exp", {})
    first = store.create_run(experiment, "exp", "native", "local", tmp_path)
    second = store.create_run(experiment, "exp", "native", "local", tmp_path)
    assert first.id.endswith("-abcd") and second.id.endswith("-ef01")
    assert {r.id for r in store.list_runs()} == {first.id, second.id}
