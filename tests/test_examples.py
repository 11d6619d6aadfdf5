"""Every experiment file in examples/ is valid as it is: the schema and the preflight pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from basht.bench.preflight import preflight
from basht.experiment import load_experiment

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Experiment files, not RubberBand profiles (`*-profile.yaml`) or the BSO's training script.
FILES = sorted(
    p
    for p in [*EXAMPLES.rglob("*.yaml"), *EXAMPLES.rglob("*.json")]
    if not p.stem.endswith("-profile") and "bso" not in p.relative_to(EXAMPLES).parts
)


def test_the_examples_are_found():
    names = {p.name for p in FILES}
    assert {"digits-asha.yaml", "digits-random.yaml", "legacy-grid.json", "sha-81.yaml"} <= names


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(EXAMPLES)) for p in FILES])
def test_an_example_validates_as_it_is(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # as `basht run` does: its modules are there
    experiment = load_experiment(path)
    preflight(experiment)
    assert experiment.name == path.stem  # a run's id starts with the file's name
