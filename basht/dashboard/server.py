"""`basht dashboard`: open the store read-only, take the port, then serve until Ctrl-C.

The port is bound here, before uvicorn starts, so a port in use is one line (and port 0 a free
port whose number is known before the first request), and no request is ever refused between a
check and the bind.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.errors import BashtError
from basht.store import Store


@dataclass
class Dashboard:
    """A dashboard ready to serve: its store, its bound socket and its app."""

    store: Store
    sock: socket.socket
    app: Any
    host: str

    @property
    def url(self) -> str:
        port = self.sock.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}/"

    def serve(self) -> None:
        """Serve until Ctrl-C (which uvicorn raises again once it has stopped)."""
        import uvicorn

        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        try:
            uvicorn.Server(config).run(sockets=[self.sock])
        finally:
            self.sock.close()
            self.store.close()


def open_dashboard(store_url: str, host: str, port: int, results: Path) -> Dashboard:
    """The store opened read-only and the port taken; BashtError (one line) if either cannot be."""
    try:
        import uvicorn  # noqa: F401  (served with it: missing, say so before anything opens)

        from basht.dashboard.app import create_app
    except ImportError as err:
        raise BashtError(
            f"basht dashboard needs FastAPI and uvicorn ({err.name} is not installed): "
            "pip install 'basht[dashboard]'"
        ) from None
    store = Store(store_url, read_only=True)
    try:
        sock = bind(host, port)
    except BashtError:
        store.close()
        raise
    return Dashboard(store, sock, create_app(store, results, host=host), host)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: a free port)."""
    if not 0 <= port <= 65535:
        raise BashtError(f"--port {port}: expected 0 to 65535 (0: any free port)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise BashtError(f"--host {host!r}: cannot resolve it ({err.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        reason = err.strerror or str(err)
        raise BashtError(f"cannot listen on {host} port {port}: {reason}") from None
    sock.setblocking(False)
    return sock
