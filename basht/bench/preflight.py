"""Preflight: what the schema cannot see but a run would trip over, checked before anything runs.

`basht validate` and `run_benchmark` call `preflight` on a loaded experiment. It trains nothing,
loads no data, opens no store and writes nothing; the checks resolve things the way the run
resolves them (the same functions), so a file that passes does not fail for these reasons later:

- the workload resolves, and a class workload can be built with `workload.params`;
- the space's keys and values pass the workload's `check_config` hook (see
  `basht.workloads.base.Workload`); workloads without the hook are not checked;
- `measure.carbon` and `measure.price` resolve (no network: a live carbon source is only set up);
- `store` is a SQLAlchemy URL whose dialect and driver are installed (`postgresql://` means
  psycopg, as in the store);
- `search.sampler: tpe` finds Optuna, whose TPE it fits;
- a fixed `measure.prometheus_port` can be bound on the host the exporter serves on (bound and
  closed at once; 0, a free port, needs no check);
- each of `measure.trackers` has its package, and an MLflow tracking server given by URL answers
  (one GET of its /health; `basht.track.checks`).

Every problem is one ExperimentError line `<file>: <key.path>: <what was wrong>`.
"""

from __future__ import annotations

import errno
import inspect
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from basht.engine.messages import WorkloadRef
from basht.engine.worker import build_workload
from basht.errors import BashtError, ExperimentError, SpecError, WorkloadError
from basht.experiment import MEASURED_METRICS, Experiment
from basht.space import Choice, Parameter
from basht.workloads import factory_can_checkpoint, is_function_workload, resolve_workload

__all__ = ["preflight"]

_UNKNOWN_PARAM = re.compile(r"^workload\.params: unknown key '(?P<key>[^']+)' (?P<rest>\(.*\))$")

# The largest value a sampler's unit draw takes (numpy's random() is below 1 by 2**-53).
_TOP = math.nextafter(1.0, 0.0)


def preflight(experiment: Experiment, source: str | None = None) -> Any:
    """Raise ExperimentError on the first problem; `source` names the file (default: the
    experiment's own `source`). Returns the workload it built to check it (None for a plain
    function), which a run describes without building it again."""
    where = experiment.source if source is None else source
    factory, workload = _check_workload(experiment, where)
    _check_space(experiment, factory, where)
    _check_metric(experiment, factory, where)
    _check_unbounded(experiment, factory, where)
    _check_devices(experiment, where)
    _check_energy(experiment, where)
    _check_carbon(experiment, where)
    _check_price(experiment, where)
    _check_store(experiment.store, where)
    _check_sampler(experiment, where)
    _check_prometheus_port(experiment.measure.prometheus_port, where)
    if experiment.measure.trackers:
        from basht.track.checks import check_trackers

        check_trackers(experiment, where)
    _check_plan(experiment, where)
    return workload


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _check_workload(experiment: Experiment, where: str) -> tuple[Any, Any]:
    """The workload's factory, and the workload built with `workload.params` (None for a plain
    function)."""
    spec = experiment.workload
    try:
        factory = resolve_workload(spec.name)
    except WorkloadError as err:
        raise ExperimentError(f"{where}: workload.name: {_one_line(err)}") from None
    if is_function_workload(factory):
        return factory, None  # an objective(config, trial) takes no params to check
    params = experiment.workload_ref().params  # a command's settings are its params
    if not spec.command:  # a command's params are settings of its own (grace_s)
        _check_signature(factory, params, where)
    try:
        workload = build_workload(WorkloadRef(spec.name, params, experiment.seed))
    except WorkloadError as err:
        raise ExperimentError(_params_line(err, factory, where)) from None
    except Exception as err:  # a user's constructor: whatever it raises is this file's problem
        raise ExperimentError(
            f"{where}: workload.params: {spec.name} cannot be built with them "
            f"({type(err).__name__}: {_one_line(err)})"
        ) from None
    _check_methods(workload, spec.name, where)
    return factory, workload


# The calls a run makes on a class workload (the Workload protocol), as the engine makes them;
# state_dict and load_state_dict are checked when there, as not every run pauses or resumes.
_METHODS = (
    ("load", ("config", "resources"), True),
    ("train", ("epochs",), True),
    ("validate", (), True),
    ("test", (), True),
    ("state_dict", (), False),
    ("load_state_dict", ("state",), False),
)


def _check_methods(workload: Any, name: str, where: str) -> None:
    """Each method a run calls is there and takes the arguments the engine passes it."""
    for method, args, required in _METHODS:
        call = getattr(workload, method, None)
        if call is None and not required:
            continue
        shown = f"{method}({', '.join(args)})"
        if not callable(call):
            raise ExperimentError(f"{where}: workload.name: {name} has no method {shown}")
        try:
            signature = inspect.signature(call)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(*args)
        except TypeError:
            takes = signature.replace(return_annotation=signature.empty)
            raise ExperimentError(
                f"{where}: workload.name: {name}.{method}{takes} cannot be called as {shown}"
            ) from None


