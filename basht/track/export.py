"""`basht export`: a stored run written to a tracker at once, by the same code that follows a live
run; and the plots the CLI draws after a run's end, sent to the trackers that keep artifacts."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.errors import BashtError
from basht.experiment import TRACKERS, TrackerSpec
from basht.store import Store
from basht.store.schema import RunRow
from basht.track.base import make_tracker, one_line
from basht.track.checks import check_tracker
from basht.track.follow import Follower, stopped
from basht.track.records import read_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exported:
    run_id: str
    tracker: str
    where: str  # the tracking URI or the folder it went to


def export_run(store_url: str, run_ref: str, to: str, uri: str | None = None) -> Exported:
    """Write run `run_ref` (an id, a unique prefix, `latest`) of the store to tracker `to`.

    `uri` is MLflow's tracking URI, or the folder TensorBoard's or W&B's files go in (default:
    the run's results folder). The tracker's other settings are the run's own, where its
    experiment named the tracker. A run tracked before is added to, not duplicated, in MLflow.
    """
    if to not in TRACKERS:
        raise BashtError(f"--to: {to!r} is not a tracker (expected one of: {', '.join(TRACKERS)})")
    store = Store(store_url, create=False)
    try:
        run = store.get_run(run_ref)
        spec = _own_spec(store, run, to)
        folder = None
        if uri is not None and to == "mlflow":
            spec = spec.model_copy(update={"uri": uri})
        elif uri is not None:
            folder = Path(uri)
        problem = check_tracker(spec)
        if problem is not None:
            raise BashtError(f"--to {to}: {problem}")
        tracker = make_tracker(spec, Path(run.results_dir), folder)
        try:
            Follower(tracker, store, run.id).replay()
        except BashtError:
            raise
        except Exception as err:
            tracker.abandon()
            raise BashtError(
                f"run {run.id}: export to {to} at {tracker.where()} failed ({one_line(err)})"
            ) from None
        return Exported(run.id, to, tracker.where())
    finally:
        store.close()


def _own_spec(store: Store, run: RunRow, name: str) -> TrackerSpec:
    """The run's experiment's settings for tracker `name`, or the tracker's defaults."""
    spec = store.get_experiment(run.experiment_id).spec
    listed: list[Any] = (spec.get("measure") or {}).get("trackers") or []
    for item in listed:
        if isinstance(item, dict) and item.get("name") == name:
            return TrackerSpec.model_validate(item)
    return TrackerSpec(name=name)  # type: ignore[arg-type]


def send_plots(store_url: str, run_id: str) -> None:
    """The plots in the run's folder (drawn after its end, as `basht run` draws them) to its
    MLflow parent run, when it was tracked there. Never raises: one warning at most."""
    try:
        store = Store(store_url, create=False)
        try:
            run = store.get_run(run_id)
            went = (run.measurement or {}).get("trackers") or {}
            if "mlflow" not in went or stopped(run.id, "mlflow"):
                return  # not tracked there, or dropped from the run with its one warning
            plots = sorted(Path(run.results_dir).glob("*.png"))
            if not plots:
                return
            spec = _own_spec(store, run, "mlflow").model_copy(update={"uri": went["mlflow"]})
            tracker = make_tracker(spec, Path(run.results_dir))
            tracker.add_artifacts(read_run(store, run.id), plots)  # type: ignore[attr-defined]
        finally:
            store.close()
    except Exception as err:  # the run and its records are what matter; the plots are a view
        log.warning("plots not sent to MLflow: %s", one_line(err))
