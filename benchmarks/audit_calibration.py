"""Calibration of the training audit's attribution margin (weince.bundle.retrain.MARGIN):
train one run per arm of a profile's vision setting, then replay every audit segment of each
under every arm on this CPU, as the run trained (bit for bit), with another thread count and
in float64, and print ``d(arm) = ||w_replay(arm) - w_end|| / ||w_end - w_start||`` with the
CPU time of one segment's replay.

    python benchmarks/audit_calibration.py --configfile config/smoke.yaml \\
        --pair digits smallcnn --json smoke_calibration.json
    weince synthetic-data --root /tmp/synth
    python benchmarks/audit_calibration.py --configfile config/paper.yaml config/rehearsal.yaml \\
        --pair cifar100 resnet18 --data /tmp/synth --json rehearsal_calibration.json
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from weince.bundle.retrain import MARGIN, attributed, distances, replay_segment
from weince.pipeline.profile import Profile
from weince.pipeline.stages import pretrain_config
from weince.train.audit import load_state, state_digest
from weince.train.simclr import pretrain
from weince.utils import write_json
from weince.utils.config import deep_merge, to_dict

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"float32, 1 thread": (torch.float32, 1), "float32, 2 threads": (torch.float32, 2),
            "float64, 1 thread": (torch.float64, 1)}


def _profile(files: list[str], data: str | None) -> Profile:
    cfg: dict[str, Any] = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for f in files:
        cfg = deep_merge(cfg, yaml.safe_load(Path(f).read_text()))
    if data:
        cfg["data_root"] = data
    if "rehearsal" in cfg:
        cfg["rehearsal"]["gpu"] = False
        cfg["rehearsal"]["paper_config"] = str(REPO / "config" / "paper.yaml")
    return Profile.of(cfg)


def _configs(prof: Profile, dataset: str, backbone: str, seed: int) -> dict[str, dict]:
    out = {}
    for arm in prof.vision.arms:
        cfg = pretrain_config(prof, dataset, backbone, arm, seed)
        cfg = dataclasses.replace(cfg, device="cpu", threads=1, progress=False,
                                  data_root=prof.data_root, tensorboard=False)
        out[arm] = to_dict(cfg)
    return out


def calibrate(prof: Profile, dataset: str, backbone: str, seed: int) -> dict[str, Any]:
    cfgs = _configs(prof, dataset, backbone, seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="weince-calibration-") as tmp:
        for claimed, cfg in cfgs.items():
            run = Path(tmp) / claimed
            summary = pretrain(cfg, run)
            for seg in summary["audit"]["segments"]:
                start = load_state(run / seg["start_file"])
                end = load_state(run / seg["end_file"])
                for variant, (dtype, threads) in VARIANTS.items():
                    replayed, cpu = {}, {}
                    for arm, c in cfgs.items():
                        t0 = time.process_time()
                        replayed[arm] = replay_segment("vision", {**c, "threads": threads},
                                                       start, seg["end"], dtype=dtype)
                        cpu[arm] = time.process_time() - t0
                    d = distances(replayed, start, end)
                    row = {"claimed": claimed, "segment": [seg["start"], seg["end"]],
                           "variant": variant, "d": d, "attributed": attributed(d, claimed),
                           "bit_for_bit": state_digest(replayed[claimed]) == seg["end_sha256"],
                           "cpu_s_per_replay": cpu[claimed]}
                    rows.append(row)
                    print(f"{claimed:>14} {seg['start']:>3}->{seg['end']:<3} {variant:<18} "
                          + "  ".join(f"d({a})={v:.3g}" for a, v in d.items())
                          + f"  {'ok' if row['attributed'] else 'NOT ATTRIBUTED'}"
                          + (" bit-for-bit" if row["bit_for_bit"] else "")
                          + f"  {cpu[claimed]:.2f} CPU s")
    worst = max(r["d"][r["claimed"]] / min(v for a, v in r["d"].items() if a != r["claimed"])
                for r in rows)
    print(f"largest d(claimed) / min d(other): {worst:.3g} (margin {MARGIN})")
    return {"pair": [dataset, backbone], "seed": seed, "margin": MARGIN, "rows": rows,
            "worst_ratio": worst}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", nargs="+", required=True)
    ap.add_argument("--pair", nargs=2, required=True, metavar=("DATASET", "BACKBONE"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", default=None, help="data_root (synthetic files for rehearsal)")
    ap.add_argument("--json", default=None, help="write the distances here")
    args = ap.parse_args()
    out = calibrate(_profile(args.configfile, args.data), *args.pair, args.seed)
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
