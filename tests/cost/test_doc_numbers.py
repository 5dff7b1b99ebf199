"""The counts docs/cluster.md and docs/cost.md state (jobs, GPU jobs, GPU-hours, sbatch calls,
a target's training runs) are the planner's: each is compared with `weince plan`'s dry run
of the same profile, so a change to the workflow that moves them fails here until the page
is regenerated (`weince plan --configfile <config> --markdown --submissions`)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from weince.cost.plan import dry_run, parse_dry_run, profile_settings, submissions, summarise

REPO = Path(__file__).resolve().parents[2]
SLURM = REPO / "workflow" / "executors" / "slurm"
CLUSTER = (REPO / "docs" / "cluster.md").read_text()
COST = (REPO / "docs" / "cost.md").read_text()


def _n(text: str) -> float:
    return float(text.replace(",", "").strip("* "))


@cache
def _plan(config: str, target: str = "") -> tuple:
    jobs = parse_dry_run(dry_run([config], SLURM, forceall=True,
                                 extra=[target] if target else None))
    return jobs, summarise(jobs)


def _profile_rows() -> dict[str, list[float]]:
    """The table "Jobs and GPU-hours per profile": config -> [jobs, GPU jobs, GPU-hours]."""
    rows = re.findall(r"^\| `(config/[\w.]+)`[^|]*\| ([\d,]+) \| ([\d,]+) \| ([\d,.]+) \|$",
                      CLUSTER, re.M)
    return {c: [_n(x) for x in nums] for c, *nums in rows}


@pytest.mark.slow   # one dry run per profile, the paper's of about 15,000 jobs
@pytest.mark.parametrize("config", ["config/smoke.yaml", "config/config.yaml",
                                    "config/paper.yaml"])
def test_the_profile_table_is_the_planners(config):
    rows = _profile_rows()
    assert set(rows) == {"config/smoke.yaml", "config/config.yaml", "config/paper.yaml"}
    total = _plan(config)[1][-1]
    assert rows[config] == [total["jobs"], total["gpu_jobs"], round(total["gpu_hours"], 1)], \
        (config, total)


@pytest.mark.slow
def test_the_paper_rule_table_and_the_sbatch_counts_are_the_planners():
    jobs, rows = _plan("config/paper.yaml")
    by_rule = {r["rule"]: r for r in rows[:-1]}
    table = CLUSTER.split("The paper grid per rule", 1)[1].split("\n\n", 2)[1]
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "**total**":
            assert [_n(cells[1]), _n(cells[5])] == [rows[-1]["jobs"],
                                                    round(rows[-1]["gpu_hours"], 1)]
            continue
        names = [c.strip() for c in cells[0].split(",")]
        count = _n(cells[1].removesuffix(" each"))
        for name in names:
            assert by_rule[name]["jobs"] == count, (name, cells)
        if len(names) == 1:
            assert round(by_rule[names[0]]["gpu_hours"], 1) == _n(cells[5]), cells
    named = {n for line in table.splitlines()[2:]
             for n in (c.strip() for c in line.strip("|").split("|")[0].split(","))}
    assert set(by_rule) <= named, set(by_rule) - named
    sub = submissions(jobs, profile_settings(SLURM))[-1]
    calls, njobs = re.search(r"([\d,]+) `sbatch` calls for the paper grid's ([\d,]+) jobs",
                             CLUSTER).groups()
    assert [_n(calls), _n(njobs)] == [sub["after"], rows[-1]["jobs"]]
    one = re.search(r"One `sbatch` per job would be ([\d,]+) submissions", CLUSTER).group(1)
    assert _n(one) == sub["before"]
    total = re.search(r"^\| \*\*total\*\* \| \*\*([\d,]+)\*\* \| \*\*([\d,]+)\*\* \| "
                      r"\*\*([\d,]+)\*\* \(([\d.]+) %\) \|$", CLUSTER, re.M).groups()
    assert [_n(x) for x in total[:3]] == [sub["jobs"], sub["before"], sub["after"]]
    assert float(total[3]) == round(100 * sub["after"] / sub["before"], 1)


@pytest.mark.slow
def test_cost_md_states_the_training_runs_a_claim_table_plans():
    jobs, _ = _plan("config/paper.yaml", "reports/paper/table_c3.md")
    trained = sum(j.rule == "pretrain" for j in jobs)
    said = re.search(r"`table_c3\.md` alone plans ([\d,]+)\s+pretraining runs", COST)
    assert said and _n(said.group(1)) == trained, (said, trained)
