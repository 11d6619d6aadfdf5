"""Development-time builder of carbon_intensity.csv from the CodeCarbon 3.3.2 wheel (never run at run time).

Usage (from the repository root, with the wheel unpacked and pycountry importable):

    pip download codecarbon==3.3.2 --no-deps -d /tmp/cc && cd /tmp/cc && python -m zipfile -e codecarbon-3.3.2-py3-none-any.whl x
    pip download pycountry --no-deps -d /tmp/cc && python -m zipfile -e /tmp/cc/pycountry-*.whl /tmp/cc/pc
    PYTHONPATH=/tmp/cc/pc python basht/energy/data/_build_carbon_intensity.py /tmp/cc/x/codecarbon/data

pycountry (LGPL-2.1) is used here only as a tool, to map ISO 3166 alpha-3 codes to alpha-2; nothing of it
is shipped. The AWS and Azure region locations below are the providers' published region locations.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

LB_PER_MWH_TO_G_PER_KWH = 453.59237 / 1000.0  # 1 lb = 453.59237 g (exact); 1 MWh = 1000 kWh

OWID_SOURCE = "OWID carbon-intensity-electricity (Ember; Energy Institute) via CodeCarbon 3.3.2"
OWID_LICENSE = "CC BY 4.0"
EGRID_SOURCE = "EPA eGRID2023 state CO2e output rate (STC2ERTA) via CodeCarbon 3.3.2"
EGRID_LICENSE = "public domain (US EPA)"
GCP_SOURCE = (
    "Google Cloud region grid carbon intensity 2023 (region-carbon-info) via CodeCarbon 3.3.2"
)
GCP_LICENSE = "published by Google; licence not stated"

# AWS region -> where it is: a US state (ISO 3166-2 "US-XX", eGRID) or a country (alpha-3, OWID).
AWS_REGIONS: dict[str, tuple[str, str]] = {
    "us-east-1": ("US-VA", "N. Virginia"),
    "us-east-2": ("US-OH", "Ohio"),
    "us-west-1": ("US-CA", "N. California"),
    "us-west-2": ("US-OR", "Oregon"),
    "us-gov-east-1": ("US-OH", "GovCloud US-East, Ohio"),
    "us-gov-west-1": ("US-OR", "GovCloud US-West, Oregon"),
    "ca-central-1": ("CAN", "Canada Central, Montreal"),
    "ca-west-1": ("CAN", "Calgary"),
    "sa-east-1": ("BRA", "Sao Paulo"),
    "eu-central-1": ("DEU", "Frankfurt"),
    "eu-central-2": ("CHE", "Zurich"),
    "eu-west-1": ("IRL", "Ireland"),
    "eu-west-2": ("GBR", "London"),
    "eu-west-3": ("FRA", "Paris"),
    "eu-north-1": ("SWE", "Stockholm"),
    "eu-south-1": ("ITA", "Milan"),
    "eu-south-2": ("ESP", "Spain"),
    "af-south-1": ("ZAF", "Cape Town"),
    "me-south-1": ("BHR", "Bahrain"),
    "me-central-1": ("ARE", "UAE"),
    "il-central-1": ("ISR", "Tel Aviv"),
    "ap-east-1": ("HKG", "Hong Kong"),
    "ap-south-1": ("IND", "Mumbai"),
    "ap-south-2": ("IND", "Hyderabad"),
    "ap-northeast-1": ("JPN", "Tokyo"),
    "ap-northeast-2": ("KOR", "Seoul"),
    "ap-northeast-3": ("JPN", "Osaka"),
    "ap-southeast-1": ("SGP", "Singapore"),
    "ap-southeast-2": ("AUS", "Sydney"),
    "ap-southeast-3": ("IDN", "Jakarta"),
    "ap-southeast-4": ("AUS", "Melbourne"),
}

AZURE_REGIONS: dict[str, tuple[str, str]] = {
    "eastus": ("US-VA", "East US, Virginia"),
    "eastus2": ("US-VA", "East US 2, Virginia"),
    "centralus": ("US-IA", "Central US, Iowa"),
    "northcentralus": ("US-IL", "North Central US, Illinois"),
    "southcentralus": ("US-TX", "South Central US, Texas"),
    "westcentralus": ("US-WY", "West Central US, Wyoming"),
    "westus": ("US-CA", "West US, California"),
    "westus2": ("US-WA", "West US 2, Washington"),
    "westus3": ("US-AZ", "West US 3, Arizona"),
    "canadacentral": ("CAN", "Canada Central, Toronto"),
    "canadaeast": ("CAN", "Canada East, Quebec City"),
    "brazilsouth": ("BRA", "Brazil South, Sao Paulo State"),
    "northeurope": ("IRL", "North Europe, Ireland"),
    "westeurope": ("NLD", "West Europe, Netherlands"),
    "uksouth": ("GBR", "UK South, London"),
    "ukwest": ("GBR", "UK West, Cardiff"),
    "francecentral": ("FRA", "France Central, Paris"),
    "germanywestcentral": ("DEU", "Germany West Central, Frankfurt"),
    "switzerlandnorth": ("CHE", "Switzerland North, Zurich"),
    "norwayeast": ("NOR", "Norway East, Oslo"),
    "swedencentral": ("SWE", "Sweden Central, Gavle"),
    "polandcentral": ("POL", "Poland Central, Warsaw"),
    "italynorth": ("ITA", "Italy North, Milan"),
    "spaincentral": ("ESP", "Spain Central, Madrid"),
    "eastasia": ("HKG", "East Asia, Hong Kong"),
    "southeastasia": ("SGP", "Southeast Asia, Singapore"),
    "japaneast": ("JPN", "Japan East, Tokyo"),
    "japanwest": ("JPN", "Japan West, Osaka"),
    "koreacentral": ("KOR", "Korea Central, Seoul"),
    "centralindia": ("IND", "Central India, Pune"),
    "southindia": ("IND", "South India, Chennai"),
    "australiaeast": ("AUS", "Australia East, New South Wales"),
    "australiasoutheast": ("AUS", "Australia Southeast, Victoria"),
    "southafricanorth": ("ZAF", "South Africa North, Johannesburg"),
    "uaenorth": ("ARE", "UAE North, Dubai"),
    "qatarcentral": ("QAT", "Qatar Central, Doha"),
    "israelcentral": ("ISR", "Israel Central"),
}

# CodeCarbon's impact.csv spells Doha "me-cenrtal1"; Google's 2023.csv says me-central1.
GCP_REGION_FIXES = {"me-cenrtal1": "me-central1"}

HEADER = """\
# Grid carbon intensity (gCO2eq/kWh), yearly averages, one row per zone. Read by basht/energy/carbon.py.
# Built by _build_carbon_intensity.py from the CodeCarbon 3.3.2 wheel (see README.md in this folder).
# kind=country: OWID (Ember + Energy Institute), CC BY 4.0; zone = ISO 3166 alpha-3, alpha2 also accepted.
# kind=us-state: EPA eGRID2023 (public domain), zone = ISO 3166-2 code, lb/MWh * 0.45359237.
# kind=cloud: gcp = Google's own 2023 region figures; aws/azure = the value of the zone named in source.
# kind=world: generation-weighted mean of the country rows (weights: OWID total_TWh of the same year).
# CodeCarbon: Copyright (c) 2019 Mila, BCG Gamma, CometML, Haverford College;
#   Copyright (c) 2023 Code Carbon NGO. MIT License (full text in README.md).
"""

COLUMNS = ["zone", "kind", "alpha2", "alpha3", "name", "g_per_kwh", "year", "source", "license"]


def build(cc_data: Path) -> str:
    """Return the CSV text; deterministic for a given wheel."""
    import pycountry  # development-time only

    mix = json.loads((cc_data / "private_infra" / "global_energy_mix.json").read_text())
    usa = json.loads((cc_data / "private_infra" / "2023" / "usa_emissions.json").read_text())
    rows: list[dict[str, object]] = []
    country: dict[str, dict[str, object]] = {}
    for alpha3 in sorted(mix):
        rec = mix[alpha3]
        alpha2 = pycountry.countries.get(alpha_3=alpha3).alpha_2
        row = {
            "zone": alpha3,
            "kind": "country",
            "alpha2": alpha2,
            "alpha3": alpha3,
            "name": rec["country_name"],
            "g_per_kwh": round(float(rec["carbon_intensity"]), 3),
            "year": rec["year"],
            "source": OWID_SOURCE,
            "license": OWID_LICENSE,
        }
        country[alpha3] = row
        rows.append(row)

    total_twh = sum(float(r["total_TWh"]) for r in mix.values())
    world = (
        sum(float(r["carbon_intensity"]) * float(r["total_TWh"]) for r in mix.values()) / total_twh
    )
    years = sorted({int(r["year"]) for r in mix.values()})
    rows.append(
        {
            "zone": "world",
            "kind": "world",
            "alpha2": "",
            "alpha3": "",
            "name": "World (generation-weighted mean of the country rows)",
            "g_per_kwh": round(world, 1),
            "year": max(years),
            "source": f"Basht: TWh-weighted mean of the {len(mix)} country rows (years {min(years)}-{max(years)}); {OWID_SOURCE}",
            "license": OWID_LICENSE,
        }
    )

    state: dict[str, dict[str, object]] = {}
    for key in sorted(k for k in usa if not k.startswith("_") and k != "usa"):
        rec = usa[key]
        code = f"US-{rec['regionCode']}"
        row = {
            "zone": code,
            "kind": "us-state",
            "alpha2": "US",
            "alpha3": "USA",
            "name": key.title(),
            "g_per_kwh": round(float(rec["emissions"]) * LB_PER_MWH_TO_G_PER_KWH, 1),
            "year": usa["_source"]["year"],
            "source": EGRID_SOURCE,
            "license": EGRID_LICENSE,
        }
        state[code] = row
        rows.append(row)

    with (cc_data / "cloud" / "impact.csv").open(encoding="utf-8-sig") as f:
        for rec in csv.DictReader(f):
            if rec["provider"] != "gcp":
                continue
            region = GCP_REGION_FIXES.get(rec["region"], rec["region"])
            alpha3 = rec["countryIsoCode"]
            rows.append(
                {
                    "zone": f"gcp:{region}",
                    "kind": "cloud",
                    "alpha2": pycountry.countries.get(alpha_3=alpha3).alpha_2,
                    "alpha3": alpha3,
                    "name": f"GCP {region} ({rec['city']})",
                    "g_per_kwh": float(rec["impact"]),
                    "year": 2023,
                    "source": GCP_SOURCE,
                    "license": GCP_LICENSE,
                }
            )

    for provider, regions in (("aws", AWS_REGIONS), ("azure", AZURE_REGIONS)):
        for region, (where, place) in regions.items():
            base = state[where] if where.startswith("US-") else country[where]
            rows.append(
                {
                    "zone": f"{provider}:{region}",
                    "kind": "cloud",
                    "alpha2": base["alpha2"],
                    "alpha3": base["alpha3"],
                    "name": f"{provider.upper() if provider == 'aws' else 'Azure'} {region} ({place})",
                    "g_per_kwh": base["g_per_kwh"],
                    "year": base["year"],
                    "source": f"mapped by Basht to {where} ({base['name']}): {base['source']}",
                    "license": base["license"],
                }
            )

    out = io.StringIO()
    out.write(HEADER)
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


if __name__ == "__main__":
    target = Path(__file__).with_name("carbon_intensity.csv")
    target.write_text(build(Path(sys.argv[1])), encoding="utf-8")
    print(f"wrote {target}")
