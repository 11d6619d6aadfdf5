"""The experiment file (DESIGN.md §1): parsed and validated once, then passed inward as typed objects."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from basht.errors import ArgumentError, BashtError, ExperimentError
from basht.space import Choice, Float, ParamSpec, SearchSpace  # `space:` entries: see space.py
from basht.states import WASTED_STATES
from basht.workloads.base import WorkloadRef, check_share

PRUNERS = ("none", "sha", "asha", "hyperband", "async-hyperband")


class _Strict(BaseModel):
    # A field's docstring is its description in the JSON schema, which the documentation's
    # experiment-file reference is generated from.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


Number = int | float


class LegacyParam(_Strict):
    """The original Basht `hyperparameter:` entry, read as a grid.

    Scalars give `start, start + step_size, ... <= end`. List-valued entries describe layer
    configurations as the original `hidden_layer_config` did: `start: [10]`, `end: [100, 100, 100]`,
    `step_size: [10, 1]` means widths 10..100 in steps of 10 and 1..3 layers in steps of 1, every
    layer of a configuration having the same width.
    """

    start: Number | list[PositiveInt]
    """The first value; a list such as `[10]` gives layer widths from `start[0]`."""
    end: Number | list[PositiveInt]
    """The last value (included); a list's length is the most layers."""
    step_size: PositiveFloat | list[PositiveInt]
    """The step between values; a list is `[width step, layer step]`."""

    @model_validator(mode="after")
    def _shape(self) -> LegacyParam:
        lists = [isinstance(v, list) for v in (self.start, self.end, self.step_size)]
        if any(lists) and not all(lists):
            raise ValueError("start, end and step_size must all be numbers or all be lists")
        if all(lists):
            if not self.start or not self.end or len(self.step_size) != 2:
                raise ValueError(
                    "list form needs non-empty start/end and step_size [width, layers]"
                )
            if self.start[0] > self.end[0] or len(self.start) > len(self.end):
                raise ValueError("start must not exceed end")
        elif not all(math.isfinite(v) for v in (self.start, self.end, self.step_size)):
            raise ValueError(
                f"start, end and step_size must be finite, got start={self.start} "
                f"end={self.end} step_size={self.step_size}"
            )
        elif self.start > self.end:
            raise ValueError(f"start must not exceed end, got start={self.start} end={self.end}")
        return self

    def values(self) -> list[Any]:
        if isinstance(self.start, list):
            width_step, layer_step = self.step_size
            widths = range(self.start[0], self.end[0] + 1, width_step)
            depths = range(len(self.start), len(self.end) + 1, layer_step)
            return [[w] * d for d in depths for w in widths]
        # step_size arrives as a float (1 -> 1.0): a whole step between integer bounds gives
        # integers, as the file wrote them, not 1.0, 2.0, ... that break `range(epochs)`.
        if (
            all(isinstance(v, int) for v in (self.start, self.end))
            and float(self.step_size).is_integer()
        ):
            return list(range(self.start, self.end + 1, int(self.step_size)))
        return (
            Float(float(self.start), float(self.end) + 1e-12, step=self.step_size).grid()
            if (self.start < self.end)
            else [float(self.start)]
        )


class WorkloadSpec(_Strict):
    """What a trial trains and evaluates: a built-in workload, one of the user's own, or any
    command (a training script as it is)."""

    name: str
    """A built-in workload's name, or `package.module:attr` of your own (`command` when a
    command is given)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Fixed workload parameters, the same for every trial (e.g. `optimizer: adam`)."""
    command: str | list[str] | None = None
    """A command that trains one trial, instead of `name`: a string (split as a shell would,
    not run by one) or a list of arguments. `{key}` is the configuration's value of `key`,
    `{budget}` the search's max_budget, `{python}` the interpreter running Basht; the configuration is also in the JSON file
    `$BASHT_CONFIG` and in `$BASHT_HP_<KEY>`."""
    metrics: str | None = None
    """A regular expression applied to each line the command prints: its named groups are a
    report's metrics (`step` the epoch), for a script that does not call the reporter."""
    checkpoint: bool = False
    """The command saves its state in `$BASHT_CHECKPOINT_DIR` when the reporter says `pause`,
    and continues from `$BASHT_RESUME_FROM`: its trials may be paused (ASHA's promotion);
    otherwise they are stopped."""
    timeout_s: PositiveFloat | None = None
    """A command that prints and reports nothing for this long fails its trial (null: no limit)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables the command gets on top of Basht's."""
    cwd: str | None = None
    """The folder the command runs in (default: the experiment file's folder)."""

    @model_validator(mode="before")
    @classmethod
    def _command_is_named(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("command") is not None and "name" not in data:
            return {**data, "name": "command"}
        return data

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        from basht.workloads import check_workload_name

        check_workload_name(name)
        return name

    @field_validator("metrics")
    @classmethod
    def _a_pattern(cls, pattern: str | None) -> str | None:
        if pattern is None:
            return None
        try:
            groups = re.compile(pattern).groupindex
        except re.error as err:
            raise ValueError(f"not a regular expression ({err})") from None
        if not set(groups) - {"step"}:
            raise ValueError("needs a named group per metric, e.g. (?P<accuracy>[0-9.]+)")
        return pattern

    @model_validator(mode="after")
    def _one_way_in(self) -> WorkloadSpec:
        if (self.name == "command") != (self.command is not None):
            raise ValueError("give either a workload name or a command, not both")
        if self.command is not None and not self.command:
            raise ValueError("command: must not be empty")
        if self.command is None and (self.metrics or self.checkpoint or self.env or self.cwd):
            raise ValueError("metrics, checkpoint, env and cwd go with a command")
        return self

    def command_params(self, max_budget: int | None) -> dict[str, Any]:
        """What a command trial is built with (`basht.workloads.command.CommandWorkload`)."""
        return {
            "command": self.command,
            "metrics": self.metrics,
            "checkpoint": self.checkpoint,
            "timeout_s": self.timeout_s,
            "env": dict(self.env),
            "cwd": self.cwd,
            "max_budget": max_budget,
            **self.params,
        }


#: What Basht measures of every trial, usable as objectives and constraints beside the
#: workload's own metrics (`basht.tune.objectives` defines them).
MEASURED_METRICS = (
    "train_energy_kwh",
    "train_carbon_g",
    "train_cost_usd",
    "train_time_s",
    "train_energy_kwh_spent",
    "train_carbon_g_spent",
    "train_cost_usd_spent",
    "train_time_s_spent",
)
_MEASURED_PREFIXES = ("train_energy", "train_carbon", "train_cost", "train_time")
FiniteNumber = Annotated[float, Field(allow_inf_nan=False)]


class ObjectiveSpec(_Strict):
    """One objective of a multi-objective search."""

    metric: str = Field(min_length=1, max_length=200)
    """A metric the workload reports, or one Basht measures (`train_energy_kwh`,
    `train_carbon_g`, `train_cost_usd`, `train_time_s`, and each with `_spent`)."""
    mode: Literal["min", "max"] = "max"
    """Whether the metric is maximised or minimised."""


class ConstraintSpec(_Strict):
    """A bound a trial must keep to be promoted or chosen: `max`, `min` or both."""

    metric: str = Field(min_length=1, max_length=200)
    """A reported or measured metric (as for objectives)."""
    max: FiniteNumber | None = None
    """The largest feasible value."""
    min: FiniteNumber | None = None
    """The smallest feasible value."""

    @model_validator(mode="after")
    def _a_bound(self) -> ConstraintSpec:
        if self.max is None and self.min is None:
            raise ValueError("a constraint needs `max`, `min` or both")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"min {self.min} exceeds max {self.max}: nothing is feasible")
        return self


