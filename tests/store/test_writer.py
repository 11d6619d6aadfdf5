"""Write-behind: nothing waits on the writer thread, and what it writes keeps its order."""

from __future__ import annotations

import pytest

from basht.experiment import Experiment
from basht.store import Store
from basht.store.writer import RowRef, WriteBehind


def _run(spec, tmp_path) -> tuple[Store, str]:
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    return store, store.create_run(exp_id, "t", "native", "local", tmp_path).id


def test_writes_naming_a_new_row_land_on_it_in_order(spec, tmp_path):
    store, run_id = _run(spec, tmp_path)
    writer = WriteBehind(store)
    refs = [writer.add_trial(run_id, n, {"x": n}, 3, state="running") for n in range(50)]
    assert all(isinstance(r, RowRef) for r in refs)  # handed back before the insert
    for n, ref in enumerate(refs):
        writer.add_report(ref, 1, 0.5 + n / 100, {"accuracy": 0.5 + n / 100}, 0.1, 0.0)
        writer.update_trial(ref, state="completed", value=0.5 + n / 100)
    writer.close()
    trials = store.trials(run_id)
    assert [t.number for t in trials] == list(range(50))
    assert all(t.state == "completed" for t in trials)
    assert [r.id for r in refs] == [t.id for t in trials]
    assert len(store.reports(run_id)) == 50


def test_a_failed_write_is_raised_at_the_next_call_and_earlier_rows_stay(spec, tmp_path):
    store, run_id = _run(spec, tmp_path)
    writer = WriteBehind(store)
    kept = writer.add_trial(run_id, 0, {"x": 0}, 3)
    writer.flush()
    writer.update_trial(kept, no_such_column=1)
    with pytest.raises(Exception, match="not a trial column: no_such_column"):
        writer.flush()
    with pytest.raises(Exception, match="not a trial column: no_such_column"):
        writer.update_trial(kept, state="completed")
    assert [t.number for t in store.trials(run_id)] == [0]
