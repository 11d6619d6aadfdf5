"""`basht export RUN --to TRACKER`: a stored run written to a tracker; bad arguments are one line
and exit code 2, never a traceback."""

from __future__ import annotations

import pytest

from tests.bad_input import check_outcome, run_cli
from tests.track.support import TRIALS, tracked_run


def test_a_stored_run_is_exported_by_a_prefix_of_its_id(spec, tmp_path, monkeypatch, capsys):
    tracked = tracked_run(spec, tmp_path, [])
    folder = tmp_path / "tb"
    args = ["export", tracked.run_id[:12], "--to", "tensorboard", "--uri", str(folder)]
    code, _ = run_cli(monkeypatch, capsys, *args, "--store", tracked.store_url)
    assert code == 0
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        f"trial-{n:04d}" for n in range(len(TRIALS))
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["latest", "--to", "comet"], ["--to: 'comet' is not a tracker", "mlflow, tensorboard"]),
        (["nope", "--to", "tensorboard"], ["no run matching 'nope'"]),
        (
            ["latest", "--to", "mlflow", "--uri", "http://127.0.0.1:9"],
            ["--to mlflow", "127.0.0.1:9"],
        ),
    ],
)
def test_bad_arguments_are_one_line(spec, tmp_path, monkeypatch, capsys, args, named):
    tracked = tracked_run(spec, tmp_path, [])
    code, err = run_cli(monkeypatch, capsys, "export", *args, "--store", tracked.store_url)
    assert code == 2
    check_outcome(code, err, *named)


def test_a_store_with_no_run_is_one_line(tmp_path, monkeypatch, capsys):
    store = f"sqlite:///{tmp_path / 'none.db'}"
    code, err = run_cli(monkeypatch, capsys, "export", "latest", "--to", "wandb", "--store", store)
    assert code == 2
    check_outcome(code, err, "none.db")
    assert not (tmp_path / "none.db").exists()
