"""``weince merge``: several results bundles (one claim each from several sites, say) as one
summary with a Source column per row.

    weince merge lab-a.tar.gz lab-b.tar.gz --out merged/
    weince merge lab-a.tar.gz lab-b.tar.gz --out merged/ --allowed-signers allowed_signers

Every archive is checked first exactly as ``weince verify`` checks it; one that fails stops
the merge and nothing is written. Then ``DIR/summary.md`` and one ``DIR/table_<claim>.md``
per claim, each also as HTML (``DIR/html/``): each archive's rows with their source
(archive and its manifest SHA-256, and the site, commits, GPU types and container images it
reported, or signed with ``--allowed-signers``), a line per replication (two archives, one
setting, the installed code's protocol: their difference and whether their intervals
overlap), a line per refused row (another protocol than the installed code's profile: the
key and both values; or the same result, by SHA-256, as another archive's: a duplicate),
numbers nothing re-checked marked ``(on trust)``, and ``not run`` with the planner's price
for a claim no archive covers. The archives are taken in the order of their file names:
any order on the command line gives the same pages. The pages are written into a folder
beside ``--out`` and renamed at the end (a second merge into the same ``--out`` is refused
while it runs; a failure, a full disk included, leaves nothing). Exit status 0 when merged
with every row kept, 3 when merged with a row refused or a duplicate, 1 when an archive
failed its check (nothing written), 2 for unusable input, 4 when it could not run here (a
full disk; an archive's check could not run).
"""

from __future__ import annotations

import argparse

from weince.bundle.merge import merge_bundles
from weince.cli.verify import add_archive_checks

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="+", metavar="FILE.tar.gz",
                        help="archives made by `weince bundle`")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for the merged summary.md and claim pages")
    add_archive_checks(parser, "each archive's unpacked size")


def main(args: argparse.Namespace) -> int:
    res = merge_bundles(args.bundles, args.out, claims=args.claims, max_bytes=args.max_bytes,
                        max_manifest_bytes=args.max_manifest_bytes,
                        allowed_signers=getattr(args, "allowed_signers", None))
    print(res.render(max_lines=args.max_lines))
    return res.exit_code
