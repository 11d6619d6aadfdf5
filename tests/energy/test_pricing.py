"""Prices and billing: provider granularity, job cost, trial shares, the shipped price sheet."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from basht.energy.billing import allocated_share, billed_seconds, job_cost_usd, trial_cost_usd
from basht.energy.pricing import (
    AWS_LINUX,
    AZURE,
    GCP,
    HOURLY,
    PER_SECOND,
    BillingRule,
    Price,
    PriceError,
    lookup_price,
    price_from_spec,
    price_sheet,
)
from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment, PriceSpec

# --- billing granularity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "runtime_s", "billed_s"),
    [
        # AWS Linux: per second, 60 s minimum
        (AWS_LINUX, 1, 60),
        (AWS_LINUX, 59, 60),
        (AWS_LINUX, 61, 61),
        (AWS_LINUX, 3601, 3601),
        # GCP: per second after a 1-minute minimum
        (GCP, 1, 60),
        (GCP, 59, 60),
        (GCP, 61, 61),
        (GCP, 3601, 3601),
        # Azure: per second, 5-minute minimum (reported from June 2025)
        (AZURE, 1, 300),
        (AZURE, 59, 300),
        (AZURE, 61, 300),
        (AZURE, 3601, 3601),
        # per started hour
        (HOURLY, 1, 3600),
        (HOURLY, 59, 3600),
        (HOURLY, 61, 3600),
        (HOURLY, 3601, 7200),
        # a user's own price: per second, no minimum
        (PER_SECOND, 1, 1),
        (PER_SECOND, 59, 59),
        (PER_SECOND, 61, 61),
        (PER_SECOND, 3601, 3601),
        (PER_SECOND, 0.2, 1),
    ],
)
def test_billed_seconds(rule: BillingRule, runtime_s: float, billed_s: float) -> None:
    assert billed_seconds(runtime_s, rule) == billed_s


def test_float_noise_does_not_buy_another_increment() -> None:
    runtime_s = sum([0.1] * 36_000)  # 3600.0000000x from adding timestamps
    assert billed_seconds(runtime_s, HOURLY) == 3600


@given(
    runtime_s=st.floats(0, 1e7),
    increment_s=st.sampled_from([1.0, 60.0, 3600.0]),
    minimum_s=st.sampled_from([0.0, 60.0, 300.0, 3600.0]),
)
def test_billed_time_covers_runtime_and_minimum_in_whole_increments(
    runtime_s: float, increment_s: float, minimum_s: float
) -> None:
    rule = BillingRule(increment_s, minimum_s)
    billed = billed_seconds(runtime_s, rule)
    assert billed >= minimum_s
    assert billed >= runtime_s - 1e-6 * increment_s
    if billed > minimum_s:
        assert billed - runtime_s < increment_s
        assert math.isclose(billed / increment_s, round(billed / increment_s))


def test_billing_rejects_negative_runtime() -> None:
    with pytest.raises(ValueError):
        billed_seconds(-1, AWS_LINUX)


# --- job and trial cost ------------------------------------------------------------------------


def test_job_cost_is_billed() -> None:
    m5 = price_from_spec(PriceSpec(provider="aws", instance="m5.xlarge"))
    assert m5.usd_per_hour == pytest.approx(0.192)
    assert job_cost_usd(m5, 10) == pytest.approx(0.192 * 60 / 3600)  # 60 s minimum
    assert job_cost_usd(m5, 7200) == pytest.approx(0.384)
    own = price_from_spec(PriceSpec(usd_per_hour=3.6))
    assert job_cost_usd(own, 10) == pytest.approx(0.01)  # no minimum for a user's own price


def test_trial_cost_is_a_cpu_share_on_a_cpu_instance() -> None:
    m5 = price_from_spec(PriceSpec(provider="aws", instance="m5.xlarge"))  # 4 vCPU, 0.192 USD/h
    assert allocated_share(m5, cpus=1) == 0.25
    assert trial_cost_usd(m5, 3600, cpus=1) == pytest.approx(0.048)
    assert trial_cost_usd(m5, 1800, cpus=2) == pytest.approx(0.048)
    assert trial_cost_usd(m5, 3600, cpus=8) == pytest.approx(0.192)  # capped at the instance
    assert trial_cost_usd(m5, 10, cpus=1) == pytest.approx(0.192 * 10 / 3600 / 4)  # no minimum


def test_trial_cost_is_a_gpu_share_on_a_gpu_instance() -> None:
    p3 = price_from_spec(PriceSpec(provider="aws", instance="p3.8xlarge"))  # 32 vCPU, 4 GPUs
    assert trial_cost_usd(p3, 3600, cpus=1, gpus=1) == pytest.approx(p3.usd_per_hour / 4)
    assert trial_cost_usd(p3, 3600, cpus=32, gpus=2) == pytest.approx(p3.usd_per_hour / 2)
    # a CPU-only trial on a GPU instance pays its vCPU share
    assert trial_cost_usd(p3, 3600, cpus=8, gpus=0) == pytest.approx(p3.usd_per_hour / 4)
    assert allocated_share(p3, cpus=1, gpus=9) == 1.0


def test_gpus_on_a_cpu_instance_fall_back_to_the_cpu_share() -> None:
    price = Price(usd_per_hour=1.0, vcpus=4)
    assert allocated_share(price, cpus=2, gpus=1) == 0.5


@given(
    cpus=st.floats(0, 200),
    gpus=st.integers(0, 16),
    duration_s=st.floats(0, 1e6),
)
def test_trial_cost_never_exceeds_the_instance(cpus: float, gpus: int, duration_s: float) -> None:
    price = Price(usd_per_hour=2.0, vcpus=8, gpus=2)
    cost = trial_cost_usd(price, duration_s, cpus, gpus)
    assert 0 <= cost <= 2.0 * duration_s / 3600 + 1e-12


# --- from the experiment file ------------------------------------------------------------------


def test_user_price_uses_this_machines_cpus_unless_given() -> None:
    own = price_from_spec(PriceSpec(usd_per_hour=0.5))
    assert own.vcpus == (os.cpu_count() or 1)
    assert own.rule == PER_SECOND
    assert own.provider is None
    sized = price_from_spec(PriceSpec(usd_per_hour=0.5, vcpus=16, gpus=2))
    assert (sized.vcpus, sized.gpus) == (16, 2)


def test_user_price_with_a_provider_uses_its_rule() -> None:
    assert price_from_spec(PriceSpec(usd_per_hour=1.0, provider="Azure")).rule == AZURE


def test_instance_lookup_per_provider() -> None:
    g2 = price_from_spec(PriceSpec(provider="gcp", instance="g2-standard-4"))
    assert (g2.vcpus, g2.gpus, g2.gpu_model, g2.rule) == (4, 1, "NVIDIA L4", GCP)
    nc = price_from_spec(PriceSpec(provider="azure", instance="standard_nc24ads_a100_v4"))
    assert nc.instance == "Standard_NC24ads_A100_v4" and nc.region == "eastus"
    assert lookup_price("aws", "g4dn.xlarge", region="us-east-1").gpus == 1


def test_user_price_overrides_the_sheet_but_keeps_size_and_rule() -> None:
    price = price_from_spec(PriceSpec(provider="aws", instance="m5.xlarge", usd_per_hour=0.1))
    assert (price.usd_per_hour, price.vcpus, price.rule) == (0.1, 4, AWS_LINUX)
    assert "usd_per_hour" in price.source


def test_spec_accepts_a_pydantic_object() -> None:
    assert price_from_spec(PriceSpec(provider="aws", instance="c5.xlarge")).usd_per_hour == 0.17
    assert price_from_spec(PriceSpec(usd_per_hour=0.0)).usd_per_hour == 0.0


def test_unknown_instance_names_it_and_lists_close_matches() -> None:
    with pytest.raises(PriceError) as info:
        price_from_spec(PriceSpec(provider="aws", instance="m5.xlarg"))
    message = str(info.value)
    assert "'m5.xlarg'" in message and "m5.xlarge" in message
    assert "\n" not in message
    assert isinstance(info.value, ExperimentError)


# The block as the experiment file gives it: the schema checks its keys and values once, and
# price_from_spec what only the price sheet knows; either names the key path.
@pytest.mark.parametrize(
    ("block", "match"),
    [
        ({}, "give usd_per_hour, or provider and instance"),
        ({"provider": "ibm", "instance": "x"}, "unknown provider 'ibm'"),
        ({"instance": "m5.xlarge"}, "needs a provider"),
        ({"provider": "aws", "instance": "m5.xlarge", "region": "mars-1"}, "'mars-1'"),
        ({"usd_per_hour": -1}, "usd_per_hour: Input should be greater than or equal to 0"),
        ({"usd_per_hour": 1, "vcpus": 0}, "vcpus"),
        ({"usd_per_hour": 1, "vcpus": 2.5}, "vcpus: Input should be a valid integer"),
        ({"usd_per_hour": 1, "memory_gib": -4}, "memory_gib"),
        ({"usd_per_hour": 1, "cost": 2}, "measure.price.cost: unknown key"),
    ],
)
def test_bad_price_spec_is_one_clear_line(spec: dict, block: dict, match: str) -> None:
    spec["measure"] = {"price": block}
    with pytest.raises(BashtError, match=match) as info:
        price_from_spec(Experiment.from_dict(spec).measure.price)
    assert "\n" not in str(info.value)
    assert "measure.price" in str(info.value)


def test_own_price_for_a_region_the_sheet_lacks_keeps_the_instances_size_and_rule() -> None:
    # The region error says "(or give usd_per_hour)": doing so must then work.
    price = price_from_spec(
        PriceSpec(provider="aws", instance="m5.xlarge", region="eu-west-1", usd_per_hour=0.214)
    )
    assert (price.usd_per_hour, price.vcpus, price.region) == (0.214, 4, "eu-west-1")
    assert price.rule.minimum_s == 60.0
    assert job_cost_usd(price, 30.0) == pytest.approx(0.214 / 60)


# --- the shipped sheet -------------------------------------------------------------------------


def test_price_sheet_parses_and_every_row_has_a_positive_price() -> None:
    sheet = price_sheet()
    assert len(sheet) >= 30
    for row in sheet:
        assert row.usd_per_hour > 0, row
        assert row.vcpus >= 1 and row.memory_gib and row.memory_gib > 0
        assert row.snapshot_date and row.source
        assert row.rule is {"aws": AWS_LINUX, "gcp": GCP, "azure": AZURE}[row.provider or ""]
        assert (row.gpus > 0) == bool(row.gpu_model), row


def test_price_sheet_covers_the_common_instances() -> None:
    have = {(p.provider, p.instance) for p in price_sheet()}
    wanted = {
        ("aws", i)
        for i in [
            "t3.medium", "m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.xlarge",
            "c5.2xlarge", "r5.xlarge", "g4dn.xlarge", "g5.xlarge", "p3.2xlarge", "p4d.24xlarge",
        ]
    } | {
        ("gcp", i)
        for i in [
            "e2-standard-2", "e2-standard-4", "n2-standard-4", "n2-standard-8", "n1-standard-4",
            "c2-standard-8", "a2-highgpu-1g", "g2-standard-4",
        ]
    } | {
        ("azure", i)
        for i in [
            "Standard_D2s_v5", "Standard_D4s_v5", "Standard_D8s_v5", "Standard_F4s_v2",
            "Standard_NC4as_T4_v3", "Standard_NC6s_v3", "Standard_NC24ads_A100_v4",
        ]
    }  # fmt: skip
    assert wanted <= have


def test_describe_names_price_rule_and_snapshot() -> None:
    text = price_from_spec(PriceSpec(provider="gcp", instance="e2-standard-2")).describe()
    assert "gcp:e2-standard-2" in text and "us-central1" in text and "snapshot" in text
