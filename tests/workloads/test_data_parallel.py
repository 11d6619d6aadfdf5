"""Data-parallel training over several devices keeps the global batch: the same run as one device.

Two replicas on the CPU ("cpu", "cpu") stand in for two GPUs, so this runs on any machine.
"""

from __future__ import annotations

from typing import Any

import pytest

from basht.errors import WorkloadError
from basht.workloads.base import Resources
from basht.workloads.digits import DigitsMLP

torch = pytest.importorskip("torch")

SEED = 7
ONE = Resources(cpus=1, seed=SEED)
TWO = Resources(cpus=1, seed=SEED, devices=("cpu", "cpu"))
THREE = Resources(cpus=1, seed=SEED, devices=("cpu", "cpu", "cpu"))


def _config(batch_size: int, optimizer: str) -> dict[str, Any]:
    return {"lr": 0.01, "hidden": 32, "batch_size": batch_size, "optimizer": optimizer}


def _trained(config: dict[str, Any], resources: Resources, epochs: int) -> DigitsMLP:
    w = DigitsMLP(seed=0)
    w.load(config, resources)
    w.train(epochs)
    return w


def _continued(config: dict[str, Any], first: Resources, then: Resources) -> DigitsMLP:
    """2 epochs on `first`, then restart from the checkpoint on `then` for 2 more."""
    state = _trained(config, first, 2).state_dict()
    w = DigitsMLP(seed=0)
    w.load(config, then)
    w.load_state_dict(state)
    w.train(2)
    return w


def _assert_same_run(a: DigitsMLP, b: DigitsMLP) -> None:
    wa, wb = a.state_dict()["model"], b.state_dict()["model"]
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.allclose(wa[key], wb[key], atol=1e-5), key
    va, vb = a.validate(), b.validate()
    assert va["accuracy"] == vb["accuracy"]
    assert va["loss"] == pytest.approx(vb["loss"], abs=1e-5)
    assert a.epochs_done == b.epochs_done


def _assert_replicas_in_sync(w: DigitsMLP) -> None:
    main = dict(w._model.named_parameters())
    for replica in w._replicas[1:]:
        for name, p in replica.named_parameters():
            assert torch.equal(p, main[name]), name


def test_replicas_default_to_the_single_device() -> None:
    assert Resources().replicas == ("cpu",)
    assert Resources(device="cuda:1").replicas == ("cuda:1",)
    assert Resources(device="cuda:1", devices=["cpu", "cpu"]).replicas == ("cpu", "cpu")


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("batch_size", [32, 33])
def test_two_replicas_match_one_device(batch_size: int, optimizer: str) -> None:
    config = _config(batch_size, optimizer)
    one = _trained(config, ONE, 2)
    two = _trained(config, TWO, 2)
    _assert_same_run(one, two)
    _assert_replicas_in_sync(two)
    assert one.state_dict()["generator"].equal(two.state_dict()["generator"])


def test_more_replicas_than_samples_in_a_batch() -> None:
    config = _config(4, "adam")
    one = _trained(config, ONE, 1)
    # The last minibatch has fewer rows than there are replicas, so one shard is empty.
    assert 0 < len(one._data["train"][1]) % 4 < len(THREE.replicas)
    _assert_same_run(one, _trained(config, THREE, 1))


def test_growing_from_a_checkpoint_keeps_the_global_batch() -> None:
    config = _config(33, "adam")
    grown = _continued(config, ONE, TWO)
    _assert_replicas_in_sync(grown)
    _assert_same_run(_trained(config, ONE, 4), grown)


def test_shrinking_from_a_checkpoint_keeps_the_global_batch() -> None:
    config = _config(33, "sgd")
    _assert_same_run(_trained(config, ONE, 4), _continued(config, TWO, ONE))


def test_dropout_with_replicas_is_reproducible() -> None:
    # Masks are drawn per shard, so this need not match one device, but it is still seeded.
    config = {**_config(32, "adam"), "dropout": 0.2}
    a, b = _trained(config, TWO, 2), _trained(config, TWO, 2)
    assert a.validate() == b.validate()
    assert a.validate()["accuracy"] > 0.8


@pytest.mark.parametrize("share", [0, 0.0, -0.5, 1.5, float("nan"), "half", True])
def test_bad_device_share_is_rejected(share: Any) -> None:
    with pytest.raises(ValueError, match="device_share"):
        Resources(device_share=share)


def test_device_share_on_cpu_is_accepted() -> None:
    w = _trained(_config(32, "adam"), Resources(seed=SEED, device_share=0.5), 1)
    assert w.validate()["accuracy"] > 0.5


def test_a_bare_string_for_devices_is_rejected() -> None:
    with pytest.raises(ValueError, match="devices"):
        Resources(devices="cuda:0")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["nonsense", "cuda:7"])
def test_unusable_device_is_named(bad: str) -> None:
    if bad.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(WorkloadError, match=f"'{bad}'"):
        DigitsMLP().load({}, Resources(devices=("cpu", bad)))