class ScalarizeSpec(_Strict):
    """Steer the search by one number made of the objectives (the front is still reported)."""

    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None
    """One weight per objective: the search minimises the weighted sum of the objectives, each
    signed so that smaller is better (a maximised metric counts negatively)."""
    zeus_eta: Annotated[float, Field(ge=0, le=1)] | None = None
    """Zeus's energy-time cost η·energy + (1−η)·max_power·time (joules), from a trial's
    projected `train_energy_kwh` and `train_time_s`; the objectives are then reported only."""
    max_power_w: PositiveFloat | None = None
    """The power that prices time in Zeus's cost (its MAXPOWER); needed with `zeus_eta`."""

    @model_validator(mode="after")
    def _one_way(self) -> ScalarizeSpec:
        if (self.weights is None) == (self.zeus_eta is None):
            raise ValueError("give `weights` or `zeus_eta`, one of them")
        if self.zeus_eta is not None and self.max_power_w is None:
            raise ValueError("zeus_eta needs max_power_w (the power that prices time)")
        if self.weights is not None and not any(self.weights):
            raise ValueError("weights: at least one must be above 0")
        return self


class ChooseSpec(_Strict):
    """Which trial the final test uses when there are several objectives."""

    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]]
    """One weight per objective: the feasible completed trial with the smallest weighted sum of
    signed objectives (each normalised to [0, 1] over the completed trials)."""

    @field_validator("weights")
    @classmethod
    def _some_weight(cls, weights: list[float]) -> list[float]:
        if not any(weights):
            raise ValueError("at least one must be above 0")
        return weights


class SearchSpec(_Strict):
    """How configurations are proposed (the sampler), stopped early (the pruner) and ranked."""

    sampler: Literal["random", "grid", "tpe", "nsga2"] = "random"
    """Where new configurations come from: `random`, `grid`, `tpe` (Optuna's TPE; systems
    native and optuna; with several objectives its multi-objective TPE; Syne Tune's own TPE with
    system synetune), or `nsga2` (Optuna's NSGA-II, with several objectives)."""
    pruner: Literal["none", "sha", "asha", "hyperband", "async-hyperband"] = "none"
    """The algorithm: `none` trains every trial to `max_budget`; the others stop or pause weak
    trials at rungs `min_budget · eta^k`."""
    asha_variant: Literal["auto", "promotion", "stopping"] = "auto"
    """How `asha` and `async-hyperband` treat a trial at a rung: `promotion` pauses it in a
    checkpoint and resumes the best later, `stopping` lets it run on only while it ranks in its
    rung's top 1/eta. `auto`: promotion when the workload checkpoints, else stopping. Stopping
    suits a workload whose epochs cost less than starting a trial, as every resume is a start."""
    metric: str = "accuracy"
    """What the workload's `validate()` returns that is optimised."""
    mode: Literal["min", "max"] = "max"
    """Whether `metric` is maximised or minimised."""
    target: float | None = None
    """Stop the job once a trial reaches this value of `metric`."""
    min_budget: PositiveInt = 1
    """The first rung: the epochs every trial trains before it can be stopped."""
    max_budget: PositiveInt | None = 1
    """The top rung: the most epochs a trial trains; null (no top rung) only with `pruner: asha`
    and a target or a budget."""
    eta: int = Field(default=3, ge=2)
    """The reduction factor: rungs are `min_budget · eta^k`, and the top 1/eta of a rung goes on."""
    max_trials: PositiveInt | None = None
    """The most configurations started (null: as many as the algorithm and the budgets allow)."""
    time_budget_s: PositiveFloat | None = None
    """End the search after this many seconds."""
    stop_grace_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = 60.0
    """Once a target or a budget ended the search, how long a running trial may take to reach its
    next report before it is aborted (a hung trial would keep the job going for ever); null
    waits as long as it takes."""
    energy_budget_kwh: PositiveFloat | None = None
    """End the job once it has used this much energy, counted from deploy over every attempt."""
    carbon_budget_g: PositiveFloat | None = None
    """End the job once it has emitted this many grams CO2eq, counted as energy_budget_kwh is."""
    cost_budget_usd: PositiveFloat | None = None
    """End the job once it has been billed this much (as OC counts it, at `measure.price`)."""
    objectives: list[ObjectiveSpec] | None = Field(default=None, min_length=1, max_length=8)
    """Several objectives (replacing `metric`/`mode`): the search ranks trials by
    non-dominated sorting and reports the Pareto front."""
    constraints: list[ConstraintSpec] = Field(default_factory=list, max_length=16)
    """Bounds a trial must keep: an infeasible trial is never promoted or chosen."""
    tie_break: Literal["eps-net", "crowding"] = "eps-net"
    """How trials on one front are ordered when a rung keeps only some of them: the ε-net of
    multi-objective ASHA (Schmucker et al. 2021), or NSGA-II's crowding distance."""
    scalarize: ScalarizeSpec | None = None
    """Rank trials by one number made of the objectives instead of by non-dominated sorting."""
    choose: Literal["first"] | ChooseSpec = "first"
    """The trial the test phase uses: `first` (the best first objective among feasible
    completed trials), or `{weights: [...]}`."""

    @property
    def limits(self) -> tuple[float | None, ...]:
        """What ends a search that would otherwise go on: a target or a budget."""
        return (
            self.target,
            self.time_budget_s,
            self.energy_budget_kwh,
            self.carbon_budget_g,
            self.cost_budget_usd,
        )

    @model_validator(mode="after")
    def _budgets(self) -> SearchSpec:
        if self.max_budget is None and self.pruner != "asha":
            raise ValueError("max_budget may be null (unbounded) only with pruner: asha")
        if self.asha_variant != "auto" and self.pruner not in ("asha", "async-hyperband"):
            raise ValueError(
                f"asha_variant: {self.asha_variant} is for pruner asha or async-hyperband, "
                f"not {self.pruner}"
            )
        if self.max_budget is None and self.asha_variant == "stopping":
            raise ValueError(
                "max_budget may be null (unbounded) only with asha_variant promotion or auto: "
                "the stopping variant runs each trial to a top rung"
            )
        if self.max_budget is None and all(v is None for v in self.limits):
            raise ValueError(
                "an unbounded max_budget needs a target or a time, energy, carbon or cost "
                "budget to end the run"
            )
        if self.max_budget is not None and self.min_budget > self.max_budget:
            raise ValueError(
                f"min_budget must not exceed max_budget, got {self.min_budget} > {self.max_budget}"
            )
        return self

    @model_validator(mode="after")
    def _objectives(self) -> SearchSpec:
        names = [o.metric for o in self.objectives or ()]
        for name in names:
            if names.count(name) > 1:
                raise _at("objectives", f"{name!r} is named twice; each objective once")
        for i, name in enumerate([*names, *(c.metric for c in self.constraints)]):
            if name.startswith(_MEASURED_PREFIXES) and name not in MEASURED_METRICS:
                where = f"objectives.{i}" if i < len(names) else "constraints"
                raise _at(
                    where,
                    f"unknown measured metric {name!r} (Basht measures "
                    f"{', '.join(MEASURED_METRICS)})",
                )
        n = len(names)
        if self.sampler == "nsga2" and not self.is_multi:
            raise _at("sampler", "nsga2 is for several objectives (give `objectives`)")
        if self.objectives is None and (self.scalarize or not isinstance(self.choose, str)):
            key = "scalarize" if self.scalarize else "choose"
            raise _at(key, "applies with several `objectives`")
        for key, spec in (("scalarize", self.scalarize), ("choose", self.choose)):
            weights = getattr(spec, "weights", None)
            if weights is not None and len(weights) != n:
                raise _at(f"{key}.weights", f"expected {n} (one per objective), got {len(weights)}")
        if self.objectives is not None:
            first = self.objectives[0]
            for key in ("metric", "mode"):
                if key in self.model_fields_set and getattr(self, key) != getattr(first, key):
                    raise _at(key, "with `objectives`, leave it out (the first objective is it)")
            # metric/mode name the first objective: the target, the progress line and the
            # peers read them (set on the frozen model once, while it is being validated)
            self.__dict__.update(metric=first.metric, mode=first.mode)
        return self

    @property
    def objective_list(self) -> list[ObjectiveSpec]:
        """The objectives: those given, or `metric`/`mode` as the only one."""
        return list(self.objectives or [ObjectiveSpec(metric=self.metric, mode=self.mode)])

    @property
    def is_multi(self) -> bool:
        """Whether trials are ranked on more than one number or under constraints."""
        return self.objectives is not None or bool(self.constraints)


