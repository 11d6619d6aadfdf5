"""Who ran what when: a run's trials as segments on worker lanes, rebuilt from the store.

A trial row keeps its first start, its last end and the worker of its last segment; a paused and
resumed trial ran in several segments, which its pause checkpoints (epoch, time) and its per-epoch
reports (time, train and validate seconds) delimit. Segments whose worker the store does not keep
(all but a trial's last) go on the first lane free over their span, so the picture shows the
schedule and its idle gaps even where the worker of an earlier segment is not recorded.
A trial that a resumed run's interruption cut short ran again in the next attempt: the
time between the attempts is idle, not the trial's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from basht.states import TrialState

if TYPE_CHECKING:  # read in `segments` only: a Segment is drawn where the store is not imported
    from basht.store import Store

#: Gap allowed between segments on one lane: times come from different clocks and writes.
_SLACK_S = 0.05


@dataclass(frozen=True)
class Segment:
    trial: int
    lane: int
    start_s: float  # since the run phase began
    end_s: float
    # The trial's final state; "paused" for a segment that ended in a pause, "aborted" for one
    # that an interruption cut short and the resumed run ran again.
    state: str


def segments(store: Store, run_id: str, lanes: int, origin: float | None = None) -> list[Segment]:
    """Every trial segment of the run, placed on at least `lanes` worker lanes; times from
    `origin` (unix seconds), by default the run phase's start (a live view, whose run phase is
    not stored yet, passes its own)."""
    from basht.report.runstats import run_start

    if origin is None:
        origin = run_start(store, run_id)
    if origin is None:
        return []
    attempts = sorted((p.start, p.end) for p in store.phases(run_id) if p.name == "run")
    # A resumed run was down between its attempts: (when one stopped, when the next began).
    downtimes = [(a[1], b[0]) for a, b in zip(attempts, attempts[1:], strict=False)]
    reports = defaultdict(list)
    for r in store.reports(run_id):
        reports[r.trial_id].append(r)
    checkpoints = _pause_checkpoints(store, run_id)
    raw: list[tuple[int, int | None, float, float, str]] = []
    for trial in store.trials(run_id):
        if trial.started_at is None:
            continue
        own = sorted(reports[trial.id], key=lambda r: r.at)
        pauses = sorted(checkpoints[trial.id], key=lambda c: c.at)
        end = trial.ended_at or (own[-1].at if own else trial.started_at)
        load_share = trial.load_s / (len(pauses) + 1)
        start = trial.started_at
        pieces = []
        for pause in pauses:
            later = [r for r in own if r.epoch > pause.epoch and r.at > pause.at]
            if not later:  # never resumed: its last segment ended in this pause
                end = pause.at
                break
            pieces.append((trial.number, None, start, pause.at, TrialState.PAUSED))
            first = later[0]
            start = first.at - first.train_s - first.validate_s - load_share
        pieces.append((trial.number, trial.worker, start, max(end, start), trial.state))
        for piece in pieces:
            raw += _split_at_downtimes(piece, downtimes, own, load_share)
    return _place([(n, w, s - origin, e - origin, st) for n, w, s, e, st in raw], max(1, lanes))


def _pause_checkpoints(store: Store, run_id: str) -> dict[int, list[Any]]:
    """Each trial's pause checkpoints (by trial row id, in the order they were written), read in
    one query rather than one per trial: a run of hundreds of trials is drawn in a blink."""
    from sqlalchemy import select

    from basht.store import CheckpointRow, TrialRow

    query = (
        select(CheckpointRow)
        .join(TrialRow, TrialRow.id == CheckpointRow.trial_id)
        .where(TrialRow.run_id == run_id, CheckpointRow.kind == "pause")
        .order_by(CheckpointRow.id)
    )
    found: dict[int, list[Any]] = defaultdict(list)
    with store.session() as s:
        for row in s.scalars(query):
            found[row.trial_id].append(row)
    return found


def _split_at_downtimes(
    piece: tuple[int, int | None, float, float, str],
    downtimes: list[tuple[float, float]],
    reports: Sequence[Any],
    load_share: float,
) -> list[tuple[int, int | None, float, float, str]]:
    """A segment that spans a resumed run's downtime was aborted when the run stopped and run
    again in the next attempt: two segments, not one that held its worker while nothing ran."""
    number, worker, start, end, state = piece
    out: list[tuple[int, int | None, float, float, str]] = []
    for stopped, restarted in downtimes:
        if start < stopped and end > restarted:
            out.append((number, None, start, stopped, TrialState.ABORTED))
            later = [r for r in reports if r.at > restarted]
            first = later[0] if later else None
            again = first.at - first.train_s - first.validate_s - load_share if first else 0.0
            start = max(restarted, again)
    out.append((number, worker, start, end, state))
    return out


def _place(raw: list[tuple[int, int | None, float, float, str]], lanes: int) -> list[Segment]:
    taken: dict[int, list[tuple[float, float]]] = defaultdict(list)
    placed: list[Segment] = []

    def free(lane: int, start: float, end: float) -> bool:
        return all(end <= s + _SLACK_S or start >= e - _SLACK_S for s, e in taken[lane])

    for number, worker, start, end, state in sorted(raw, key=lambda r: (r[1] is None, r[2])):
        lane = worker if worker is not None and free(worker, start, end) else None
        if lane is None:
            lane = next((i for i in range(lanes) if free(i, start, end)), None)
        if lane is None:
            lane = lanes
            while not free(lane, start, end):
                lane += 1
        taken[lane].append((start, end))
        placed.append(Segment(number, lane, start, end, state))
    return sorted(placed, key=lambda s: (s.lane, s.start_s))
