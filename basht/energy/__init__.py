"""Energy, carbon and cost: power sources, the node monitor, grid intensity, prices and billing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.energy.base import EnergySource, EnergyUnavailable, Reading
    from basht.energy.billing import (
        allocated_share,
        billed_seconds,
        billed_usd,
        job_cost_usd,
        trial_cost_usd,
    )
    from basht.energy.carbon import (
        CarbonIntensity,
        CarbonIntensityError,
        ElectricityMapsIntensity,
        StaticIntensity,
        TableIntensity,
        TimeSeriesIntensity,
        emissions_g,
        intensity_from_spec,
        mean_g_per_kwh,
    )
    from basht.energy.estimate import EstimateModel, EstimateSource
    from basht.energy.monitor import Account, EnergyMonitor, Measurement
    from basht.energy.nvml import NvmlSource
    from basht.energy.pricing import (
        BillingRule,
        Price,
        PriceError,
        lookup_price,
        price_from_spec,
        price_sheet,
    )
    from basht.energy.prometheus import PrometheusClient, PrometheusSource
    from basht.energy.rapl import RaplSource
    from basht.energy.sources import CombinedSource, open_sources

__all__ = [
    "Account",
    "BillingRule",
    "CarbonIntensity",
    "CarbonIntensityError",
    "CombinedSource",
    "ElectricityMapsIntensity",
    "EnergyMonitor",
    "EnergySource",
    "EnergyUnavailable",
    "EstimateModel",
    "EstimateSource",
    "Measurement",
    "NvmlSource",
    "Price",
    "PriceError",
    "PrometheusClient",
    "PrometheusSource",
    "RaplSource",
    "Reading",
    "StaticIntensity",
    "TableIntensity",
    "TimeSeriesIntensity",
    "allocated_share",
    "billed_seconds",
    "billed_usd",
    "emissions_g",
    "intensity_from_spec",
    "job_cost_usd",
    "lookup_price",
    "mean_g_per_kwh",
    "open_sources",
    "price_from_spec",
    "price_sheet",
    "trial_cost_usd",
]

__getattr__, __dir__ = lazy_exports(__name__)
