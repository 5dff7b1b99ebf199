"""``weince progress``: how far a profile's campaign is, read from its files while it runs
(weince.cost.progress; docs/cluster.md, "How far is it").

    weince progress --configfile config/smoke.yaml
    weince progress --configfile config/paper.yaml --target reports/paper/table_c3.md
    weince progress --markdown > progress.md

Per claim and overall: training runs planned, finished, running, stopped, failed, not
started and blocked (a manual step named), the jobs left and the failed jobs, the
device-hours spent beside the forecast of the same runs, the ETA of every job left
(evaluation jobs included, from a dry run of the target) and of the training runs at the
measured rate, and every failed job with its whole reason and log. It reads
files only (no lock), so it runs beside a live Snakemake; run it from the folder Snakemake
runs in (its ``.snakemake/``).
"""

from __future__ import annotations

import argparse

from weince.cost.plan import claim_of_target, load_profile
from weince.cost.progress import progress, progress_text

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", nargs="*", default=["config/paper.yaml"],
                   help="config file(s) of the profile (default: config/paper.yaml)")
    p.add_argument("--target", help="only the runs of one claim's table, e.g. "
                   "reports/paper/table_c3.md")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    p.add_argument("--no-jobs", dest="jobs", action="store_false",
                   help="count training runs only: no dry run of the target for its jobs left "
                        "(faster; the ETA then leaves out evaluation jobs; default: count "
                        "every job)")
    p.add_argument("--no-sacct", dest="sacct", action="store_false",
                   help="do not ask SLURM's sacct for job states, even where it exists "
                        "(default: ask where sacct is installed)")


def main(args: argparse.Namespace) -> int:
    prof = load_profile(args.configfile)
    claim = None
    if args.target:
        claim = claim_of_target(args.target, prof)
        if claim is None:
            raise ValueError(f"--target {args.target}: give a claim's table "
                             f"(reports/{prof.name}/table_c3.md)")
    p = progress(prof, claim=claim, use_sacct=args.sacct, configfiles=args.configfile,
                 target=args.target, count_jobs=args.jobs)
    print(progress_text(p, "github" if args.markdown else "simple"), end="")
    return 0
