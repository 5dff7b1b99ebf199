"""``weince status``: every claim, where a verdict can come from, and the verdict each
profile's last run computed (the README's claims table).

    weince status                           # print the table
    weince status --readme README.md        # rewrite the README's generated block
    weince status --readme README.md --check   # exit 1 when that block is out of date
    weince status --verdicts docs/verdicts.md  # rewrite the rules page's generated blocks
"""

from __future__ import annotations

import argparse

from weince.report.rules_page import update_rules_page
from weince.report.status import status_table, update_readme

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--claims", default="config/claims.yaml",
                   help="claims registry (default: %(default)s)")
    p.add_argument("--reports", default="reports",
                   help="reports root holding <profile>/claims/<id>.json (default: %(default)s)")
    p.add_argument("--readme", default=None,
                   help="rewrite this file's generated claims block instead of printing "
                        "(default: print)")
    p.add_argument("--verdicts", default=None,
                   help="rewrite this page's generated rules blocks (docs/verdicts.md) from "
                        "the registry and the rule code instead of printing (default: print)")
    p.add_argument("--check", action="store_true",
                   help="with --readme or --verdicts: only compare, exit 1 when a block is "
                        "out of date (default: off)")


def main(args: argparse.Namespace) -> int:
    if args.verdicts is not None:
        same = update_rules_page(args.verdicts, args.claims, check=args.check)
        if args.check and not same:
            print(f"{args.verdicts}: the rules are out of date; run `weince status --verdicts "
                  f"{args.verdicts}`")
            return 1
        print(f"{args.verdicts}: rules {'up to date' if same else 'rewritten'}")
        return 0
    if args.readme is None:
        print(status_table(args.claims, args.reports))
        return 0
    same = update_readme(args.readme, args.claims, args.reports, check=args.check)
    if args.check and not same:
        print(f"{args.readme}: the claims table is out of date; run `weince status --readme "
              f"{args.readme}`")
        return 1
    print(f"{args.readme}: claims table {'up to date' if same else 'rewritten'}")
    return 0