class ResourcesSpec(_Strict):
    """The workers trials run on and what each may use (Table 1's wn, at, wcpu, wmem, amem)."""

    workers: int = Field(default=1, ge=1, le=10_000)
    """Worker processes: the most trials that run at once."""
    accelerator: Literal["cpu", "gpu"] = "cpu"
    """What trials train on."""
    cpus_per_worker: int = Field(default=1, ge=1)
    """The threads each worker's torch, OpenMP and MKL may use."""
    memory_per_worker_mb: PositiveInt = 2048
    """A trial's memory (its `Resources.memory_mb`): Ray reserves it and the energy estimate
    counts it."""
    limit_memory: bool = False
    """Hold each local worker to memory_per_worker_mb (its data memory): a trial that allocates
    past it fails with a MemoryError instead of pushing the machine into swap or the OOM killer."""
    accelerator_memory_mb: int = Field(default=0, ge=0)
    """Accelerator memory per worker, recorded (Table 1's amem); GPU shares are set by
    `engine.min_width`."""
    devices: list[str] | None = Field(default=None, min_length=1)
    """The accelerator devices trials are placed on (accelerator: gpu, executor: local); default:
    every CUDA device torch sees. `["cpu", "cpu"]` rehearses the placement on a machine without."""


class RaySpec(_Strict):
    """Where `executor: ray` runs: an existing cluster's address, or (none) a Ray of its own."""

    address: str | None = Field(default=None, min_length=1)
    """The head of an existing cluster (`host:port` or `ray://...`); null starts a Ray of its own."""


