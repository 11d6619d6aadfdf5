"""Read measurements back from a Prometheus server's HTTP API (the seed's metric collection path)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from basht.energy.base import EnergyUnavailable, Reading
from basht.errors import BashtError


class PrometheusError(BashtError):
    """The server could not be reached or rejected the query."""


class PrometheusClient:
    """Instant and range queries against `/api/v1/query` and `/api/v1/query_range`."""

    def __init__(self, url: str, timeout_s: float = 5.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        address = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout_s) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:200]
            raise PrometheusError(f"Prometheus {self.url}: HTTP {err.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as err:
            raise PrometheusError(f"Prometheus {self.url}: cannot connect ({err})") from None
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus {self.url}: {body.get('error', 'query failed')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant vector: (labels, value) per series."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def query_range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """A range vector: (labels, [(time, value), ...]) per series."""
        params = {"query": expr, "start": start, "end": end, "step": step_s}
        data = self._get("/api/v1/query_range", params)
        return [
            (r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in data["result"]
        ]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=self.timeout_s) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False


#: node_exporter's RAPL counters, one series per package, summed here rather than in PromQL.
DEFAULT_QUERY = "node_rapl_package_joules_total"


class PrometheusSource:
    """Node energy from counter series in Prometheus (node_exporter's RAPL collector by default).

    Each series the query returns keeps its own running total, and a value below its last one
    starts that series again from zero, as Prometheus's `increase()` does per series: an exporter
    restart, or a package's raw RAPL counter wrapping (node_exporter exposes it as it is). Summed
    in the query (`sum(...)`), one package's wrap would read as the whole sum starting again and
    count every other package's energy once more.
    """

    name = "prometheus"

    def __init__(self, url: str, query: str = DEFAULT_QUERY):
        self.client = PrometheusClient(url)
        self.expr = query
        try:
            first = self._values()
        except PrometheusError as err:
            raise EnergyUnavailable(str(err)) from None
        if not first:
            raise EnergyUnavailable(f"Prometheus {url}: the query {query!r} returned no series")
        self._last = first
        self._total = 0.0

    def _values(self) -> dict[tuple[tuple[str, str], ...], float]:
        """Each series' value, by its labels."""
        return {tuple(sorted(labels.items())): v for labels, v in self.client.query(self.expr)}

    def read(self) -> Reading:
        try:
            values = self._values()
        except PrometheusError:
            values = {}  # a missed scrape adds nothing; the next read catches up
        for series, value in values.items():
            last = self._last.get(series)
            if last is not None:  # a series first seen now counts from here
                self._total += value - last if value >= last else value
            self._last[series] = value
        return Reading(time.time(), {"cpu": self._total})

    def max_interval_s(self) -> float | None:
        return None

    def describe(self) -> str:
        return f"Prometheus {self.client.url}: {self.expr}"

    def close(self) -> None:
        pass
