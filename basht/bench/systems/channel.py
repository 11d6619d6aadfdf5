"""How trial processes talk to the driver: a pipe (Optuna's workers) or a 127.0.0.1 socket (Ray).

`Started` and `Completing` are requests and wait for the driver's answer; every other message is
sent and forgotten, so an epoch never waits for the store write its report causes.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from basht.bench.systems.messages import Completing, Scoring, Started

log = logging.getLogger(__name__)

REQUESTS = (Started, Completing, Scoring)


class TrialChannel:
    """The trial process's end: `request` waits for the answer, `send` does not."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, address: tuple[str, int], authkey: bytes) -> TrialChannel:
        return cls(Client(address, authkey=authkey))

    def request(self, message: Any) -> Any:
        with self._lock:
            self.conn.send(message)
            return self.conn.recv()

    def send(self, message: Any) -> None:
        with self._lock:
            self.conn.send(message)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()


def answer(conn: Connection, message: Any, handle: Callable[[Any], Any]) -> None:
    """Hand one message to `handle`; send its answer back if the message was a request."""
    try:
        reply = handle(message)
    except Exception:  # a bookkeeping bug must not leave the trial waiting forever
        log.exception("handling %s failed", type(message).__name__)
        reply = None
    if isinstance(message, REQUESTS):
        conn.send(reply)


class EventServer:
    """Accepts trial processes on 127.0.0.1 (authenticated) and serves each on its own thread."""

    def __init__(self, handle: Callable[[Any], Any]):
        self.handle = handle
        self.authkey = secrets.token_bytes(32)
        self.listener = Listener(("127.0.0.1", 0), authkey=self.authkey)
        self.address: tuple[str, int] = self.listener.address
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="basht-events", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self.listener.accept()
            except (OSError, EOFError):
                if self._closed:
                    return
                continue  # a client that failed authentication or hung up early
            if self._closed:
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return  # the trial process ended or was killed
            try:
                answer(conn, message, self.handle)
            except OSError:
                return

    def close(self) -> None:
        """Stop accepting; connections end when their trial processes do (undeploy ends them)."""
        if self._closed:
            return
        self._closed = True
        # accept() blocks until a client comes: a last connection of our own wakes it up.
        with contextlib.suppress(OSError, EOFError):
            Client(self.address, authkey=self.authkey).close()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.listener.close()
