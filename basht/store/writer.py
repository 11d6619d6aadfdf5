"""Write-behind for the Tuner's hot path: the store's writes, in order, on a thread of their own.

Each report would otherwise hold the driver for a SQLite commit while the workers wait for their
next command. Writes queue here and a writer thread applies them in the order they were made,
everything queued at once in one transaction, so the store always holds a prefix of what
happened (the decision log included). Nothing waits: `add_trial` hands back a `RowRef` that the
writer fills in when it inserts the row, and later writes naming it run after that insert (the
queue keeps their order). `flush()` waits for everything.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from basht.store.repository import Store

log = logging.getLogger(__name__)

_STOP = object()
#: Marks a call queued by `after_commit`, run once the writes queued before it are committed.
_AFTER = object()


class RowRef:
    """A trial's row id before it exists: the writer thread sets `id` when it inserts the row."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id: int | None = None

    def __repr__(self) -> str:
        return f"RowRef({self.id})"


class WriteBehind:
    """Stands in for a Store in the Tuner: the same write methods, applied asynchronously."""

    def __init__(self, store: Store):
        self.store = store
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Event()
        self._idle.set()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="basht-store-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while True:  # everything already queued goes into the same transaction
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(op is _STOP for op in batch)
            ops = [op for op in batch if op is not _STOP and op[0] is not _AFTER]
            afterwards = [op for op in batch if op is not _STOP and op[0] is _AFTER]
            try:
                if ops:
                    with self.store.batch():
                        for method, args, kwargs, ref in ops:
                            if args and type(args[0]) is RowRef:
                                args = (args[0].id, *args[1:])
                            result = getattr(self.store, method)(*args, **kwargs)
                            if ref is not None:
                                ref.id = result
                for _, call, args, _ in afterwards:  # the batch is committed: now it may
                    call(*args)
            except BaseException as err:  # surfaced to the Tuner at its next call
                log.error("store write failed: %s", err)
                self._error = err
            if self._queue.empty():
                self._idle.set()
            if stop:
                return

    def _put(self, method: str, args: tuple, kwargs: dict, ref: RowRef | None = None) -> None:
        if self._error is not None:
            raise self._error
        self._idle.clear()
        self._queue.put((method, args, kwargs, ref))

    def add_trial(self, *args: Any, **kwargs: Any) -> RowRef:
        """The new row's reference at once; its id is known once the writer has inserted it."""
        ref = RowRef()
        self._put("add_trial", args, kwargs, ref)
        return ref

    def update_trial(self, *args: Any, **kwargs: Any) -> None:
        self._put("update_trial", args, kwargs)

    def add_trial_time(self, *args: Any, **kwargs: Any) -> None:
        self._put("add_trial_time", args, kwargs)

    def add_report(self, *args: Any, **kwargs: Any) -> None:
        self._put("add_report", args, kwargs)

    def add_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        self._put("add_checkpoint", args, kwargs)

    def mark_checkpoint_deleted(self, *args: Any, **kwargs: Any) -> None:
        self._put("mark_checkpoint_deleted", args, kwargs)

    def log_decision(self, *args: Any, **kwargs: Any) -> None:
        self._put("log_decision", args, kwargs)

    def after_commit(self, call: Any, *args: Any) -> None:
        """Run `call(*args)` on the writer thread once everything queued before it is in the
        store: a file the store names (a checkpoint) is deleted only after the store says so,
        so a kill in between leaves a file too many, never a record of a file that is gone."""
        if self._error is not None:
            raise self._error
        self._idle.clear()
        self._queue.put((_AFTER, call, args, None))

    def flush(self) -> None:
        """Wait until everything queued so far is in the store."""
        self._idle.wait()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()
        if self._error is not None:
            raise self._error
