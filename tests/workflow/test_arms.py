"""An arm means what it says: an arm added to ``vision.arms`` in an overlay is pretrained,
probed and k-NN-evaluated at every seed, and has a row on the ablation page, in the
default's dry run (no claim and no ablation group of the default names it)."""

from __future__ import annotations

import yaml

from weince.pipeline.ablations import ARMS_GROUP, ablation_plan
from weince.pipeline.profile import Profile


def _jobs(stdout: str) -> dict[str, list[dict[str, str]]]:
    """A dry run's jobs by rule, each ``{"input": ..., "output": ...}`` as printed."""
    jobs: dict[str, list[dict[str, str]]] = {}
    job: dict[str, str] | None = None
    for line in stdout.splitlines():
        if line.startswith(("rule ", "localrule ")):
            job = {}
            jobs.setdefault(line.split()[1].rstrip(":"), []).append(job)
        elif job is not None and line.startswith("    ") and ": " in line:
            key, _, rest = line.strip().partition(": ")
            job[key] = rest
    return jobs


def test_an_arm_added_in_an_overlay_is_trained_evaluated_and_tabled(
        tmp_path, copy_workflow, run_snakemake):
    arms = ["infonce", "weince", "weince_recipe", "dcl"]
    overlay = yaml.safe_dump({"vision": {"arms": arms}})
    wf = copy_workflow(tmp_path / "wf", {"extra_arm.yaml": overlay})
    proc = run_snakemake(wf, "-n", "--cores", "2", "--configfile", "config/extra_arm.yaml",
                         timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = _jobs(proc.stdout)
    outputs = {f.strip() for js in jobs.values() for j in js
               for f in j.get("output", "").split(",")}
    cfg = yaml.safe_load((wf / "config" / "config.yaml").read_text())
    run = "results/default/vision/digits/smallcnn/dcl/seed{}/{}"
    for seed in cfg["vision"]["seeds"]:
        for f in ("encoder.pt", "linear.json", "knn.json"):
            assert run.format(seed, f) in outputs, (seed, f)
    (page,) = jobs["ablations_report"]
    assert all(run.format(s, "linear.json") in page["input"] for s in cfg["vision"]["seeds"])
    plan = ablation_plan(Profile.of({**cfg, "vision": {**cfg["vision"], "arms": arms},
                                     "claims": str(wf / "config" / "claims.yaml")}))
    assert [r.arm for r in plan.groups[-1].rows] == arms and plan.groups[-1].name == ARMS_GROUP
    # the default as shipped names all its arms in its groups: no group of arms
    shipped = ablation_plan(Profile.of({**cfg, "claims": str(wf / "config" / "claims.yaml")}))
    assert ARMS_GROUP not in [g.name for g in shipped.groups]
