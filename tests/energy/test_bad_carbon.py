"""Generated bad carbon-intensity series: an experiment's `measure.carbon.csv` is accepted or
refused in one line naming the experiment, the key and the CSV file, never a traceback, and a
run of a refused one stores nothing.

The series are written the ways they go wrong: columns missing, renamed or in another order, a
`;` for a `,`, values that are not numbers or negative, NaN or huge, timestamps that are not
times, out of range, repeated or out of order; and files that are empty, only a header, not
UTF-8 or a folder. A series that is accepted is also described and integrated, as a run does.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from basht.energy.carbon import CarbonIntensityError, TimeSeriesIntensity, emissions_g
from tests.bad_input import check_outcome, fuzz_settings, mostly, run_cli
from tests.conftest import BASE

KEY = "measure.carbon.csv"
GOOD_HEADERS = st.sampled_from(
    [
        "timestamp,g_per_kwh",
        "g_per_kwh,timestamp",
        "Timestamp , G_PER_KWH",
        "timestamp,g_per_kwh,zone",
        '"timestamp","g_per_kwh"',
        "\ufefftimestamp,g_per_kwh",
        "# a comment first\ntimestamp,g_per_kwh",
    ]
)
BAD_HEADERS = st.sampled_from(
    [
        "timestamp",  # a column missing
        "time,g_per_kwh",  # renamed
        "timestamp,gco2_per_kwh",
        "timestamp;g_per_kwh",  # another delimiter
        "timestamp\tg_per_kwh",
        "",
    ]
)
GOOD_TIMES = st.one_of(
    st.integers(min_value=0, max_value=2_000_000_000).map(str),
    st.datetimes().map(lambda t: t.isoformat()),
)
ODD_TIMES = st.one_of(
    st.sampled_from(
        [
            "2024-01-01T00:00:00Z",
            "2024-01-01 00:30:00+02:00",
            "2024-13-01T00:00:00",
            "1e18",
            "-1e18",
            "253402300800",  # the first second of the year 10000
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00+01:00",
            "nan",
            "inf",
            "",
            "yesterday",
        ]
    ),
    st.floats().map(repr),
    st.text(max_size=8),
)
GOOD_VALUES = st.floats(min_value=0, max_value=2000).map(repr)
ODD_VALUES = st.one_of(
    st.sampled_from(["380", "0", "-1", "nan", "inf", "1e308", "1e400", "", "n/a", "1_000", "0x10"]),
    st.floats().map(repr),
    st.text(max_size=6),
)


@st.composite
def series(draw: st.DrawFn) -> bytes:
    """A carbon-intensity CSV file, more or less right."""
    header = draw(mostly(GOOD_HEADERS, BAD_HEADERS))
    delimiter = ";" if ";" in header else "\t" if "\t" in header else ","
    cell = st.tuples(mostly(GOOD_TIMES, ODD_TIMES, 6), mostly(GOOD_VALUES, ODD_VALUES, 6))
    rows = draw(st.lists(cell, max_size=5))
    if rows and draw(st.integers(0, 3)) == 0:  # a timestamp again
        rows.append((rows[0][0], draw(GOOD_VALUES)))
    if draw(st.booleans()):
        rows.reverse()
    swapped = header.lower().startswith("g_per_kwh")
    lines = [header, *(delimiter.join((v, t) if swapped else (t, v)) for t, v in rows)]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines).encode() + draw(st.sampled_from([b"", b"\n"]))


def _files(tmp_path: Path, content: bytes) -> tuple[Path, Path, Path]:
    """The CSV, and an experiment that names it (its store in tmp_path)."""
    series_path = tmp_path / "intensity.csv"
    series_path.write_bytes(content)
    store = tmp_path / "refused.db"
    spec = BASE | {"measure": {"carbon": {"csv": series_path.name}}, "store": f"sqlite:///{store}"}
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(spec))
    return series_path, experiment, store


def _check(
    series_path: Path,
    experiment: Path,
    store: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    *,
    named: str | Path | None = None,
) -> int:
    """`basht validate` of the experiment; a refused series is refused by `basht run` as well,
    and nothing is stored; an accepted one is described and integrated as a run does."""
    named = series_path if named is None else named
    code, err = run_cli(monkeypatch, capsys, "validate", str(experiment))
    check_outcome(code, err, KEY, named, starts=experiment)
    if code == 2:
        code, err = run_cli(monkeypatch, capsys, "run", "-q", "--no-plots", str(experiment))
        check_outcome(code, err, KEY, named, starts=experiment)
        assert code == 2 and not store.exists()
        return 2
    intensity = TimeSeriesIntensity.from_csv(series_path)
    assert intensity.describe()
    start, end = intensity.timestamps[0], intensity.timestamps[-1]
    assert emissions_g(3.6e6, intensity, start - 60, end + 60) >= 0
    return 0


@fuzz_settings(200)
@given(content=series())
def test_the_reader_accepts_a_carbon_series_or_refuses_it_in_one_line(
    content: bytes, tmp_path: Path
) -> None:
    """The reader alone, many times over (the CLI's test below has its plumbing)."""
    path = tmp_path / "intensity.csv"
    path.write_bytes(content)
    try:
        intensity = TimeSeriesIntensity.from_csv(path)
    except CarbonIntensityError as err:
        assert "\n" not in str(err) and str(err).startswith(f"{path}"), err
        return
    assert intensity.describe()
    start, end = intensity.timestamps[0], intensity.timestamps[-1]
    assert emissions_g(3.6e6, intensity, start - 60, end + 60) >= 0


@fuzz_settings(70)
@given(content=series())
def test_a_carbon_series_is_accepted_or_refused_in_one_line(
    content: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _check(*_files(tmp_path, content), monkeypatch, capsys)


@fuzz_settings(30)
@given(content=st.binary(max_size=100))
def test_any_bytes_as_a_carbon_series_are_accepted_or_refused_in_one_line(
    content: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _check(*_files(tmp_path, content), monkeypatch, capsys)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        # Each of these passed `basht validate`, and failed with a traceback in the run once it
        # was stored (a time outside the years a date can show).
        (b"timestamp,g_per_kwh\n1e18,380\n", "timestamp '1e18' is neither"),
        (b"timestamp,g_per_kwh\n-62135596801,380\n", "timestamp '-62135596801' is neither"),
        (b"timestamp,g_per_kwh\n9999-12-31T23:59:59-01:00,380\n", "of the years 1 to 9999"),
        # A cell past the csv module's size limit.
        (b"timestamp,g_per_kwh\n1," + b"1" * (csv.field_size_limit() + 1) + b"\n", "not a CSV row"),
        (b"", "empty; expected a header timestamp,g_per_kwh"),
        (b"timestamp,g_per_kwh\n", "no data rows after the header"),
        (b"timestamp;g_per_kwh\n0;380\n", "header must name the columns timestamp,g_per_kwh"),
        (b"timestamp,g_per_kwh\n\xff\xfe,380\n", "not a UTF-8 text file"),
        (b"timestamp,g_per_kwh\n0,380\n0,400\n", "timestamp '0' repeats line 2"),
        (b"timestamp,g_per_kwh\n0,nan\n", "g_per_kwh 'nan' is not a number >= 0"),
    ],
    ids=["1e18", "year-0", "year-10000", "huge-cell", "empty", "header-only", "semicolons",
         "not-utf8", "repeated", "nan"],
)  # fmt: skip
def test_carbon_series_a_run_could_not_use_are_refused_before_it_stores_anything(
    content: bytes, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    series_path, experiment, store = _files(tmp_path, content)
    code, err = run_cli(monkeypatch, capsys, "validate", str(experiment))
    assert code == 2 and said in err, err
    assert _check(series_path, experiment, store, monkeypatch, capsys) == 2


def test_a_carbon_series_that_is_a_folder_or_no_path_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    series_path, experiment, store = _files(tmp_path, b"")
    series_path.unlink()
    series_path.mkdir()
    assert _check(series_path, experiment, store, monkeypatch, capsys) == 2
    spec = yaml.safe_load(experiment.read_text())
    spec["measure"]["carbon"]["csv"] = "intensity\0.csv"
    experiment.write_text(yaml.safe_dump(spec))
    named = repr(str(tmp_path / "intensity\0.csv"))  # a NUL cannot be printed as it is
    assert _check(series_path, experiment, store, monkeypatch, capsys, named=named) == 2