def _check_signature(factory: Any, params: dict[str, Any], where: str) -> None:
    """Unknown and missing params by the constructor's signature, named by their key."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    fields = signature.parameters.values()
    named = [p for p in fields if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    known = [p.name for p in named if p.name != "seed"]
    if not any(p.kind is p.VAR_KEYWORD for p in fields):
        for key in params:
            if key not in known and key != "seed":
                expected = f"expected one of: {', '.join(known)}" if known else "it takes none"
                raise ExperimentError(f"{where}: workload.params.{key}: unknown key ({expected})")
    for p in named:
        if p.default is p.empty and p.name != "seed" and p.name not in params:
            raise ExperimentError(f"{where}: workload.params.{p.name}: missing required key")


def _params_line(err: WorkloadError, factory: Any, where: str) -> str:
    """A constructor's message (`<workload>: workload.params...: what`) as this file's line."""
    message = _one_line(err)
    name = getattr(factory, "workload_name", None)
    if name and message.startswith(f"{name}: "):
        message = message.removeprefix(f"{name}: ")
    unknown = _UNKNOWN_PARAM.match(message)
    if unknown:  # name the key in the path, as the schema does
        return f"{where}: workload.params.{unknown['key']}: unknown key {unknown['rest']}"
    if message.startswith("workload.params"):
        return f"{where}: {message}"
    return f"{where}: workload.params: {message}"


def _check_space(experiment: Experiment, factory: Any, where: str) -> None:
    """Every key, with the values a sampler can draw at both ends (every value of a choice)."""
    check: Callable[..., None] | None = getattr(factory, "check_config", None)
    if not callable(check):
        return
    label = "space" if experiment.space is not None else "hyperparameter"
    space = experiment.search_space
    for key, parameter in space.items():
        for value in _probe_values(parameter):
            _call_hook(check, {key: value}, f"{where}: {label}.{key}")
    # All keys at once: catches keys that are fine alone but not together (aliases of each other).
    _call_hook(check, {k: p.from_unit(0.0) for k, p in space.items()}, f"{where}: {label}")


def _probe_values(parameter: Parameter) -> list[Any]:
    if isinstance(parameter, Choice):  # any of its values may be drawn
        return parameter.grid()
    return [parameter.from_unit(0.0), parameter.from_unit(_TOP)]


def _call_hook(check: Callable[..., None], config: Mapping[str, Any], where: str) -> None:
    try:
        check(dict(config), where)
    except BashtError as err:
        raise ExperimentError(_one_line(err)) from None
    except Exception as err:  # a user's hook that raised something else
        raise ExperimentError(f"{where}: {type(err).__name__}: {_one_line(err)}") from None


def _check_metric(experiment: Experiment, factory: Any, where: str) -> None:
    """`search.metric` against the names a workload declares it reports (`metrics`)."""
    reported = getattr(factory, "metrics", None)
    metric = experiment.search.metric
    if reported is not None and (
        not isinstance(reported, (tuple, list, set, frozenset))
        or not all(isinstance(m, str) for m in reported)
    ):
        raise ExperimentError(
            f"{where}: workload.name: {experiment.workload.name}.metrics must be a tuple of "
            f"metric names, such as ('accuracy', 'loss'), not {reported!r}"
        )
    if reported and metric not in reported:
        raise ExperimentError(
            f"{where}: search.metric: {experiment.workload.name} does not report {metric!r} "
            f"(it reports {', '.join(reported)})"
        )
    if not reported:
        return
    search = experiment.search
    # Every objective and constraint too: one no trial reports fails every trial at its first
    # report. Measured metrics come from Basht, not from the workload.
    named = [(f"search.objectives[{i}]", o.metric) for i, o in enumerate(search.objectives or [])]
    named += [(f"search.constraints[{i}]", c.metric) for i, c in enumerate(search.constraints)]
    for key, name in named:
        if name not in reported and name not in MEASURED_METRICS:
            raise ExperimentError(
                f"{where}: {key}.metric: {experiment.workload.name} does not report {name!r} "
                f"(it reports {', '.join(reported)}; measured: {', '.join(MEASURED_METRICS)})"
            )


def _check_unbounded(experiment: Experiment, factory: Any, where: str) -> None:
    """What native's algorithm would refuse at deploy: no top rung, or trials paused in
    checkpoints (`asha_variant: promotion`), for a workload that cannot save one."""
    if experiment.system != "native":
        return
    from basht.tune.factory import asha_variant, check_unbounded

    checkpoints = factory_can_checkpoint(factory, experiment.workload_ref().params)
    try:
        check_unbounded(experiment, can_checkpoint=checkpoints)
        if experiment.search.pruner in ("asha", "async-hyperband"):
            asha_variant(experiment, can_checkpoint=checkpoints)
    except BashtError as err:
        raise ExperimentError(f"{where}: {err}") from None


def _check_devices(experiment: Experiment, where: str) -> None:
    """A GPU run here needs the devices it names, or a CUDA device torch can see, and room on
    them for every worker's smallest share (`engine.min_width`)."""
    if experiment.resources.accelerator != "gpu" or experiment.executor != "local":
        return  # Ray places GPUs on its nodes
    from basht.bench.native import local_devices
    from basht.engine.local import device_share

    try:
        devices = local_devices(experiment)
        device_share(experiment.resources.workers, len(devices), experiment.engine.min_width)
    except BashtError as err:
        raise ExperimentError(f"{where}: {_one_line(err)}") from None


