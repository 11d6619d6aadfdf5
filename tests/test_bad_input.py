"""Generated bad experiment files: each is accepted (exit 0) or refused in one line naming the
file (exit 2), never a traceback, and a refused file stores nothing.

Valid files (the examples) are mutated the ways files go wrong: a key removed, one added, a value
of the wrong type, huge, negative, NaN or infinite, nested deeply; and files that are not YAML,
not text or empty. Hypothesis counts what it tried; the examples it finds are kept between runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from basht.cli import main

EXAMPLE = yaml.safe_load(
    Path(__file__).parents[1].joinpath("examples/sleep-smoke.yaml").read_text()
)

#: Values a file may hold instead of the right one.
ODD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 10**30, 1e-300, "", "-1", "nan"]),
    st.text(max_size=20),
)
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a nested mapping (lists are values)."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            found.append((*prefix, key))
            found.extend(_paths(value, (*prefix, key)))
    return found


def _mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(EXAMPLE))  # a deep copy
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(data)
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["remove", "replace", "add"]))
        if how == "remove":
            parent.pop(path[-1], None)
        elif how == "replace":
            parent[path[-1]] = draw(ODD_VALUES)
        else:
            parent[draw(st.text(min_size=1, max_size=10))] = draw(ODD_VALUES)
    return data


def _validate(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, *args: str
) -> tuple[int, str]:
    monkeypatch.setattr("sys.argv", ["basht", *args, str(path)])
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err


def _check_outcome(path: Path, code: int, err: str) -> None:
    assert code in (0, 2), f"exit {code}: {err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"error: {path}"), lines[0]


_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(data=st.data())
def test_a_mutated_experiment_file_is_accepted_or_refused_in_one_line(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    spec = _mutated(data.draw)
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
    ],
    ids=["billion-laughs", "deep-nesting", "object-construction"],
)
def test_yaml_that_would_expand_recurse_or_build_objects_is_refused(
    text: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    code, err = _validate(path, monkeypatch, capsys, "validate")
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
