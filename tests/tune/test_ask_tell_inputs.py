"""What a user writes to ask/tell: a SearchSpace, the experiment file's `space:` form or typed
parameters give the same configurations; a wrong argument fails when the algorithm is built, in
one line that names it."""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import basht.tune
from basht.errors import ArgumentError, ExperimentError
from basht.experiment import Experiment
from basht.space import Choice, Float, Int, SearchSpace
from basht.tune import (
    ASHA,
    SHA,
    AsyncHyperband,
    AsyncSuccessiveHalving,
    Decision,
    FullBudgetSearch,
    GridSampler,
    GridSearch,
    Hyperband,
    RandomSampler,
    RandomSearch,
    SynchronousHyperband,
    TPESampler,
)
from tests.conftest import BASE

# Exactly what an experiment file's `space:` block holds once read.
YAML_SPACE = yaml.safe_load(
    """
lr:         {type: float, low: 1.0e-4, high: 0.3, log: true}
hidden:     {type: int, low: 16, high: 256, log: true}
batch_size: {type: choice, values: [16, 32, 64, 128]}
dropout:    {type: float, low: 0.0, high: 0.5, step: 0.1}
layers:     {type: choice, values: [[64], [64, 32], none]}
"""
)
TYPED = {
    "lr": Float(1e-4, 0.3, log=True),
    "hidden": Int(16, 256, log=True),
    "batch_size": Choice((16, 32, 64, 128)),
    "dropout": Float(0.0, 0.5, step=0.1),
    "layers": Choice(((64,), (64, 32), "none")),
}

# A grid needs a finite space.
YAML_GRID = yaml.safe_load(
    """
hidden:  {type: int, low: 16, high: 64, step: 16}
dropout: {type: float, low: 0.0, high: 0.2, step: 0.1}
layers:  {type: choice, values: [[64], [64, 32]]}
"""
)
TYPED_GRID = {
    "hidden": Int(16, 64, step=16),
    "dropout": Float(0.0, 0.2, step=0.1),
    "layers": Choice(((64,), (64, 32))),
}

Build = Callable[..., Any]
COMMON = {"metric": "accuracy", "mode": "max", "max_trials": 20, "seed": 3}
BUDGETS = {"min_budget": 1, "max_budget": 9, "eta": 3}
# name: (builder, its arguments, whether it needs a finite space)
ALGORITHMS: dict[str, tuple[Build, dict[str, Any], bool]] = {
    "RandomSearch": (RandomSearch, {**COMMON, "max_budget": 9}, False),
    "GridSearch": (GridSearch, {"metric": "accuracy", "mode": "max", "max_budget": 9}, True),
    "FullBudgetSearch": (FullBudgetSearch, {**COMMON, "max_budget": 9, "sampler": "tpe"}, False),
    "ASHA": (ASHA, {**COMMON, **BUDGETS}, False),
    "ASHA-stopping": (ASHA, {**COMMON, **BUDGETS, "variant": "stopping"}, False),
    "AsyncHyperband": (AsyncHyperband, {**COMMON, **BUDGETS}, False),
    "AsyncSuccessiveHalving": (
        AsyncSuccessiveHalving,
        {**COMMON, **BUDGETS, "brackets": [0, 1]},
        False,
    ),
    "SHA": (SHA, {**COMMON, **BUDGETS}, False),
    "Hyperband": (Hyperband, {**COMMON, **BUDGETS}, False),
    "SynchronousHyperband": (SynchronousHyperband, {**COMMON, **BUDGETS, "shapes": [0, 1]}, False),
}
SAMPLERS: dict[str, tuple[Build, dict[str, Any], bool]] = {
    "RandomSampler": (RandomSampler, {"seed": 3}, False),
    "GridSampler": (GridSampler, {}, True),
    "TPESampler": (TPESampler, {"seed": 3, "mode": "max", "min_observations": 4}, False),
}


def _score(config: dict[str, Any]) -> float:
    return -((math.log(config["lr"]) + 5) ** 2) if "lr" in config else -config["dropout"]


def _inside(config: dict[str, Any], space: SearchSpace) -> bool:
    for name, p in space.items():
        value = config[name]
        if isinstance(p, Choice) or p.step is not None:
            inside = value in p.grid()
        else:
            whole = isinstance(value, int) or isinstance(p, Float)
            inside = whole and p.low <= value <= p.high
        if not inside:
            return False
    return list(config) == list(space)