def _check_energy(experiment: Experiment, where: str) -> None:
    """A named counter (rapl, nvml) must be readable here, and a Prometheus server answer the
    query with a series: the user asked for measured numbers. On Ray, nodes read their own
    counters (Prometheus is read by the driver); auto falls back to the labelled estimate."""
    measure = experiment.measure
    kind = measure.energy
    local = kind in ("rapl", "nvml") and experiment.executor == "local"
    if not local and kind != "prometheus":
        return
    from basht.energy.sources import open_sources

    try:
        open_sources(
            kind, prometheus_url=measure.prometheus_url, prometheus_query=measure.prometheus_query
        ).close()
    except BashtError as err:
        raise ExperimentError(f"{where}: {_one_line(err)}") from None


def _check_carbon(experiment: Experiment, where: str) -> None:
    from basht.energy.carbon import intensity_from_spec

    try:  # builds only: a live source asks the API once running
        intensity = intensity_from_spec(experiment.measure.carbon)
        if experiment.schedule.carbon_aware:
            from basht.bench.carbon_schedule import forecast_of

            forecast_of(experiment, intensity)  # a forecast needing a token has one
    except SpecError as err:  # `measure.carbon.<key>: <reason>`, `schedule.forecast: ...`
        raise ExperimentError(f"{where}: {_one_line(err)}") from None


def _check_price(experiment: Experiment, where: str) -> None:
    from basht.energy.pricing import price_from_spec

    try:
        price_from_spec(experiment.measure.price)
    except SpecError as err:  # `measure.price.<key>: <reason>`
        raise ExperimentError(f"{where}: {_one_line(err)}") from None


def _check_plan(experiment: Experiment, where: str) -> None:
    """What the plan's executor would refuse at deploy: more worker processes than this machine
    holds, or (re-planning) a profile that cannot be planned from, as in a hand-edited file."""
    spec = experiment.plan
    if spec is None:
        return
    from basht.plan.cluster import check_local_plan
    from basht.plan.executor import plan_profile

    try:
        check_local_plan(spec.plan, spec.price.gpus)
        if spec.replan:
            plan_profile(spec)
    except BashtError as err:
        raise ExperimentError(f"{where}: {err}") from None


def _check_store(url: str, where: str) -> None:
    """Resolve the URL and import its dialect and driver the way the store opens it
    (`basht.store.urls.resolve_url`); no connection, no file or folder made."""
    from basht.store.urls import StoreURLError, resolve_url

    try:
        resolve_url(url)
    except StoreURLError as err:
        raise ExperimentError(f"{where}: store: {err.reason}") from None


def _check_sampler(experiment: Experiment, where: str) -> None:
    """The native `tpe` sampler imports Optuna when the run builds it; find it now instead."""
    if experiment.search.sampler != "tpe" or experiment.system != "native":
        return
    from basht.tune.tpe import NEEDS_OPTUNA, TPESampler

    try:
        TPESampler(experiment.search_space, experiment.seed, experiment.search.mode)
    except BashtError:
        raise ExperimentError(f"{where}: search.sampler: {NEEDS_OPTUNA}") from None


def _check_prometheus_port(port: int | None, where: str) -> None:
    """Bind the port as the live exporter will (same host, SO_REUSEADDR as its HTTP server sets)
    and close it again, so a taken port fails here rather than a stored run."""
    if not port:  # None: no exporter; 0: the system picks a free port
        return
    import socket

    from basht.report.exporter import HOST

    family, _, _, _, address = socket.getaddrinfo(
        HOST, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            what = f"port {port} on {HOST} is already in use"
        else:  # e.g. a port below 1024 without the right to bind it
            what = f"cannot bind port {port} on {HOST} ({err.strerror or err})"
        raise ExperimentError(
            f"{where}: measure.prometheus_port: {what}; pick another, or 0 for a free one"
        ) from None
