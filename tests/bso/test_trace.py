"""The bundled Zeus trace: the jobs Zeus simulates, priced and sampled the way Zeus does."""

from __future__ import annotations

import numpy as np
import pytest

from basht.bso.errors import BSOError
from basht.bso.trace import GPUS, WORKLOADS, TraceJob


def test_librispeech_on_v100_is_zeus_run_single_default_job():
    trace = TraceJob("librispeech", "v100")
    assert trace.default_batch_size == 192  # min(256, the largest size measured on a V100)
    assert trace.batch_sizes[0] == 2 and trace.batch_sizes[-1] == 192
    assert trace.max_power_w == 250.0
    epoch = trace.epoch(192)
    assert epoch.energy_j == pytest.approx(epoch.time_s * 250.0, rel=0.5)
    assert trace.power_limit_w(192) == 250.0


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_is_replayable_on_every_gpu(name, gpu):
    trace = TraceJob(name, gpu)
    assert trace.default_batch_size in trace.batch_sizes
    assert all(trace.paths(b) for b in trace.batch_sizes)
    assert any(p is not None for p in trace.paths(trace.default_batch_size))


def test_sampling_is_zeus_dataframe_sample():
    """pandas' df.sample(n=1, random_state=rng) is rng.choice(len(df), size=1, replace=False)."""
    trace = TraceJob("cifar100", "v100")
    paths = trace.paths(1024)
    rng, ref = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(20):
        assert (
            trace.sample_path(1024, rng)
            == paths[int(ref.choice(len(paths), size=1, replace=False)[0])]
        )


def test_unknown_workloads_and_gpus_are_named():
    with pytest.raises(BSOError, match="expected one of cifar100"):
        TraceJob("mnist", "v100")
    with pytest.raises(BSOError, match="expected one of v100"):
        TraceJob("squad", "h100")
