"""Electricity Maps' carbon-intensity forecast, as the carbon-aware scheduler's forecast.

A live run knows the grid only as it is now; the scheduler needs the hours to come. Electricity
Maps publishes a forecast for a zone (API v3, GET /carbon-intensity/forecast?zone=Z with header
`auth-token`; the answer's `forecast` is a list of `{carbonIntensity, datetime}` points, hourly
for 24 to 72 hours, read 2026). It is fetched at most every `cache_s` seconds; when the API
fails, one warning, and `fallback` (the persistence forecast over what the run has seen, or the
current value held flat, which makes the scheduler run now) serves until the next try. Neither
costs the deadline: the shifter's guard holds whatever the forecast says.
"""

from __future__ import annotations

import bisect
import http.client
import logging
import math
import threading
import time
import urllib.error
from collections.abc import Callable
from datetime import datetime

from basht.energy.carbon import ELECTRICITYMAPS_BASE_URL, CarbonIntensity, electricitymaps_get
from basht.energy.shifting import Forecast

__all__ = ["ElectricityMapsForecast", "FlatForecast"]

log = logging.getLogger(__name__)

#: The longest horizon the forecast endpoint offers (hours); a deadline past it plans the rest
#: at the last value the forecast gives.
HORIZON_H = 72


class FlatForecast:
    """Every later hour as the grid is now: no reason to wait, so the scheduler runs at once."""

    def __init__(self, intensity: CarbonIntensity) -> None:
        self.intensity = intensity

    def g_per_kwh(self, at: float, now: float) -> float:
        return self.intensity.g_per_kwh(min(at, now))

    def describe(self) -> str:
        return f"the current value held flat, of {self.intensity.describe()}"


class ElectricityMapsForecast:
    """Forecast points of a zone from Electricity Maps; `intensity` (the run's) for now and the
    past. Between points the earlier one holds (a step series, as the API's hourly values)."""

    def __init__(
        self,
        zone: str,
        token: str,
        intensity: CarbonIntensity,
        *,
        base_url: str = ELECTRICITYMAPS_BASE_URL,
        fallback: Forecast | None = None,
        timeout_s: float = 5.0,
        cache_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.zone = zone.strip()
        self._token = token
        self.intensity = intensity
        self.base_url = base_url.rstrip("/")
        self.fallback: Forecast = fallback if fallback is not None else FlatForecast(intensity)
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._fetched_at: float | None = None
        self._times: list[float] = []
        self._values: list[float] = []
        self.updated_at: str | None = None
        self.last_error: str | None = None
        self.fetches = 0
        self.failures = 0

    def _fetch(self) -> tuple[list[float], list[float], str | None]:
        body = electricitymaps_get(
            f"{self.base_url}/carbon-intensity/forecast",
            {"zone": self.zone, "horizonHours": HORIZON_H},
            self._token,
            self.timeout_s,
        )
        points = []
        for point in body["forecast"]:
            value = point["carbonIntensity"]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"carbonIntensity is {value!r}")
            if not 0 <= value < math.inf:
                raise ValueError(f"carbonIntensity is {value!r}")
            moment = datetime.fromisoformat(str(point["datetime"]).replace("Z", "+00:00"))
            if moment.tzinfo is None:
                raise ValueError(f"datetime {point['datetime']!r} has no time zone")
            points.append((moment.timestamp(), float(value)))
        if not points:
            raise ValueError("the forecast is empty")
        points.sort()
        updated = body.get("updatedAt")
        return (
            [t for t, _ in points],
            [v for _, v in points],
            updated if isinstance(updated, str) else None,
        )

    def _refresh(self) -> None:
        now = self._clock()
        if self._fetched_at is not None and now - self._fetched_at < self.cache_s:
            return
        self._fetched_at = now
        try:
            times, values, updated = self._fetch()
        except urllib.error.HTTPError as e:
            self._failed(f"HTTP {e.code}")
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as e:
            self._failed(f"{type(e).__name__}: {getattr(e, 'reason', None) or e}")
        else:
            self._times, self._values, self.updated_at = times, values, updated
            self.last_error = None
            self.fetches += 1

    def _failed(self, reason: str) -> None:
        self.failures += 1
        if self.last_error is None:  # one warning per stretch of failures, not one per slot
            log.warning(
                "Electricity Maps forecast failed for zone %s (%s); planning with %s",
                self.zone,
                reason,
                self.fallback.describe(),
            )
        self.last_error = reason
        self._times, self._values = [], []

    def g_per_kwh(self, at: float, now: float) -> float:
        """The forecast's value at `at`, the present included where the forecast covers it: the
        scheduler then ranks the slot it is in and the later ones by one source (the live value
        is an hour's, cached). Before the forecast's first point, the run's own intensity."""
        with self._lock:
            self._refresh()
            times, values = self._times, self._values
        if not times:
            return self.fallback.g_per_kwh(at, now)
        i = bisect.bisect_right(times, at) - 1
        if i < 0:
            return self.intensity.g_per_kwh(at) if at <= now else values[0]
        return values[i]

    def describe(self) -> str:
        counts = f"{self.fetches} fetched, {self.failures} failed"
        if self.last_error is not None:
            return (
                f"Electricity Maps forecast for zone {self.zone} unavailable ({self.last_error}; "
                f"{counts}); {self.fallback.describe()}"
            )
        updated = f", updated {self.updated_at}" if self.updated_at else ""
        return f"Electricity Maps forecast for zone {self.zone} ({counts}{updated})"

    def __repr__(self) -> str:
        return f"ElectricityMapsForecast({self.zone!r}, base_url={self.base_url!r})"
