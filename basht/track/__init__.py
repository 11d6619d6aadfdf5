"""Experiment trackers (MLflow, TensorBoard, Weights & Biases offline) fed from the run store: live
from a thread per tracker while a run goes, or at once for a stored run (`basht export`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.track.base import Tracker, make_tracker
    from basht.track.checks import check_trackers
    from basht.track.export import Exported, export_run, send_plots
    from basht.track.follow import Follower, Tracking, start_tracking

__all__ = [
    "Exported",
    "Follower",
    "Tracker",
    "Tracking",
    "check_trackers",
    "export_run",
    "make_tracker",
    "send_plots",
    "start_tracking",
]

__getattr__, __dir__ = lazy_exports(__name__)
