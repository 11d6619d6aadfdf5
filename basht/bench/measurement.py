"""What the runner measures around any system under test: node energy, carbon, cost, live metrics."""

from __future__ import annotations

import logging
import time
from typing import Any

from basht.energy.billing import billing_price, live_bill_usd
from basht.energy.monitor import UNMEASURED, Account, AccountKey, EnergyMonitor, summed
from basht.energy.node import open_node_sources, slot_devices
from basht.errors import ExperimentError
from basht.experiment import Experiment
from basht.store import Store

log = logging.getLogger(__name__)


def run_intensity(experiment: Experiment, clock_start: float) -> Any:
    """The carbon intensity the run is measured and scheduled with: `measure.carbon`, replayed
    from `schedule.start` at `schedule.time_scale` when either is given."""
    from basht.energy.carbon import ScaledIntensity, intensity_from_spec
    from basht.experiment import parse_deadline

    intensity = intensity_from_spec(experiment.measure.carbon)
    schedule = experiment.schedule
    if schedule.start is None and schedule.time_scale == 1.0:
        return intensity
    start = clock_start if schedule.start is None else parse_deadline(schedule.start, 0.0)
    return ScaledIntensity(intensity, clock_start, start, schedule.time_scale)


def start_monitor(
    experiment: Experiment, store: Store, run_id: str, resume: bool, intensity: Any = None
) -> EnergyMonitor:
    """One sampler for the node, writing its samples and accounts to the store as it goes."""
    measure, resources = experiment.measure, experiment.resources
    sources = open_node_sources(measure, resources, resources.workers)
    if intensity is None:
        intensity = run_intensity(experiment, time.time())
    previous = _previous_accounts(store, run_id) if resume else {}

    def sink(samples: list[dict[str, Any]], accounts: dict[AccountKey, Account]):
        store.add_power_samples(run_id, samples)
        merged = summed(previous, accounts)
        source_of = monitor.source_of  # other nodes' included: built once, not per row
        store.replace_energy_accounts(
            run_id,
            [
                {
                    "kind": kind,
                    "trial": trial,
                    "component": component,
                    "source": UNMEASURED
                    if component == UNMEASURED
                    else source_of.get(component, sources.name),
                    "energy_j": a.energy_j,
                    "emissions_g": a.emissions_g,
                }
                for (kind, trial, component), a in merged.items()
            ],
        )

    monitor = EnergyMonitor(
        source=sources,
        sample_interval_s=measure.sample_interval_s,
        slots=resources.workers,
        slot_devices=slot_devices(sources, resources.workers),
        intensity=intensity,
        sink=sink,
        carried=previous,
    )
    store.update_run(
        run_id,
        measurement={
            "energy": monitor.describe(),
            "energy_sources": sorted(set(monitor.source_of.values())),
            "carbon": intensity.describe(),
            "sample_interval_s": monitor.interval_s,
        },
    )
    log.info("energy: %s; carbon: %s", monitor.describe(), intensity.describe())
    return monitor


def _previous_accounts(store: Store, run_id: str) -> dict[AccountKey, Account]:
    """A resumed run adds to what its earlier attempts booked."""
    return {
        (row.kind, row.trial, row.component): Account(row.energy_j, row.emissions_g)
        for row in store.energy_accounts(run_id)
    }


def start_exporter(ctx: Any, port: int) -> Any:
    """Live metrics on 127.0.0.1:`port` for the length of the run.

    The URL (with the port chosen when `port` is 0) is kept in the run's `measurement` and told
    to the run's `on_update` when that is an object with a `metrics_served(url)` method (as the
    CLI's progress display is); a plain callable only ever gets TunerStatus snapshots.
    """
    from basht.energy.carbon import intensity_from_spec
    from basht.report.exporter import HOST, LiveExporter

    measure = ctx.experiment.measure
    price, data_usd = billing_price(ctx.experiment)
    started = time.time()

    def billed(now: float) -> float:
        return live_bill_usd(ctx.store, ctx.run_id, price, started, now, data_usd)

    try:
        exporter = LiveExporter(
            ctx.monitor,
            port=port,
            host=HOST,
            usd_per_hour=price.usd_per_hour,
            intensity=getattr(ctx, "intensity", None) or intensity_from_spec(measure.carbon),
            billed=billed,
        )
    except OSError as err:  # taken since preflight looked, or a resumed run's port is taken
        raise ExperimentError(
            f"{ctx.experiment.source}: measure.prometheus_port: cannot serve live metrics on "
            f"{HOST}:{port} ({err.strerror or err}); pick another port, or 0 for a free one"
        ) from None
    ctx.store.update_run(
        ctx.run_id,
        measurement={
            **(ctx.store.get_run(ctx.run_id).measurement or {}),
            "prometheus": exporter.url,
        },
    )
    log.info("live metrics on %s", exporter.url)
    announce = getattr(ctx.on_update, "metrics_served", None)
    if callable(announce):
        announce(exporter.url)
    return exporter
