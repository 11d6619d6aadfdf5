"""Grid carbon intensity (gCO2eq/kWh) for a run, and the emissions of energy spent over a time span."""

from __future__ import annotations

import bisect
import csv
import difflib
import http.client
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from basht.errors import SpecError

if TYPE_CHECKING:
    from basht.experiment import CarbonSpec

log = logging.getLogger(__name__)

TABLE_PATH = Path(__file__).with_name("data") / "carbon_intensity.csv"
J_PER_KWH = 3.6e6  # 1 kWh = 3.6 MJ, exact by definition
# Electricity Maps API v3 (docs: static.electricitymap.org/api/docs, read 2025): GET
# /carbon-intensity/latest?zone=Z with header `auth-token`; the JSON answer carries `zone`,
# `carbonIntensity` (gCO2eq/kWh, lifecycle by default) and `datetime` (ISO 8601, hour of the value).
ELECTRICITYMAPS_BASE_URL = "https://api.electricitymap.org/v3"
ELECTRICITYMAPS_TOKEN_ENV = "ELECTRICITYMAPS_TOKEN"
#: Another base URL for the API (a proxy, a mirror, a test server), instead of the public one.
ELECTRICITYMAPS_URL_ENV = "ELECTRICITYMAPS_API_URL"
#: Where the experiment file gives its carbon intensity: the key path its errors name.
CARBON_PATH = "measure.carbon"


class CarbonIntensityError(SpecError):
    """A carbon zone, value or time-series file that cannot be used; the message names which,
    and `key` the key path it is at, where one is known."""


class CarbonIntensity(ABC):
    """Where a gCO2eq/kWh figure comes from; every result records `describe()` next to its numbers."""

    #: True when the value never changes with time, so emissions need no integration.
    is_static: bool = True
    #: The zone the figure is for, as Basht names it (`DEU`, `aws:eu-central-1`, `csv:...`).
    zone: str = ""

    @abstractmethod
    def g_per_kwh(self, at: float) -> float:
        """The intensity in force at unix time `at`."""

    @abstractmethod
    def describe(self) -> str:
        """One line: zone, year or time span, and source, for provenance in results."""

    def change_points(self, start: float, end: float) -> Sequence[float]:
        """Times strictly inside (start, end) where the value may change; empty for steady sources."""
        return ()


