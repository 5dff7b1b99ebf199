"""``weince merge``: several results bundles (one claim each from several sites, say) as one
summary with a Source column per row.

    weince merge lab-a.tar.gz lab-b.tar.gz --out merged/

Every archive is checked first exactly as ``weince verify`` checks it; one that fails stops
the merge and nothing is written. Then ``DIR/summary.md`` and one ``DIR/table_<claim>.md``
per claim: each archive's rows with their source (archive and its manifest SHA-256, site,
commits, GPU types, container images), a line per replication (two archives, one setting,
one protocol: their difference and whether their intervals overlap), a line per refused
row (one setting under a different protocol: the key and both values), and ``not run`` with
the planner's price for a claim no archive covers. The pages are written into a folder
beside ``--out`` and renamed at the end (a second merge into the same ``--out`` is refused
while it runs; a failure, a full disk included, leaves nothing). Exit status 0 when merged,
1 when an archive failed its check, 2 for unusable input, 3 for a full disk.
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
                        max_manifest_bytes=args.max_manifest_bytes)
    print(res.render(max_lines=args.max_lines))
    return res.exit_code
