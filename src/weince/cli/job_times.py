"""``weince job-times``: where a finished run spent its time, per rule (its benchmark files).

    weince job-times                                  # the embedded default: results/default
    weince job-times --profile smoke
    weince job-times --results /scratch/r --profile paper --jobs 10

Every rule of the workflow has a ``benchmark:`` file per job
(``results/<profile>/benchmarks/``); this prints jobs, total, mean and longest wall seconds
and peak memory per rule, the most expensive rule first, and the slowest jobs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from weince.cost.job_times import job_times, per_rule

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", help="results root (default: results)")
    p.add_argument("--profile", default="default", help="profile name (default: default)")
    p.add_argument("--jobs", type=int, default=5, metavar="N",
                   help="also list the N slowest jobs (default 5; 0: none)")


def main(args: argparse.Namespace) -> int:
    folder = Path(args.results) / args.profile / "benchmarks"
    times = job_times(folder)
    if not times:
        cmd = "snakemake --cores 2" + ("" if args.profile == "default"
                                       else f" --configfile config/{args.profile}.yaml")
        raise FileNotFoundError(f"no benchmark files in {folder}: run the workflow first "
                                f"(`{cmd}`), or pass --results / --profile")
    rules = per_rule(times)
    total = sum(r.total_s for r in rules)
    print(tabulate([[r.rule, r.jobs, r.total_s, 100 * r.total_s / total, r.mean_s, r.max_s,
                     r.max_rss_mb] for r in rules],
                   headers=["rule", "jobs", "total s", "% of total", "mean s", "max s",
                            "peak MB"], floatfmt=("", "", ".1f", ".0f", ".2f", ".2f", ".0f"),
                   missingval="-"))
    print(f"\n{len(times)} jobs, {total:.0f} s of job time in {folder} (on 2 cores at "
          f"least {total / 2:.0f} s of wall time, planning and idle cores not counted)")
    if args.jobs > 0:
        slow = sorted(times, key=lambda t: -t.seconds)[:args.jobs]
        print()
        print(tabulate([[t.job, t.seconds] for t in slow], headers=["slowest jobs", "s"],
                       floatfmt=("", ".2f")))
    return 0
