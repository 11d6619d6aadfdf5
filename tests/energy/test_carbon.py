"""Carbon intensity: table look-ups, explicit values, recorded series, Electricity Maps, emissions."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from basht.energy.carbon import (
    CarbonIntensityError,
    ElectricityMapsIntensity,
    StaticIntensity,
    TableIntensity,
    TimeSeriesIntensity,
    emissions_g,
    intensity_from_spec,
    mean_g_per_kwh,
    table_zones,
)
from basht.errors import BashtError, ExperimentError
from basht.experiment import CarbonSpec, Experiment
from tests.energy.em_api import ElectricityMapsStub

KWH_J = 3.6e6


# --- the shipped table -------------------------------------------------------------------------


def test_country_by_alpha2_and_alpha3_is_the_same_row() -> None:
    de, deu = TableIntensity.for_zone("DE"), TableIntensity.for_zone("DEU")
    assert de.row == deu.row
    assert de.row.name == "Germany"
    assert de.g_per_kwh(0.0) == pytest.approx(380.95)  # OWID 2023, as CodeCarbon 3.3.2 ships it
    assert de.row.year == 2023


def test_lookup_is_case_insensitive() -> None:
    assert TableIntensity.for_zone("fra").row == TableIntensity.for_zone("Fr").row


@pytest.mark.parametrize(
    ("zone", "g_per_kwh", "source_word"),
    [
        ("gcp:europe-west3", 345.0, "Google"),  # Google's 2023 region figure
        ("aws:eu-central-1", 380.95, "DEU"),  # mapped to Germany
        ("azure:westeurope", 267.622, "NLD"),  # mapped to the Netherlands
        ("aws:us-east-1", 244.8, "US-VA"),  # mapped to Virginia, eGRID2023
    ],
)
def test_cloud_region_per_provider(zone: str, g_per_kwh: float, source_word: str) -> None:
    intensity = TableIntensity.for_zone(zone)
    assert intensity.g_per_kwh(0.0) == pytest.approx(g_per_kwh)
    assert source_word in intensity.row.source
    assert intensity.is_static
    assert zone in intensity.describe()


def test_table_has_world_average_and_common_regions() -> None:
    assert 300 < TableIntensity.for_zone("world").g_per_kwh(0.0) < 600
    zones = set(table_zones())
    for zone in ["aws:us-west-2", "aws:eu-west-1", "gcp:us-central1", "azure:eastus", "US-CA"]:
        assert zone in zones
    assert sum(z.startswith("gcp:") for z in zones) >= 30


def test_unknown_zone_names_it_and_suggests_close_matches() -> None:
    with pytest.raises(CarbonIntensityError) as info:
        TableIntensity.for_zone("aws:eu-central1")
    message = str(info.value)
    assert "'aws:eu-central1'" in message
    assert "aws:eu-central-1" in message
    assert "\n" not in message
    assert isinstance(info.value, ExperimentError)


def test_unknown_country_name_suggests_its_codes() -> None:
    with pytest.raises(CarbonIntensityError, match="DE, DEU"):
        TableIntensity.for_zone("Germany")


def test_unknown_zone_without_close_match_explains_the_forms() -> None:
    with pytest.raises(CarbonIntensityError, match="ISO 3166"):
        TableIntensity.for_zone("qq")


# --- explicit value ----------------------------------------------------------------------------


def test_explicit_value_is_static_and_exact() -> None:
    intensity = StaticIntensity(380)
    assert intensity.is_static
    assert intensity.g_per_kwh(123.0) == 380.0
    assert "380" in intensity.describe()
    # 7.2 MJ = 2 kWh at 380 g/kWh
    assert emissions_g(7.2e6, intensity, 0.0, 3600.0) == pytest.approx(760.0)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "380", True])
def test_explicit_value_rejects_nonsense(bad: object) -> None:
    with pytest.raises(CarbonIntensityError):
        StaticIntensity(bad)  # type: ignore[arg-type]


@given(
    energy_j=st.floats(0, 1e12),
    g_per_kwh=st.floats(0, 2000),
    start=st.floats(0, 2e9),
    span_s=st.floats(0, 1e6),
)
def test_static_emissions_are_energy_times_intensity(
    energy_j: float, g_per_kwh: float, start: float, span_s: float
) -> None:
    got = emissions_g(energy_j, StaticIntensity(g_per_kwh), start, start + span_s)
    assert got == pytest.approx(energy_j / KWH_J * g_per_kwh)


# --- recorded time series ----------------------------------------------------------------------


def _series(tmp_path: Path, text: str, name: str = "ci.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_series_is_stepwise(tmp_path: Path) -> None:
    path = _series(tmp_path, "timestamp,g_per_kwh\n100,200\n200,400\n300,100\n")
    s = TimeSeriesIntensity.from_csv(path)
    assert not s.is_static
    assert s.g_per_kwh(50) == 200  # before the first row: the first value
    assert s.g_per_kwh(100) == 200  # at a row: that row
    assert s.g_per_kwh(199.9) == 200  # held until the next row
    assert s.g_per_kwh(200) == 400
    assert s.g_per_kwh(10_000) == 100  # after the last row: the last value


def test_series_reads_iso_8601_and_unix_seconds_in_any_order(tmp_path: Path) -> None:
    text = (
        "# exported from somewhere\n"
        "timestamp,g_per_kwh,zone\n"
        "2024-01-01T01:00:00Z,300,DE\n"
        "1704067200,100,DE\n"  # 2024-01-01T00:00:00Z
        "2024-01-01T03:00:00+01:00,500,DE\n"  # 02:00Z
    )
    path = _series(tmp_path, text)
    s = TimeSeriesIntensity.from_csv(path)
    assert s.timestamps == [1704067200.0, 1704070800.0, 1704074400.0]
    assert s.values_g_per_kwh == [100, 300, 500]
    assert s.g_per_kwh(1704067200 + 1800) == 100


def test_naive_iso_time_is_utc(tmp_path: Path) -> None:
    s = TimeSeriesIntensity.from_csv(
        _series(tmp_path, "timestamp,g_per_kwh\n2024-01-01T00:00:00,1\n")
    )
    assert s.timestamps == [1704067200.0]


def test_emissions_integrate_across_steps(tmp_path: Path) -> None:
    # steps: 200 g/kWh from t=100, 400 from t=200, 100 from t=300.
    s = TimeSeriesIntensity.from_csv(
        _series(tmp_path, "timestamp,g_per_kwh\n100,200\n200,400\n300,100\n")
    )
    # 3.6 MJ = 1 kWh spent uniformly over [150, 350]: a quarter each in [150,200) and [300,350),
    # half in [200,300): 0.25*200 + 0.5*400 + 0.25*100 = 50 + 200 + 25 = 275 g.
    assert emissions_g(3.6e6, s, 150, 350) == pytest.approx(275.0)
    assert mean_g_per_kwh(s, 150, 350) == pytest.approx(275.0)
    # Before the first row the first value holds: [0, 200] -> all at 200.
    assert emissions_g(3.6e6, s, 0, 200) == pytest.approx(200.0)
    # Inside one step, and an empty span: the value in force.
    assert emissions_g(7.2e6, s, 210, 290) == pytest.approx(800.0)
    assert emissions_g(3.6e6, s, 300, 300) == pytest.approx(100.0)


@given(
    cut=st.floats(0, 1),
    start=st.floats(0, 400),
    span_s=st.floats(1e-3, 400),
)
def test_emissions_are_additive_over_a_split_span(cut: float, start: float, span_s: float) -> None:
    s = TimeSeriesIntensity([100.0, 200.0, 300.0], [200.0, 400.0, 100.0], source="mem")
    end = start + span_s
    mid = start + cut * span_s
    energy_j = 1e6
    whole = emissions_g(energy_j, s, start, end)
    parts = emissions_g(energy_j * (mid - start) / span_s, s, start, mid) + emissions_g(
        energy_j * (end - mid) / span_s, s, mid, end
    )
    assert whole == pytest.approx(parts, rel=1e-9, abs=1e-9)
    assert 100.0 * energy_j / KWH_J - 1e-9 <= whole <= 400.0 * energy_j / KWH_J + 1e-9


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("timestamp,g_per_kwh\n100,200\nyesterday,300\n", ":3:", "timestamp 'yesterday'"),
        ("timestamp,g_per_kwh\n100,200\n200,-5\n", ":3:", "g_per_kwh '-5'"),
        ("timestamp,g_per_kwh\n100,200\n200,lots\n", ":3:", "g_per_kwh 'lots'"),
        ("# note\ntimestamp,g_per_kwh\n100,200\n100,300\n", ":4:", "repeats line 3"),
        ("time,value\n100,200\n", ":1:", "header"),
        ("timestamp,g_per_kwh\n100\n", ":2:", "columns"),
    ],
)
def test_bad_series_line_is_named(tmp_path: Path, text: str, where: str, what: str) -> None:
    path = _series(tmp_path, text)
    with pytest.raises(CarbonIntensityError) as info:
        TimeSeriesIntensity.from_csv(path)
    message = str(info.value)
    assert f"{path}{where}" in message
    assert what in message
    assert "\n" not in message


def test_missing_or_empty_series_file(tmp_path: Path) -> None:
    with pytest.raises(CarbonIntensityError, match="cannot read"):
        TimeSeriesIntensity.from_csv(tmp_path / "nope.csv")
    with pytest.raises(CarbonIntensityError, match="no data rows"):
        TimeSeriesIntensity.from_csv(_series(tmp_path, "timestamp,g_per_kwh\n"))


# --- Electricity Maps against a real local server ----------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.integration
def test_electricitymaps_sends_token_and_zone_and_parses_value(api: ElectricityMapsStub) -> None:
    live = ElectricityMapsIntensity("DE", "secret-token", base_url=api.base_url, timeout_s=2)
    assert not live.is_static
    assert live.g_per_kwh(0.0) == 123.0
    assert api.requests == [("/v3/carbon-intensity/latest?zone=DE", "secret-token")]
    description = live.describe()
    assert "live" in description and "2025-01-01T10:00" in description
    assert "secret-token" not in description


@pytest.mark.integration
def test_electricitymaps_caches_for_the_configured_period(api: ElectricityMapsStub) -> None:
    clock = _Clock()
    live = ElectricityMapsIntensity("DE", "t", base_url=api.base_url, cache_s=60, clock=clock)
    assert live.g_per_kwh(0.0) == 123.0
    api.body = dict(api.body, carbonIntensity=456)  # type: ignore[arg-type]
    clock.now += 59
    assert live.g_per_kwh(0.0) == 123.0
    assert len(api.requests) == 1
    clock.now += 2
    assert live.g_per_kwh(0.0) == 456.0
    assert len(api.requests) == 2


@pytest.mark.integration
def test_electricitymaps_falls_back_to_table_on_http_500(
    api: ElectricityMapsStub, caplog: pytest.LogCaptureFixture
) -> None:
    api.status = 500
    api.body = {"error": "boom"}
    live = ElectricityMapsIntensity("DE", "t", base_url=api.base_url, timeout_s=2)
    with caplog.at_level(logging.WARNING, logger="basht.energy.carbon"):
        value = live.g_per_kwh(0.0)
    assert value == pytest.approx(380.95)  # Germany's table value
    assert "HTTP 500" in caplog.text and "DE" in caplog.text
    assert "fallback" in live.describe() and "HTTP 500" in live.describe()
    assert live.last_used == "fallback"


@pytest.mark.integration
def test_electricitymaps_falls_back_on_a_body_without_a_value(api: ElectricityMapsStub) -> None:
    api.body = {"zone": "DE", "carbonIntensity": None}
    live = ElectricityMapsIntensity("DE", "t", base_url=api.base_url, timeout_s=2)
    assert live.g_per_kwh(0.0) == pytest.approx(380.95)
    assert live.last_used == "fallback"


def test_electricitymaps_falls_back_when_unreachable(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    live = ElectricityMapsIntensity("FR", "t", base_url=f"http://127.0.0.1:{port}/v3", timeout_s=1)
    with caplog.at_level(logging.WARNING, logger="basht.energy.carbon"):
        assert live.g_per_kwh(0.0) == TableIntensity.for_zone("FR").g_per_kwh(0.0)
    assert "Electricity Maps failed for zone FR" in caplog.text
    assert "fallback" in live.describe()


@pytest.mark.integration
def test_electricitymaps_subzone_falls_back_to_its_country(api: ElectricityMapsStub) -> None:
    api.status = 503
    live = ElectricityMapsIntensity("US-CAL-CISO", "t", base_url=api.base_url, timeout_s=2)
    assert live.g_per_kwh(0.0) == TableIntensity.for_zone("USA").g_per_kwh(0.0)


def test_electricitymaps_unknown_zone_fails_at_construction() -> None:
    with pytest.raises(CarbonIntensityError, match="'nowhere'"):
        ElectricityMapsIntensity("nowhere", "t")


# --- building from the experiment file ---------------------------------------------------------


def test_spec_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    path = _series(tmp_path, "timestamp,g_per_kwh\n0,42\n")
    assert isinstance(intensity_from_spec(CarbonSpec(g_per_kwh=380)), StaticIntensity)
    assert isinstance(intensity_from_spec(CarbonSpec(csv=str(path))), TimeSeriesIntensity)
    table = intensity_from_spec(CarbonSpec(region="DE"))
    assert isinstance(table, TableIntensity) and table.zone == "DEU"


def test_spec_accepts_a_pydantic_object() -> None:
    assert intensity_from_spec(CarbonSpec(g_per_kwh=12.5)).g_per_kwh(0) == 12.5
    assert intensity_from_spec(CarbonSpec(region="gcp:europe-west3")).g_per_kwh(0) == 345.0


@pytest.mark.integration
def test_spec_with_token_goes_live_with_table_fallback(
    api: ElectricityMapsStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "from-env")
    live = intensity_from_spec(CarbonSpec(region="aws:eu-central-1"))
    assert isinstance(live, ElectricityMapsIntensity)
    assert live.zone == "DE"  # a cloud region asks for its country
    assert live.fallback.zone == "aws:eu-central-1"
    live.base_url = api.base_url
    assert live.g_per_kwh(0.0) == 123.0
    assert api.requests[-1][1] == "from-env"
    explicit = intensity_from_spec(CarbonSpec(region="DEU", electricitymaps_token="from-file"))
    assert isinstance(explicit, ElectricityMapsIntensity) and explicit.zone == "DE"


# The block as the experiment file gives it: the schema checks its keys and values once, and
# intensity_from_spec what only the table or the series knows; either names the key path.
@pytest.mark.parametrize(
    ("block", "match"),
    [
        ({}, "give exactly one of region, g_per_kwh or csv"),
        ({"region": "Atlantis"}, "'Atlantis'"),
        ({"g_per_kwh": -3}, "g_per_kwh: Input should be greater than or equal to 0"),
        ({"regoin": "DE"}, "measure.carbon.regoin: unknown key"),
    ],
)
def test_bad_spec_is_one_clear_line(
    spec: dict, block: dict, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    spec["measure"] = {"carbon": block}
    with pytest.raises(BashtError, match=match) as info:
        intensity_from_spec(Experiment.from_dict(spec).measure.carbon)
    assert "\n" not in str(info.value)
    assert "measure.carbon" in str(info.value)


def test_emissions_reject_a_backwards_span() -> None:
    with pytest.raises(ValueError):
        emissions_g(1.0, StaticIntensity(1), 10.0, 5.0)
    with pytest.raises(ValueError):
        emissions_g(-1.0, StaticIntensity(1), 0.0, 5.0)
