"""``weince status``: every claim, where a verdict can come from, and the verdict each
profile's last run computed (the README's claims table, from the reference run committed in
``reference/``); after a run of your own, where its verdicts and numbers differ from the
reference.

    weince status                        # your runs' table; where they differ from the reference
    weince status --readme README.md     # rewrite the README's block (the reference's table)
    weince status --readme README.md --check   # exit 1 when it or the reference is out of date
    weince status --update-reference --readme README.md   # after `snakemake --cores 2`
    weince status --verdicts docs/verdicts.md  # rewrite the rules page's generated blocks
"""

from __future__ import annotations

import argparse

from weince.report.reference import (REFERENCE, REFERENCE_PROFILE, compare_runs,
                                     stale_reference, update_reference)
from weince.report.rules_page import update_rules_page
from weince.report.status import status_table, update_readme

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--claims", default="config/claims.yaml",
                   help="claims registry (default: %(default)s)")
    p.add_argument("--reports", default="reports",
                   help="reports root holding <profile>/claims/<id>.json (default: %(default)s)")
    p.add_argument("--reference", default=REFERENCE,
                   help="the committed reference run's root, <profile>/claims/<id>.json; the "
                        "README's table reads it (default: %(default)s)")
    p.add_argument("--readme", default=None,
                   help="rewrite this file's generated claims block instead of printing "
                        "(default: print)")
    p.add_argument("--verdicts", default=None,
                   help="rewrite this page's generated rules blocks (docs/verdicts.md) from "
                        "the registry and the rule code instead of printing (default: print)")
    p.add_argument("--check", action="store_true",
                   help="with --readme or --verdicts: only compare, exit 1 when a block (or "
                        "the reference) is out of date (default: off)")
    p.add_argument("--update-reference", action="store_true",
                   help="copy the claim files of your finished run of --profile "
                        "(<reports>/<profile>/claims/) into the reference first (default: off)")
    p.add_argument("--profile", default=REFERENCE_PROFILE,
                   help="with --update-reference: the profile whose run becomes the "
                        "reference (default: %(default)s)")


def _readme(args: argparse.Namespace) -> int:
    same = update_readme(args.readme, args.claims, args.reference, check=args.check)
    stale = stale_reference(args.reference, args.claims) if args.check else []
    if args.check and (stale or not same):
        print(stale[0] + (f" (and {len(stale) - 1} more)" if len(stale) > 1 else "") if stale
              else f"{args.readme}: the claims table is out of date; run `weince status "
                   f"--readme {args.readme}`")
        return 1
    print(f"{args.readme}: claims table {'up to date' if same else 'rewritten'}")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.update_reference and args.check:
        raise ValueError("--update-reference writes the reference and --check only compares: "
                         "give one of them")
    if args.verdicts is not None:
        same = update_rules_page(args.verdicts, args.claims, check=args.check)
        if args.check and not same:
            print(f"{args.verdicts}: the rules are out of date; run `weince status --verdicts "
                  f"{args.verdicts}`")
            return 1
        print(f"{args.verdicts}: rules {'up to date' if same else 'rewritten'}")
        return 0
    if args.update_reference:
        files = update_reference(args.reports, args.reference, args.claims, args.profile)
        print(f"reference: {len(files)} claim files of {args.reports}/{args.profile}/claims/ "
              f"copied to {files[0].parent}/")
    if args.readme is not None:
        return _readme(args)
    if args.update_reference:
        return 0
    print(status_table(args.claims, args.reports))
    lines = compare_runs(args.claims, args.reports, args.reference)
    if lines:
        print("\n" + "\n".join(lines))
    return 0
