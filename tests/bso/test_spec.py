"""The wire models accept what Zeus's client sends and reject what Zeus rejects (and what crashed it)."""

from __future__ import annotations

import math
import re

import pytest
from pydantic import ValidationError

from basht.bso.spec import CreatedJob, JobSpec, JobSpecFromClient, TrainingResult, spec_key
from tests.bso.support import job_body


def test_zeus_defaults_fill_a_minimal_spec():
    spec = JobSpec(job_id_prefix="mnist", batch_sizes=[64, 32], default_batch_size=32)
    assert spec.job_id is None
    assert spec.batch_sizes == [32, 64]  # sorted, as Zeus's validator does
    assert (spec.eta_knob, spec.beta_knob, spec.target_metric) == (0.5, 2.0, 0.5)
    assert (spec.max_epochs, spec.num_pruning_rounds, spec.window_size) == (100, 2, 0)
    assert (spec.mab_prior_mean, spec.mab_prior_precision, spec.mab_num_explorations) == (0, 0, 2)
    assert spec.higher_is_better_metric is True and spec.mab_seed is None


def test_unknown_fields_are_ignored_and_numbers_coerced():
    body = job_body("mnist-1", seed=7, error=False, max_epochs="12", eta_knob=1)
    spec = JobSpecFromClient.model_validate(body)
    assert spec.max_epochs == 12 and spec.eta_knob == 1.0
    assert not hasattr(spec, "seed")


def test_gpu_fields_serialise_first_like_zeus():
    spec = JobSpecFromClient.model_validate(job_body("mnist-1"))
    assert list(spec.model_dump())[:4] == ["max_power", "number_of_gpus", "gpu_model", "job_id"]


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"job_id": "other-1"}, "does not start with prefix"),
        ({"default_batch_size": 128}, "not in batch_sizes"),
        ({"batch_sizes": []}, "empty"),
        ({"batch_sizes": [32, 32, 1024]}, "duplicates"),
        ({"batch_sizes": [0, 1024]}, "greater than 0"),
        ({"eta_knob": 1.5}, "range [0,1]"),
        ({"beta_knob": 0}, "beta_knob"),
        ({"max_epochs": 0}, "greater than 0"),
        ({"num_pruning_rounds": -1}, "greater than or equal to 0"),
        ({"mab_num_explorations": -1}, "greater than or equal to 0"),
        ({"mab_seed": -3}, "greater than or equal to 0"),
        ({"max_power": 0}, "greater than 0"),
        ({"number_of_gpus": 0}, "greater than 0"),
        ({"gpu_model": ""}, "Shouldn't be empty"),
        ({"target_metric": float("nan")}, "finite number"),
        ({"eta_knob": float("nan")}, "finite number"),
        ({"beta_knob": float("inf")}, "finite number"),
        ({"max_power": float("inf")}, "finite number"),
        ({"window_size": -5}, "greater than or equal to 0"),
        ({"max_epochs": 2**31}, "less than or equal to 2147483647"),
        ({"window_size": 2**31}, "less than or equal to"),
        ({"num_pruning_rounds": 2**31}, "less than or equal to"),
        ({"mab_num_explorations": 2**31}, "less than or equal to"),
        ({"mab_seed": 2**63}, "less than or equal to 9223372036854775807"),
        ({"number_of_gpus": 2**31}, "less than or equal to"),
        ({"batch_sizes": [1024, 2**31]}, "less than or equal to"),
        ({"job_id": "test-" + "x" * 396}, "at most 400 characters"),
        ({"job_id": "test-\x00"}, "NUL"),
        ({"job_id": "test-\ud800"}, "unicode string"),
        ({"job_id_prefix": "x" * 301, "job_id": "x" * 301}, "at most 300 characters"),
        ({"gpu_model": "x" * 301}, "at most 300 characters"),
        ({"gpu_model": "A\x00100"}, "NUL"),
        ({"job_id": "test-\n200 OK"}, "control characters or line separators (found U+000A)"),
        ({"job_id": "test-\x1b[2J"}, "U+001B"),
        ({"job_id": "test-\u2028"}, "U+2028"),
        ({"job_id_prefix": "te\tst", "job_id": "te\tst-1"}, "U+0009"),
        ({"gpu_model": "A100\x85"}, "U+0085"),
    ],
)
def test_bad_specs_are_rejected_with_the_reason(changes, fragment):
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        JobSpecFromClient.model_validate(job_body("test-1", **changes))


