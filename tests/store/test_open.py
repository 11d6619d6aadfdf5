"""Opening a store that does not exist yet from several processes at once (a run starting while
`basht runs` or a test polls it): every one of them opens it."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from basht.store import Store


def _open(url: str, barrier) -> None:
    barrier.wait()
    Store(url).list_runs()


def test_processes_creating_one_fresh_store_at_once_all_open_it(tmp_path: Path):
    ctx = mp.get_context("spawn")
    for i in range(3):
        url = f"sqlite:///{tmp_path / f'fresh-{i}.db'}"
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_open, args=(url, barrier)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0, 0], f"round {i}"
