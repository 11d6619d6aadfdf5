"""Generated bad experiment files: each is accepted (exit 0) or refused in one line naming the
file (exit 2), never a traceback, and a refused file stores nothing.

Valid files (the examples) are mutated the ways files go wrong: a key removed, one added, a value
of the wrong type, huge, negative, NaN or infinite, nested deeply; and files that are not YAML,
not text or empty. Hypothesis counts what it tried; the examples it finds are kept between runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from basht.experiment import load_experiment
from tests.bad_input import check_outcome, fuzz_settings, mutated, run_cli

EXAMPLE = yaml.safe_load(
    Path(__file__).parents[1].joinpath("examples/sleep-smoke.yaml").read_text()
)


def _validate(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, *args: str
) -> tuple[int, str]:
    return run_cli(monkeypatch, capsys, *args, str(path))


def _check_outcome(path: Path, code: int, err: str) -> None:
    check_outcome(code, err, starts=path)


_SETTINGS = fuzz_settings(120)


@_SETTINGS
@given(data=st.data())
def test_a_mutated_experiment_file_is_accepted_or_refused_in_one_line(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    spec = mutated(data.draw, EXAMPLE)
    store = tmp_path / "refused.db"
    if isinstance(spec, dict):
        spec["store"] = f"sqlite:///{store}"
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    code, err = _validate(path, monkeypatch, capsys, "validate")
    _check_outcome(path, code, err)
    if code == 2:  # `basht run` refuses it the same way, before anything is stored
        code, err = _validate(path, monkeypatch, capsys, "run", "-q", "--no-plots")
        _check_outcome(path, code, err)
        assert code == 2 and not store.exists()


@_SETTINGS
@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_as_an_experiment_file_are_accepted_or_refused_in_one_line(
    content: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_bytes(content)
    code, err = _validate(path, monkeypatch, capsys, "validate")
    _check_outcome(path, code, err)
    assert code == 2  # no bytes make a whole experiment by chance


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "name: x\nspace:\n  x: {type: choice, values: [&a [1,1,1,1,1,1,1,1,1,1], "
            + ", ".join(
                f"&{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcde", "bcdef", strict=True)
            )
            + "]}\n",
            "more than 100,000 values once its YAML aliases are expanded; refused",
        ),
        ("name: " + "[" * 50_000 + "]" * 50_000 + "\n", "not valid YAML: nested too deeply"),
        ("name: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
        # Each of these once gave a traceback: a value PyYAML or Python cannot build.
        ("name: x\nseed: " + "1" * 5000 + "\n", "not valid YAML: Exceeds the limit (4300 digits)"),
        ("name: x\nseed: !!int abc\n", "not valid YAML: invalid literal for int()"),
        # Types JSON (and so the store) cannot hold.
        ("name: !!set {a}\n", "not valid YAML: tag tag:yaml.org,2002:set is not read"),
        ("name: !!binary aGk=\n", "not valid YAML: tag tag:yaml.org,2002:binary is not read"),
        ("name: !!timestamp 2024-01-01\n", "tag tag:yaml.org,2002:timestamp is not read"),
    ],
    ids=["billion-laughs", "deep-nesting", "object-construction", "5000-digits", "bad-int-tag",
         "set", "binary", "timestamp-tag"],
)  # fmt: skip
def test_yaml_that_would_expand_recurse_or_build_objects_is_refused(
    text: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    code, err = _validate(path, monkeypatch, capsys, "validate")
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_a_date_is_read_as_the_text_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """YAML reads `2024-01-01` as a date, which no key takes and the store's JSON cannot hold:
    a choice of dates once passed `basht validate` and failed the run it had stored; a date
    that is no date (`2020-13-45`) was a traceback."""
    path = tmp_path / "exp.yaml"
    spec = yaml.safe_load(yaml.safe_dump(EXAMPLE))
    spec["space"]["x"] = {"type": "choice", "values": ["@1", "@2"]}
    path.write_text(
        yaml.safe_dump(spec).replace("'@1'", "2024-01-01").replace("'@2'", "2024-01-02")
    )
    assert load_experiment(path).search_space["x"].values == ("2024-01-01", "2024-01-02")
    code, err = _validate(path, monkeypatch, capsys, "validate")
    assert code == 0, err
    path.write_text(yaml.safe_dump(EXAMPLE | {"seed": "@"}).replace("'@'", "2020-13-45"))
    code, err = _validate(path, monkeypatch, capsys, "validate")
    _check_outcome(path, code, err)
    assert code == 2 and "seed: Input should be a valid integer" in err, err
