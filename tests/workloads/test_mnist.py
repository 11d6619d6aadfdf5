"""The IDX reader/writer and the mnist-mlp workload, on small generated MNIST-shaped files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from basht.errors import WorkloadError
from basht.workloads import Workload, resolve_workload
from basht.workloads.base import Resources
from basht.workloads.mnist import FILES, MnistMLP, mnist_splits, read_idx, write_idx

ONE_CPU = Resources(cpus=1, seed=0)


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """28x28 uint8 images: class k is a bright horizontal band at rows 2k..2k+3, plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    images = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
    for i, k in enumerate(labels):
        start = 2 * int(k) + 4
        images[i, start : start + 3, 4:24] = 200 + rng.integers(0, 56, size=(3, 20))
    return images, labels


def make_mnist(directory: Path, n_train: int = 200, n_test: int = 50, gz: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    train_x, train_y = synthetic(n_train, seed=1)
    test_x, test_y = synthetic(n_test, seed=2)
    write_idx(directory / (FILES["train_images"] + suffix), train_x)
    write_idx(directory / (FILES["train_labels"] + suffix), train_y)
    write_idx(directory / (FILES["test_images"] + suffix), test_x)
    write_idx(directory / (FILES["test_labels"] + suffix), test_y)
    return directory


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "float32", "float64"])
@pytest.mark.parametrize("name", ["data-idx", "data-idx.gz"])
def test_round_trip(tmp_path: Path, dtype: str, name: str) -> None:
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((5, 3, 4)) * 100).astype(dtype)
    out = read_idx(write_idx(tmp_path / name, array))
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    assert np.array_equal(out, array)
    out[0, 0, 0] = 1  # a writable copy, not a view of the file's bytes


def test_header_is_the_mnist_format(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "labels", np.array([7, 2, 1], dtype=np.uint8))
    assert path.read_bytes() == bytes([0, 0, 0x08, 1, 0, 0, 0, 3, 7, 2, 1])
    path = write_idx(tmp_path / "floats", np.array([[1.5]], dtype=np.float32))
    assert path.read_bytes() == bytes([0, 0, 0x0D, 2, 0, 0, 0, 1, 0, 0, 0, 1]) + bytes.fromhex(
        "3fc00000"
    )


def test_gzip_is_recognised_by_content_not_name(tmp_path: Path) -> None:
    array = np.arange(12, dtype=np.int16).reshape(3, 4)
    plain = write_idx(tmp_path / "a", array).read_bytes()
    (tmp_path / "b").write_bytes(gzip.compress(plain))
    assert np.array_equal(read_idx(tmp_path / "b"), array)


def test_write_idx_rejects_unsupported_dtypes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="int64"):
        write_idx(tmp_path / "x", np.arange(3, dtype=np.int64))


def _good_bytes() -> bytes:
    return bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_good_bytes()[:-1], "truncated"),
        (_good_bytes() + b"\0", "trailing bytes"),
        (_good_bytes()[:9], "truncated header"),
        (b"\0\0", "too short"),
        (b"\x08\x03" + _good_bytes()[2:], "bad magic"),
        (bytes([0, 0, 0x07]) + _good_bytes()[3:], "data type"),
        (gzip.compress(_good_bytes(), mtime=0)[:-6], "gzip"),
    ],
    ids=lambda value: value if isinstance(value, str) else "idx",  # not by bytes that vary
)
def test_bad_file_raises_one_line_naming_the_file(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "bad-idx3-ubyte"
    path.write_bytes(content)
    with pytest.raises(WorkloadError) as info:
        read_idx(path)
    message = str(info.value)
    assert str(path) in message and problem in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such file"):
        read_idx(tmp_path / "absent")


def test_mnist_mlp_needs_a_path(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"workload\.params\.path"):
        MnistMLP(seed=0)
    with pytest.raises(WorkloadError, match=r"workload\.params\.path"):
        MnistMLP(seed=0, path=tmp_path / "nowhere")


def test_mnist_mlp_describes_its_files_without_reading_them(tmp_path: Path) -> None:
    from basht.workloads.base import about_workload

    make_mnist(tmp_path, gz=True)
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir()) / 1e6
    about = about_workload(MnistMLP(seed=0, path=str(tmp_path), limit=100, optimizer="sgd"))
    assert about == {
        "dataset": f"MNIST IDX files in {tmp_path}, the first 100 training images",
        "dataset_mb": pytest.approx(on_disk),
        "model": "MLP (PyTorch): hidden widths and dropout from the config",
        "training": "minibatch sgd on cross-entropy unless the config says otherwise",
    }
    (tmp_path / (FILES["test_labels"] + ".gz")).unlink()  # a size it cannot know is None
    assert about_workload(MnistMLP(seed=0, path=str(tmp_path)))["dataset_mb"] is None


