"""``weince verify``: check a results bundle made by ``weince bundle``.

    weince verify default.tar.gz
    weince verify default.tar.gz --keep rebuilt/      # keep the rebuilt tables
    weince verify default.tar.gz --extract CHECKOUT   # then unpack the verified files
    weince verify smoke.tar.gz --reevaluate 2         # rerun 2 encoders' probes here
    weince verify lab-a.tar.gz --allowed-signers allowed_signers   # a signed manifest
    weince verify smoke.tar.gz --retrain 2            # replay 2 runs' training segments

Checks every file's size and SHA-256 against the manifest, rebuilds every claim table and
the summary from the bundle's result files with the installed code and the installed
claims registry, and prints what differs, a difference between the archive's registry
(or the rules in words its claim files carry) and the installed one included.
``--archive-registry`` judges by the archive's own registry instead, and says so on every
verdict line. The archive is untrusted: its manifest (first in it) is checked before
anything else is decompressed, and links, devices, paths outside its results folder and
files the manifest does not list are never unpacked. Exit status 0 only when everything
matches, 1 when the numbers differ (or a signature does not verify against
--allowed-signers), 2 for a hostile or inconsistent archive, 3 when the check could not run
here (disk, memory, or a picked run the installed code cannot re-evaluate). Every linear-probe
and k-NN number is recomputed from the per-example test predictions its file carries.
Offline, seconds, no GPU; needs only the report's dependencies (no torch). ``--reevaluate
N`` (torch, CPU minutes) then reruns the probes of N encoders and the STS evaluation of the
text models among the picks, one of each kind and arm first (:mod:`weince.bundle.reevaluate`;
exit 3 when a picked run cannot be re-evaluated as recorded); ``--data DIR`` compares the
test labels with your own copy of the data. ``--allowed-signers FILE`` checks the
manifest's SSH signature (:mod:`weince.bundle.signing`).
"""

from __future__ import annotations

import argparse
import importlib

from weince.bundle import DEFAULT_MAX_BYTES, DEFAULT_MAX_MANIFEST_BYTES, parse_size
from weince.bundle.verify import verify_bundle

__all__ = ["add_archive_checks", "add_arguments", "main"]


def add_archive_checks(parser: argparse.ArgumentParser, size_of: str) -> None:
    """The options of an archive's checks (size caps, report length, the claims registry),
    shared by ``weince verify`` and ``weince merge``; ``size_of`` names what --max-bytes caps."""
    parser.add_argument("--max-bytes", type=parse_size, default=DEFAULT_MAX_BYTES,
                        metavar="SIZE", help=f"cap on {size_of} "
                                             f"(default {DEFAULT_MAX_BYTES >> 30}G)")
    parser.add_argument("--max-manifest-bytes", type=parse_size,
                        default=DEFAULT_MAX_MANIFEST_BYTES, metavar="SIZE",
                        help=f"cap on manifest.json (default {DEFAULT_MAX_MANIFEST_BYTES >> 20}M)")
    parser.add_argument("--max-lines", type=int, default=12,
                        help="at most this many lines per list in the report (default 12)")
    parser.add_argument("--claims", metavar="PATH", default=None,
                        help="the installed claims registry (default: config/claims.yaml of "
                             "the checkout weince is imported from, else of this folder)")
    parser.add_argument("--allowed-signers", metavar="FILE", default=None,
                        help="an ssh-keygen allowed-signers file: the manifest's signature "
                             "(`weince bundle --sign`) must verify against it, and the "
                             "provenance it records then reads as the signer's (default: "
                             "not checked: site, GPU and container read as reported by the "
                             "site)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="FILE.tar.gz", help="archive made by `weince bundle`")
    parser.add_argument("--keep", metavar="DIR", help="copy the rebuilt report to DIR")
    parser.add_argument("--extract", metavar="DIR",
                        help="after the archive's checks pass, unpack its verified files "
                             "into DIR (a checkout); nothing is written there otherwise")
    add_archive_checks(parser, "the total unpacked size")
    parser.add_argument("--reevaluate", type=int, default=0, metavar="N",
                        help="then pick N runs of the archive (an archive made with "
                             "--with-models; one of each kind and arm first, then at random), "
                             "extract their features here (CPU is fine) and rerun the linear "
                             "probe and k-NN, or the STS evaluation of a text model, with the "
                             "archive's settings, comparing every number (needs torch; "
                             "default 0: none)")
    parser.add_argument("--retrain", type=int, default=0, metavar="N",
                        help="then replay the training audit segments of N runs feeding "
                             "verdict rows (an archive made with --with-audit; picked with "
                             "--seed, stratified over arms) on this CPU: bit for bit where "
                             "the run was trained as here, else by attribution to its arm "
                             "(needs torch; default 0: none)")
    parser.add_argument("--attribution", action="store_true",
                        help="--retrain: judge by attribution even where a bit-for-bit "
                             "replay applies (every distance printed)")
    parser.add_argument("--replay-dtype", choices=("float32", "float64"), default="float32",
                        help="--retrain: replay the network and optimiser in this precision "
                             "(float64: a stand-in for another device; judged by attribution; "
                             "default float32)")
    parser.add_argument("--replay-threads", type=int, default=None, metavar="N",
                        help="--retrain: CPU threads of the replay (default: the run's)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the --reevaluate pick (default 0; printed)")
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="your own copy of the data sets: the test labels the archive's "
                             "predictions were scored against are compared with them, and "
                             "--reevaluate reads its images there (needs torch)")
    parser.add_argument("--archive-registry", action="store_true",
                        help="judge by the archive's own claims registry instead of the "
                             "installed one (every verdict line says so; default: off)")


def main(args: argparse.Namespace) -> int:
    if getattr(args, "retrain", 0):   # torch only here (weince.bundle.retrain)
        return importlib.import_module("weince.bundle.retrain").main(args)
    if getattr(args, "reevaluate", 0) or getattr(args, "data", None):
        if args.reevaluate < 0:
            raise SystemExit("weince verify: --reevaluate N needs N >= 0")
        # torch only here: plain `weince verify` never loads it
        again = importlib.import_module("weince.bundle.reevaluate")
        return again.reevaluate(args.bundle, args.reevaluate, seed=args.seed, data=args.data,
                                claims=getattr(args, "claims", None),
                                allowed_signers=getattr(args, "allowed_signers", None))
    res = verify_bundle(args.bundle, keep=args.keep, extract=getattr(args, "extract", None),
                        max_bytes=getattr(args, "max_bytes", DEFAULT_MAX_BYTES),
                        max_manifest_bytes=getattr(args, "max_manifest_bytes",
                                                   DEFAULT_MAX_MANIFEST_BYTES),
                        claims=getattr(args, "claims", None),
                        archive_registry=getattr(args, "archive_registry", False),
                        allowed_signers=getattr(args, "allowed_signers", None))
    print(res.render(max_lines=args.max_lines))
    return res.exit_code
