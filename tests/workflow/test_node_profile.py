"""The workflow profile of one machine with several GPUs (workflow/executors/node) plans the
smoke profile, and every GPU job carries its `jobs_per_gpu` (its slot's sharing) as a
resource: the config's number per setting, 1 for the timing job, none for a CPU job (slow
tier: a Snakemake dry run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow   # a Snakemake dry run in a subprocess

REPO = Path(__file__).resolve().parents[2]
OVERLAY = """
resources:
  pretrain: {gpu: 1}
  timing: {gpu: 1}
node:
  jobs_per_gpu: {default: 3}
"""


def test_node_profile_dry_run_gives_each_gpu_job_its_share(tmp_path, copy_workflow,
                                                             run_snakemake):
    profile = yaml.safe_load((REPO / "workflow/executors/node/config.yaml").read_text())
    assert profile["resources"] == ["gpu=32"] and profile["cores"] == "all"
    wf = copy_workflow(tmp_path / "wf", {"gpus.yaml": OVERLAY})
    proc = run_snakemake(wf, "-n", "--workflow-profile", "workflow/executors/node",
                         "--configfile", "config/smoke.yaml", "config/gpus.yaml")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    shares: dict[str, set[str]] = {}
    for rule, res in re.findall(r"^rule (\w+):\n(?:    .*\n)*?    resources: (.*)$",
                                proc.stdout, re.M):
        m = re.search(r"jobs_per_gpu=(\d+)", res)
        shares.setdefault(rule, set()).add(m.group(1) if m else "-")
    assert shares["pretrain"] == {"3"} and shares["timing"] == {"1"}
    assert shares["linear"] == {"-"}          # a CPU job has no slot
