"""RAPL on generated powercap trees: domains, wraparound, permissions, unreadable files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from basht.energy import EnergyUnavailable, RaplSource


def _zone(root: Path, name: str, label: str, energy_uj: int, max_uj: int | None = 2**32) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    if max_uj is not None:
        (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


def _set(zone: Path, energy_uj: int) -> None:
    (zone / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def server(tmp_path: Path) -> dict[str, Path]:
    """Two sockets, each with a dram sub-zone and core/uncore, and a psys zone on top."""
    root = tmp_path / "powercap"
    zones = {
        "pkg0": _zone(root, "intel-rapl:0", "package-0", 1_000_000),
        "pkg1": _zone(root, "intel-rapl:1", "package-1", 5_000_000),
        "dram0": _zone(root / "intel-rapl:0", "intel-rapl:0:0", "dram", 100_000),
        "core0": _zone(root / "intel-rapl:0", "intel-rapl:0:1", "core", 10),
        "uncore0": _zone(root / "intel-rapl:0", "intel-rapl:0:2", "uncore", 10),
        "dram1": _zone(root / "intel-rapl:1", "intel-rapl:1:0", "dram", 200_000),
        "psys": _zone(root, "intel-rapl:2", "psys", 99_000_000),
    }
    zones["root"] = root
    return zones


def test_packages_are_summed_dram_kept_apart_psys_core_uncore_left_out(server):
    rapl = RaplSource(server["root"])
    assert sorted(d.name for d in rapl.domains) == ["dram", "dram", "package-0", "package-1"]
    _set(server["pkg0"], 3_000_000)  # +2 J
    _set(server["pkg1"], 6_000_000)  # +1 J
    _set(server["dram0"], 600_000)  # +0.5 J
    _set(server["psys"], 199_000_000)  # would add 100 J if it were counted
    _set(server["core0"], 50_000_000)
    reading = rapl.read()
    assert reading.energy_j == pytest.approx({"cpu": 3.0, "dram": 0.5})


def test_a_counter_wrap_adds_the_range_once(tmp_path):
    root = tmp_path / "pc"
    pkg = _zone(root, "intel-rapl:0", "package-0", 990_000, max_uj=1_000_000)
    rapl = RaplSource(root)
    _set(pkg, 5_000)  # wrapped: 10_000 to the top, then 5_000
    assert rapl.read().energy_j["cpu"] == pytest.approx(0.015)
    _set(pkg, 25_000)
    assert rapl.read().energy_j["cpu"] == pytest.approx(0.035)
    # The poll interval keeps two wraps from falling between reads.
    assert rapl.max_interval_s() == pytest.approx(1.0 / 500 / 2)


def test_a_domain_with_an_unreadable_range_is_left_out_never_negative(tmp_path, caplog):
    root = tmp_path / "pc"
    _zone(root, "intel-rapl:0", "package-0", 1_000, max_uj=2**32)
    dram = _zone(root / "intel-rapl:0", "intel-rapl:0:0", "dram", 900, max_uj=None)
    rapl = RaplSource(root)
    assert [d.name for d in rapl.domains] == ["package-0"]
    assert "max_energy_range_uj" in caplog.text
    _set(dram, 10)  # would look like a wrap with an unknown range
    assert "dram" not in rapl.read().energy_j


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_counter_gives_a_clear_reason(tmp_path):
    root = tmp_path / "pc"
    pkg = _zone(root, "intel-rapl:0", "package-0", 1_000)
    (pkg / "energy_uj").chmod(0o000)
    with pytest.raises(EnergyUnavailable, match="root only"):
        RaplSource(root)


def test_an_unreadable_counter_as_root_is_simulated(tmp_path, monkeypatch):
    root = tmp_path / "pc"
    pkg = _zone(root, "intel-rapl:0", "package-0", 1_000)
    real = Path.read_text

    def deny(self, *args, **kwargs):
        if self == pkg / "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", deny)
    with pytest.raises(EnergyUnavailable, match="readable by root only"):
        RaplSource(root)


def test_no_powercap_is_unavailable(tmp_path):
    with pytest.raises(EnergyUnavailable, match="does not exist"):
        RaplSource(tmp_path / "absent")


def test_mmio_duplicates_are_counted_once(tmp_path):
    root = tmp_path / "pc"
    msr = _zone(root, "intel-rapl:0", "package-0", 1_000_000)
    mmio = _zone(root, "intel-rapl-mmio:0", "package-0", 1_000_000)
    rapl = RaplSource(root)
    assert len(rapl.domains) == 1
    _set(msr, 2_000_000)
    _set(mmio, 2_000_000)
    assert rapl.read().energy_j["cpu"] == pytest.approx(1.0)
