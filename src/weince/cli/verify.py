"""``weince verify``: check a results bundle made by ``weince bundle``.

    weince verify default.tar.gz
    weince verify default.tar.gz --keep rebuilt/      # keep the rebuilt tables
    weince verify default.tar.gz --extract CHECKOUT   # then unpack the verified files

Checks every file's size and SHA-256 against the manifest, rebuilds every claim table and
the summary from the bundle's result files with the installed code and the installed
claims registry, and prints what differs, a difference between the archive's registry
(or the rules in words its claim files carry) and the installed one included.
``--archive-registry`` judges by the archive's own registry instead, and says so on every
verdict line. The archive is untrusted: links, devices, paths outside the folder and files the
manifest does not list are never unpacked. Exit status 0 only when everything matches, 1
when something differs, 2 for an unsafe or malformed archive. Offline, seconds, no GPU;
needs only the report's dependencies (no torch).
"""

from __future__ import annotations

import argparse

from weince.bundle import DEFAULT_MAX_BYTES, DEFAULT_MAX_MANIFEST_BYTES, parse_size
from weince.bundle.verify import verify_bundle

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="FILE.tar.gz", help="archive made by `weince bundle`")
    parser.add_argument("--keep", metavar="DIR", help="copy the rebuilt report to DIR")
    parser.add_argument("--extract", metavar="DIR",
                        help="after the archive's checks pass, unpack its verified files "
                             "into DIR (a checkout); nothing is written there otherwise")
    parser.add_argument("--max-bytes", type=parse_size, default=DEFAULT_MAX_BYTES,
                        metavar="SIZE", help="cap on the total unpacked size "
                                             f"(default {DEFAULT_MAX_BYTES >> 30}G)")
    parser.add_argument("--max-manifest-bytes", type=parse_size,
                        default=DEFAULT_MAX_MANIFEST_BYTES, metavar="SIZE",
                        help=f"cap on manifest.json (default {DEFAULT_MAX_MANIFEST_BYTES >> 20}M)")
    parser.add_argument("--max-lines", type=int, default=12,
                        help="at most this many lines per list in the report (default 12)")
    parser.add_argument("--claims", metavar="PATH", default=None,
                        help="the installed claims registry (default: config/claims.yaml of "
                             "the checkout weince is imported from, else of this folder)")
    parser.add_argument("--archive-registry", action="store_true",
                        help="judge by the archive's own claims registry instead of the "
                             "installed one (every verdict line says so; default: off)")


def main(args: argparse.Namespace) -> int:
    res = verify_bundle(args.bundle, keep=args.keep, extract=getattr(args, "extract", None),
                        max_bytes=getattr(args, "max_bytes", DEFAULT_MAX_BYTES),
                        max_manifest_bytes=getattr(args, "max_manifest_bytes",
                                                   DEFAULT_MAX_MANIFEST_BYTES),
                        claims=getattr(args, "claims", None),
                        archive_registry=getattr(args, "archive_registry", False))
    print(res.render(max_lines=args.max_lines))
    return res.exit_code
