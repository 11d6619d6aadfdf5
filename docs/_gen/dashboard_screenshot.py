"""Take the dashboard screenshot of docs/how-to/dashboard.md: a real run, watched while it runs.

    python docs/_gen/dashboard_screenshot.py [--out docs/assets/dashboard.png]

Runs examples/digits-energy.yaml (two objectives: accuracy against training energy) with an
energy and a carbon budget, in a scratch folder, serves `basht dashboard` on its store, and
shoots the run's page in headless Chromium once most of its trials have started. Needs the
`test` extra (Playwright) and a Chromium on the PATH; takes about half a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.dashboard.browser import chromium  # noqa: E402
from tests.tools import find_tool  # noqa: E402

#: Shot once this many of the run's 60 trials have started: fronts and budgets half-way.
TRIALS = 36
WAIT_S = 300.0


def _until(what: str, check, wait_s: float = WAIT_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise SystemExit(f"gave up waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "dashboard.png")
    args = parser.parse_args()
    executable = find_tool("chromium")
    if executable is None:
        raise SystemExit("needs Chromium (apt-get install chromium)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BASHT_PLOTS": "0"}
    with tempfile.TemporaryDirectory(prefix="basht-shot-") as scratch:
        cwd = Path(scratch)
        spec = yaml.safe_load((ROOT / "examples" / "digits-energy.yaml").read_text())
        spec["search"].update(energy_budget_kwh=0.0001, carbon_budget_g=0.04)
        spec["store"] = f"sqlite:///{cwd / 'basht.db'}"
        (cwd / "digits-energy.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        basht = [sys.executable, "-m", "basht.cli"]
        run = subprocess.Popen(
            [*basht, "run", "-q", "digits-energy.yaml"], cwd=cwd, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log = cwd / "dashboard.log"
        dashboard = None
        try:
            _until("the run's store", lambda: (cwd / "basht.db").exists() or run.poll() is not None)
            time.sleep(1.0)  # its tables
            dashboard = subprocess.Popen(
                [*basht, "dashboard", "--store", spec["store"], "--port", "0"], cwd=cwd, env=env,
                stdout=log.open("w"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            found = _until("the dashboard", lambda: re.search(r"http://\S+/", log.read_text()))
            url = found.group(0)
            with chromium(executable, width=1280, height=900) as (page, _):
                page.goto(url)
                page.wait_for_selector("tr[data-run] a")
                page.click("tr[data-run] a")
                page.wait_for_selector("#trial-count")

                def far_enough() -> bool:
                    status = page.evaluate("document.body.dataset.status")
                    if status != "running":
                        raise SystemExit(f"the run ended ({status}) before the shot: run again")
                    count = page.evaluate("document.querySelector('#trial-count').textContent")
                    return int(count) >= TRIALS

                _until(f"{TRIALS} trials", far_enough)
                page.mouse.move(0, 0)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out), full_page=True)
            print(f"wrote {args.out}")
        finally:
            if dashboard is not None:
                dashboard.send_signal(signal.SIGINT)
                dashboard.wait(timeout=30)
            run.send_signal(signal.SIGINT)
            run.wait(timeout=60)


if __name__ == "__main__":
    main()
