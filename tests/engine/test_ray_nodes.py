"""Which Ray nodes a run held, and from when to when (no Ray needed: Ray's node table by hand)."""

from __future__ import annotations

from basht.engine.ray.nodes import NodeLedger


def _node(node_id: str, alive: bool = True) -> dict:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "127.0.0.1", "Resources": {}}


class _Ray:
    """Stands in for the `ray` module: `nodes()` answers the table set last, or raises."""

    def __init__(self, table: list[dict] | None = None):
        self.table, self.asked = table or [], 0

    def nodes(self) -> list[dict]:
        self.asked += 1
        if isinstance(self.table, Exception):
            raise self.table
        return self.table


def test_a_node_is_in_the_run_from_the_look_that_finds_it_to_the_one_that_finds_it_gone():
    told: list[list[dict]] = []
    now = iter([10.0, 20.0, 30.0, 40.0])
    ledger = NodeLedger(on_change=told.append, clock=lambda: next(now))
    ray = _Ray([_node("a"), _node("b")])
    ledger.look(ray)  # 10: a and b
    ledger.look(ray)  # 20: nothing new, nothing told
    ray.table = [_node("a"), _node("b", alive=False), _node("c")]
    ledger.look(ray)  # 30: b is dead, c joined
    ray.table = [_node("a"), _node("c")]
    ledger.look(ray)  # 40: b is no longer listed: still gone since 30
    spans = {n["node_id"]: (n["joined_at"], n["left_at"]) for n in ledger.records()}
    assert spans == {"a": (10.0, None), "b": (10.0, 30.0), "c": (30.0, None)}
    assert len(told) == 2 and told[-1] == ledger.records()


def test_looks_while_trials_run_are_spaced_and_a_failed_or_empty_answer_changes_nothing():
    ledger = NodeLedger(interval_s=3600.0, clock=lambda: 5.0)
    ray = _Ray([_node("a")])
    ledger.look(ray, force=False)
    ledger.look(ray, force=False)  # within the interval: Ray is not asked
    assert ray.asked == 1
    ray.table = RuntimeError("connection lost")
    ledger.look(ray)
    ray.table = []
    ledger.look(ray)
    assert [(n["node_id"], n["left_at"]) for n in ledger.records()] == [("a", None)]


def test_a_worker_placed_on_a_node_not_yet_seen_brings_the_node_in():
    told: list[list[dict]] = []
    ledger = NodeLedger(on_change=told.append, clock=lambda: 7.0)
    ledger.placed(0, "a")
    ledger.placed(0, "a")  # the same news twice is told once
    ledger.placed(1, None)  # a worker not placed yet: nothing
    assert told == [[ledger.records()[0]]]
    assert ledger.records()[0] == {
        "node": "node-a",
        "node_id": "a",
        "address": "",
        "cpus": 0.0,
        "gpus": 0.0,
        "joined_at": 7.0,
        "left_at": None,
        "workers": [0],
    }
