"""What a run's trackers need, checked before the run starts (`basht.bench.preflight`): each
tracker's package, and an MLflow tracking server that answers. A problem is one line naming the
key; nothing is stored or written."""

from __future__ import annotations

import importlib.util
import urllib.error
import urllib.request

from basht.errors import ExperimentError
from basht.experiment import Experiment, TrackerSpec
from basht.track.base import PACKAGES
from basht.track.mlflow_tracker import given_uri, is_http

#: Seconds an MLflow server has to answer at the start.
REACH_TIMEOUT_S = 5.0


def check_installed(name: str) -> str | None:
    """Why the tracker `name` cannot run here (its package is missing), or None."""
    if importlib.util.find_spec(PACKAGES[name]) is None:
        return f"{name} is not installed (pip install 'basht[{name}]')"
    return None


def check_reachable(uri: str) -> str | None:
    """Why the MLflow tracking server at `uri` cannot be used now, or None (not over HTTP: the
    client opens it itself). Any HTTP answer will do: the server is there."""
    if not is_http(uri):
        return None
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=REACH_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None  # it answered (an authenticating proxy, an older server without /health)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return f"no MLflow tracking server answers at {uri} ({reason})"


def check_tracker(spec: TrackerSpec) -> str | None:
    """Why the tracker of `spec` cannot run, or None."""
    problem = check_installed(spec.name)
    uri = given_uri(spec.uri) if spec.name == "mlflow" else None
    if problem is None and uri is not None:
        problem = check_reachable(uri)
    return problem


def check_trackers(experiment: Experiment, where: str) -> None:
    """Raise ExperimentError, one line, for the first tracker that cannot run."""
    for index, spec in enumerate(experiment.measure.trackers):
        problem = check_tracker(spec)
        if problem is not None:
            raise ExperimentError(f"{where}: measure.trackers.{index}: {problem}")
