"""One machine with several GPUs and no scheduler, end to end without a GPU (slow tier:
Snakemake runs): the smoke profile with its training and evaluation rules marked as GPU
jobs, on a fake device list (WEINCE_FAKE_GPUS) that the slot pool reads.

- two workflow copies run at once on one pool of 4 fake GPUs (`--resources gpu=2` each):
  their GPU jobs run concurrently, each log names its slot, and no two jobs that ran at the
  same time, in either workflow, held the same slot;
- with `node.jobs_per_gpu: 2` on one fake GPU, two jobs share it (slot 0 and slot 1, their
  train.json says `shared`);
- every result JSON of those runs equals the plain smoke run's outside timing and
  provenance.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from stable_json import stable

pytestmark = pytest.mark.slow

RUN = "results/smoke/vision/digits/smallcnn"
ARMS = ["infonce", "weince_recipe", "weince@m0", "weince@m2"]
TARGETS = [f"{RUN}/{a}/seed7/{f}" for a in ARMS[:2] for f in ("linear.json", "knn.json")] + \
    [f"{RUN}/{a}/seed7/train.json" for a in ARMS[2:]]
GPU_RULES = "resources:\n" + "".join(f"  {r}: {{gpu: 1}}\n"
                                     for r in ("pretrain", "features", "linear", "knn"))
SLOT_RE = re.compile(r"gpu slot: (gpu\d+/slot\d+) .*taken at (\S+) after")
END_RE = re.compile(r"gpu slot: (gpu\d+/slot\d+) held until (\S+) at least")



def _jsons(wf: Path) -> dict[str, object]:
    """Every result JSON of the runs, without timing and provenance. The hidden digest records
    (``.<file>.digest.json``) are left out: the bytes of a checkpoint, an audit state or
    ``features.pt`` hold when and where they were written; the encoder's SHA-256 in
    train.json and the audit states' content digests are compared."""
    return {str(p.relative_to(wf)): stable(json.loads(p.read_text()))
            for p in sorted((wf / RUN).rglob("*.json")) if not p.name.startswith(".")}


def _args(cores: int, gpus: int, extra: str | None) -> list[str]:
    cfg = ["config/smoke.yaml"] + (["config/gpus.yaml"] if extra is not None else [])
    return [*TARGETS, "--cores", str(cores), "--resources", f"gpu={gpus}",
            "--configfile", *cfg]


def _workflow(tmp: Path, name: str, copy_workflow, node: str | None) -> Path:
    extra = None if node is None else {"gpus.yaml": GPU_RULES + node}
    return copy_workflow(tmp / name, extra)


def _slots(wf: Path) -> list[tuple[str, float, float, Path]]:
    """(slot, taken, held until, log) of every GPU job of a run, from its log's slot lines:
    an interval inside the time the job held its slot (it takes the slot first and frees it
    when its process ends, after its last line), so two jobs whose intervals overlap held
    their slots at the same time."""
    out = []
    for log in sorted((wf / "results/smoke/logs").rglob("*.log")):
        text = log.read_text()
        m = SLOT_RE.search(text)
        if m:
            end = END_RE.search(text)
            assert end and end.group(1) == m.group(1), log
            out.append((m.group(1), _t(m.group(2)), _t(end.group(2)), log))
    return out


def _t(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


@pytest.fixture(scope="module")
def plain(tmp_path_factory, copy_workflow, run_snakemake):
    wf = _workflow(tmp_path_factory.mktemp("plain"), "plain", copy_workflow, None)
    proc = run_snakemake(wf, *_args(2, 1, None), timeout=1200)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return wf


def test_two_workflows_on_one_pool_never_hold_the_same_slot(plain, tmp_path, copy_workflow,
                                                             run_snakemake):
    env = {"WEINCE_FAKE_GPUS": "4", "WEINCE_GPU_LOCK_DIR": str(tmp_path / "locks")}
    wfs = [_workflow(tmp_path, f"wf{i}", copy_workflow, "node: {jobs_per_gpu: 1}\n")
           for i in (1, 2)]
    with ThreadPoolExecutor(2) as pool:     # both at once, each its own snakemake process
        procs = list(pool.map(lambda wf: run_snakemake(wf, *_args(2, 2, ""), timeout=1800,
                                                       **env), wfs))
    for p in procs:
        assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    jobs = [j for wf in wfs for j in _slots(wf)]
    assert len(jobs) >= 2 * 10                 # 4 trainings, 2 features, 2 linear, 2 knn each
    overlapping = [(a, b) for i, a in enumerate(jobs) for b in jobs[i + 1:]
                   if a[1] < b[2] and b[1] < a[2]]
    assert overlapping, "no two GPU jobs ran at the same time"
    assert all(a[0] != b[0] for a, b in overlapping), \
        [(a[3].name, b[3].name, a[0]) for a, b in overlapping if a[0] == b[0]]
    assert len({j[0] for j in jobs}) >= 2
    for wf in wfs:
        assert _jsons(wf) == _jsons(plain)


def test_two_jobs_share_one_gpu_with_the_unshared_results(plain, tmp_path, copy_workflow,
                                                          run_snakemake):
    env = {"WEINCE_FAKE_GPUS": "1", "WEINCE_GPU_LOCK_DIR": str(tmp_path / "locks")}
    wf = _workflow(tmp_path, "shared", copy_workflow, "node: {jobs_per_gpu: 2}\n")
    proc = run_snakemake(wf, *_args(2, 2, ""), timeout=1200, **env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    jobs = _slots(wf)
    assert {j[0] for j in jobs} == {"gpu0/slot0", "gpu0/slot1"}
    shared = [json.loads((wf / RUN / a / "seed7/train.json").read_text())
              ["step_timing"]["gpu_slot"] for a in ARMS]
    assert all(s["shared"] and s["jobs_per_gpu"] == 2 for s in shared)
    assert _jsons(wf) == _jsons(plain)