@pytest.mark.parametrize(
    "job_id",
    [
        "'; DROP TABLE bso_jobs;--",
        "../../etc/passwd",
        "%2e%2e%2f",
        "é-e\u0301-日本-🙂",
        "\u202eevil",
    ],
)
def test_ids_are_free_text_but_for_control_characters(job_id):
    spec = JobSpecFromClient.model_validate(job_body(job_id, job_id_prefix=job_id[:1]))
    assert spec.job_id == job_id  # kept exactly: no normalization, no escaping


def test_beta_null_disables_early_stopping():
    assert JobSpecFromClient.model_validate(job_body("test-1", beta_knob=None)).beta_knob is None


def test_spec_key_ignores_batch_size_order_but_not_values():
    a = JobSpecFromClient.model_validate(job_body("test-1"))
    b = JobSpecFromClient.model_validate(
        job_body("test-1", batch_sizes=[4096, 2048, 1024, 512, 256, 64, 32])
    )
    c = JobSpecFromClient.model_validate(job_body("test-1", max_power=2999.0))
    assert spec_key(a) == spec_key(b)
    assert spec_key(a) != spec_key(c)
    assert spec_key(CreatedJob.model_validate(a.model_dump())) == spec_key(a)


def test_training_results_need_non_negative_time_and_energy():
    trial = {"job_id": "j", "batch_size": 32, "trial_number": 1}
    with pytest.raises(ValidationError):
        TrainingResult(**trial, time=-1, energy=1, metric=0, current_epoch=1)
    ok = TrainingResult(**trial, time=1, energy=2, metric=0.5, current_epoch=1)
    assert ok.energy == 2


def test_integers_up_to_their_columns_are_accepted():
    """INTEGER columns are 32-bit on PostgreSQL; the seed's column is a BIGINT."""
    spec = JobSpecFromClient.model_validate(
        job_body("test-1", batch_sizes=[1024, 2**31 - 1], max_epochs=2**31 - 1, mab_seed=2**63 - 1)
    )
    assert spec.batch_sizes[-1] == spec.max_epochs == 2**31 - 1
    assert spec.mab_seed == 2**63 - 1
    longest = JobSpecFromClient.model_validate(job_body("test-" + "x" * 395, gpu_model="é" * 300))
    assert len(longest.job_id) == 400


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"current_epoch": 0}, "greater than 0"),
        ({"current_epoch": -3}, "greater than 0"),
        ({"current_epoch": 2**31}, "less than or equal to"),
        ({"trial_number": 2**31}, "less than or equal to"),
        ({"trial_number": -(2**31) - 1}, "greater than or equal to"),
        ({"batch_size": 2**31}, "less than or equal to"),
        ({"job_id": "j\x00"}, "NUL"),
        ({"job_id": "j\r"}, "U+000D"),
        ({"time": float("inf")}, "finite number"),
        ({"energy": float("nan")}, "finite number"),
    ],
)
def test_bad_training_results_are_rejected_with_the_reason(changes, fragment):
    values = {"job_id": "j", "batch_size": 32, "trial_number": 1, "time": 1.0, "energy": 2.0}
    values.update({"metric": 0.5, "current_epoch": 1, **changes})
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        TrainingResult.model_validate(values)


@pytest.mark.parametrize("metric", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_metric_is_a_diverged_run_not_bad_input(metric):
    body = (
        '{"job_id": "j", "batch_size": 32, "trial_number": 1, "time": 1.0, "energy": 2.0, '
        f'"metric": {metric}, "current_epoch": 1}}'
    )
    assert not math.isfinite(TrainingResult.model_validate_json(body).metric)
