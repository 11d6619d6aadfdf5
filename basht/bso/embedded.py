"""A real BSO server in a background thread on a free 127.0.0.1 port, for `basht bso simulate` and
benchmarks that need one without the user starting `basht bso serve` first."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from basht.bso.config import ServerSettings
from basht.bso.errors import BSOError


@contextmanager
def serve_in_thread(db: str, token: str | None = None, timeout_s: float = 30.0) -> Iterator[str]:
    """Serve `db` (migrated first) until the block ends; yields the server's base URL."""
    import uvicorn

    from basht.bso.db.migrate import ensure_ready
    from basht.bso.server import create_app

    settings = ServerSettings(db=db, token=token, log_level="warning")
    ensure_ready(settings.db)
    # Port 0: the kernel picks a free port. (Handing uvicorn a pre-bound socket instead costs
    # ~45 ms per request here: its connections miss the TCP setup uvicorn gives its own.)
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="basht-bso-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise BSOError("the embedded BSO server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
