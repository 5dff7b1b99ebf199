"""The reference run is current: the embedded default, run by the code of the checkout, gives
the verdicts the committed reference (`reference/default/claims/`) holds, and every number
within its claim's tolerance.

What is compared: every claim's verdict and each arm's verdict; the numbers of every claim
whose registry entry has a tolerance, except the timing claim's (its numbers measure the
machine, not the code). A claim without a tolerance (C2, N1-N3) has its verdicts compared
only. The fast tier checks the rest of what makes the reference stale (a registry entry
changed since, a claim without a file: tests/report/test_status.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from weince.pipeline.claims import load_claims
from weince.report.claim_file import claim_file, read_claim_file
from weince.report.reference import REFRESH, differences, read_reference

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_default_run_agrees_with_the_reference(tmp_path, copy_workflow, run_snakemake):
    wf = copy_workflow(tmp_path / "wf")
    proc = run_snakemake(wf, "--cores", "2", timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reg = load_claims(REPO / "config" / "claims.yaml")
    diffs = []
    for c in reg["claims"]:
        ours = read_claim_file(claim_file(wf / "reports" / "default", c["id"]))
        ref = read_reference(claim_file(REPO / "reference" / "default", c["id"]), c,
                             reg["alpha"])
        numbers = c.get("tolerance") is not None and c["stage"] != "timing"
        diffs += [f"{c['id']}: {d}" for d in differences(ref, ours, c, numbers=numbers)]
    assert not diffs, (f"the reference is stale ({len(diffs)} difference(s)): "
                       + "; ".join(diffs[:10]) + f"; {REFRESH}")
