"""Run Zeus's own BSO server code on the trace, driven by Zeus's own harness, and write JSON.

Runs INSIDE a Zeus virtual environment with `zeus[bso,bso-server]`, aiosqlite and greenlet. It is
Zeus's test setup (`tests/optimizer/batch_size/test_simulator.py`, shipped in the zeus wheel): the
FastAPI app in-process with a SQLite database, `SimulatorWithServer` from the wheel's tests as the
client, httpx routed to the app's TestClient. Two changes, both stated here:

* the power limit optimizer always answers the batch size's highest power limit (Basht optimizes
  the batch size only);
* Zeus's fix of its seeded generator (commit a678f4e, after 0.16.0: store
  `rng.bit_generator.state`, not `rng.__getstate__()`, which is None under numpy 2) is applied by
  wrapping `default_rng` in the two modules that store the state. Without it 0.16.0's seeded jobs
  are not reproducible at all.

    python zeus_server_sim.py --trace-dir DIR --dataset cifar100 ... --out result.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

_tmp = tempfile.mkdtemp(prefix="zeus-bso-")
os.environ["ZEUS_BSO_DATABASE_URL"] = f"sqlite+aiosqlite:///{_tmp}/zeus.db"
os.environ.setdefault("ZEUS_BSO_LOG_LEVEL", "WARNING")


class _StatefulGenerator(np.random.Generator):
    """numpy 2's Generator.__getstate__ returns None; this one returns what Zeus HEAD stores."""

    def __getstate__(self):  # type: ignore[override]
        return self.bit_generator.state


def _numpy_with_fixed_rng() -> types.SimpleNamespace:
    random = types.SimpleNamespace(
        **{k: getattr(np.random, k) for k in dir(np.random) if not k.startswith("__")}
    )
    random.default_rng = lambda seed=None: _StatefulGenerator(np.random.PCG64(seed))
    proxy = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    proxy.random = random
    return proxy


def main() -> None:
    import asyncio

    import httpx
    import pandas as pd
    from fastapi.testclient import TestClient
    from tests.optimizer.batch_size.simulate_with_server import SimulatorWithServer
    from zeus._legacy.job import Job
    from zeus._legacy.policy import PowerLimitOptimizer
    from zeus.optimizer.batch_size.server.database.db_connection import (
        DatabaseSessionManager,
        get_db_session,
    )
    from zeus.optimizer.batch_size.server.database.schema import Base
    from zeus.optimizer.batch_size.server.job import commands as job_commands
    from zeus.optimizer.batch_size.server.router import app
    from zeus.optimizer.batch_size.server.services import service as zeus_service
    from zeus.utils.metric import zeus_cost

    fixed_np = _numpy_with_fixed_rng()
    job_commands.np = fixed_np  # CreateJob.from_job_config stores the first state
    zeus_service.np = fixed_np  # _get_generator / get_random_choices / get_normal

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--network", required=True)
    parser.add_argument("--optimizer", required=True)
    parser.add_argument("--target-metric", type=float, required=True)
    parser.add_argument("--max-epochs", type=int, required=True)
    parser.add_argument("--default-bs", type=int, required=True)
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recurrences", type=int, default=50)
    parser.add_argument("--eta", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=2.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    class HighestPowerLimit(PowerLimitOptimizer):
        def __init__(self, limits: dict[int, int]) -> None:
            self.limits = limits

        @property
        def name(self) -> str:
            return "HighestPowerLimit"

        def predict(self, job: Job, batch_size: int) -> int | None:
            return int(self.limits[batch_size])

        def observe(self, job: Job, batch_size: int, power_limit: int, cost: float) -> None:
            return None

    sessions = DatabaseSessionManager(os.environ["ZEUS_BSO_DATABASE_URL"], {"echo": False})

    async def create_tables() -> None:
        async with sessions._engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)

    async def override_db_session():  # type: ignore[no-untyped-def]
        async with sessions.session() as session:
            yield session

    asyncio.run(create_tables())
    app.dependency_overrides[get_db_session] = override_db_session

    train_df = pd.read_csv(args.trace_dir / "summary_train.csv")
    power_df = pd.read_csv(args.trace_dir / f"summary_power_{args.gpu}.csv")
    job = Job(
        args.dataset,
        args.network,
        args.optimizer,
        args.target_metric,
        args.max_epochs,
        args.default_bs,
    )
    mine = power_df.loc[
        (power_df.dataset == job.dataset)
        & (power_df.network == job.network)
        & (power_df.optimizer == job.optimizer)
    ]
    plo = HighestPowerLimit(mine.groupby("batch_size").power_limit.max().to_dict())
    out: dict[str, object] = {}
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        with TestClient(app) as client:
            httpx.post, httpx.get, httpx.patch = client.post, client.get, client.patch
            sim = SimulatorWithServer(
                train_df, power_df, plo, args.gpu, seed=args.seed, verbose=False
            )
            max_power = sim.df.power_limit.max().item()
            history = sim.simulate_one_job(job, args.recurrences, args.beta, args.eta)
        out["runs"] = [
            {
                "batch_size": int(h.bs),
                "energy_j": float(h.energy),
                "time_s": float(h.time),
                "converged": bool(h.reached),
                "cost": float(zeus_cost(h.energy, h.time, args.eta, max_power)),
            }
            for h in history
        ]
        out["cost"] = sum(r["cost"] for r in out["runs"])  # type: ignore[index]
    except Exception as err:
        out["error"] = f"{type(err).__name__}: {err}"
    finally:
        sys.stdout = real_stdout
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
