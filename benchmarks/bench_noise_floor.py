"""Our synthetic noise-floor experiment (C11) beside the authors' script, in one run.

    git --git-dir <mirror of hsme98/weince> show HEAD:synthetic/noise_floor_simulation.py \\
        > /tmp/official_nf.py
    python benchmarks/bench_noise_floor.py --official /tmp/official_nf.py [--replicates 12000]

Runs, each in its own process and timed by the CPU seconds the OS charges to it (user +
system, ``os.wait4``) beside its wall seconds: the authors' script (simulation, CSV and
figure), ``weince noise-floor`` (the same three), and our simulation alone. Both draw the
multinomial counts of every n in the same order from ``numpy.random.default_rng(seed)``
with the same probabilities, so at the same seed they see the same samples: the script then
compares the two CSVs column by column (largest relative difference of each MSE), which
checks the estimators as well as the clock. Without ``--official`` only ours is timed.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], cwd: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one command; raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err}")
    return wall, ru.ru_utime + ru.ru_stime


def read_csv(path: Path) -> list[dict[str, float]]:
    with path.open() as fh:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official", type=Path, help="the authors' noise_floor_simulation.py")
    ap.add_argument("--replicates", type=int, default=12_000)
    ap.add_argument("--seed", type=int, default=20260113)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_nf_"))
    py = sys.executable
    rows = []
    sim = ("from weince.evt.noise_floor import simulate_noise_floor; "
           f"simulate_noise_floor(replicates={args.replicates}, seed={args.seed})")
    rows.append(("ours: simulation only (python -c)", *timed([py, "-c", sim])))
    rows.append(("ours: weince noise-floor (simulation, CSV, figure)",
                 *timed([py, "-m", "weince.cli", "noise-floor", "--replicates",
                         str(args.replicates), "--seed", str(args.seed), "--out",
                         str(tmp / "ours")])))
    if args.official:
        rows.append(("official: noise_floor_simulation.py (simulation, CSV, figure)",
                     *timed([py, str(args.official.resolve()), "--seed", str(args.seed),
                             "--n-reps", str(args.replicates), "--out-dir",
                             str(tmp / "official")])))
    print(f"replicates per n: {args.replicates}, seed {args.seed}, "
          f"{os.cpu_count()} CPU(s) visible")
    for name, wall, cpu in rows:
        print(f"{name:<64} wall {wall:8.2f} s   CPU {cpu:8.2f} s")
    if args.official:
        ours_cpu, off_cpu = rows[1][2], rows[2][2]
        print(f"official / ours (whole command, CPU seconds): {off_cpu / ours_cpu:.0f}x; "
              f"official / our simulation alone: {off_cpu / rows[0][2]:.0f}x")
        a = read_csv(tmp / "ours" / "noise_floor.csv")
        b = read_csv(tmp / "official" / "noise_floor_results.csv")
        pairs = (("mse_weibit", "mse_lambda_weibit"), ("mse_softmax", "mse_lambda_softmax"),
                 ("theory_weibit", "weibit_theory_c_over_n"),
                 ("softmax_floor", "softmax_bias_floor"))
        for ours_key, their_key in pairs:
            rel = max(abs(x[ours_key] - y[their_key]) / abs(y[their_key]) for x, y in zip(a, b))
            print(f"largest relative difference, {ours_key:<14} vs {their_key:<24} {rel:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
