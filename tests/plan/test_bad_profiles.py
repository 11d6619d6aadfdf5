"""Generated bad profiles: `basht plan --profile FILE` accepts each (and plans) or refuses it in
one line naming the file, never a traceback, and writes no plan for a refused one.

The profiles mutated are the example's (an instance from the price sheet) and one with every
optional key (an instance given as a mapping, data, power, overhead, scaling).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from basht.errors import BashtError
from basht.plan.profile import load_profile
from tests.bad_input import TINY_SHA, check_outcome, fuzz_settings, mutated, run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "examples/plan/p3-profile.yaml").read_text())
EVERY_KEY: dict[str, Any] = {
    "instance": {"usd_per_hour": 1.0, "gpus": 2, "provider": "aws", "name": "g", "vcpus": 4},
    "epoch_s": {1: [1.0, 2.0], 2: [0.6]},
    "startup_s": [1.0],
    "overhead_s": [0.5],
    "data": {"gb": 1, "usd_per_gb": 0.1},
    "power_w": {"idle": 10, "busy": 20},
    "scaling": 0.8,
    "source": "made up",
}
#: What `basht plan` may say for a profile it read, about the plan rather than the file.
ABOUT_THE_PLAN = ("meets the deadline", "job too large to plan")


def _plan(
    tmp_path: Path, profile: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> tuple[int, str]:
    """`basht plan` of the tiny SHA job with `profile`; exit 2 writes no plan."""
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(TINY_SHA))
    out = tmp_path / "plan.json"
    out.unlink(missing_ok=True)
    code, err = run_cli(
        monkeypatch, capsys, "plan", str(experiment), "--profile", str(profile),
        "--deadline", "100h", "--runs", "5", "--json", str(out),
    )  # fmt: skip
    if code == 2 and any(about in err for about in ABOUT_THE_PLAN):
        check_outcome(code, err)
    else:
        check_outcome(code, err, profile)
    assert (code == 0) == out.exists(), err
    return code, err


def _mutated_profile(data: st.DataObject, tmp_path: Path) -> Path:
    spec = mutated(data.draw, data.draw(st.sampled_from([EXAMPLE, EVERY_KEY])), lists=True)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    return path


@fuzz_settings(200)
@given(data=st.data())
def test_the_reader_accepts_a_mutated_profile_or_refuses_it_in_one_line(
    data: st.DataObject, tmp_path: Path
) -> None:
    """The reader alone, many times over (the CLI's test below has its plumbing)."""
    path = _mutated_profile(data, tmp_path)
    try:
        load_profile(path)
    except BashtError as err:
        assert "\n" not in str(err) and str(err).startswith(f"{path}: "), err


@fuzz_settings(40)
@given(data=st.data())
def test_a_mutated_profile_is_accepted_or_refused_in_one_line(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _plan(tmp_path, _mutated_profile(data, tmp_path), monkeypatch, capsys)


@fuzz_settings(40)
@given(content=st.binary(max_size=120) | st.text(max_size=120).map(str.encode))
def test_any_bytes_as_a_profile_are_refused_in_one_line(
    content: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "profile.yaml"
    path.write_bytes(content)
    code, _ = _plan(tmp_path, path, monkeypatch, capsys)
    assert code == 2  # no bytes make a whole profile by chance


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # Each of these once failed with a traceback.
        ("1: x\nsource: y\n", "1: unknown key"),  # keys of two types, sorted together
        ("instance: {usd_per_hour: 1, gpus: 1, provider: {a: 1}}\nepoch_s: {1: [1]}\n",
         "instance.provider: {'a': 1} is not one of aws, gcp, azure"),
        ("instance: {usd_per_hour: 1, gpus: 1, 2: x}\nepoch_s: {1: [1]}\n", "instance.2: unknown key"),
        ("instance: aws:p3.8xlarge\nepoch_s: {1: [1" + "0" * 400 + "]}\n",
         "epoch_s.1: expected a number, got 1000"),
        ("instance: aws:p3.8xlarge\nepoch_s: {1" + "0" * 400 + ": [1]}\n",
         "expected a whole GPU count"),
        ('instance: aws:p3.8xlarge\nepoch_s: {"a\\nb": [1]}\n',
         "epoch_s.'a\\nb': expected a whole GPU count"),
        ("instance: aws:p3.8xlarge\nepoch_s: {1: [1]}\nstartup_s: [2020-13-45]\n",
         "startup_s: expected a number, got '2020-13-45'"),
    ],
    ids=["mixed-keys", "mapping-provider", "int-key", "400-digit-seconds", "400-digit-count",
         "line-break-in-key", "not-a-date"],
)  # fmt: skip
def test_profiles_that_once_gave_a_traceback_are_one_line(
    text: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(BashtError, match="^[^\n]*$") as refused:
        load_profile(path)
    assert said in str(refused.value), refused.value
    code, err = _plan(tmp_path, path, monkeypatch, capsys)
    assert code == 2 and said in err, err