def _drive(algo: Any, steps: int = 40) -> list[tuple[Any, ...]]:
    """The same calls to any algorithm: each suggestion reports at its budget, and completes
    when told to go on."""
    seen = []
    for _ in range(steps):
        s = algo.suggest()
        if s is None:
            break
        seen.append((s.trial_id, s.config, s.budget, s.resume))
        if algo.report(s.trial_id, s.budget, _score(s.config)) is Decision.CONTINUE:
            algo.complete(s.trial_id)
    return seen


def _spaces(finite: bool) -> dict[str, Any]:
    typed = TYPED_GRID if finite else TYPED
    return {
        "yaml": YAML_GRID if finite else YAML_SPACE,
        "typed": dict(typed),
        "mixed": {**(YAML_GRID if finite else YAML_SPACE), "hidden": typed["hidden"]},
        "by hand": SearchSpace(typed),
    }


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_algorithm_takes_the_file_form_and_typed_parameters(name):
    build, kwargs, finite = ALGORITHMS[name]
    runs = {form: _drive(build(space, **kwargs)) for form, space in _spaces(finite).items()}
    expected = runs.pop("by hand")
    assert len(expected) >= 9
    hand = SearchSpace(TYPED_GRID if finite else TYPED)
    assert all(_inside(config, hand) for _, config, _, _ in expected)
    for form, seen in runs.items():
        assert seen == expected, form


@pytest.mark.parametrize("name", SAMPLERS)
def test_every_sampler_takes_the_file_form_and_typed_parameters(name):
    build, kwargs, finite = SAMPLERS[name]

    def draws(space: Any) -> list[dict[str, Any]]:
        sampler, configs = build(space, **kwargs), []
        for _ in range(30):  # TPE: a model from the fifth result on
            config = sampler.next()
            if config is None:
                break
            configs.append(config)
            if hasattr(sampler, "observe"):
                sampler.observe(config, 1, _score(config))
        return configs

    runs = {form: draws(space) for form, space in _spaces(finite).items()}
    expected = runs.pop("by hand")
    hand = SearchSpace(TYPED_GRID if finite else TYPED)
    assert len(expected) == (hand.size if finite else 30)
    assert all(_inside(config, hand) for config in expected)
    for form, seen in runs.items():
        assert seen == expected, form


def test_the_file_form_reads_as_the_experiment_file_reads_it():
    experiment = Experiment.from_dict({**copy.deepcopy(BASE), "space": YAML_SPACE})
    assert SearchSpace.coerce(YAML_SPACE) == experiment.search_space == SearchSpace(TYPED)
    space = SearchSpace(TYPED)
    assert SearchSpace.coerce(space) is space  # checked, not copied


def test_an_asha_from_the_file_form_suggests_rather_than_failing():
    algo = ASHA(
        {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True}},
        metric="accuracy",
        max_budget=9,
    )
    s = algo.suggest()
    assert s is not None and 1e-4 <= s.config["lr"] <= 1.0


