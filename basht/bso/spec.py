"""The wire protocol: Zeus's BSO request and response models, field for field, in pydantic 2.

Field names, defaults and checks follow `zeus.optimizer.batch_size.common` (Zeus 0.9 to 0.16),
so a stock Zeus client can talk to our server. Unknown fields are ignored and numbers are coerced
the lax way, as pydantic 1 did for Zeus. Where Zeus accepted a value that later crashed its server
(a duplicate or non-positive batch size, a negative seed or prior precision, NaN knobs), we reject
it with a 422 instead; a stock client never sends those. Every float must be finite, every
integer must fit the column that stores it (32-bit INTEGER on PostgreSQL and MySQL; the seed is a
64-bit BIGINT) and every string its column (a length, no NUL), so no value can fail
later in the database or in the JSON of an answer.

Ids are free text, as in Zeus: a quote, a slash, a percent sign or any script is an ordinary
character, stored through bound parameters and compared exactly (no normalization). Control
characters are refused (see `plain`).
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"
POWER_PROFILE_URL = "/power_profiles"  # Basht's addition: a batch size's power-limit profile

_WIRE = ConfigDict(extra="ignore", allow_inf_nan=False, coerce_numbers_to_str=True)

INT64_MAX = 2**63 - 1
"""The largest integer a BIGINT column stores (only `mab_seed` has one)."""

INT32_MAX = 2**31 - 1
"""The largest integer an INTEGER column stores: 32-bit on PostgreSQL and MySQL (SQLite's is
64-bit, but a value the other databases refuse must be refused on every one)."""

Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
PositiveInt = Annotated[int, Field(gt=0, le=INT32_MAX)]
NonNegativeInt = Annotated[int, Field(ge=0, le=INT32_MAX)]
Seed = Annotated[int, Field(ge=0, le=INT64_MAX)]


def storable(value: str) -> str:
    """PostgreSQL's text cannot hold NUL: the driver would fail on it with a 500. (Pydantic
    already refuses lone surrogates, which are not UTF-8.)"""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


_LINE_BREAKING = frozenset({"Cc", "Zl", "Zp"})


def plain(value: str) -> str:
    """Ids and names are free text, but without control characters (tab, newline, escape, DEL,
    ...) or line and paragraph separators: the server writes them to its log and people read them
    in tables, where a newline would forge a log line and an escape sequence drive the terminal.
    Anything else (quotes, slashes, percent signs, other scripts) is an ordinary character."""
    for char in value:
        if unicodedata.category(char) in _LINE_BREAKING:
            raise ValueError(
                f"must not contain control characters or line separators (found U+{ord(char):04X})"
            )
    return value


JOB_ID_MAX_LENGTH = 400
"""The length of the job_id columns. A prefix leaves room for the "-<8 hex>" a server adds."""

# An empty id would name no job: the server would invent a new one at each registration.
JobIdStr = Annotated[
    str,
    Field(min_length=1, max_length=JOB_ID_MAX_LENGTH),
    AfterValidator(storable),
    AfterValidator(plain),
]
Str300 = Annotated[str, Field(max_length=300), AfterValidator(storable), AfterValidator(plain)]


class Stage(StrEnum):
    """Where a job is: trying batch sizes in pruning rounds, or choosing among survivors (MAB)."""

    PRUNING = "Pruning"
    MAB = "MAB"


class TrialType(StrEnum):
    """Why a trial got its batch size.

    EXPLORATION: a pruning-round probe. CONCURRENT: asked for while a probe was still running, so
    it gets the cheapest size known so far instead of a second probe. MAB: chosen by the bandit.
    """

    EXPLORATION = "Exploration"
    CONCURRENT = "Concurrent"
    MAB = "MAB"


class TrialStatus(StrEnum):
    """DISPATCHED: running. SUCCEEDED: a final result came in (converged or not). FAILED: ended
    by PATCH /trials without a result (a crash); it carries no cost. ABANDONED: sent no report
    for longer than the server's trial timeout (a client killed before it could end the trial);
    it carries no cost either, and a report that comes after all is refused."""

    DISPATCHED = "Dispatched"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABANDONED = "Abandoned"


class JobParams(BaseModel):
    """What the user decides about a recurring job; `batch_sizes` comes back sorted."""

    model_config = _WIRE

    job_id: JobIdStr
    job_id_prefix: Str300
    batch_sizes: list[PositiveInt]
    default_batch_size: PositiveInt
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: PositiveInt = 100
    num_pruning_rounds: NonNegativeInt = 2
    window_size: NonNegativeInt = 0  # 0: no window, every result counts (as in Zeus)
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = Field(default=0.0, ge=0)
    mab_num_explorations: NonNegativeInt = 2
    mab_seed: Seed | None = None
    optimize_power_limit: bool = False
    """Basht's addition: also choose each batch size's GPU power limit, from a profile taken just
    in time during the first run of that batch size (Zeus's JIT power limit optimizer). Off, the
    job is Zeus's, byte for byte on the wire."""

    @field_validator("batch_sizes")
    @classmethod
    def _sorted_unique(cls, bs: list[int]) -> list[int]:
        if not bs:
            raise ValueError(f"Batch Sizes = {bs} is empty")
        if len(set(bs)) != len(bs):
            raise ValueError(f"batch_sizes {bs} has duplicates")
        return sorted(bs)

    @field_validator("eta_knob")
    @classmethod
    def _eta_in_unit_interval(cls, v: float) -> float:
        if v < 0 or v > 1:
            raise ValueError("eta_knob should be in range [0,1]")
        return v

    @field_validator("beta_knob")
    @classmethod
    def _beta_positive_or_none(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError(
                f"Invalid beta_knob({v}). To disable early stop, set beta_knob = None to "
                "disable or positive value."
            )
        return v

    @model_validator(mode="after")
    def _default_in_batch_sizes(self) -> JobParams:
        if self.default_batch_size not in self.batch_sizes:
            raise ValueError(
                f"Default BS({self.default_batch_size}) not in batch_sizes({self.batch_sizes})."
            )
        return self


class GpuConfig(BaseModel):
    """What the client measures about its machine; `max_power` is watts for all its GPUs together."""

    model_config = _WIRE

    max_power: float = Field(gt=0)
    number_of_gpus: PositiveInt
    gpu_model: Str300

    @field_validator("gpu_model")
    @classmethod
    def _not_empty(cls, v: str) -> str:
        if not v:
            raise ValueError(f"Invalid gpu_model({v}). Shouldn't be empty.")
        return v


class JobSpec(JobParams):
    """What a user writes: like JobParams, but the server invents `job_id` when it is left out."""

    job_id: JobIdStr | None = None  # type: ignore[assignment]  # optional here, on purpose

    @model_validator(mode="after")
    def _id_has_prefix(self) -> JobSpec:
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(
                f"Job_id({self.job_id}) does not start with prefix({self.job_id_prefix})."
            )
        return self


class JobSpecFromClient(JobSpec, GpuConfig):
    """The body of POST /jobs: the user's spec plus the client's GPU facts.

    Base order puts the GPU fields first when serialised, as Zeus's responses do.
    """


class CreatedJob(JobParams, GpuConfig):
    """The spec as the server registered it: `job_id` is always set."""

    def spec(self) -> JobSpecFromClient:
        return JobSpecFromClient.model_validate(self.model_dump())


class TrialId(BaseModel):
    """One run of a job: the batch size to train with and the trial's number within the job."""

    model_config = _WIRE

    job_id: JobIdStr
    batch_size: Int32
    trial_number: Int32


class Assignment(TrialId):
    """The answer to GET /jobs/batch_size: a trial, and for a job that optimizes the power limit
    either the limit to train at (`power_limit`, W per GPU) or a request to profile the limits
    first (`profile_power_limits`). Both are left out of the JSON when unset, so a job without
    power limits gets exactly Zeus's `TrialId`."""

    power_limit: float | None = Field(default=None, gt=0)
    profile_power_limits: bool | None = None

    def trial_id(self) -> TrialId:
        return TrialId(
            job_id=self.job_id, batch_size=self.batch_size, trial_number=self.trial_number
        )


class PowerMeasurement(BaseModel):
    """Time (s) and energy (J, all the job's GPUs) of the same amount of training at one limit."""

    model_config = _WIRE

    power_limit: float = Field(gt=0)
    time: float = Field(gt=0)
    energy: float = Field(ge=0)


class PowerProfile(TrialId):
    """The body of POST /power_profiles: one batch size's measurements, one per power limit."""

    measurements: list[PowerMeasurement] = Field(min_length=1, max_length=1000)

    @field_validator("measurements")
    @classmethod
    def _one_per_limit(cls, ms: list[PowerMeasurement]) -> list[PowerMeasurement]:
        limits = [m.power_limit for m in ms]
        if len(set(limits)) != len(limits):
            raise ValueError(f"power limits {limits} have duplicates")
        return ms


class PowerLimitChoice(BaseModel):
    """The power limit (W per GPU) a batch size trains at from now on, chosen from its profile."""

    model_config = _WIRE

    job_id: JobIdStr
    batch_size: Int32
    power_limit: float


class TrainingResult(TrialId):
    """One epoch's report. `time` (s) and `energy` (J) are cumulative since training began;
    `current_epoch` counts from 1. A NaN or infinite `metric` reports a diverged run."""

    time: float = Field(ge=0)
    energy: float = Field(ge=0)
    metric: float = Field(allow_inf_nan=True)  # NaN or infinite: the run diverged
    current_epoch: PositiveInt


class ReportResponse(BaseModel):
    """The server's decision after a report: keep going, or stop (and whether the target was met)."""

    model_config = _WIRE

    stop_train: bool
    converged: bool
    message: str


def spec_key(spec: JobSpecFromClient | CreatedJob | dict[str, Any]) -> dict[str, Any]:
    """The fields whose equality decides 200 (same spec) versus 409 (changed spec) on POST /jobs."""
    data = spec if isinstance(spec, dict) else spec.model_dump()
    return {name: data.get(name) for name in CreatedJob.model_fields}
