"""Cloud prices: an instance type's price per hour, its size, and the rule its provider bills by.

Where a `Price` comes from: the shipped price sheet, the experiment file's `measure.price`, or a
plan's instance type. What a price comes to over time (a job's, a cluster's, a trial's bill) is
`basht.energy.billing`.
"""

from __future__ import annotations

import csv
import difflib
import logging
import math
import os
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from basht.errors import SpecError

if TYPE_CHECKING:
    from basht.experiment import PlanPriceSpec, PriceSpec

log = logging.getLogger(__name__)

PRICES_PATH = Path(__file__).with_name("data") / "prices.csv"
#: Where the experiment file gives its price: the key path its errors name.
PRICE_PATH = "measure.price"


class PriceError(SpecError):
    """A price, provider or instance that cannot be used; `key` is the key path it is at."""

    def __init__(self, reason: str, key: str | None = "price") -> None:
        super().__init__(reason, key)


@dataclass(frozen=True)
class BillingRule:
    """How a provider rounds a runtime: whole `increment_s` steps, and never less than `minimum_s`."""

    increment_s: float
    minimum_s: float
    name: str = ""

    def __post_init__(self) -> None:
        if not (self.increment_s > 0 and math.isfinite(self.increment_s)):
            raise ValueError(f"increment_s must be > 0, got {self.increment_s!r}")
        if not (self.minimum_s >= 0 and math.isfinite(self.minimum_s)):
            raise ValueError(f"minimum_s must be >= 0, got {self.minimum_s!r}")


# AWS EC2 On-Demand, Linux (also Windows, RHEL, Ubuntu): per second with a 60 s minimum, since
# 2 Oct 2017 (AWS "Per-Second Billing for EC2 Instances and EBS Volumes", 2017-09-18; EC2 On-Demand
# pricing page; AWS re:Post knowledge center). SUSE and AMIs with an hourly software charge: HOURLY.
AWS_LINUX = BillingRule(increment_s=1.0, minimum_s=60.0, name="aws: per second, 60 s minimum")
# GCP Compute Engine: vCPU, GPU and memory billed per second after a 1-minute minimum (Compute Engine
# pricing page, "Billing model"; per-second billing since September 2017).
GCP = BillingRule(increment_s=1.0, minimum_s=60.0, name="gcp: per second, 1 minute minimum")
# Azure VMs: prorated per second; a 5-minute minimum per start is *reported* from 1 June 2025 (a
# Microsoft Q&A answer, see shared/research/energy_carbon.md section 5), not verified on a price page.
AZURE = BillingRule(
    increment_s=1.0, minimum_s=300.0, name="azure: per second, 5 minute minimum (reported)"
)
# Per started hour: EC2 SUSE, Marketplace AMIs with hourly software charges, many on-premise leases.
HOURLY = BillingRule(increment_s=3600.0, minimum_s=3600.0, name="per started hour")
# A user's own $/h without a provider: per second, no minimum.
PER_SECOND = BillingRule(increment_s=1.0, minimum_s=0.0, name="per second, no minimum")

BILLING_RULES: dict[str, BillingRule] = {"aws": AWS_LINUX, "gcp": GCP, "azure": AZURE}
# The sheet's region for each provider when the spec names none.
DEFAULT_REGIONS: dict[str, str] = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}


@dataclass(frozen=True)
class Price:
    """An instance's on-demand price, its size (for shares), and how it is billed."""

    usd_per_hour: float
    vcpus: int
    gpus: int = 0
    memory_gib: float | None = None
    rule: BillingRule = PER_SECOND
    provider: str | None = None
    instance: str | None = None
    source: str = "experiment file usd_per_hour"
    region: str | None = None
    gpu_model: str | None = None
    snapshot_date: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.usd_per_hour) and self.usd_per_hour >= 0):
            raise PriceError(f"usd_per_hour must be a number >= 0, got {self.usd_per_hour!r}")
        if self.vcpus < 1:
            raise PriceError(f"vcpus must be >= 1, got {self.vcpus!r}")
        if self.gpus < 0:
            raise PriceError(f"gpus must be >= 0, got {self.gpus!r}")
        if self.memory_gib is not None and not self.memory_gib > 0:
            raise PriceError(f"memory_gib must be > 0, got {self.memory_gib!r}")

    def describe(self) -> str:
        """One line for provenance in results."""
        what = (
            f"{self.provider}:{self.instance}" if self.instance else (self.provider or "user price")
        )
        where = f" in {self.region}" if self.region else ""
        when = f", snapshot {self.snapshot_date}" if self.snapshot_date else ""
        return f"{what}{where}: {self.usd_per_hour:g} USD/h, billed {self.rule.name} ({self.source}{when})"


def _positive(text: str, kind: type, what: str) -> Any:
    value = kind(text)
    if not value > 0 or (kind is float and not math.isfinite(value)):
        raise ValueError(f"{what} {text!r} must be > 0")
    return value


