"""Record what Zeus chooses on the trace, as golden data for Basht's tests.

Writes `tests/bso/data/zeus_golden.json`: for each (workload, GPU, seed), the batch size of every
run and the cumulative cost produced by

* `zeus_server`: Zeus's own BSO server code driven by Zeus's own harness (zeus_server_sim.py), and
* `zeus_legacy`: Zeus's legacy simulator, `PruningGTSBatchSizeOptimizer` (zeus_legacy_sim.py),

both at the highest power limit. `tests/bso/test_simulate.py` replays the same cases against our
server with the same harness and expects exactly Zeus's server's batch sizes and cost. Needs the
Zeus venvs (made on first use, see zeus_venv.py); the tests themselves do not.

    python benchmarks/zeus_golden.py [--recurrences 50] [--seeds 1 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from zeus_venv import ZEUS_VERSION, zeus_python  # noqa: E402

from basht.bso.trace import DATA, WORKLOADS, TraceJob  # noqa: E402

OUT = ROOT / "tests" / "bso" / "data" / "zeus_golden.json"


def run_zeus(
    script: str,
    python: Path,
    trace: TraceJob,
    seed: int,
    recurrences: int,
    *extra: str,
) -> dict[str, object]:
    """One run of `script` (zeus_legacy_sim.py or zeus_server_sim.py) in a Zeus venv."""
    w = trace.workload
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "legacy.json"
        subprocess.run(
            [
                str(python),
                str(Path(__file__).resolve().parent / script),
                "--trace-dir",
                str(DATA),
                "--dataset",
                w.dataset,
                "--network",
                w.network,
                "--optimizer",
                w.optimizer,
                "--target-metric",
                str(w.target_metric),
                "--max-epochs",
                str(w.max_epochs),
                "--default-bs",
                str(trace.default_batch_size),
                "--gpu",
                trace.gpu,
                "--seed",
                str(seed),
                "--recurrences",
                str(recurrences),
                "--out",
                str(out),
                *extra,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recurrences", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--gpu", default="v100")
    args = parser.parse_args()
    client_python = zeus_python("client")
    server_python = zeus_python("server")
    cases = []
    for name in WORKLOADS:
        trace = TraceJob(name, args.gpu)
        for seed in args.seeds:
            case: dict[str, object] = {
                "workload": name,
                "gpu": args.gpu,
                "seed": seed,
                "recurrences": args.recurrences,
            }
            runs = {
                "zeus_server": run_zeus(
                    "zeus_server_sim.py", server_python, trace, seed, args.recurrences
                ),
                "zeus_legacy": run_zeus(
                    "zeus_legacy_sim.py",
                    client_python,
                    trace,
                    seed,
                    args.recurrences,
                    "--plo",
                    "max",
                ),
            }
            for key, out in runs.items():
                if "error" in out:
                    case[key] = {"error": out["error"]}
                else:
                    sizes = [r["batch_size"] for r in out["runs"]]  # type: ignore[attr-defined]
                    case[key] = {"batch_sizes": sizes, "cost": out["cost"]}
            cases.append(case)
            same = case["zeus_server"] == case["zeus_legacy"]
            print(name, seed, "server and legacy agree" if same else "server and legacy differ")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"zeus": ZEUS_VERSION, "power_limit": "highest", "cases": cases}, indent=1)
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
