"""``weince bundle``: one profile's results, reports and configs in a checkable archive.

    weince bundle --profile default --out default.tar.gz
    weince bundle --profile paper --out paper.tar.gz --with-models --with-scores
    weince bundle --profile paper --out lab-a.tar.gz --sign ~/.ssh/id_ed25519

Run it in the workflow's folder, after the report is built. It prints every commit, GPU type,
site and container image its results were made at, refuses result files of one setting
made under different protocols (naming both files and the key), and a link where it packs
files (naming it; only a relative link the workflow made inside the results folder is
packed, as that link), and ends with ``weince verify`` on the new archive (skip with
``--no-check``): an archive that fails it, or a full disk, leaves nothing at ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from weince.bundle.make import make_bundle
from weince.bundle.verify import verify_bundle
from weince.utils.diskspace import is_disk_full

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", required=True, help="workflow profile (default, smoke, "
                        "paper, ...): the report reports/PROFILE/ must exist")
    parser.add_argument("--out", required=True, metavar="FILE.tar.gz", help="archive to write")
    parser.add_argument("--reports", default="reports",
                        help="reports root the profile's report is in (default: reports)")
    parser.add_argument("--with-models", action="store_true",
                        help="also the encoders, feature files and text models (large)")
    parser.add_argument("--with-scores", action="store_true",
                        help="also the raw score and probe arrays (*.npz)")
    parser.add_argument("--sign", metavar="KEY", default=None,
                        help="sign the manifest with this SSH private key (ssh-keygen -Y "
                             "sign, namespace weince-bundle): reviewers check it with "
                             "--allowed-signers, and the site's provenance then reads as "
                             "signed")
    parser.add_argument("--with-audit", action="store_true",
                        help="also the training states of the audit segments of every run "
                             "feeding a verdict row (for `weince verify --retrain N`; the "
                             "size is printed first)")
    parser.add_argument("--no-check", action="store_true",
                        help="do not run `weince verify` on the new archive")


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    # checked under another name, renamed to --out only when its check passes: a failed
    # bundle leaves nothing (and an archive already at --out stays as it was)
    staged = out if args.no_check else out.with_name(f".{out.name}.unchecked")
    try:
        man = make_bundle(args.profile, staged, reports=args.reports,
                          with_models=args.with_models, with_scores=args.with_scores,
                          sign=args.sign, with_audit=args.with_audit)
    except (FileNotFoundError, ValueError) as err:
        print(f"weince bundle: {err}", file=sys.stderr)
        return 2
    except OSError as err:   # a full disk: make_bundle removed its partial archive
        print(f"weince bundle: {str(err.strerror or err).replace(str(staged), str(out))}",
              file=sys.stderr)
        return 3 if is_disk_full(err) else 2
    roles: dict[str, int] = {}
    for f in man["files"]:
        key = "report input" if f["role"].startswith("report input") else f["role"]
        roles[key] = roles.get(key, 0) + 1
    print(f"packed {args.out}: {len(man['files'])} files ("
          + ", ".join(f"{n} {r}" for r, n in sorted(roles.items())) + ")")
    for what, values in man["sources"].items():
        print(f"results made at {what}: {', '.join(values) or 'none recorded'}")
    if man["absent"]:
        print(f"note: {len(man['absent'])} file(s) the report reads do not exist, e.g. "
              f"{man['absent'][0]}")
    if args.no_check:
        return 0
    try:
        res = verify_bundle(staged)
        res.bundle = out.name
        print(res.render())
        if res.ok:
            os.replace(staged, out)
            print(f"wrote {out}")
            return 0
    finally:
        staged.unlink(missing_ok=True)
    why = ("its check could not run here" if res.exit_code == 3 else
           "its own check failed (the lines above say why)")
    print(f"weince bundle: {out} was not written: {why}", file=sys.stderr)
    return res.exit_code or 1