def test_missing_mnist_file_is_named(tmp_path: Path) -> None:
    make_mnist(tmp_path)
    (tmp_path / FILES["test_labels"]).unlink()
    w = MnistMLP(seed=0, path=str(tmp_path))
    with pytest.raises(WorkloadError, match=FILES["test_labels"]):
        w.load({}, ONE_CPU)


def test_mismatched_counts_are_rejected(tmp_path: Path) -> None:
    make_mnist(tmp_path)
    write_idx(tmp_path / FILES["train_labels"], np.zeros(10, dtype=np.uint8))
    with pytest.raises(WorkloadError, match="200 images but 10 labels"):
        MnistMLP(seed=0, path=tmp_path).load({}, ONE_CPU)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_mlp_beats_chance(tmp_path: Path, gz: bool) -> None:
    assert resolve_workload("mnist-mlp") is MnistMLP
    w = MnistMLP(seed=0, path=str(make_mnist(tmp_path, gz=gz)))
    assert isinstance(w, Workload)
    w.load({"lr": 0.01, "hidden": 32, "batch_size": 16}, ONE_CPU)
    w.train(5)
    assert w.validate()["accuracy"] >= 0.6
    assert w.test()["accuracy"] >= 0.6


def test_validation_split_and_limit(tmp_path: Path) -> None:
    make_mnist(tmp_path)
    default = mnist_splits(tmp_path, 1 / 6, None)
    assert (len(default.y_train), len(default.y_val), len(default.y_test)) == (167, 33, 50)
    assert default.X_train.shape[1] == 28 * 28
    assert default.X_train.min() >= 0.0 and default.X_train.max() <= 1.0
    images, labels = synthetic(200, seed=1)
    # The validation split is the tail of the training files.
    assert np.array_equal(default.y_val, labels[167:])
    assert np.allclose(default.X_val, images[167:].reshape(33, -1) / 255.0)
    limited = mnist_splits(tmp_path, 0.25, 120)
    assert (len(limited.y_train), len(limited.y_val), len(limited.y_test)) == (90, 30, 50)
    assert np.array_equal(limited.y_val, labels[90:120])


@pytest.mark.parametrize(
    ("params", "fragment"),
    [({"validation_fraction": 1.0}, "validation_fraction"), ({"limit": 0}, "limit")],
)
def test_bad_mnist_params(tmp_path: Path, params: dict[str, float], fragment: str) -> None:
    with pytest.raises(WorkloadError, match=fragment):
        MnistMLP(seed=0, path=tmp_path, **params)


def test_mnist_pause_resume_is_bitwise_identical(tmp_path: Path) -> None:
    make_mnist(tmp_path)
    config = {"lr": 0.01, "hidden": [32, 16], "dropout": 0.1}

    def fresh() -> MnistMLP:
        w = MnistMLP(seed=0, path=tmp_path, limit=150)
        w.load(config, ONE_CPU)
        return w

    straight, first = fresh(), fresh()
    straight.train(3)
    first.train(2)
    resumed = fresh()
    resumed.load_state_dict(first.state_dict())
    resumed.train(1)
    assert resumed.validate() == straight.validate()
