"""Carbon-aware shifting: forecasts, slots, the wait-and-scale decision, emissions and the oracle."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.energy.carbon import StaticIntensity, TimeSeriesIntensity
from basht.energy.shifting import (
    CarbonShifter,
    Decision,
    Forecast,
    PerfectForecast,
    PersistenceForecast,
    Slot,
    agnostic_schedule,
    check_feasible,
    emissions_g,
    oracle_emissions_g,
    parse_deadline,
    placed_emissions_g,
    slots,
)
from basht.errors import ArgumentError, BashtError

T0 = 1_700_006_400.0  # 2023-11-15T00:00:00Z: a whole hour, so a whole quarter hour too
H = 3600.0
DAY = 86400.0


def series(*steps: tuple[float, float]) -> TimeSeriesIntensity:
    """A step series from (seconds after T0, gCO2eq/kWh) pairs."""
    return TimeSeriesIntensity([T0 + t for t, _ in steps], [g for _, g in steps], source="test")


def shifter(intensity: TimeSeriesIntensity, deadline: float, workers: int, **kw) -> CarbonShifter:
    return CarbonShifter(PerfectForecast(intensity), deadline, workers, **kw)


# --- forecasts ---------------------------------------------------------------------------------


def test_persistence_forecast_is_the_same_hour_a_day_earlier_at_todays_level() -> None:
    hourly = TimeSeriesIntensity(
        [T0 + i * H for i in range(-50, 50)], [1000.0 + i for i in range(-50, 50)], source="test"
    )
    now = T0 + 0.5 * H
    f = PersistenceForecast(hourly)
    assert f.g_per_kwh(now - 100, now) == 1000.0  # the past is known: the series itself
    assert f.g_per_kwh(now, now) == 1000.0
    # today runs 24 above yesterday: yesterday's hours, moved up by that
    assert f.g_per_kwh(now + H, now) == 1000.0 - 23 + 24  # T0 + 1.5h - 24h
    assert f.g_per_kwh(now + DAY, now) == 1000.0 + 24  # exactly a day ahead: k = 1 lands on now
    assert f.g_per_kwh(now + DAY + 1, now) == 1000.0 - 24 + 24  # past a day: two days back
    assert "persistence" in f.describe() and "test" in f.describe()


def test_persistence_over_days_averages_the_same_hours_and_the_level_over_them() -> None:
    # three earlier days at 100, 200 and 600 at every hour, today 400 at every hour
    s = series((-3 * DAY, 100), (-2 * DAY, 200), (-DAY, 600), (0, 400))
    now = T0 + 0.5 * H
    week = PersistenceForecast(s, days=3)
    level = 400.0 - (600 + 200 + 100) / 3  # today against the mean of the same 3 days
    assert week.g_per_kwh(now + H, now) == pytest.approx((600 + 200 + 100) / 3 + level)
    assert week.g_per_kwh(now + H, now) == 400.0  # a flat day forecasts itself
    # more than a period ahead: the days from the first one known at `now` back
    hourly = TimeSeriesIntensity(
        [T0 + i * H for i in range(-100, 50)], [1000.0 + i for i in range(-100, 50)], source="t"
    )
    two = PersistenceForecast(hourly, days=2)
    level = 1000.0 - (976 + 952) / 2
    assert two.g_per_kwh(now + H, now) == pytest.approx((977 + 953) / 2 + level)
    assert two.g_per_kwh(now + DAY + H, now) == pytest.approx((977 + 953) / 2 + level)
    assert two.g_per_kwh(now + DAY + H, now) != pytest.approx((1001 + 977) / 2 + level)
    assert PersistenceForecast(s, days=1).g_per_kwh(now + H, now) == 400.0  # yesterday alone
    assert "the mean of 3" in week.describe() and "days=3" in repr(week)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ArgumentError, match="days must be a whole number >= 1"):
            PersistenceForecast(s, days=bad)


def test_perfect_forecast_is_the_series() -> None:
    s = series((0, 100), (H, 300))
    f: Forecast = PerfectForecast(s)
    assert f.g_per_kwh(T0 + 2 * H, T0) == 300.0
    assert f.g_per_kwh(T0 + 10, T0) == 100.0


# --- slots -------------------------------------------------------------------------------------


def test_slots_are_cut_at_multiples_of_step_from_the_epoch() -> None:
    s = series((0, 100), (1000, 300))
    got = slots(PerfectForecast(s), T0 + 100, T0 + 2000, 900.0)
    assert got == [
        Slot(T0 + 100, T0 + 900, 100.0),  # the first one is short
        Slot(T0 + 900, T0 + 1800, 100.0),  # the value at its start, not where it changes
        Slot(T0 + 1800, T0 + 2000, 300.0),  # the last one ends at the deadline
    ]
    assert got[0].duration_s == 800.0
    assert slots(PerfectForecast(s), T0, T0, 900.0) == []


def test_slots_use_the_forecast_made_at_now() -> None:
    s = series((-DAY, 50), (-DAY + 900, 20), (0, 400))
    got = slots(PersistenceForecast(s), T0, T0 + 1800, 900.0)
    # now is known; later is yesterday's shape (30 less a quarter hour on) at today's level
    assert [x.g_per_kwh for x in got] == [400.0, 370.0]


def test_persistence_forecast_is_never_below_zero() -> None:
    s = series((-DAY, 300), (-DAY + H, 10), (0, 100))
    assert PersistenceForecast(s).g_per_kwh(T0 + H, T0) == 0.0  # 10 + (100 - 300) clamped


# --- decide ------------------------------------------------------------------------------------


def test_clean_now_runs_full_width() -> None:
    s = series((-H, 100), (H, 500))
    d = shifter(s, T0 + 10 * H, 4).decide(T0, 2 * H)
    assert d == Decision(4, T0 + 900, "clean slot")


def test_dirty_now_with_a_clean_slot_later_that_fits_holds_until_the_slot_ends() -> None:
    s = series((-H, 500), (2 * H, 100), (3 * H, 500))
    d = shifter(s, T0 + 10 * H, 4).decide(T0 + 100, H)
    assert d == Decision(0, T0 + 900, "dirty: held")
    kept = shifter(s, T0 + 10 * H, 4, min_workers=1).decide(T0 + 100, H)
    assert (kept.workers, kept.reason) == (1, "dirty: held")


def test_work_that_only_fits_in_all_remaining_time_runs_full_width() -> None:
    s = series((-H, 500), (2 * H, 100), (3 * H, 500))
    work = 4 * 5 * H
    d = shifter(s, T0 + 5 * H * 1.1, 4).decide(T0, work)  # margin 0.1: needs all of it
    assert d == Decision(4, T0 + 900, "deadline needs full speed")


def test_deadline_guard_runs_full_width_within_a_step_of_the_deadline() -> None:
    s = series((-H, 900), (900, 100))  # dirty now, clean for the rest
    deadline = T0 + 4 * H
    # the clean slots hold 4·(4h - 900 s) = 54000 worker-seconds
    at_guard = shifter(s, deadline, 4, margin=0.0).decide(T0, 54000)
    assert at_guard == Decision(4, T0 + 900, "deadline needs full speed")
    below = shifter(s, deadline, 4, margin=0.0).decide(T0, 54000 - 4)
    assert below == Decision(0, T0 + 900, "dirty: held")
    # the margin counts: 1.1 x 49100 > 54000
    assert shifter(s, deadline, 4).decide(T0, 49100).reason == "deadline needs full speed"


def test_parallelism_caps_the_capacity_of_a_slot() -> None:
    s = series((-H, 500), (900, 100), (900 + H, 600))
    sh = shifter(s, T0 + 10 * H, 4, margin=0.0)
    assert sh.decide(T0, 2 * H).workers == 0  # the clean hour holds 4 worker-hours
    one = sh.decide(T0, 2 * H, parallelism=1)  # it holds 1; the current slot is next cleanest
    assert one == Decision(1, T0 + 900, "clean slot")
    assert sh.decide(T0, 2 * H, parallelism=9).workers == 0  # capped at max_workers
    assert sh.decide(T0, 2 * H, parallelism=0) == Decision(0, T0 + 900, "nothing can run now")


def test_marginal_slot_runs_the_width_it_needs_rounded_up() -> None:
    s = series((-H, 200), (900, 100), (1800, 500))
    sh = shifter(s, T0 + 10 * H, 8, margin=0.0)
    d = sh.decide(T0, 8 * 900 + 2.3 * 900)  # the clean slot holds 8·900; 2.3 workers more here
    assert d == Decision(3, T0 + 900, "marginal slot")
    exact = sh.decide(T0, 8 * 900 + 2 * 900)
    assert exact.workers == 2


def test_no_work_left_runs_nothing() -> None:
    s = series((0, 100))
    assert shifter(s, T0 + H, 2).decide(T0 + 10, 0.0) == Decision(0, T0 + 900, "no work left")


def test_slack_1x_always_runs_full_width() -> None:
    s = series((-H, 900), (900, 10))
    sh = shifter(s, T0 + 2 * H, 4)
    assert sh.decide(T0, 4 * 2 * H).workers == 4
    assert sh.earliest_finish(T0, 4 * 2 * H) == T0 + 2 * H


def test_bad_arguments_raise_one_line_value_errors() -> None:
    s = PerfectForecast(series((0, 100)))
    for kw in ({"max_workers": 0}, {"step_s": 0.0}, {"margin": -0.1}, {"min_workers": 5}):
        args = {"max_workers": 4} | kw
        with pytest.raises(ArgumentError) as err:
            CarbonShifter(s, T0 + H, args.pop("max_workers"), **args)
        assert isinstance(err.value, ValueError) and isinstance(err.value, BashtError)
        assert "\n" not in str(err.value)


# --- feasibility, emissions, baselines ---------------------------------------------------------


def test_check_feasible_names_the_deadline_the_work_and_the_earliest_finish() -> None:
    assert check_feasible(T0, T0 + 2 * H, 8 * H, 4) is None  # exactly in time
    assert check_feasible(T0, T0 + H, 8 * H, 4) == (
        "deadline 2023-11-15T01:00:00Z is too early: the work (about 8 worker-hours) "
        "at 4 workers finishes 2023-11-15T02:00:00Z at the earliest"
    )


def test_emissions_integral_is_exact_on_a_step_series() -> None:
    s = series((0, 100), (1000, 300))
    # 3600 W over 500 s at 100 g and 500 s at 300 g: 0.5 kWh each
    assert emissions_g(s, [(T0 + 500, T0 + 1500, 3600.0)]) == pytest.approx(200.0, rel=1e-12)
    assert emissions_g(StaticIntensity(400), [(T0, T0 + H, 1000.0), (T0, T0 + H, 0.0)]) == 400.0
    with pytest.raises(ArgumentError):
        emissions_g(s, [(T0 + 1, T0, 1.0)])


def test_oracle_fills_the_cleanest_hours_and_beats_the_agnostic_baseline() -> None:
    s = series((0, 500), (H, 100))
    base = agnostic_schedule(T0, H, 2, 100.0)
    assert base == [(T0, T0 + 1800, 200.0)]
    assert emissions_g(s, base) == pytest.approx(50.0)  # 0.1 kWh at 500 g
    assert oracle_emissions_g(s, T0, T0 + 2 * H, H, 2, 100.0) == pytest.approx(10.0)
    assert oracle_emissions_g(s, T0, T0 + 2 * H, H, 2, 100.0, step_s=900) == pytest.approx(10.0)
    assert oracle_emissions_g(s, T0, T0 + 2 * H, 0.0, 2, 100.0) == 0.0
    assert agnostic_schedule(T0, 0.0, 2, 100.0) == []
    with pytest.raises(ArgumentError, match="too early"):
        oracle_emissions_g(s, T0, T0 + 600, H, 2, 100.0)


def test_placement_is_the_oracle_with_a_perfect_forecast_and_pays_for_a_wrong_one() -> None:
    # Yesterday the first hour was clean and the second dirty; today it is the other way round.
    s = series((-DAY, 100), (-DAY + H, 500), (0, 500), (H, 100), (2 * H, 100))
    args = (T0, T0 + 2 * H, H, 2, 100.0)
    oracle = oracle_emissions_g(s, *args)
    assert placed_emissions_g(s, PerfectForecast(s), *args) == pytest.approx(oracle)
    # Persistence at today's level ranks the first hour cleanest: the work runs in the dirty one.
    wrong = placed_emissions_g(s, PersistenceForecast(s), *args)
    assert wrong == pytest.approx(emissions_g(s, agnostic_schedule(T0, H, 2, 100.0)))
    assert wrong == pytest.approx(5 * oracle)
    assert placed_emissions_g(s, PerfectForecast(s), T0, T0 + H, 0.0, 2, 100.0) == 0.0
    with pytest.raises(ArgumentError, match="too early"):
        placed_emissions_g(s, PerfectForecast(s), T0, T0 + 600, H, 2, 100.0)


# --- parse_deadline ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12h", T0 + 12 * H),
        ("90m", T0 + 5400),
        ("2d", T0 + 2 * DAY),
        ("3600s", T0 + H),
        ("3600", T0 + H),
        (" 1.5 H ", T0 + 1.5 * H),
        ("2023-11-15T01:00:00", T0 + H),
        ("2023-11-15T01:00:00Z", T0 + H),
        ("2023-11-15T02:00+01:00", T0 + H),
    ],
)
def test_parse_deadline_reads_durations_and_iso_times(text: str, expected: float) -> None:
    assert parse_deadline(text, T0) == expected


@pytest.mark.parametrize("text", ["soon", "12x", "", "-5h", "1e3h", "nan", "9" * 400 + "d"])
def test_parse_deadline_rejects_other_text_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="12h, 90m, 2d or 3600s") as err:
        parse_deadline(text, T0)
    assert "\n" not in str(err.value)


# --- the loop: decide() driving divisible work -------------------------------------------------


def simulate(
    sh: CarbonShifter, now: float, work_s: float, power_w: float
) -> tuple[float, list[tuple[float, float, float]], list[Decision]]:
    """Run divisible work as `decide` says: (finish time, schedule rows, decisions)."""
    t, left = now, work_s
    schedule: list[tuple[float, float, float]] = []
    decisions: list[Decision] = []
    for _ in range(100_000):
        if left <= 0:
            return t, schedule, decisions
        d = sh.decide(t, left)
        decisions.append(d)
        assert d.until > t and 0 <= d.workers <= sh.max_workers
        if d.workers:
            dt = min(d.until - t, left / d.workers)
            schedule.append((t, t + dt, d.workers * power_w))
            left = 0.0 if dt == left / d.workers else left - d.workers * dt
            t += dt
        else:
            t = d.until
    raise AssertionError("the loop did not end")


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[TimeSeriesIntensity, float, float, float, int, float, float]:
    """A repeating step series (changes off the slot grid too), a job, its deadline and settings."""
    now = T0 + draw(st.integers(0, 3599))
    gap = draw(st.sampled_from([600.0, 1000.0, 3600.0, 5400.0]))
    offset = draw(st.integers(0, int(gap) - 1))
    pattern: Sequence[int] = draw(st.lists(st.integers(0, 800), min_size=1, max_size=30))
    workers = draw(st.integers(1, 8))
    work = draw(st.floats(60.0, 3 * H)) * workers
    slack = draw(st.one_of(st.just(1.0), st.floats(1.0, 4.0)))
    deadline = now + work / workers * slack
    start = now - DAY - gap + offset
    n = math.ceil((deadline - start) / gap) + 2
    s = TimeSeriesIntensity(
        [start + i * gap for i in range(n)],
        [float(pattern[i % len(pattern)]) for i in range(n)],
        source="test",
    )
    step = draw(st.sampled_from([300.0, 900.0, 3600.0]))
    margin = draw(st.sampled_from([0.0, 0.1, 0.5]))
    return s, now, deadline, work, workers, step, margin


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_the_loop_meets_feasible_deadlines_and_never_beats_the_oracle(
    case: tuple[TimeSeriesIntensity, float, float, float, int, float, float],
) -> None:
    s, now, deadline, work, workers, step, margin = case
    assert check_feasible(now, deadline, work, workers) is None
    power = 100.0
    oracle = oracle_emissions_g(s, now, deadline, work, workers, power)
    assert oracle <= emissions_g(s, agnostic_schedule(now, work, workers, power)) * (1 + 1e-9)
    for forecast in (PerfectForecast(s), PersistenceForecast(s)):
        sh = CarbonShifter(forecast, deadline, workers, step_s=step, margin=margin)
        finish, schedule, _ = simulate(sh, now, work, power)
        assert finish <= deadline + 1e-6
        assert emissions_g(s, schedule) >= oracle * (1 - 1e-9) - 1e-9


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_with_slack_1x_every_decision_is_full_width(
    case: tuple[TimeSeriesIntensity, float, float, float, int, float, float],
) -> None:
    s, now, _, work, workers, step, margin = case
    deadline = now + work / workers
    for forecast in (PerfectForecast(s), PersistenceForecast(s)):
        sh = CarbonShifter(forecast, deadline, workers, step_s=step, margin=margin)
        finish, _, decisions = simulate(sh, now, work, 1.0)
        assert all(d.workers == workers for d in decisions)
        assert finish <= deadline + 1e-6
