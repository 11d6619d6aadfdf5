"""Checkpoint files: owner-only, atomic, tensors read without unpickling objects, and refused
where someone else could have written them."""

from __future__ import annotations

import os
import pickle
import stat
from collections import OrderedDict

import pytest
import torch

from basht.engine.checkpoints import UnsafeCheckpoint, load_state, save_state
from tests.engine.checkpoint_objects import Boom


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_model_state_is_written_owner_only_with_torch_and_read_back_weights_only(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = {
        "model": OrderedDict(model.state_dict()),
        "optimizer": optimizer.state_dict(),
        "hparams": {"hidden": (8, 4), "lr": 0.1, "name": "mlp"},
        "epochs": 3,
    }
    path = tmp_path / "run" / "checkpoints" / "t1.pkl"
    save_state(state, path)

    assert path.read_bytes()[:2] == b"PK"  # torch.save's zip, not a bare pickle
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    loaded = load_state(path)
    assert torch.equal(loaded["model"]["weight"], model.weight)
    assert loaded["hparams"] == state["hparams"] and loaded["epochs"] == 3
    assert not list(path.parent.glob("*.tmp"))


def test_a_state_of_other_objects_is_pickled(tmp_path):
    path = tmp_path / "c.pkl"
    save_state({"estimator": {1, 2}, "generator": {"state": 7}}, path)
    assert path.read_bytes()[:1] == b"\x80"
    assert load_state(path) == {"estimator": {1, 2}, "generator": {"state": 7}}


def test_a_torch_file_holding_an_object_is_not_built(tmp_path):
    """A torch checkpoint someone crafted to build an object on load gets no further."""
    path = tmp_path / "c.pkl"
    with open(path, "wb") as f:
        torch.save({"w": torch.ones(1), "evil": Boom()}, f)
    os.chmod(path, 0o600)
    with pytest.raises(pickle.UnpicklingError):
        load_state(path)
    assert not Boom.built


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_checkpoint_others_can_write_is_refused_in_one_line(tmp_path, where):
    folder = tmp_path / "checkpoints"
    path = folder / "t1.pkl"
    save_state({"w": 1}, path)
    os.chmod(path if where == "file" else folder, 0o777 if where == "folder" else 0o662)
    with pytest.raises(UnsafeCheckpoint) as refused:
        load_state(path)
    message = str(refused.value)
    assert "\n" not in message
    assert "writable by others" in message and str(path if where == "file" else folder) in message


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user takes root")
def test_a_checkpoint_another_user_owns_is_refused(tmp_path):
    path = tmp_path / "t1.pkl"
    save_state({"w": 1}, path)
    os.chown(path, 65534, 65534)
    with pytest.raises(UnsafeCheckpoint, match="belongs to another user"):
        load_state(path)


def test_a_state_that_cannot_be_written_leaves_nothing(tmp_path):
    path = tmp_path / "c.pkl"
    with pytest.raises((AttributeError, TypeError, pickle.PicklingError)):
        save_state({"f": lambda: 1}, path)
    assert list(tmp_path.iterdir()) == []
