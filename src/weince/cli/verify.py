"""``weince verify``: check a results bundle made by ``weince bundle``.

    weince verify default.tar.gz
    weince verify default.tar.gz --keep rebuilt/      # keep the rebuilt tables

Checks every file's SHA-256 against the manifest, rebuilds every claim table and the
summary from the bundle's result files with the installed code, and prints what differs.
Exit status 0 only when everything matches, 1 when something differs, 2 for a bad archive.
Offline, seconds, no GPU; needs only the report's dependencies (no torch).
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="FILE.tar.gz", help="archive made by `weince bundle`")
    parser.add_argument("--keep", metavar="DIR", help="copy the rebuilt report to DIR")
    parser.add_argument("--max-lines", type=int, default=12,
                        help="at most this many lines per list in the report (default 12)")


def main(args: argparse.Namespace) -> int:
    from weince.bundle.verify import verify_bundle

    res = verify_bundle(args.bundle, keep=args.keep)
    print(res.render(max_lines=args.max_lines))
    if res.ok:
        return 0
    return 2 if res.errors and not res.n_files else 1
