"""How good `weince progress`'s ETA is: a smoke run in a fresh copy of the workflow, polled
while it runs, then each poll's ETA (every job left, evaluation jobs included:
weince.cost.progress.jobs_left) against the wall time that was actually left.

    python benchmarks/progress_eta.py [--every 15] [--keep DIR]

The run's total time is known only at its end, so the script polls every ``--every``
seconds and then reads five evenly spaced polls (the ones nearest 1/6, 2/6, ... 5/6 of the
run's wall time); it prints each one's ETA, the time that was left and their ratio, and
exits 1 unless the first ratio lies within 3x and the last four within 1.5x (the bound
docs/cluster.md states). A poll is a dry run of the target (seconds), which loads the
machine the run shares: the ratios include that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from weince.cost.plan import load_profile
from weince.cost.progress import eta_seconds, incomplete_marks, jobs_left

REPO = Path(__file__).resolve().parents[1]
CONFIG = ["config/smoke.yaml"]


def _copy(dest: Path) -> Path:
    for name in ("Snakefile",):
        shutil.copy2(REPO / name, dest / name)
    for name in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / name, dest / name)
    return dest


def _poll(wf: Path) -> float | None:
    prof = load_profile([str(wf / c) for c in CONFIG])
    cwd = os.getcwd()
    os.chdir(wf)                  # the profile's results are relative to the run folder
    try:
        return eta_seconds(jobs_left(prof, CONFIG, None, wf, incomplete_marks(wf)))
    finally:
        os.chdir(cwd)


def ratios(polls: list[tuple[float, float | None]], total: float) -> list[tuple]:
    """(t, ETA, left, ratio) of the five polls nearest k/6 of ``total`` (k = 1..5)."""
    out = []
    for k in range(1, 6):
        t, eta = min(polls, key=lambda p: abs(p[0] - k * total / 6))
        left = total - t
        ratio = None if eta is None or eta <= 0 or left <= 0 else max(eta / left, left / eta)
        out.append((t, eta, left, ratio))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=15.0, help="seconds between polls")
    ap.add_argument("--keep", help="run in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    tmp = None if args.keep else tempfile.mkdtemp(prefix="weince-eta-")
    wf = _copy(Path(args.keep or tmp))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0, c0 = time.monotonic(), time.process_time()
    run = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                            *CONFIG], cwd=wf, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    polls: list[tuple[float, float | None]] = []
    while run.poll() is None:
        time.sleep(args.every)
        if run.poll() is None:
            polls.append((time.monotonic() - t0, _poll(wf)))
    total = time.monotonic() - t0
    if run.returncode != 0 or not polls:
        print(f"the smoke run failed (exit {run.returncode}) or ended before a poll: {wf}")
        return 1
    print(f"smoke run: {total:.0f} s wall; {len(polls)} polls every {args.every:.0f} s "
          f"(this script's own CPU time {time.process_time() - c0:.0f} s)")
    print("poll  at (s)  ETA (s)  left (s)  ratio")
    rows = ratios(polls, total)
    for i, (t, eta, left, r) in enumerate(rows, 1):
        print(f"{i:>4}  {t:6.0f}  {'-' if eta is None else f'{eta:7.0f}'}  {left:8.0f}  "
              f"{'-' if r is None else f'{r:.2f}'}")
    ok = rows[0][3] is not None and rows[0][3] <= 3.0 and all(
        r is not None and r <= 1.5 for *_, r in rows[1:])
    print("within 3x at the first poll and 1.5x at the last four:", "yes" if ok else "no")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
