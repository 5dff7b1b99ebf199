"""``weince report``: claims registry + result files -> tables with verdicts.

    weince report --config config/config.yaml                 # the embedded default
    weince report --config config/paper.yaml --profile paper
    weince report --config config/smoke.yaml --results /tmp/r --reports /tmp/rep

Several ``--config`` files are merged left to right, as Snakemake merges its
``configfile`` with ``--configfile`` (nested mappings updated, lists replaced).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from weince.pipeline.profile import Profile
from weince.report.build import build_report
from weince.utils.config import apply_overrides, parse_yaml

__all__ = ["add_arguments", "main", "load_profile_config"]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def load_profile_config(paths: Sequence[str | Path],
                        overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Merge YAML config files (later wins) and ``key.sub=value`` overrides (YAML values)."""
    cfg: dict[str, Any] = {}
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise FileNotFoundError(f"config file {p} does not exist (profiles ship in config/: "
                                    f"config.yaml, smoke.yaml, paper.yaml)")
        _merge(cfg, parse_yaml(p.read_text(), f"config file {p}") or {})
    return apply_overrides(cfg, overrides)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", action="append", required=True, metavar="YAML",
                        help="workflow config of the profile (repeat to merge several)")
    parser.add_argument("--profile", help="profile name (default: the config's 'profile')")
    parser.add_argument("--claims", help="claims registry (default: the config's 'claims')")
    parser.add_argument("--results", help="results root (default: the config's 'results')")
    parser.add_argument("--reports", help="reports root (default: the config's 'reports')")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (value parsed as YAML; repeatable; "
                             "default: none)")
    parser.add_argument("--no-figures", action="store_true", help="tables only")


def main(args: argparse.Namespace) -> int:
    cfg = load_profile_config(args.config, args.set)
    for key in ("profile", "claims", "results", "reports"):
        if getattr(args, key):
            cfg[key] = getattr(args, key)
    prof = Profile.of(cfg)
    results = build_report(prof, with_figures=not args.no_figures)
    width = max(len(r.claim["title"]) for r in results)
    for r in results:
        print(f"{r.claim['id']:<4} {r.claim['title']:<{width}}  {r.verdict}")
    out = prof.report_dir / "summary.md"
    print(f"wrote {out}")
    return 0
