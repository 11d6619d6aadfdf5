"""TensorBoard: each trial's scalars and the HParams plugin's summaries, read back with
TensorBoard's own event reader and its HParams plugin's backend, as its HParams view lists them."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from basht.track import export_run
from tests.track.support import TRIALS, tracked_run, trial_kwh


@pytest.fixture(scope="module")
def tb() -> SimpleNamespace:
    """TensorBoard's readers, imported when a test runs (not at collection, which every lane
    pays)."""
    pytest.importorskip("tensorboard")
    names = {
        "context": "tensorboard.context",
        "data_provider": "tensorboard.backend.event_processing.data_provider",
        "multiplexer": "tensorboard.backend.event_processing.plugin_event_multiplexer",
        "accumulator": "tensorboard.backend.event_processing.event_accumulator",
        "base_plugin": "tensorboard.plugins.base_plugin",
        "api_pb2": "tensorboard.plugins.hparams.api_pb2",
        "backend_context": "tensorboard.plugins.hparams.backend_context",
        "list_session_groups": "tensorboard.plugins.hparams.list_session_groups",
        "metadata": "tensorboard.plugins.hparams.metadata",
    }
    return SimpleNamespace(**{k: importlib.import_module(v) for k, v in names.items()})


def session_groups(tb: SimpleNamespace, logdir: Path) -> dict[str, Any]:
    """{group name: SessionGroup} as the HParams plugin serves its view of `logdir`."""
    mux = tb.multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = tb.data_provider.MultiplexerDataProvider(mux, str(logdir))
    board = tb.base_plugin.TBContext(logdir=str(logdir), multiplexer=mux, data_provider=provider)
    api = tb.api_pb2
    request = api.ListSessionGroupsRequest(
        start_index=0,
        slice_size=100,
        allowed_statuses=[api.STATUS_SUCCESS, api.STATUS_FAILURE, api.STATUS_UNKNOWN],
    )
    handler = tb.list_session_groups.Handler(
        tb.context.RequestContext(), tb.backend_context.Context(board), "", request
    )
    return {group.name: group for group in handler.run().session_groups}


def _hparam(value: Any) -> Any:
    return getattr(value, value.WhichOneof("kind"))


def test_the_hparams_view_lists_every_trial_with_its_configuration_and_metrics(spec, tmp_path, tb):
    tracked = tracked_run(spec, tmp_path, ["tensorboard"])
    groups = session_groups(tb, tracked.results_dir / "tensorboard")
    assert sorted(groups) == [f"trial-{n:04d}" for n in range(len(TRIALS))]
    for number, (config, state, values) in enumerate(TRIALS):
        group = groups[f"trial-{number:04d}"]
        assert {k: _hparam(v) for k, v in group.hparams.items()} == config
        metrics = {m.name.tag: m.value for m in group.metric_values}
        assert metrics["energy_kwh"] == pytest.approx(trial_kwh(number), rel=1e-6)
        assert metrics["duration_s"] == pytest.approx(0.011 * len(values), rel=1e-5)
        assert metrics["cost_usd"] == 0.0
        if values:
            assert metrics["accuracy"] == pytest.approx(values[-1], rel=1e-6)
        status = tb.api_pb2.STATUS_FAILURE if state == "failed" else tb.api_pb2.STATUS_SUCCESS
        assert [s.status for s in group.sessions] == [status]


def test_scalars_per_trial_and_the_run_s_table_read_back(spec, tmp_path, tb):
    tracked = tracked_run(spec, tmp_path, ["tensorboard"])
    logdir = tracked.results_dir / "tensorboard"
    meta = tb.metadata
    first = tb.accumulator.EventAccumulator(str(logdir / "trial-0000"))
    first.Reload()
    accuracy = [(s.step, s.value) for s in first.Scalars("accuracy")]
    assert accuracy == [(e, pytest.approx(v)) for e, v in enumerate(TRIALS[0][2], 1)]
    assert "note" not in first.Tags()["scalars"]  # a report's null is no scalar
    content = first.PluginTagToContent(meta.PLUGIN_NAME)
    start = meta.parse_session_start_info_plugin_data(content[meta.SESSION_START_INFO_TAG])
    assert start.group_name == "trial-0000" and start.hparams["x"].number_value == 0.5

    top = tb.accumulator.EventAccumulator(str(logdir))
    top.Reload()
    scalars = set(top.Tags()["scalars"])
    assert {"run/TWH", "run/JCT", "phase/run_s", "phase/undeploy_s", "test/accuracy"} <= scalars
    experiment = meta.parse_experiment_plugin_data(
        top.PluginTagToContent(meta.PLUGIN_NAME)[meta.EXPERIMENT_TAG]
    )
    domains = {
        h.name: (h.domain_interval.min_value, h.domain_interval.max_value)
        for h in experiment.hparam_infos
    }
    assert domains == {"x": (-1.0, 1.0), "n": (1.0, 4.0)}
    assert {m.name.tag for m in experiment.metric_infos} >= {"accuracy", "loss", "energy_kwh"}


def test_an_export_writes_what_the_live_tracker_wrote(spec, tmp_path, tb):
    tracked = tracked_run(spec, tmp_path, ["tensorboard"])
    folder = tmp_path / "exported"
    done = export_run(tracked.store_url, "latest", "tensorboard", str(folder))
    assert done.run_id == tracked.run_id and Path(done.where) == folder
    live = session_groups(tb, tracked.results_dir / "tensorboard")
    exported = session_groups(tb, folder)
    assert sorted(live) == sorted(exported)
    for name, group in live.items():
        assert group.hparams == exported[name].hparams
        tags = {m.name.tag: m.value for m in group.metric_values}
        assert tags == {m.name.tag: m.value for m in exported[name].metric_values}
