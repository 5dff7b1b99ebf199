"""``weince fetch-data``: every data set and text model a profile reads, fetched once, before
any job, on a machine with network (a login node); compute jobs never download.

    weince fetch-data                                   # the paper profile, into data/
    weince fetch-data --configfile config/paper.yaml --config data_root=/scratch/data
    weince fetch-data --check                           # only look: what is there, what not

The profile is read as the workflow reads it: ``config/config.yaml``, then each
``--configfile`` over it, then ``--config KEY=VALUE`` (YAML values; dotted keys go into
sections), the same arguments as the ``snakemake`` command. One line per item: present
(not touched), fetched (CIFAR-10/100 and STL-10 through torchvision's downloader, a Hugging
Face model as a snapshot into ``{data_root}/models/<name>``), or missing with the file to
get and where to put it (ImageNet-32, Tiny-ImageNet, wiki1m, STS-B). Exits 0 when
everything is on disk, 1 otherwise (docs/data.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from weince.data.fetch import fetch
from weince.pipeline.preflight import data_items, fetch_command
from weince.pipeline.profile import Profile
from weince.utils.config import apply_overrides, deep_merge, parse_yaml

__all__ = ["add_arguments", "main", "load_config"]

BASE_CONFIG = "config/config.yaml"   # the Snakefile's `configfile:`, under every profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", nargs="+", default=["config/paper.yaml"], metavar="FILE",
                   help="config file(s) of the profile, merged over config/config.yaml as "
                        "snakemake merges them (default: config/paper.yaml)")
    p.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE",
                   help="config values over the files, as snakemake's --config (e.g. "
                        "data_root=/scratch/data; default: none)")
    p.add_argument("--check", action="store_true",
                   help="download nothing: say what is present, what would be downloaded "
                        "and what must be fetched by hand (exit 1 unless all is present)")


def load_config(configfiles: list[str], overrides: list[str]) -> dict[str, Any]:
    """The workflow config of a profile as Snakemake builds it: ``config/config.yaml``, each
    of ``configfiles`` over it (mappings merged, other values replaced), then ``overrides``
    (``key.sub=value``, values parsed as YAML)."""
    cfg: dict[str, Any] = {}
    for f in [BASE_CONFIG, *[c for c in configfiles if c != BASE_CONFIG]]:
        path = Path(f)
        if not path.is_file():
            raise FileNotFoundError(f"config file {f} does not exist (run this command from "
                                    f"the checkout's root, or give the file's path)")
        deep_merge(cfg, parse_yaml(path.read_text(), f"config file {f}") or {})
    return apply_overrides(cfg, overrides)


def _where(item) -> str:
    note = " (synthetic files of `weince synthetic-data`)" if item.synthetic() else ""
    return f"{item.target}{note}"


def _one(item, check: bool, fetch_cmd: str, say) -> bool:
    """Report one item, fetching it unless ``check``; True when it is on disk after."""
    gone = item.missing(fetch_cmd)
    if gone is None:
        say(f"{item.name}: present, not touched: {_where(item)}")
        return True
    gone = gone.removeprefix(f"{item.name}: ")
    if not item.downloadable:
        say(f"{item.name}: MISSING, get it by hand (it cannot be downloaded here): {gone}")
        return False
    if check:
        say(f"{item.name}: missing; would download {item.origin} into {item.target} "
            f"(without --check)")
        return False
    say(f"{item.name}: downloading {item.origin} into {item.target} ...")
    try:
        fetch(item)
    except Exception as err:   # noqa: BLE001 - one item's failure is reported, the rest go on
        why = " ".join(str(err).split()).removeprefix(f"{item.name}: ")
        say(f"{item.name}: download FAILED: {why}")
        return False
    gone = item.missing(fetch_cmd)
    say(f"{item.name}: fetched: {_where(item)}" if gone is None
        else f"{item.name}: still missing after the download: {gone}")
    return gone is None


def main(args: argparse.Namespace) -> int:
    if not args.check:
        # the one place that may reach the Hugging Face hub: the container and offline
        # profiles set HF_HUB_OFFLINE=1, which huggingface_hub reads when first imported
        os.environ["HF_HUB_OFFLINE"] = "0"
    prof = Profile.of(load_config(args.configfile, args.config))
    items = data_items(prof)
    cmd = fetch_command(prof)

    def say(line: str) -> None:
        print(line, flush=True)

    say(f"profile {prof.name!r}, data root {prof.data_root}/: {len(items)} item(s) read "
        f"from disk{' (--check: nothing is downloaded)' if args.check else ''}")
    ok = [_one(item, args.check, cmd, say) for item in items]
    missing = ok.count(False)
    if missing:
        print(f"{missing} of {len(items)} item(s) not on disk: get them as said above, then "
              f"run `{cmd}{' --check' if args.check else ''}` again; the workflow refuses to "
              f"plan until they are there", file=sys.stderr)
        return 1
    say(f"all {len(items)} item(s) on disk: the workflow's jobs read them there and never "
        f"download")
    return 0