def _check_g_per_kwh(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CarbonIntensityError(f"g_per_kwh must be a number, got {value!r}", what)
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise CarbonIntensityError(f"g_per_kwh must be a finite number >= 0, got {value!r}", what)
    return value


class StaticIntensity(CarbonIntensity):
    """A fixed figure given by the user: reproducible, and exact for any time span."""

    def __init__(self, g_per_kwh: float, source: str = "experiment file") -> None:
        self.value_g_per_kwh = _check_g_per_kwh(g_per_kwh, "carbon")
        self.source = source
        self.zone = "fixed"

    def g_per_kwh(self, at: float) -> float:
        return self.value_g_per_kwh

    def describe(self) -> str:
        return f"fixed {self.value_g_per_kwh:g} gCO2eq/kWh ({self.source})"

    def __repr__(self) -> str:
        return f"StaticIntensity({self.value_g_per_kwh!r})"


@dataclass(frozen=True)
class ZoneRow:
    """One row of the shipped table `data/carbon_intensity.csv`."""

    zone: str
    kind: str  # country | us-state | cloud | world
    alpha2: str
    alpha3: str
    name: str
    g_per_kwh: float
    year: int
    source: str
    license: str


def _data_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines that are not `#` comments or blank."""
    with path.open(encoding="utf-8-sig", newline="") as f:
        return [
            (n, line) for n, line in enumerate(f, 1) if line.strip() and not line.startswith("#")
        ]


@cache
def _table() -> tuple[dict[str, ZoneRow], dict[str, str]]:
    """Rows by lower-case key (zone id, plus alpha-2 for countries), and name -> zone for hints."""
    lines = _data_lines(TABLE_PATH)
    by_key: dict[str, ZoneRow] = {}
    names: dict[str, str] = {}
    for rec in csv.DictReader(line for _, line in lines):
        row = ZoneRow(
            zone=rec["zone"],
            kind=rec["kind"],
            alpha2=rec["alpha2"],
            alpha3=rec["alpha3"],
            name=rec["name"],
            g_per_kwh=float(rec["g_per_kwh"]),
            year=int(rec["year"]),
            source=rec["source"],
            license=rec["license"],
        )
        by_key[row.zone.lower()] = row
        if row.kind == "country":
            by_key[row.alpha2.lower()] = row
            names[row.name.lower()] = row.alpha2
    return by_key, names


def table_zones() -> list[str]:
    """Every zone id the shipped table knows (alpha-2 country codes included)."""
    by_key, _ = _table()
    return sorted(
        {row.zone for row in by_key.values()}
        | {r.alpha2 for r in by_key.values() if r.kind == "country"}
    )


def _suggest(zone: str) -> list[str]:
    by_key, names = _table()
    key = zone.strip().lower()
    hints: list[str] = []
    if key in names:
        code = names[key]
        hints += [code, by_key[code.lower()].alpha3]
    for name in difflib.get_close_matches(key, list(names), n=2, cutoff=0.75):
        code = names[name]
        hints += [code, by_key[code.lower()].alpha3]
    labels = {
        k: (r.alpha2 if k == r.alpha2.lower() and r.kind == "country" else r.zone)
        for k, r in by_key.items()
    }
    hints += [labels[k] for k in difflib.get_close_matches(key, list(by_key), n=5, cutoff=0.6)]
    return list(dict.fromkeys(hints))[:6]


class TableIntensity(CarbonIntensity):
    """The yearly average of a country, US state or cloud region, from the shipped offline table."""

    def __init__(self, row: ZoneRow, asked_as: str | None = None) -> None:
        self.row = row
        self.zone = row.zone
        self.asked_as = asked_as or row.zone

    @classmethod
    def for_zone(cls, zone: str) -> TableIntensity:
        """Look a zone up case-insensitively: `DE`/`DEU`, `US-VA`, `aws:eu-central-1`, `world`."""
        by_key, _ = _table()
        row = by_key.get(zone.strip().lower())
        if row is None:
            hints = _suggest(zone)
            tail = (
                f"did you mean {', '.join(hints)}?"
                if hints
                else "give an ISO 3166 country code (DE or DEU), a US state (US-VA), a cloud "
                "region (aws:eu-central-1, gcp:europe-west3, azure:westeurope) or world"
            )
            raise CarbonIntensityError(f"unknown zone {zone!r}; {tail}", "carbon")
        return cls(row, asked_as=zone.strip())

    def g_per_kwh(self, at: float) -> float:
        return self.row.g_per_kwh

    def describe(self) -> str:
        r = self.row
        return (
            f"{r.zone} ({r.name}): {r.g_per_kwh:g} gCO2eq/kWh, {r.year} yearly average, "
            f"source: {r.source} [{r.license}]"
        )

    def __repr__(self) -> str:
        return f"TableIntensity.for_zone({self.zone!r})"


#: The times a series may hold: those a date can show (years 1 to 9999, UTC), as `describe`
#: and the results do.
_EARLIEST_S = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_LATEST_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def _parse_timestamp(text: str) -> float:
    """Unix seconds, or ISO 8601 (a time without offset is taken as UTC); ValueError for text
    that is neither, or a time outside the years 1 to 9999."""
    try:
        value = float(text)
    except ValueError:
        moment = datetime.fromisoformat(text)  # ValueError on bad text; 3.11 accepts "Z"
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = moment.timestamp()
    if not _EARLIEST_S <= value <= _LATEST_S:  # NaN too
        raise ValueError(text)
    return value


def _cells(line: str, path: Path, n: int) -> list[str]:
    """Line `n` of the series as its cells."""
    try:
        return next(csv.reader([line]))
    except csv.Error as e:  # a field past csv's size limit
        raise CarbonIntensityError(f"{path}:{n}: not a CSV row ({e})") from None


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


class TimeSeriesIntensity(CarbonIntensity):
    """A recorded series, step-wise: the value at t is the latest row at or before t (the first before it)."""

    is_static = False

    def __init__(
        self, timestamps: Sequence[float], values_g_per_kwh: Sequence[float], source: str
    ) -> None:
        if not timestamps or len(timestamps) != len(values_g_per_kwh):
            raise CarbonIntensityError(f"{source}: need one or more (timestamp, g_per_kwh) rows")
        if any(b <= a for a, b in zip(timestamps, timestamps[1:], strict=False)):
            raise CarbonIntensityError(f"{source}: timestamps must be strictly increasing")
        self.timestamps = [float(t) for t in timestamps]
        self.values_g_per_kwh = [_check_g_per_kwh(v, source) for v in values_g_per_kwh]
        self.source = source
        self.zone = f"csv:{source}"

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> TimeSeriesIntensity:
        """Read `timestamp,g_per_kwh` rows (other columns ignored, `#` lines skipped, any order)."""
        path = Path(path)
        try:
            lines = _data_lines(path)
        except OSError as e:
            raise CarbonIntensityError(
                f"{path}: cannot read carbon time series ({e.strerror})"
            ) from e
        except UnicodeDecodeError as e:
            raise CarbonIntensityError(f"{path}: not a UTF-8 text file") from e
        except ValueError:  # from open(): a path with a NUL in it
            raise CarbonIntensityError(f"{str(path)!r}: not a path (it holds a NUL)") from None
        if not lines:
            raise CarbonIntensityError(f"{path}: empty; expected a header timestamp,g_per_kwh")
        first_n, header_line = lines[0]
        header = [c.strip().lower() for c in _cells(header_line, path, first_n)]
        if "timestamp" not in header or "g_per_kwh" not in header:
            raise CarbonIntensityError(
                f"{path}:{first_n}: header must name the columns timestamp,g_per_kwh, got {header_line.strip()!r}"
            )
        i_t, i_v = header.index("timestamp"), header.index("g_per_kwh")
        seen: dict[float, int] = {}
        points: list[tuple[float, float]] = []
        for n, line in lines[1:]:
            cells = _cells(line, path, n)
            if len(cells) <= max(i_t, i_v):
                raise CarbonIntensityError(
                    f"{path}:{n}: expected {len(header)} columns, got {len(cells)}"
                )
            t_text, v_text = cells[i_t].strip(), cells[i_v].strip()
            try:
                t = _parse_timestamp(t_text)
            except ValueError:
                raise CarbonIntensityError(
                    f"{path}:{n}: timestamp {t_text!r} is neither ISO 8601 nor unix seconds "
                    "of the years 1 to 9999"
                ) from None
            try:
                v = float(v_text)
            except ValueError:
                v = math.nan
            if not math.isfinite(v) or v < 0:
                raise CarbonIntensityError(f"{path}:{n}: g_per_kwh {v_text!r} is not a number >= 0")
            if t in seen:
                raise CarbonIntensityError(
                    f"{path}:{n}: timestamp {t_text!r} repeats line {seen[t]}"
                )
            seen[t] = n
            points.append((t, v))
        if not points:
            raise CarbonIntensityError(f"{path}: no data rows after the header")
        points.sort()
        return cls([t for t, _ in points], [v for _, v in points], source=str(path))

    def g_per_kwh(self, at: float) -> float:
        i = bisect.bisect_right(self.timestamps, at) - 1
        return self.values_g_per_kwh[max(i, 0)]

    def change_points(self, start: float, end: float) -> Sequence[float]:
        lo = bisect.bisect_right(self.timestamps, start)
        hi = bisect.bisect_left(self.timestamps, end)
        return self.timestamps[lo:hi]

    def describe(self) -> str:
        ts, vs = self.timestamps, self.values_g_per_kwh
        return (
            f"time series {self.source}: {len(ts)} steps {_iso(ts[0])} .. {_iso(ts[-1])}, "
            f"{min(vs):g}-{max(vs):g} gCO2eq/kWh (value held until the next row)"
        )

    def __repr__(self) -> str:
        return f"TimeSeriesIntensity.from_csv({self.source!r})"


class ScaledIntensity(CarbonIntensity):
    """A series replayed from `series_start`, `time_scale` series seconds per second since
    `clock_start`: a recorded day of the grid passes in minutes, and a run's emissions are
    integrated over the same replayed series its schedule saw (`schedule.time_scale`)."""

    is_static = False

    def __init__(
        self, series: CarbonIntensity, clock_start: float, series_start: float, time_scale: float
    ) -> None:
        self.series, self.clock_start = series, clock_start
        self.series_start, self.time_scale = series_start, time_scale
        self.zone = series.zone

    def anchor(self, clock_now: float) -> None:
        """The replay starts now: `series_start` is this moment (the run phase begins; deploy and
        setup do not use up the replayed series)."""
        self.clock_start = clock_now

    def to_series(self, at: float) -> float:
        return self.series_start + (at - self.clock_start) * self.time_scale

    def to_clock(self, series_at: float) -> float:
        return self.clock_start + (series_at - self.series_start) / self.time_scale

    def g_per_kwh(self, at: float) -> float:
        return self.series.g_per_kwh(self.to_series(at))

    def change_points(self, start: float, end: float) -> Sequence[float]:
        points = self.series.change_points(self.to_series(start), self.to_series(end))
        return [self.to_clock(p) for p in points]

    def describe(self) -> str:
        return (
            f"{self.series.describe()}; replayed from {_iso(self.series_start)} at "
            f"{self.time_scale:g} series seconds per second"
        )


def _fallback_for(zone: str) -> TableIntensity:
    """The table row for a zone; an Electricity Maps sub-zone (`US-CAL-CISO`) falls back to its country."""
    try:
        return TableIntensity.for_zone(zone)
    except CarbonIntensityError:
        country = zone.split("-", 1)[0]
        if ":" not in zone and country != zone:
            try:
                return TableIntensity.for_zone(country)
            except CarbonIntensityError:
                pass
        raise


class ElectricityMapsIntensity(CarbonIntensity):
    """Live intensity from the Electricity Maps API, cached; the table value when the API fails.

    The API gives the latest hourly value only, so `g_per_kwh(at)` ignores `at` and returns the value
    fetched at most `cache_s` ago. A failure (HTTP error, timeout, bad JSON) logs a warning and serves
    the fallback for `cache_s` before the API is tried again; `describe()` says which one was used.
    """

    is_static = False

    def __init__(
        self,
        zone: str,
        token: str,
        base_url: str = ELECTRICITYMAPS_BASE_URL,
        timeout_s: float = 5.0,
        cache_s: float = 900.0,
        fallback: CarbonIntensity | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not token:
            raise CarbonIntensityError("an Electricity Maps token is empty", "carbon")
        self.zone = zone.strip()
        self.fallback = fallback if fallback is not None else _fallback_for(self.zone)
        self._token = token
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached_at: float | None = None
        self._value_g_per_kwh = 0.0
        self.last_used: str | None = None  # "live" | "fallback"
        self.last_datetime: str | None = None
        self.last_error: str | None = None
        self.live_count = 0
        self.fallback_count = 0

    def _fetch(self) -> tuple[float, str | None]:
        body = electricitymaps_get(
            f"{self.base_url}/carbon-intensity/latest",
            {"zone": self.zone},
            self._token,
            self.timeout_s,
        )
        value = body["carbonIntensity"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < math.inf
        ):
            raise ValueError(f"carbonIntensity is {value!r}")
        moment = body.get("datetime")
        return float(value), moment if isinstance(moment, str) else None

    def g_per_kwh(self, at: float) -> float:
        with self._lock:  # the monitor's sampler and the live exporter may ask at once
            return self._g_per_kwh(at)

    def _g_per_kwh(self, at: float) -> float:
        now = self._clock()
        if self._cached_at is not None and now - self._cached_at < self.cache_s:
            return self._value_g_per_kwh
        try:
            value, moment = self._fetch()
        except urllib.error.HTTPError as e:
            value, moment = self._fall_back(f"HTTP {e.code}", at), None
        except (
            OSError,
            http.client.HTTPException,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
        ) as e:
            reason = getattr(e, "reason", None) or e
            value, moment = self._fall_back(f"{type(e).__name__}: {reason}", at), None
        else:
            self.last_used, self.last_datetime, self.last_error = "live", moment, None
            self.live_count += 1
        self._cached_at, self._value_g_per_kwh = now, value
        return value

    def _fall_back(self, reason: str, at: float) -> float:
        self.last_used, self.last_error = "fallback", reason
        self.fallback_count += 1
        log.warning(
            "Electricity Maps failed for zone %s (%s); using %s",
            self.zone,
            reason,
            self.fallback.describe(),
        )
        return self.fallback.g_per_kwh(at)

    def describe(self) -> str:
        counts = f"live {self.live_count}x, fallback {self.fallback_count}x"
        if self.last_used == "live":
            return (
                f"Electricity Maps zone {self.zone}: {self._value_g_per_kwh:g} gCO2eq/kWh for "
                f"{self.last_datetime or 'unknown hour'} (carbon-intensity/latest; {counts})"
            )
        if self.last_used == "fallback":
            return (
                f"Electricity Maps zone {self.zone} unavailable ({self.last_error}); fallback "
                f"{self.fallback.describe()} ({counts})"
            )
        return f"Electricity Maps zone {self.zone} (not fetched yet; fallback {self.fallback.describe()})"

    def __repr__(self) -> str:
        return f"ElectricityMapsIntensity({self.zone!r}, base_url={self.base_url!r})"


def intensity_from_spec(spec: CarbonSpec) -> CarbonIntensity:
    """Build the intensity the experiment's `measure.carbon` block asks for (the schema has
    checked that it gives exactly one of these); an error names its key under `measure.carbon`.

    1. `g_per_kwh`: a fixed figure (`StaticIntensity`), the reproducible choice;
    2. `csv`: a recorded `timestamp,g_per_kwh` series (`TimeSeriesIntensity`);
    3. `region` with an Electricity Maps token (`electricitymaps_token`, else the environment
       variable ELECTRICITYMAPS_TOKEN): live values, the table value of `region` as fallback;
    4. `region`: the shipped yearly table (`TableIntensity`).
    The live zone is the region's ISO alpha-2 country (a cloud region or US state asks for its
    country); a region the table lacks but Electricity Maps knows (`US-CAL-CISO`) is sent as it is,
    with its country's table value as fallback.
    """
    key = next((k for k in ("g_per_kwh", "csv", "region") if getattr(spec, k) is not None), None)
    try:
        return _intensity(spec)
    except CarbonIntensityError as err:
        raise CarbonIntensityError(
            err.reason, f"{CARBON_PATH}.{key}" if key else CARBON_PATH
        ) from None


def _intensity(spec: CarbonSpec) -> CarbonIntensity:
    """The intensity of the spec's one key; its errors name no key path (the caller's does)."""
    if spec.g_per_kwh is not None:
        return StaticIntensity(spec.g_per_kwh)
    if spec.csv is not None:
        return TimeSeriesIntensity.from_csv(spec.csv)
    region = (spec.region or "").strip()
    if not region:  # the schema lets a blank one through
        raise CarbonIntensityError(
            "expected a zone, such as DE, DEU, US-VA, aws:eu-central-1 or world"
        )
    token = electricitymaps_token(spec)
    if not token:
        return TableIntensity.for_zone(region)
    fallback = _fallback_for(region)
    if fallback.row.kind == "world":
        log.warning("Electricity Maps has no world zone; using the table value for %s", region)
        return fallback
    known = (
        fallback.row.zone.lower() == region.lower() or fallback.row.alpha2.lower() == region.lower()
    )
    live_zone = fallback.row.alpha2 if known else region
    log.info("carbon: live Electricity Maps zone %s for region %s", live_zone, region)
    return ElectricityMapsIntensity(
        live_zone, token, base_url=electricitymaps_base_url(), fallback=fallback
    )


def electricitymaps_get(url: str, query: dict[str, Any], token: str, timeout_s: float) -> Any:
    """The JSON answer of one GET of the API (the token in its header, never in the URL)."""
    request = urllib.request.Request(
        f"{url}?{urllib.parse.urlencode(query)}",
        headers={"auth-token": token, "Accept": "application/json", "User-Agent": "basht"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.load(response)


def electricitymaps_base_url() -> str:
    """The API's base URL: the environment's `ELECTRICITYMAPS_API_URL`, else the public one."""
    return os.environ.get(ELECTRICITYMAPS_URL_ENV, "").strip() or ELECTRICITYMAPS_BASE_URL


def electricitymaps_token(spec: CarbonSpec) -> str:
    """The token a spec gives, else the environment's (empty when neither has one)."""
    return spec.electricitymaps_token or os.environ.get(ELECTRICITYMAPS_TOKEN_ENV, "")


def mean_g_per_kwh(intensity: CarbonIntensity, start: float, end: float) -> float:
    """Time-weighted mean intensity over [start, end] (unix seconds); the value at `start` if empty."""
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"need finite start <= end, got start={start!r} end={end!r}")
    if intensity.is_static or end == start:
        return intensity.g_per_kwh(start)
    edges = [start, *intensity.change_points(start, end), end]
    weighted = sum(intensity.g_per_kwh(a) * (b - a) for a, b in zip(edges, edges[1:], strict=False))
    return weighted / (end - start)


def emissions_g(energy_j: float, intensity: CarbonIntensity, start: float, end: float) -> float:
    """Grams CO2eq of `energy_j` joules drawn uniformly over [start, end] (unix seconds).

    Exact for a static intensity; for a time series, each step's value weighs the share of the
    energy spent while it was in force.
    """
    if not math.isfinite(energy_j) or energy_j < 0:
        raise ValueError(f"energy_j must be a finite number >= 0, got {energy_j!r}")
    return energy_j / J_PER_KWH * mean_g_per_kwh(intensity, start, end)
