"""One vocabulary for trials: states, decisions, worker commands and events."""

from __future__ import annotations

import pickle

import pytest

from basht.states import (
    ENDS_RUN,
    FINAL_STATES,
    WASTED_STATES,
    Command,
    Decision,
    EventKind,
    TrialState,
)


def test_a_state_is_the_string_the_store_keeps():
    assert TrialState.COMPLETED == "completed" and TrialState.COMPLETED == "completed"
    assert {"paused": 1}[TrialState.PAUSED] == 1  # rows read back as str find enum keys
    assert f"{TrialState.ABORTED}" == "aborted"
    assert pickle.loads(pickle.dumps(TrialState.FAILED)) is TrialState.FAILED


def test_final_and_wasted_states():
    assert (
        {s for s in TrialState if s.is_final}
        == FINAL_STATES
        == {
            "completed",
            "stopped",
            "failed",
            "aborted",
        }
    )
    assert [s for s in TrialState if s.is_wasted] == sorted(
        WASTED_STATES, key=list(TrialState).index
    )
    assert list(WASTED_STATES) == ["failed", "aborted", "stopped"]  # the experiment's default
    assert not TrialState.PAUSED.is_final  # a paused trial may still resume


@pytest.mark.parametrize(
    ("command", "ending"),
    [(Command.STOP, "stopped"), (Command.PAUSE, "paused"), (Command.COMPLETE, "completed")],
)
def test_each_ending_command_names_the_event_a_worker_sends(command, ending):
    assert command.ending == ending and command.ending.ends_run
    assert TrialState(command.ending) == ending  # and that event's kind is the trial's new state


def test_continue_ends_nothing_and_decisions_are_commands():
    with pytest.raises(KeyError):
        _ = Command.CONTINUE.ending
    assert {Command(d.value) for d in Decision} == {Command.CONTINUE, Command.PAUSE, Command.STOP}
    assert {EventKind.PAUSED, EventKind.STOPPED, EventKind.COMPLETED, EventKind.FAILED} == ENDS_RUN
    assert not EventKind.REPORT.ends_run and not EventKind.LOADED.ends_run


def test_the_experiment_default_of_wasted_states_is_the_vocabulary_s():
    from basht.experiment import MeasureSpec

    assert MeasureSpec().wasted_states == ["failed", "aborted", "stopped"]
