"""A real Prometheus server on 127.0.0.1 for tests (Debian's `prometheus` package)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from basht.energy import PrometheusClient
from tests.tools import need_tool


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def prometheus(
    tmp: Path, targets: list[str], interval_s: float = 0.5
) -> Iterator[PrometheusClient]:
    """Start Prometheus scraping `targets` every `interval_s`; stop it and its data afterwards."""
    binary = need_tool("prometheus")  # skips the test where it is not installed
    port = free_port()
    config = tmp / "prometheus.yml"
    listed = ", ".join(f"'{t}'" for t in targets)
    every = f"{int(interval_s * 1000)}ms"  # Prometheus durations take no fractions
    config.write_text(
        f"global:\n  scrape_interval: {every}\n  evaluation_interval: {every}\n"
        f"scrape_configs:\n  - job_name: basht\n    static_configs:\n      - targets: [{listed}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = PrometheusClient(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while not client.ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"prometheus did not start: {proc.stderr.read().decode()[-500:]}"
                )
            time.sleep(0.2)
        yield client
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