class CarbonSpec(_Strict):
    """Grid intensity: a zone's yearly average, a fixed number, or a time series; optionally live."""

    region: str | None = None
    """A country or cloud region (e.g. `DE`): its yearly average from the shipped table, or live
    with an Electricity Maps token."""
    g_per_kwh: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """A fixed intensity in grams CO2eq per kWh: the reproducible choice."""
    csv: str | None = None
    """A recorded `timestamp,g_per_kwh` series (a relative path is read next to the experiment
    file)."""
    electricitymaps_token: str | None = None
    """An Electricity Maps token: `region`'s live intensity, its table value as fallback (else
    the environment variable ELECTRICITYMAPS_TOKEN)."""

    @model_validator(mode="after")
    def _one(self) -> CarbonSpec:
        given = [k for k in ("region", "g_per_kwh", "csv") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of region, g_per_kwh or csv")
        if self.electricitymaps_token is not None and self.region is None:
            raise ValueError("electricitymaps_token needs a region (the zone to ask for)")
        return self


class PriceSpec(_Strict):
    """The user's price per hour, or an instance of the shipped price sheet (or both: the user's
    price at the sheet's size); `basht.energy.pricing.price_from_spec` builds the price."""

    usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Your price per hour; alone it is billed per second with no minimum."""
    provider: str | None = None
    """The cloud provider (aws, gcp or azure): its billing rule, and its price sheet rows."""
    instance: str | None = None
    """An instance type of the shipped price sheet (e.g. `m5.xlarge`): its price and size."""
    region: str | None = None
    """The provider's region to price the instance in."""
    vcpus: int | None = Field(default=None, ge=1)
    """The machine's vCPUs, which size a trial's share (default: the sheet's, else this
    machine's)."""
    gpus: int | None = Field(default=None, ge=0)
    """The machine's GPUs, which size a trial's share (default: the sheet's, else 0)."""
    memory_gib: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """The machine's memory in GiB, which sizes a trial's share."""

    @model_validator(mode="after")
    def _one(self) -> PriceSpec:
        if self.instance is not None and self.provider is None:
            raise _at(
                "provider", f"instance {self.instance!r} needs a provider (aws, gcp or azure)"
            )
        if self.usd_per_hour is None and (self.provider is None or self.instance is None):
            raise ValueError("give usd_per_hour, or provider and instance")
        return self


class EstimateSpec(_Strict):
    """Constants of the estimate model for this machine (defaults: Cloud Carbon Footprint's)."""

    idle_w_per_vcpu: float = Field(default=0.74, ge=0)
    """Watts a vCPU draws idle."""
    max_w_per_vcpu: float = Field(default=3.5, ge=0)
    """Watts a vCPU draws fully busy."""
    memory_w_per_gb: float = Field(default=0.392, ge=0)
    """Watts a GB of memory draws."""

    @model_validator(mode="after")
    def _order(self) -> EstimateSpec:
        if self.max_w_per_vcpu < self.idle_w_per_vcpu:
            raise ValueError("max_w_per_vcpu must not be below idle_w_per_vcpu")
        return self


# The states a trial can end a run in (a trial never ends pending or running).
TrialStateName = Literal["failed", "aborted", "stopped", "completed", "paused"]


#: The experiment trackers a run can be written to as it goes (`basht.track`), each an extra.
TRACKERS = ("mlflow", "tensorboard", "wandb")


class TrackerSpec(_Strict):
    """An experiment tracker the run is written to while it goes, from a thread that reads the
    store (`basht.track`): a tracker that fails is dropped with one warning, never the run."""

    name: Literal["mlflow", "tensorboard", "wandb"]
    """Which tracker: `mlflow`, `tensorboard` (event files under the run's results folder) or
    `wandb` (Weights & Biases, offline, under the run's results folder)."""
    uri: str | None = Field(default=None, min_length=1)
    """mlflow: the tracking URI (`http://127.0.0.1:5000`, `sqlite:///mlflow.db`); default: the
    environment variable MLFLOW_TRACKING_URI, else `mlflow.db` (SQLite) beside the run folders."""
    experiment: str | None = Field(default=None, min_length=1)
    """mlflow: the MLflow experiment the run goes under (default: this experiment's `name`)."""
    project: str | None = Field(default=None, min_length=1)
    """wandb: the project the offline runs are synced to (default: this experiment's `name`)."""

    @model_validator(mode="after")
    def _applies(self) -> TrackerSpec:
        for key, owner in (("uri", "mlflow"), ("experiment", "mlflow"), ("project", "wandb")):
            if getattr(self, key) is not None and self.name != owner:
                raise _at(key, f"applies to {owner} only, not to {self.name}")
        return self


class MeasureSpec(_Strict):
    """How energy, carbon and cost are measured, and where live metrics are served."""

    energy: Literal["auto", "rapl", "nvml", "estimate", "prometheus"] = "auto"
    """Where energy is read: `rapl` (CPU counters), `nvml` (NVIDIA GPUs), `estimate` (a power
    model), `prometheus` (a server's counters), or `auto`, the best this machine has."""
    sample_interval_s: PositiveFloat = 0.5
    """Seconds between energy readings."""
    carbon: CarbonSpec = Field(default_factory=lambda: CarbonSpec(region="DE"))
    """The grid's carbon intensity (default: Germany's yearly average)."""
    price: PriceSpec = Field(default_factory=lambda: PriceSpec(usd_per_hour=0.0))
    """What the resources cost (default: nothing)."""
    prometheus_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve live Prometheus metrics on this port while the run lasts (0 picks a free one)."""
    prometheus_url: str | None = None
    """Read energy from this Prometheus server (with `energy: prometheus`)."""
    # Counter series, summed by the source per series: not sum(...), whose wraps it cannot see.
    prometheus_query: str = "node_rapl_package_joules_total"
    """The PromQL selector of the energy counters, in joules (one series or several)."""
    estimate: EstimateSpec = Field(default_factory=EstimateSpec)
    """Constants of the power model `energy: estimate` uses."""
    wasted_states: list[TrialStateName] = Field(
        default_factory=lambda: [state.value for state in WASTED_STATES]
    )
    """The states a trial ends in that count as wasted (WTT, WTE, WTC)."""
    trackers: list[TrackerSpec] = Field(default_factory=list)
    """Experiment trackers the run is written to as it goes: names (`[mlflow, tensorboard]`), or
    mappings with a name and its settings (`{name: mlflow, uri: http://127.0.0.1:5000}`). Each
    needs its extra: `pip install 'basht[mlflow]'`."""

    @field_validator("trackers", mode="before")
    @classmethod
    def _tracker_names(cls, value: Any) -> Any:
        """A name alone is the tracker with its defaults; an unknown or repeated name is named."""
        if not isinstance(value, list):
            return value
        items = [{"name": item} if isinstance(item, str) else item for item in value]
        seen: set[str] = set()
        for index, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                continue
            if name not in TRACKERS:
                expected = ", ".join(TRACKERS)
                raise _at(str(index), f"unknown tracker {name!r} (expected one of: {expected})")
            if name in seen:
                raise _at(str(index), f"{name} is listed twice")
            seen.add(name)
        return items


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)", re.IGNORECASE)
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_deadline(text: str, now: float) -> float:
    """Unix seconds of a deadline given as a duration from `now` ("12h", "90m", "2d", "3600s", or a
    plain number of seconds) or an ISO 8601 time (UTC unless it names an offset). ValueError
    (an ArgumentError) with one line naming the accepted forms for anything else."""
    stripped = text.strip()
    match = _DURATION.fullmatch(stripped)
    if match:
        value = now + float(match[1]) * _UNIT_S[match[2].lower()]
    else:
        try:
            moment = datetime.fromisoformat(stripped)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            value = moment.timestamp()
        except (ValueError, OverflowError):  # OverflowError: an offset past year 1 or 9999
            value = math.nan
    if not math.isfinite(value):
        raise ArgumentError(
            f"deadline {text!r} is not understood; expected a duration such as 12h, 90m, 2d or "
            "3600s, a number of seconds, or an ISO 8601 time such as 2025-06-01T18:00 "
            "(UTC unless it names an offset)"
        )
    return value


def _check_time(value: str | None, key: str) -> str | None:
    if value is not None:
        try:
            parse_deadline(value, 0.0) if key == "deadline" else datetime.fromisoformat(value)
        except ValueError as err:
            raise ValueError(
                str(err) if key == "deadline" else f"{value!r} is not an ISO 8601 time"
            ) from None
    return value


class ScheduleSpec(_Strict):
    """When the work runs: carbon-aware, it waits for a clean grid and runs wider then, and
    still meets the deadline (`basht.energy.shifting`)."""

    carbon_aware: bool = False
    """Hold trials back (and pause them at checkpoints) while the grid is dirty, by
    `measure.carbon`'s series and the forecast, and run up to `max_workers` when it is clean."""
    deadline: str | None = Field(default=None, min_length=1, max_length=64)
    """When the job must be done: a duration from the start (`12h`, `90m`, `2d`, seconds) or an
    ISO 8601 time (UTC unless it says). Needed with `carbon_aware`."""
    forecast: Literal["persistence", "perfect", "csv", "electricitymaps"] = "persistence"
    """What the scheduler expects of the grid: `persistence` (the same hours a day earlier, moved
    to today's level), `perfect` (the recorded series itself: an oracle, for recorded runs and
    evaluation), `csv` (a forecast series of your own, `forecast_csv`: a day-ahead forecast
    recorded beside the series, say) or `electricitymaps` (the zone's forecast from the
    Electricity Maps API, live: needs `measure.carbon.region` and a token)."""
    forecast_days: int = Field(default=1, ge=1, le=28)
    """With `forecast: persistence`: how many earlier days it averages the same hours over (and
    today's level against). 1 is yesterday alone; a week blurs one day's weather out of the
    daily cycle and, on the 2020 European series, ranks the hours better."""
    forecast_csv: str | None = Field(default=None, min_length=1, max_length=4096)
    """With `forecast: csv`: a `timestamp,g_per_kwh` file (as `measure.carbon.csv`, relative to
    the experiment file) whose value at each time is what the scheduler expects then; the past is
    the measured series."""
    max_workers: int | None = Field(default=None, ge=1, le=10_000)
    """The most trials that may run at once (default `resources.workers`); the scheduler may
    run fewer, or none."""
    step_s: float = Field(default=900.0, gt=0, allow_inf_nan=False)
    """The length of the forecast's slots: the scheduler decides again at least this often."""
    start: str | None = Field(default=None, min_length=1, max_length=64)
    """Where in the carbon series the run starts (an ISO 8601 time): to replay a recorded
    series; default now."""
    time_scale: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    """Series seconds per real second (3600: an hour of the series passes in a second), so a
    real run shows a day of the grid in minutes; emissions are integrated over the same scaled
    series, and the deadline is in series time."""

    @field_validator("deadline", "start")
    @classmethod
    def _a_time(cls, value: str | None, info: Any) -> str | None:
        return _check_time(value, info.field_name)

    @model_validator(mode="after")
    def _deadline(self) -> ScheduleSpec:
        if self.carbon_aware and self.deadline is None:
            raise ValueError("carbon_aware needs a deadline (a duration such as 12h, or a time)")
        if self.forecast == "csv" and self.forecast_csv is None:
            raise ValueError("forecast: csv needs forecast_csv (a timestamp,g_per_kwh file)")
        if self.forecast_csv is not None and self.forecast != "csv":
            raise ValueError(f"forecast_csv is read with forecast: csv, not {self.forecast}")
        if self.forecast_days != 1 and self.forecast != "persistence":
            raise ValueError(
                f"forecast_days is read with forecast: persistence, not {self.forecast}"
            )
        return self


class EngineSpec(_Strict):
    """How trials share the machine: `fluid` re-plans widths (threads, GPUs); `fifo` fixes them."""

    scheduler: Literal["fifo", "fluid"] = "fifo"
    """`fifo` gives each trial a fixed width; `fluid` re-plans the widths as trials come and go."""
    max_width: PositiveInt | None = None
    """The most cores (or GPUs) one trial may get."""
    min_width: PositiveFloat | None = None
    """The smallest GPU share a trial gets (1/2, 1/4...: trials share a device; default: an equal
    split when there are more workers than devices)."""

    @field_validator("min_width")
    @classmethod
    def _packable(cls, width: float | None) -> float | None:
        """1/2, 1/4... of a device or whole devices: the shares that always pack."""
        return None if width is None else check_share(width)


@dataclass(frozen=True)
class Stage:
    """Stage i of the job: `trials` live trials, each training `epochs` more epochs."""

    trials: int
    epochs: int


@dataclass(frozen=True)
class ShaJob:
    """The job a RubberBand plan is for, as the file's `search` describes it: synchronous
    successive halving, n trials at min_budget, then the top 1/eta of each rung, up to max_budget.
    Here beside the schema, which checks that a plan fits the file's job.

    A trial resumes from its checkpoint at each rung, so stage i trains each survivor for the
    epochs between rung i-1 and rung i.
    """

    trials: int
    min_budget: int
    max_budget: int
    eta: int = 3

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise BashtError(f"a job needs at least one trial, got {self.trials}")
        if self.eta < 2 or self.min_budget < 1 or self.max_budget < self.min_budget:
            raise BashtError(
                f"budgets {self.min_budget}..{self.max_budget} with eta {self.eta}: expected "
                "1 <= min_budget <= max_budget and eta >= 2"
            )

    @property
    def rungs(self) -> tuple[int, ...]:
        """Budgets min_budget·eta^k below max_budget, then max_budget (as the tuners' rungs)."""
        levels, budget = [], self.min_budget
        while budget < self.max_budget:
            levels.append(budget)
            budget *= self.eta
        return (*levels, self.max_budget)

    @property
    def bracket_size(self) -> int:
        """eta^K configurations: the fewest that bring one to max_budget (Basht's SHA bracket)."""
        return self.eta ** (len(self.rungs) - 1)

    @property
    def stages(self) -> tuple[Stage, ...]:
        levels = self.rungs
        stages, trials, done = [], self.trials, 0
        for budget in levels:
            stages.append(Stage(trials, budget - done))
            done, trials = budget, max(1, trials // self.eta)
        return tuple(stages)

    @classmethod
    def from_experiment(cls, experiment: Experiment) -> ShaJob:
        """The job an experiment file describes (`search`: max_trials at min_budget, eta; with
        `pruner: none`, one stage of max_trials trials to max_budget)."""
        search = experiment.search
        if search.max_budget is None:
            raise BashtError("search.max_budget: a plan needs a bounded job")
        job = cls(1, search.min_budget, search.max_budget, search.eta)
        trials = search.max_trials or job.bracket_size
        if search.pruner == "none":  # every trial to max_budget: one stage
            return cls(trials, search.max_budget, search.max_budget, search.eta)
        return cls(trials, search.min_budget, search.max_budget, search.eta)


class _PlanPart(BaseModel):
    """Part of the plan file: `basht plan --json` writes it and `basht run --plan` reads it.
    What else a file holds (from another version of Basht) is not read. Every number is
    finite: `basht plan --json` writes no other, and a run bills, times and reports them."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, use_attribute_docstrings=True)


class PlanStageSpec(_PlanPart):
    """One stage of the job."""

    trials: PositiveInt
    """The trials that train in this stage."""
    epochs: PositiveInt
    """The epochs each of them trains in it."""
    delay_s: float = Field(default=0.0, ge=0, lt=1e9, allow_inf_nan=False)
    """Seconds the run waits before the stage starts, holding no instances (a carbon plan's
    wait for a cleaner grid; over `schedule.time_scale` when a series is replayed)."""


class PlanJobSpec(_PlanPart):
    """The synchronous SHA job the plan is for; it must be the experiment file's."""

    trials: PositiveInt
    """The configurations the job starts at min_budget."""
    min_budget: PositiveInt
    """The first rung, in epochs."""
    max_budget: PositiveInt
    """The top rung, in epochs."""
    eta: int = Field(ge=2)
    """The reduction factor between rungs."""
    stages: list[PlanStageSpec] = []
    """The job's stages as `ShaJob.stages` gives them, for the reader."""


class PlanPriceSpec(_PlanPart):
    """The instance type a plan is for: its price, GPUs, and the provider's billing rule."""

    usd_per_hour: float = Field(ge=0, allow_inf_nan=False)
    """An instance's price per hour."""
    gpus: PositiveInt
    """An instance's GPUs."""
    vcpus: PositiveInt = 1
    """An instance's vCPUs."""
    increment_s: PositiveFloat = 1.0
    """The provider bills an instance's life in whole steps of this many seconds."""
    minimum_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """The least time the provider bills an instance for."""
    rule: str = ""
    """The billing rule, described."""
    provider: str | None = None
    """The cloud provider."""
    instance: str | None = None
    """The instance type."""
    data_usd_per_instance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """What moving the data onto each launched instance costs."""


class PlanLayoutSpec(_PlanPart):
    """How a stage's trials sit on its instances."""

    gpus_per_trial: PositiveInt
    """The GPUs each trial trains on."""
    slots: PositiveInt
    """The trials that run at once."""
    waves: PositiveInt
    """How many rounds of `slots` trials the stage takes."""


class PlanEstimateSpec(_PlanPart):
    """What the simulated runs of a plan took: job completion time, bill and energy."""

    jct_s: float
    """The mean job completion time, in seconds."""
    jct_p95_s: float
    """The 95th percentile of the job completion time, in seconds."""
    cost_usd: float
    """The mean bill."""
    cost_p95_usd: float
    """The 95th percentile of the bill."""
    stage_end_s: list[float] = []
    """Each stage's barrier, in seconds from the start, on average."""
    energy_kwh: float | None = None
    """The mean energy (estimated from the profile's power_w)."""


class PlanEmissionsSpec(_PlanPart):
    """The plan's and the best static cluster's emissions (grams, estimated from their energy)."""

    intensity: str
    """The grid intensity they are at, described."""
    plan_g: float
    """The plan's emissions."""
    static_g: float
    """The best static cluster's emissions."""


_Seconds = Annotated[float, Field(ge=0, lt=1e9, allow_inf_nan=False)]


class PlanProfileSpec(_PlanPart):
    """The profile a plan was made from (its measurements; the instance is the plan's price):
    what a run re-plans from at each barrier."""

    epoch_s: dict[PositiveInt, list[Annotated[float, Field(gt=0, lt=1e9)]]] = Field(min_length=1)
    """One trial's measured epoch times, in seconds, per GPU count."""
    startup_s: list[_Seconds] = Field(default=[0.0], min_length=1)
    """Measured seconds from requesting an instance to its being ready."""
    overhead_s: list[_Seconds] = Field(default=[0.0], min_length=1)
    """A trial's measured seconds besides its epochs."""
    scaling: PositiveFloat | None = None
    """b in t(k) = t(1)·k^-b, for GPU counts not measured (1 = linear)."""
    power_w: dict[Literal["idle", "busy"], Annotated[float, Field(ge=0, lt=1e6)]] | None = None
    """A whole instance's draw in watts, idle and with every GPU busy."""
    source: str = ""
    """What was profiled, described."""


class PlanSpec(_PlanPart):
    """The plan file: a RubberBand plan to run the job on, instances in each stage. `basht plan
    --json` writes this model and `basht run --plan` (or the file's `plan:`) reads it; the
    fields are in the order the file has them."""

    emissions_estimate: PlanEmissionsSpec | None = None
    """The plan's and the best static cluster's estimated emissions."""
    job: PlanJobSpec
    """The job the plan is for."""
    instance: str | None = None
    """The plan's one-line description of the instance type."""
    price: PlanPriceSpec
    """The instance type: its price, size and billing rule."""
    profile_source: str = ""
    """Where the profile came from."""
    deadline_s: PositiveFloat | None = None
    """The seconds the job must finish in."""
    confidence: Literal["mean", "p95"] | None = None
    """What must meet the deadline: the mean or the 95th percentile job completion time."""
    plan: list[PositiveInt] = Field(min_length=1)
    """The instances in each stage."""
    layouts: list[PlanLayoutSpec] = []
    """How each stage's trials sit on its instances."""
    estimate: PlanEstimateSpec | None = None
    """The plan's simulated time, bill and energy."""
    static_plan: list[PositiveInt] | None = None
    """The best static cluster, as a plan."""
    static_estimate: PlanEstimateSpec | None = None
    """The best static cluster's simulated time, bill and energy."""
    static_over_plan_cost: float | None = None
    """The static cluster's bill over the plan's."""
    plans_simulated: int | None = None
    """How many plans the planner simulated."""
    profile: PlanProfileSpec | None = None
    """The measurements the plan was made from; re-planning starts from them."""
    max_instances: PositiveInt | None = None
    """The most instances the plan could have used."""
    runs: PositiveInt = 200
    """Simulated runs per plan."""
    seed: int = Field(default=0, ge=0)
    """Seeds the simulated stragglers."""
    preprovision: bool = False
    """Request each stage's new instances ahead of its barrier (`basht plan --preprovision`)."""
    objective: Literal["cost", "energy"] = "cost"
    """What re-planning keeps least."""
    replan: bool = False
    """Plan the remaining stages again at each barrier, from the time left and the trial times
    seen so far (RubberBand's answer to a run that is slower or faster than its profile)."""

    @model_validator(mode="after")
    def _can_replan(self) -> PlanSpec:
        needs = {"replan": ("deadline_s", "profile"), "preprovision": ("estimate", "profile")}
        for option, keys in needs.items():
            missing = [k for k in keys if getattr(self, k) is None]
            estimate = self.estimate
            if (
                option == "preprovision"
                and estimate
                and len(estimate.stage_end_s) != len(self.plan)
            ):
                missing.append("estimate.stage_end_s")  # a plan from before Basht kept them
            if getattr(self, option) and missing:
                raise _at(
                    option,
                    f"needs the plan's {' and '.join(missing)} (write the plan with "
                    "basht plan --json)",
                )
        if self.replan and self.objective == "energy" and self.profile.power_w is None:
            raise _at("objective", "energy needs the profile's power_w (idle and busy watts)")
        return self


def peer_limit(experiment: Experiment, system: str) -> tuple[str, str] | None:
    """What a peer system (Optuna, Ray Tune, Syne Tune) cannot run of this experiment, as (key,
    why); the same file then compares like with like, or is refused before anything runs."""
    if system == "native":
        return None
    if experiment.executor != "local":
        return (
            "executor",
            f"{experiment.executor} applies to system: native only; "
            f"system: {system} runs trials its own way",
        )
    if experiment.resources.accelerator != "cpu":
        return (
            "resources.accelerator",
            f"gpu runs with system: native; system: {system} trains its trials on CPU here",
        )
    if experiment.search.is_multi and system != "optuna":
        key = "search.objectives" if experiment.search.objectives else "search.constraints"
        return (
            key,
            f"several objectives and constraints run with system native or optuna (system: "
            f"{system} would be told one number per trial)",
        )
    if experiment.search.scalarize is not None:
        return (
            "search.scalarize",
            f"ranks trials by Basht's own scalar; system: {system} has no counterpart",
        )
    if experiment.engine.scheduler != "fifo":
        return (
            "engine.scheduler",
            f"{experiment.engine.scheduler} is Basht's engine; system: {system} places "
            "its own trials",
        )
    if system == "synetune" and experiment.search.sampler == "grid":
        return ("search.sampler", "grid has no Syne Tune counterpart (random, tpe)")
    if experiment.search.asha_variant == "promotion":
        return (
            "search.asha_variant",
            f"promotion pauses trials in Basht's checkpoints; system: {system} stops them "
            "(asha_variant: stopping or auto)",
        )
    return None


class Experiment(BaseModel):
    """A validated experiment: every field of the seed's Table 1 has a home here."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[a-z0-9_-]+$", max_length=99)  # the run id adds 21 of its 120
    """The experiment's name, `[a-z0-9_-]+`: the start of every run id."""
    seed: int = Field(default=0, ge=0)  # numpy seeds only non-negative integers
    """Seeds the sampler and the workloads, so that a run can be repeated."""
    workload: WorkloadSpec
    """What a trial trains and evaluates."""
    space: dict[str, ParamSpec] | None = None
    """The search space Φ: a parameter per name (`float`, `int` or `choice`); pS = |Φ| is derived
    ("inf" with a real-valued parameter)."""
    hyperparameter: dict[str, LegacyParam] | None = None
    """The original Basht grid form (`start`, `end`, `step_size`), read as `space` with
    `sampler: grid`; give it or `space`, not both."""
    search: SearchSpec = Field(default_factory=SearchSpec)
    """How configurations are proposed, pruned and ranked, and what ends the search."""
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    """The workers trials run on and what each may use."""
    system: Literal["native", "optuna", "raytune", "synetune"] = "native"
    """The system under test: Basht itself (`native`), Optuna, Ray Tune or Syne Tune."""
    executor: Literal["local", "ray", "simulated"] = "local"
    """Where `system: native` runs trials: worker processes here (`local`) or Ray (`ray`);
    `simulated` is for Python only (`basht.tune.simulate`)."""
    ray: RaySpec | None = None
    """Where `executor: ray` runs (only with that executor)."""
    engine: EngineSpec = Field(default_factory=EngineSpec)
    """How trials share the machine (`executor: local`)."""
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    """How energy, carbon and cost are measured, and the live metrics."""
    store: str = "sqlite:///basht.db"
    """Where runs are kept: any SQLAlchemy URL (SQLite or PostgreSQL)."""
    plan: PlanSpec | None = None
    """Run on an elastic cluster that follows this RubberBand plan: the plan (as `basht plan
    --json` writes it) or the path of its file, read next to the experiment file."""
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    """When the work runs: carbon-aware, with a deadline."""

    @model_validator(mode="after")
    def _one_space(self) -> Experiment:
        if self.space is None and self.hyperparameter is None:
            raise ValueError("give a `space` (or the original `hyperparameter` grid form)")
        if self.space is not None and self.hyperparameter is not None:
            raise ValueError("give `space` or `hyperparameter`, not both")
        if not (self.space or self.hyperparameter):
            raise ValueError("the search space is empty")
        if self.hyperparameter is not None and self.search.sampler != "grid":
            # The original form is a grid by definition.
            self.search = self.search.model_copy(update={"sampler": "grid"})
        if self.search.sampler == "tpe" and self.system == "raytune":
            raise _at("search.sampler", "tpe runs with system native or optuna, not raytune")
        if self.search.sampler == "grid" and not self.search_space.is_finite:
            raise _at("search.sampler", "grid needs a finite space (give `step` or use `choice`)")
        search = self.search
        ends = search.max_trials is not None or any(v is not None for v in search.limits)
        # SHA and Hyperband run one bracket without a trial limit; a grid runs out; the others
        # draw new configurations for ever.
        never_done = (
            search.pruner in ("none", "asha", "async-hyperband") and search.sampler != "grid"
        )
        if never_done and not ends:
            raise _at(
                "search",
                f"pruner {search.pruner} with the {search.sampler} sampler never ends on its own: "
                "give max_trials, target or a budget (time_budget_s, energy_budget_kwh, "
                "carbon_budget_g, cost_budget_usd)",
            )
        price = self.measure.price
        free = price.usd_per_hour == 0 and self.plan is None
        if search.cost_budget_usd is not None and free:
            raise _at(
                "search.cost_budget_usd",
                "measure.price is 0 USD per hour, so the job would never spend it",
            )
        return self

    @model_validator(mode="after")
    def _executor_options(self) -> Experiment:
        if self.executor == "simulated":
            raise _at(
                "executor",
                "simulated runs learning-curve models on a virtual clock from Python "
                "(basht.tune.simulate, benchmarks/asha_scale.py); basht run takes local or ray",
            )
        if self.ray is not None and self.executor != "ray":
            raise _at("ray", "applies only with executor: ray")
        limit = peer_limit(self, self.system)
        if limit is not None:
            raise _at(*limit)
        gpu = self.resources.accelerator == "gpu"
        if self.resources.devices is not None and not (gpu and self.executor == "local"):
            raise _at(
                "resources.devices",
                "applies to accelerator: gpu with executor: local (Ray places GPUs itself)",
            )
        if self.engine.min_width is not None and not gpu:
            raise _at("engine.min_width", "a GPU share; it needs accelerator: gpu")
        return self

    @model_validator(mode="after")
    def _schedule_fits(self) -> Experiment:
        schedule = self.schedule
        if schedule.max_workers is not None and schedule.max_workers > self.resources.workers:
            raise _at(
                "schedule.max_workers",
                f"{schedule.max_workers} is more than resources.workers ({self.resources.workers})",
            )
        if not schedule.carbon_aware:
            return self
        if self.system != "native":
            raise _at("schedule.carbon_aware", f"runs with system: native, not {self.system}")
        if self.plan is not None:
            raise _at("schedule.carbon_aware", "a RubberBand plan fixes when its stages run")
        carbon = self.measure.carbon
        if schedule.forecast == "electricitymaps":
            if carbon.region is None:
                raise _at(
                    "schedule.forecast",
                    "electricitymaps forecasts a zone: give measure.carbon.region",
                )
            replayed = {"start": schedule.start is not None, "time_scale": schedule.time_scale != 1}
            for key in (k for k, given in replayed.items() if given):
                raise _at(f"schedule.{key}", "replays a recorded series: measure.carbon.csv")
        elif carbon.csv is None:
            raise _at(
                "schedule.carbon_aware",
                "needs a carbon intensity that changes over time: measure.carbon.csv "
                "(or a region with forecast: electricitymaps)",
            )
        return self

    @model_validator(mode="after")
    def _plan_fits(self) -> Experiment:
        """A plan is for one synchronous SHA job: it must be this file's, run by Basht here."""
        if self.plan is None:
            return self
        if self.system != "native" or self.executor != "local":
            raise _at("plan", "runs with system: native and executor: local")
        if self.resources.accelerator != "cpu":
            raise _at("plan", "this machine's instances emulate GPUs with cores: accelerator: cpu")
        if self.search.pruner not in ("sha", "none"):
            raise _at(
                "plan",
                f"is for a synchronous SHA job (pruner: sha or none), not {self.search.pruner}",
            )
        planned = self.plan.job
        job = ShaJob.from_experiment(self)
        mine = (job.trials, job.min_budget, job.max_budget, job.eta)
        if mine != (planned.trials, planned.min_budget, planned.max_budget, planned.eta):
            raise _at(
                "plan",
                f"is for {planned.trials} trials over {planned.min_budget}..{planned.max_budget} "
                f"epochs with eta {planned.eta}, but this file's job is {job.trials} trials over "
                f"{job.min_budget}..{job.max_budget} with eta {job.eta}",
            )
        if len(self.plan.plan) != len(job.stages):
            raise _at(
                "plan",
                f"gives {len(self.plan.plan)} stages, but the job has {len(job.stages)}",
            )
        return self

    @property
    def source(self) -> str:
        """Where this experiment was read from, for messages: its file, or `<experiment>`."""
        # Kept beside the fields (like a cached property): model_copy keeps it, == ignores it.
        return self.__dict__.get("_source", "<experiment>")

    @property
    def search_space(self) -> SearchSpace:
        if self.space is not None:
            return SearchSpace({k: v.to_parameter() for k, v in self.space.items()})
        assert self.hyperparameter is not None
        return SearchSpace(
            {k: Choice(tuple(_tuple(v.values()))) for k, v in self.hyperparameter.items()}
        )

    @property
    def space_size(self) -> int | str:
        """pS = |Φ|, or "inf" for a space with a continuous parameter."""
        size = self.search_space.size
        return int(size) if math.isfinite(size) else "inf"

    @classmethod
    def from_dict(cls, data: Any, source: str = "<experiment>") -> Experiment:
        if not isinstance(data, dict):
            raise ExperimentError(
                f"{source}: expected a mapping at the top level, got {type(data).__name__}"
            )
        try:
            experiment = cls.model_validate(data)
        except ValidationError as err:
            raise ExperimentError(_one_line(err, source)) from None
        experiment.__dict__["_source"] = source
        return experiment

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=False)

    def workload_ref(self) -> WorkloadRef:
        """The workload as the processes that run its trials build it, with the memory each
        trial may use."""
        spec = self.workload
        memory_mb = self.resources.memory_per_worker_mb
        params = spec.command_params(self.search.max_budget) if spec.command else dict(spec.params)
        return WorkloadRef(spec.name, params, self.seed, memory_mb=memory_mb)


#: What a run adds to the experiment it stores, derived rather than given (pS, and Table 1's
#: dataset, model, size and training algorithm as the workload describes them): taken out
#: again before a stored experiment is read back.
DERIVED_KEYS = ("space_size", "workload_about")


def _tuple(values: list[Any]) -> list[Any]:
    return [tuple(v) if isinstance(v, list) else v for v in values]


def read_text(path: Path, label: str = "") -> str:
    """A file a user gave, as UTF-8 text: missing, unreadable (a directory, no permission) or not
    text (a binary file, another encoding) is one ExperimentError line naming it."""
    where = f"{label}{path}"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExperimentError(f"{where}: no such file") from None
    except UnicodeDecodeError as err:
        byte = err.object[err.start]
        raise ExperimentError(
            f"{where}: not UTF-8 text (byte {byte:#04x} at offset {err.start})"
        ) from None
    except OSError as err:
        raise ExperimentError(f"{where}: cannot read ({err.strerror})") from None
    except ValueError:  # from open(): the only path it refuses so is one with a NUL in it
        raise ExperimentError(f"{label}{str(path)!r}: not a path (it holds a NUL)") from None


#: The most values (mappings, lists and scalars, counted as often as they appear) a file may
#: hold once its YAML aliases are expanded. An experiment file holds hundreds; an alias of an
#: alias of an alias (a "billion laughs") expands to billions, which every later step (the
#: schema, the store's JSON) would walk.
MAX_DOCUMENT_VALUES = 100_000


def read_document(path: Path) -> Any:
    """A YAML file, or JSON for a `.json` one, read safely (no object construction, JSON's
    types only); a file that is not there, not text, does not parse, nests too deeply or
    expands past MAX_DOCUMENT_VALUES is one ExperimentError line."""
    text = read_text(path)
    kind = "JSON" if path.suffix == ".json" else "YAML"
    data = _parsed(text, kind, str(path))
    _check_expanded_size(data, path)
    return data


def _refuse_tag(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """A tag that builds what JSON has no type for: refused, where it is in the file."""
    raise yaml.constructor.ConstructorError(
        None,
        None,
        f"tag {node.tag} is not read: a Basht file holds text, numbers, true/false, null, "
        "lists and mappings",
        node.start_mark,
    )


class _DataLoader(yaml.SafeLoader):
    """YAML read as the JSON it stands for, which is how Basht keeps it (the store, results):
    a date (`2024-01-01`) stays text, and the tags that build other types are refused."""


_DataLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    _DataLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def _parsed(text: str, kind: str, where: str) -> Any:
    """`text` parsed as `kind` (JSON or YAML); every way it fails is one ExperimentError line
    that starts with `where`."""
    try:
        return json.loads(text) if kind == "JSON" else yaml.load(text, Loader=_DataLoader)
    except (ValueError, yaml.YAMLError) as err:
        # ValueError: JSON's errors, and a value neither parser can build (`!!int abc`, an
        # integer of more digits than Python converts).
        reason = " ".join(str(err).split()).split("; use sys.set_int_max_str_digits")[0]
        raise ExperimentError(f"{where}: not valid {kind}: {reason}") from None
    except RecursionError:
        raise ExperimentError(f"{where}: not valid {kind}: nested too deeply") from None


def _check_expanded_size(data: Any, path: Path) -> None:
    """Walk `data` as later steps would see it, stopping as soon as it is too large."""
    seen, pending = 0, [data]
    while pending:
        item = pending.pop()
        seen += 1
        if seen > MAX_DOCUMENT_VALUES:
            raise ExperimentError(
                f"{path}: more than {MAX_DOCUMENT_VALUES:,} values once its YAML aliases are "
                "expanded; refused"
            )
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def load_experiment(path: str | Path) -> Experiment:
    """Read a YAML or JSON experiment file; every problem becomes one ExperimentError line."""
    path = Path(path)
    data = read_document(path)
    source = str(path)
    if isinstance(data, dict) and isinstance(data.get("plan"), str):
        # A plan file named in the experiment is read next to it and kept in the run's record.
        plan = Path(data["plan"])
        plan = plan if plan.is_absolute() else path.parent / plan
        data = {**data, "plan": read_plan(plan)}
        source = f"{path} with plan {plan}"  # a problem names both files, as with --plan
    experiment = Experiment.from_dict(data, source)
    workload = experiment.workload
    if workload.command is not None and not Path(workload.cwd or ".").is_absolute():
        # A command written next to its experiment file runs there, wherever basht runs from.
        cwd = str((path.parent / (workload.cwd or ".")).resolve())
        experiment = experiment.model_copy(
            update={"workload": workload.model_copy(update={"cwd": cwd})}
        )
    # A time series next to the experiment file is found wherever basht runs from, and by a
    # resume from another folder: its path is kept absolute.
    csv = experiment.measure.carbon.csv
    if csv is not None:
        carbon = experiment.measure.carbon.model_copy(update={"csv": _beside(path, csv)})
        measure = experiment.measure.model_copy(update={"carbon": carbon})
        experiment = experiment.model_copy(update={"measure": measure})
    forecast_csv = experiment.schedule.forecast_csv
    if forecast_csv is not None:
        schedule = experiment.schedule.model_copy(
            update={"forecast_csv": _beside(path, forecast_csv)}
        )
        experiment = experiment.model_copy(update={"schedule": schedule})
    return experiment


def _beside(experiment_file: Path, name: str) -> str:
    """`name` as it is when absolute, else the absolute path of `name` next to the file."""
    return name if Path(name).is_absolute() else os.path.abspath(experiment_file.parent / name)


def read_plan(path: str | Path) -> dict[str, Any]:
    """A plan file as `basht plan --json` writes it, read as JSON (checked with the experiment)."""
    path = Path(path)
    data = _parsed(read_text(path, "plan "), "JSON", f"plan {path}")
    if not isinstance(data, dict):
        raise ExperimentError(f"plan {path}: expected a mapping (from basht plan --json)")
    return data


def with_plan(
    experiment: Experiment, path: str | Path | None = None, *, replan: bool = False
) -> Experiment:
    """The experiment run on the elastic cluster of the plan at `path` (`basht run --plan`),
    or of the one it names; with `replan`, re-planned at each barrier (`--replan`)."""
    if path is None and experiment.plan is None:
        raise ExperimentError(
            f"{experiment.source}: plan: --replan needs a plan (give --plan FILE)"
        )
    plan = read_plan(path) if path is not None else experiment.to_dict()["plan"]
    if replan:
        plan = {**plan, "replan": True}
    data = experiment.to_dict() | {"plan": plan}
    source = experiment.source if path is None else f"{experiment.source} with plan {path}"
    return Experiment.from_dict(data, source)


_TAGS = {"float", "int", "choice", "list"}


def _at(path: str, what: str) -> PydanticCustomError:
    """A cross-field problem that belongs to one key: reported as `<file>: <path>: <what>`."""
    return PydanticCustomError("basht_at_key", "{what}", {"path": path, "what": what})


def _one_line(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"] if not (isinstance(p, str) and _is_tag(p))]
    where = ".".join(map(_shown_key, loc)) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        expected = _fields_at(loc[:-1])
        what = (
            f"unknown key (expected one of: {', '.join(expected)})" if expected else "unknown key"
        )
    elif kind == "missing":
        what = "missing required key"
    elif kind == "basht_at_key":
        context = first.get("ctx") or {}
        where = ".".join([*map(_shown_key, loc), str(context["path"])])
        what = str(context["what"])
    else:
        msg = first["msg"].removeprefix("Value error, ")
        what = msg if kind == "value_error" else f"{msg}, got {first['input']!r}"
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{source}: {where}: {what}{suffix}"


def _shown_key(key: str) -> str:
    """A key as a message shows it: quoted when it is empty or holds spaces or control
    characters (a newline in a key must not break the one-line message)."""
    return key if key and key.isprintable() and not any(c.isspace() for c in key) else repr(key)


def _is_tag(part: str) -> bool:
    return (
        part in _TAGS
        or part.startswith(("function-", "union[", "tagged-union[", "constrained-"))
        or "[" in part
    )


def _fields_at(loc: list[str]) -> list[str]:
    model: Any = Experiment
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if fields is not None and part.isdigit() and part not in fields:
            continue  # an item of a list of models (`measure.trackers.0`): the model's keys
        if fields is None or part not in fields:
            # Inside a dict of parameters: the key is the user's name, the value a param model.
            if model is ParamSpec or model == "param":
                return []
            model = "param"
            continue
        annotation = fields[part].annotation
        model = next(
            (
                a
                for a in getattr(annotation, "__args__", (annotation,))
                if hasattr(a, "model_fields")
            ),
            annotation,
        )
    return list(getattr(model, "model_fields", {}))
