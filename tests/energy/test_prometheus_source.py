"""Energy read from counter series in Prometheus: each series' resets and wraps on its own."""

from __future__ import annotations

import pytest

from basht.energy import PrometheusClient, PrometheusSource
from basht.energy.prometheus import PrometheusError
from basht.experiment import MeasureSpec


def _serve(monkeypatch, answers: list) -> None:
    """Each query gets the next answer: {package index: joules}, or an error to raise."""
    pending = iter(answers)

    def query(self, expr, at=None):
        answer = next(pending)
        if isinstance(answer, Exception):
            raise answer
        return [({"index": str(i)}, joules) for i, joules in answer.items()]

    monkeypatch.setattr(PrometheusClient, "query", query)


def test_one_package_wrapping_counts_that_package_again_not_every_package(monkeypatch):
    # node_exporter exposes the raw RAPL counter: package 0 wraps at ~262 kJ. Summed in PromQL,
    # the drop read as the whole sum starting again and booked package 1's 150 kJ once more.
    _serve(monkeypatch, [{0: 261_990.0, 1: 150_000.0}, {0: 40.0, 1: 150_200.0}])
    source = PrometheusSource("http://127.0.0.1:9")
    assert source.read().energy_j == {"cpu": pytest.approx(40.0 + 200.0)}


def test_a_missed_scrape_or_a_new_series_adds_nothing_and_the_next_read_catches_up(monkeypatch):
    _serve(
        monkeypatch,
        [{0: 100.0}, PrometheusError("down"), {0: 130.0, 1: 5_000.0}, {0: 140.0, 1: 5_010.0}],
    )
    source = PrometheusSource("http://127.0.0.1:9")
    assert source.read().energy_j == {"cpu": 0.0}
    assert source.read().energy_j == {"cpu": pytest.approx(30.0)}
    assert source.read().energy_j == {"cpu": pytest.approx(50.0)}


def test_the_default_query_leaves_the_per_series_sum_to_the_source():
    assert "sum(" not in MeasureSpec().prometheus_query
