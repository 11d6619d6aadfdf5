"""A stand-in for the Electricity Maps API on 127.0.0.1, for the live intensity's and the
forecast's tests: `latest` answers `body` (or what `latest` returns, when set), `forecast` what
`forecast` returns, both with `status`; every request's path and token is kept."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import Any


class ElectricityMapsStub:
    def __init__(self) -> None:
        self.status = 200
        self.body: object = {
            "zone": "DE",
            "carbonIntensity": 123,
            "datetime": "2025-01-01T10:00:00.000Z",
            "updatedAt": "2025-01-01T10:04:00.000Z",
            "emissionFactorType": "lifecycle",
            "isEstimated": False,
        }
        self.latest: Callable[[], object] | None = None
        self.forecast: Callable[[], object] = lambda: {"zone": "DE", "forecast": []}
        self.requests: list[tuple[str, str | None]] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append((self.path, self.headers.get("auth-token")))
                if "/forecast" in self.path:
                    answer: Any = api.forecast()
                else:
                    answer = api.latest() if api.latest is not None else api.body
                payload = json.dumps(answer).encode()
                self.send_response(api.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v3"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
