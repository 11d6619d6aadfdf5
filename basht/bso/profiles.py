"""A job's power-limit profiles in the database: one per batch size, and the limit chosen from it.

Only the measurements are stored; the chosen limit is computed from them with the job's knobs
whenever it is needed, so it can never disagree with its profile. All functions run inside the
caller's transaction, with the job's row locked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from basht.bso.db.schema import JobRow, PowerProfileRow
from basht.bso.jit import LimitMeasurement, cheapest_limit


async def replace(
    s: AsyncSession,
    job_id: str,
    batch_size: int,
    trial_number: int,
    measurements: Sequence[LimitMeasurement],
) -> None:
    """Make `measurements` the batch size's profile (a later profile replaces an earlier one)."""
    await s.execute(
        delete(PowerProfileRow).where(
            PowerProfileRow.job_id == job_id, PowerProfileRow.batch_size == batch_size
        )
    )
    for m in measurements:
        s.add(
            PowerProfileRow(
                job_id=job_id,
                batch_size=batch_size,
                power_limit_w=m.power_limit_w,
                time_s=m.time_s,
                energy_j=m.energy_j,
                trial_number=trial_number,
            )
        )


async def chosen_limit(s: AsyncSession, job: JobRow, batch_size: int) -> float | None:
    """The batch size's limit of least cost; None until it has a profile."""
    rows = await s.scalars(
        select(PowerProfileRow).where(
            PowerProfileRow.job_id == job.job_id, PowerProfileRow.batch_size == batch_size
        )
    )
    profile = [LimitMeasurement(r.power_limit_w, r.time_s, r.energy_j) for r in rows]
    return cheapest_limit(profile, job.eta_knob, job.max_power) if profile else None


async def state(s: AsyncSession, job: JobRow) -> list[dict[str, Any]]:
    """Each profiled batch size's chosen limit and its profile (highest limit first), for GET /jobs."""
    rows = (
        await s.scalars(
            select(PowerProfileRow)
            .where(PowerProfileRow.job_id == job.job_id)
            .order_by(PowerProfileRow.batch_size, PowerProfileRow.power_limit_w.desc())
        )
    ).all()
    out = []
    for size in sorted({r.batch_size for r in rows}):
        mine = [r for r in rows if r.batch_size == size]
        profile = [LimitMeasurement(r.power_limit_w, r.time_s, r.energy_j) for r in mine]
        out.append(
            {
                "batch_size": size,
                "power_limit": cheapest_limit(profile, job.eta_knob, job.max_power),
                "trial_number": mine[0].trial_number,
                "profile": [
                    {"power_limit": m.power_limit_w, "time": m.time_s, "energy": m.energy_j}
                    for m in profile
                ],
            }
        )
    return out


async def delete_all(s: AsyncSession, job_id: str) -> None:
    await s.execute(delete(PowerProfileRow).where(PowerProfileRow.job_id == job_id))
