"""Forged copies of a smoke archive made with ``--with-audit``, for the training audit's end
to end test (tests/workflow/test_resume.py): every file the forger touches gets its new size
and SHA-256 in the manifest and SHA256SUMS, so the archive passes ``weince verify``'s hashes
and only the replay can tell."""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

from weince.bundle.retrain import replay_segment
from weince.train.audit import load_state, state_digest
from weince.utils.checkpoint import save_checkpoint

VISION = "results/smoke/vision/digits/smallcnn"


def repack(src: Path, dst: Path, change: Callable[[Path, dict], None]) -> Path:
    """A copy of archive ``src`` with ``change(folder, manifest)`` applied to its unpacked
    files and manifest, every listed file's hash and size rewritten."""
    work = dst.parent / (dst.name + ".d")
    with tarfile.open(src) as tar:
        tar.extractall(work, filter="data")
    man_path = next(work.glob("**/bundle/manifest.json"))
    man = json.loads(man_path.read_text())
    change(work, man)
    for entry in man["files"]:
        f = work / entry["path"]
        if f.is_file() and not entry["path"].endswith(("manifest.json", "SHA256SUMS")):
            entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
            entry["bytes"] = f.stat().st_size
    man_path.write_text(json.dumps(man, indent=1) + "\n")
    (man_path.parent / "SHA256SUMS").write_text(
        "".join(f"{e['sha256']}  {e['path']}\n" for e in man["files"]))
    own = [man_path, man_path.parent / "SHA256SUMS"]   # the manifest first, as bundle writes
    with tarfile.open(dst, "w:gz", compresslevel=1) as tar:
        for p in own + sorted(q for q in work.rglob("*") if q.is_file() and q not in own):
            tar.add(p, arcname=str(p.relative_to(work)))
    return dst


def swap_arms(a: str, b: str) -> Callable[[Path, dict], None]:
    """Swap two arms' run folders (encoder, results, train.json, audit states) and their
    manifest entries: what turns one arm's numbers into the other's."""
    def change(work: Path, man: dict) -> None:
        pa, pb = work / VISION / a / "seed7", work / VISION / b / "seed7"
        tmp = pa.with_name("seed7.swap")
        pa.rename(tmp)
        pb.rename(pa)
        tmp.rename(pb)
        ka, kb = f"{VISION}/{a}/seed7/", f"{VISION}/{b}/seed7/"
        for e in man["files"]:
            if e["path"].startswith(ka):
                e["path"] = kb + e["path"][len(ka):]
            elif e["path"].startswith(kb):
                e["path"] = ka + e["path"][len(kb):]
    return change


def relabel_last_segment(arm: str, trained_with: str) -> Callable[[Path, dict], None]:
    """Replace the end state of ``arm``'s last audit segment by the state its start reaches
    under the loss ``trained_with``, and commit that state's digest in its train.json."""
    def change(work: Path, man: dict) -> None:
        run = work / VISION / arm / "seed7"
        summary = json.loads((run / "train.json").read_text())
        seg = summary["audit"]["segments"][-1]
        cfg = dict(summary["provenance"]["config"])
        for key in ("norm_mean", "norm_std"):
            cfg.pop(key)
        cfg.update(loss=trained_with, loss_kwargs={}, device="cpu", progress=False,
                   tensorboard=False, keep_states="none")
        forged = replay_segment("vision", cfg, load_state(run / seg["start_file"]), seg["end"])
        end = run / seg["end_file"]
        save_checkpoint(end, **forged)
        # the digest record save_checkpoint writes beside a file: an archive ships none
        end.with_name(f".{end.name}.digest.json").unlink(missing_ok=True)
        seg["end_sha256"] = summary["audit"]["states_sha256"][str(seg["end"])] = \
            state_digest(forged)
        (run / "train.json").write_text(json.dumps(summary, indent=2) + "\n")
    return change