@cache
def _sheet(path: Path = PRICES_PATH) -> tuple[Price, ...]:
    prices: list[Price] = []
    with path.open(encoding="utf-8", newline="") as f:
        lines = [
            (n, line) for n, line in enumerate(f, 1) if line.strip() and not line.startswith("#")
        ]
    reader = csv.DictReader(line for _, line in lines)
    for (n, _), rec in zip(lines[1:], reader, strict=True):
        try:
            provider = rec["provider"].strip().lower()
            prices.append(
                Price(
                    usd_per_hour=_positive(rec["usd_per_hour"], float, "usd_per_hour"),
                    vcpus=_positive(rec["vcpus"], int, "vcpus"),
                    gpus=int(rec["gpus"] or 0),
                    memory_gib=_positive(rec["memory_gib"], float, "memory_gib"),
                    rule=BILLING_RULES[provider],
                    provider=provider,
                    instance=rec["instance"].strip(),
                    source=rec["source"],
                    region=rec["region"].strip(),
                    gpu_model=rec["gpu_model"] or None,
                    snapshot_date=rec["snapshot_date"],
                )
            )
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise PriceError(f"{path}:{n}: bad price row ({e})", key=None) from None
    return tuple(prices)


def price_sheet() -> tuple[Price, ...]:
    """Every row of the shipped snapshot `data/prices.csv` (a dated snapshot: verify, or override)."""
    return _sheet(PRICES_PATH)


def lookup_price(
    provider: str, instance: str, region: str | None = None, at: str = "price"
) -> Price:
    """The sheet row for an instance (case-insensitive); `region` picks one when there are several.
    An error names the key it is about under `at` (`measure.price` for the experiment file)."""
    provider = provider.strip().lower()
    if provider not in BILLING_RULES:
        raise PriceError(
            f"unknown provider {provider!r}; expected one of {', '.join(BILLING_RULES)}",
            f"{at}.provider",
        )
    rows = [p for p in price_sheet() if p.provider == provider]
    matches = [p for p in rows if (p.instance or "").lower() == instance.strip().lower()]
    if not matches:
        names = sorted({p.instance or "" for p in rows})
        lower = {n.lower(): n for n in names}
        close = [
            lower[n]
            for n in difflib.get_close_matches(
                instance.strip().lower(), list(lower), n=5, cutoff=0.5
            )
        ]
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(names)}"
        raise PriceError(
            f"instance {instance!r} is not in the {provider} price sheet; {hint} "
            "(or give usd_per_hour)",
            f"{at}.instance",
        )
    if region is not None:
        chosen = [p for p in matches if (p.region or "").lower() == region.strip().lower()]
        if not chosen:
            have = ", ".join(sorted(p.region or "" for p in matches))
            raise PriceError(
                f"no {provider} {instance} price for region {region!r}; the sheet has {have} "
                "(or give usd_per_hour)",
                f"{at}.region",
            )
        return chosen[0]
    default = [p for p in matches if p.region == DEFAULT_REGIONS[provider]]
    return (default or matches)[0]


def price_from_spec(spec: PriceSpec) -> Price:
    """Build the `Price` the experiment's `measure.price` block asks for (the schema has checked
    its keys and values; what is left is what only the price sheet knows, and its errors name
    their key under `measure.price`).

    - `{usd_per_hour: X}`: the user's price, billed per second with no minimum; `vcpus` (default:
      this machine's `os.cpu_count()`), `gpus` (default 0) and `memory_gib` size the shares.
    - `{provider, instance}` (optional `region`): the sheet row, billed by the provider's rule.
    - both: the sheet row's size and the provider's rule, at the user's `usd_per_hour`.
    - `{provider, usd_per_hour}`: the user's price, billed by the provider's rule.
    """
    sizes = {k: v for k in ("vcpus", "gpus", "memory_gib") if (v := getattr(spec, k)) is not None}
    if spec.instance is not None and spec.provider is not None:
        try:
            price = lookup_price(spec.provider, spec.instance, spec.region, at=PRICE_PATH)
        except PriceError:
            if spec.usd_per_hour is None or spec.region is None:
                raise
            # The user's price for a region the sheet lacks (as its message suggests): a type is
            # the same size in every region, so any row of it sizes the shares.
            price = replace(
                lookup_price(spec.provider, spec.instance, at=PRICE_PATH), region=spec.region
            )
        if spec.usd_per_hour is not None:
            price = replace(
                price,
                usd_per_hour=float(spec.usd_per_hour),
                source="experiment file usd_per_hour; size from the price sheet",
                snapshot_date=None,
            )
        return replace(price, **sizes) if sizes else price
    if spec.usd_per_hour is None:  # PriceSpec refuses this; a spec built without validating
        raise PriceError("give usd_per_hour, or provider and instance", PRICE_PATH)
    rule, provider = PER_SECOND, None
    if spec.provider is not None:
        provider = spec.provider.strip().lower()
        if provider not in BILLING_RULES:
            raise PriceError(
                f"unknown provider {spec.provider!r}; expected one of {', '.join(BILLING_RULES)}",
                f"{PRICE_PATH}.provider",
            )
        rule = BILLING_RULES[provider]
    return Price(
        usd_per_hour=float(spec.usd_per_hour),
        vcpus=sizes["vcpus"] if "vcpus" in sizes else (os.cpu_count() or 1),
        gpus=sizes.get("gpus", 0),
        memory_gib=sizes.get("memory_gib"),
        rule=rule,
        provider=provider,
        region=spec.region,
    )


def plan_price(spec: PlanPriceSpec) -> Price:
    """The plan's instance type as a `Price`: what its elastic cluster is billed at."""
    return Price(
        usd_per_hour=spec.usd_per_hour,
        vcpus=spec.vcpus,
        gpus=spec.gpus,
        rule=BillingRule(spec.increment_s, spec.minimum_s, spec.rule),
        provider=spec.provider,
        instance=spec.instance,
        source="the plan's instance type",
    )