def _each(name: str, cases: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    return [
        pytest.param(name, arg, over, id=f"{name}-{arg}-{i}") for i, (arg, over) in enumerate(cases)
    ]


SPACE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("space", {"space": [("lr", Float(0.0, 1.0))]}),
    ("space", {"space": "lr"}),
    ("space", {"space": {}}),
    ("space", {"space": {"lr": {"type": "normal", "low": 0.0, "high": 1.0}}}),
    ("space", {"space": {"lr": {"low": 0.0, "high": 1.0}}}),
    ("space", {"space": {"lr": {"type": "float", "low": 1.0, "high": 0.1}}}),
    ("space", {"space": {"lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}}),
    ("space", {"space": {"lr": {"type": "float", "low": 0.0, "high": 1.0, "lgo": True}}}),
    ("space", {"space": {"lr": {"type": "float", "low": 0.0}}}),
    ("space", {"space": {"n": {"type": "int", "low": 1.5, "high": 3}}}),
    ("space", {"space": {"c": {"type": "choice", "values": []}}}),
    ("space", {"space": {"lr": Float(1.0, 0.1)}}),
    ("space", {"space": {"lr": Float(0.0, math.inf)}}),
    ("space", {"space": {"n": Int(1, 8, step=0)}}),
    ("space", {"space": {"c": Choice(())}}),
    ("space", {"space": {"lr": 0.1}}),
    ("space", {"space": SearchSpace({"lr": Float(0.0, 1.0, log=True)})}),
    ("space", {"space": {1: Float(0.0, 1.0)}}),
    ("metric", {"metric": ""}),
    ("metric", {"metric": None}),
    ("mode", {"mode": "maximize"}),
]
SEEDED = [("seed", {"seed": -1}), ("seed", {"seed": 1.5})]
TRIALS = [("max_trials", {"max_trials": 0}), ("max_trials", {"max_trials": -3})]
SAMPLER = [("sampler", {"sampler": "tpe-ish"}), ("sampler", {"sampler": 3})]
MAX = [("max_budget", {"max_budget": 0}), ("max_budget", {"max_budget": 4.5})]
RUNGS = [
    ("eta", {"eta": 1}),
    ("eta", {"eta": 2.5}),
    ("min_budget", {"min_budget": 0}),
    ("min_budget", {"min_budget": -1}),
    ("max_budget", {"max_budget": 0}),
    ("max_budget", {"min_budget": 3, "max_budget": 2}),
]
BOUNDED = [("max_budget", {"max_budget": None})]
BAD: list[Any] = [
    *_each("RandomSearch", SPACE_CASES + SEEDED + TRIALS + MAX),
    *_each("GridSearch", SPACE_CASES + TRIALS + MAX + [("space", {"space": TYPED})]),
    *_each("FullBudgetSearch", SPACE_CASES + SEEDED + TRIALS + SAMPLER + MAX + BOUNDED),
    *_each(
        "ASHA",
        SPACE_CASES
        + SEEDED
        + TRIALS
        + SAMPLER
        + RUNGS
        + [
            ("variant", {"variant": "promote"}),
            ("min_early_stopping_rate", {"min_early_stopping_rate": -1}),
        ],
    ),
    *_each("ASHA-stopping", [("max_budget", {"max_budget": None})]),
    *_each("AsyncHyperband", SPACE_CASES + SEEDED + TRIALS + SAMPLER + RUNGS + BOUNDED),
    *_each(
        "AsyncSuccessiveHalving",
        SPACE_CASES
        + SEEDED
        + RUNGS
        + [("brackets", {"brackets": []}), ("brackets", {"brackets": [-1]})],
    ),
    *_each(
        "SHA",
        SPACE_CASES
        + SEEDED
        + TRIALS
        + SAMPLER
        + RUNGS
        + BOUNDED
        + [
            ("n_configs", {"n_configs": 0}),
            ("min_early_stopping_rate", {"min_early_stopping_rate": -2}),
        ],
    ),
    *_each("Hyperband", SPACE_CASES + SEEDED + TRIALS + SAMPLER + RUNGS + BOUNDED),
    *_each(
        "SynchronousHyperband",
        SPACE_CASES
        + RUNGS
        + BOUNDED
        + [
            ("shapes", {"shapes": []}),
            ("shapes", {"shapes": "01"}),
            ("bracket_sizes", {"bracket_sizes": [9]}),
            ("bracket_sizes", {"bracket_sizes": [9, 0]}),
        ],
    ),
]


@pytest.mark.parametrize(("name", "argument", "over"), BAD)
def test_a_wrong_argument_fails_at_construction_in_one_line_naming_it(name, argument, over):
    build, kwargs, finite = ALGORITHMS[name]
    kwargs = {**kwargs, **over}
    space = kwargs.pop("space", YAML_GRID if finite else YAML_SPACE)
    with pytest.raises(ArgumentError) as raised:
        build(space, **kwargs)
    message = str(raised.value)
    assert "\n" not in message and message.split(":")[0].split(".")[0] == argument, message
    # The CLI turns it into one line; Python code that catches ValueError still does.
    assert isinstance(raised.value, ExperimentError) and isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("build", "over", "argument"),
    [
        (RandomSampler, {"seed": -1}, "seed"),
        (GridSampler, {}, "space"),  # an infinite space has no grid
        (TPESampler, {"mode": "up"}, "mode"),
        (TPESampler, {"seed": "0"}, "seed"),
        (TPESampler, {"min_observations": 0}, "min_observations"),
    ],
)
def test_a_wrong_sampler_argument_fails_at_construction(build, over, argument):
    with pytest.raises(ArgumentError, match=rf"^{argument}: "):
        build(YAML_SPACE, **over)
    with pytest.raises(ArgumentError, match=r"^space\.lr: low must be below high"):
        build({"lr": {"type": "float", "low": 1.0, "high": 0.5}})


def test_the_space_error_names_the_key_and_what_was_expected():
    cases = {
        "space.lr: low must be below high, got low=1.0 high=0.1": {
            "lr": {"type": "float", "low": 1.0, "high": 0.1}
        },
        "space.lr.type: unknown type 'normal' (expected one of: float, int, choice)": {
            "lr": {"type": "normal"}
        },
        "space.lr.lgo: unknown key (expected one of: type, low, high, log, step)": {
            "lr": {"type": "float", "low": 0.0, "high": 1.0, "lgo": True}
        },
        "space.lr.high: missing required key": {"lr": {"type": "float", "low": 0.0}},
        "space.lr: log scale needs low > 0, got low=0.0": {"lr": Float(0.0, 1.0, log=True)},
    }
    for message, space in cases.items():
        with pytest.raises(ArgumentError) as raised:
            ASHA(space, metric="accuracy", max_budget=9)
        assert str(raised.value) == message


# -- the file's rules and the Python API's never disagree ----------------------------------------

_NUMBER = st.one_of(
    st.integers(-3, 40),
    st.floats(-3.0, 40.0),
    st.sampled_from([0.0, 1e-4, math.inf, -math.inf, math.nan]),
)
_VALID = st.one_of(  # most arbitrary specs are refused: these are mostly accepted
    st.tuples(st.floats(1e-3, 10.0), st.floats(1.01, 100.0), st.booleans()).map(
        lambda t: {"type": "float", "low": t[0], "high": t[0] * t[1], "log": t[2]}
    ),
    st.tuples(st.integers(1, 50), st.integers(1, 50), st.sampled_from([None, 1, 2])).map(
        lambda t: {"type": "int", "low": t[0], "high": t[0] + t[1], "step": t[2]}
    ),
)
_SPEC = st.one_of(
    _VALID,
    st.fixed_dictionaries(
        {"type": st.just("float"), "low": _NUMBER, "high": _NUMBER},
        optional={"log": st.booleans(), "step": st.one_of(st.none(), _NUMBER)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("int"), "low": _NUMBER, "high": _NUMBER},
        optional={"log": st.booleans(), "step": st.one_of(st.none(), st.integers(-1, 5))},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("choice"),
            "values": st.lists(
                st.one_of(
                    st.integers(), st.text(max_size=3), st.lists(st.integers(0, 9), max_size=2)
                ),
                max_size=3,
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["normal", "list", ""]), "low": _NUMBER},
        optional={"lgo": st.booleans()},
    ),
)


def _typed(spec: dict[str, Any]) -> Any:
    """The spec as a typed parameter, where it is one (a known type without other keys)."""
    fields = {k: v for k, v in spec.items() if k != "type"}
    if spec["type"] == "choice":
        return Choice(tuple(fields["values"]))
    kind = {"float": Float, "int": Int}.get(spec["type"])
    if kind is None or not set(fields) <= {"low", "high", "log", "step"}:
        return None
    return kind(**fields)


@settings(max_examples=150, deadline=None)
@given(specs=st.lists(_SPEC, min_size=1, max_size=3))
def test_the_file_and_the_python_api_accept_and_refuse_the_same_spaces(specs):
    space = {f"p{i}": spec for i, spec in enumerate(specs)}
    try:
        from_file = Experiment.from_dict({**copy.deepcopy(BASE), "space": space}).search_space
        file_error = None
    except ExperimentError as err:
        from_file, file_error = None, str(err)
    try:
        coerced, error = SearchSpace.coerce(space), None
    except ArgumentError as err:
        coerced, error = None, str(err)
    assert (file_error is None) == (error is None), (file_error, error)
    if error is not None:
        assert file_error is not None
        key = error.split(":")[0].split(".")[1]  # the same first bad parameter
        assert file_error.startswith(f"<experiment>: space.{key}"), (file_error, error)
    else:
        assert coerced == from_file
        assert SearchSpace.coerce(dict(coerced)) == coerced  # typed parameters read back alike
    for name, spec in space.items():
        typed = _typed(spec)
        if typed is None:
            continue
        try:
            SearchSpace.coerce({name: spec})
            dict_ok = True
        except ArgumentError:
            dict_ok = False
        try:
            SearchSpace.coerce({name: typed})
            typed_ok = True
        except ArgumentError:
            typed_ok = False
        assert dict_ok == typed_ok, spec


# -- the package's modules import one way ---------------------------------------------------------


def test_the_tuning_modules_import_one_another_without_a_circle():
    package = Path(basht.tune.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        if path.stem == "__init__":
            continue
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports too
            if isinstance(node, ast.ImportFrom) and node.module:
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[f"basht.tune.{path.stem}"] = deps
    for module in graph:
        graph[module] &= set(graph)
    assert "basht.tune.tpe" not in graph["basht.tune.samplers"]

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        for dep in graph[module]:
            visit(dep, (*path, module))

    for module in graph:
        visit(module, ())
