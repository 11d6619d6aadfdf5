"""The Prometheus metrics reference, read from the live exporter's registry (`basht.report.exporter`):
names, types, labels and help texts are the ones a scrape returns."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from .markdown import code, table


@dataclass(frozen=True)
class Metric:
    """One metric family as a scrape shows it."""

    name: str
    kind: str  # counter, gauge, histogram, ...
    help: str
    labels: tuple[str, ...]
    series: tuple[str, ...]  # the sample names a query uses: basht_trials_total, ..._bucket


class _OneOfEach:
    """A stand-in energy monitor with one account of every kind, so each metric family has a
    sample and therefore shows its labels (a family without samples shows none)."""

    def __init__(self) -> None:
        from basht.energy.monitor import IDLE_KINDS

        account = SimpleNamespace(energy_j=1.0, emissions_g=0.1)
        kinds = ("trial", *IDLE_KINDS)
        self.source_of = {"cpu": "estimate"}
        self._accounts = {(kind, "t", "cpu"): account for kind in kinds}

    def all_accounts(self) -> dict[tuple[str, str, str], Any]:
        return self._accounts


class _NoServer:
    """Stands in for the HTTP server the exporter starts: a docs build serves nothing."""

    server_port = 0

    def shutdown(self) -> None:
        pass

    def server_close(self) -> None:
        pass


def exporter_metrics() -> list[Metric]:
    """Every metric family the live exporter serves, read from its registry.

    The metrics are created where the exporter starts, so one is built, as a run builds it, with
    its HTTP server replaced by a stand-in.
    """
    from unittest import mock

    from basht.report import exporter as module

    serve = mock.patch.object(module, "start_http_server", lambda *a, **k: (_NoServer(), None))
    with serve:
        exporter = module.LiveExporter(_OneOfEach(), port=0, usd_per_hour=1.0)
    exporter.trial_ended("completed", 1.0)  # a sample, so the trial metrics show their labels
    families = list(exporter.registry.collect())
    metrics = []
    for family in families:
        labels = dict.fromkeys(getattr(family, "_labelnames", ()))
        for sample in family.samples:
            labels.update(dict.fromkeys(k for k in sample.labels if k != "le"))
        series = tuple(dict.fromkeys(s.name for s in family.samples)) or (family.name,)
        buckets = [s.labels["le"] for s in family.samples if "le" in s.labels]
        about = family.documentation
        if buckets:  # a histogram's upper bounds, as its `le` label gives them
            about += f" Buckets (le): {', '.join(dict.fromkeys(buckets))}."
        metrics.append(Metric(family.name, family.type, about, tuple(labels), series))
    return metrics


def prometheus_page(metrics: list[Metric] | None = None) -> str:
    """The Markdown of `reference/prometheus.md`."""
    metrics = exporter_metrics() if metrics is None else metrics
    rows = [
        [
            code(m.name),
            m.kind,
            ", ".join(code(label) for label in m.labels) or "—",
            ", ".join(code(s) for s in m.series),
            m.help,
        ]
        for m in metrics
    ]
    return "\n".join(
        [
            "# Prometheus metrics\n",
            "With `measure.prometheus_port` set, a run serves these metrics on "
            "`http://127.0.0.1:PORT/metrics` while it lasts (port 0 picks a free one; the run "
            "prints where). Energy, emissions and cost are read from the run's energy monitor at "
            "scrape time; trial counts and durations are pushed as trials end. No label names a "
            "trial, so the number of series stays bounded. Units are base units: joules, grams, "
            "seconds, US dollars.\n",
            "This table is read from the exporter's registry when the documentation is built.\n",
            table(["metric", "type", "labels", "series", "help"], rows),
        ]
    )
