"""The Snakemake workflow: lint, formatting, the DAG of every profile, and the smoke
profile end to end (in a temporary copy, so the repository is never written to)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from weince.pipeline.schema import read_schema
from weince.pipeline.ablations import ablation_plan
from weince.pipeline.fused import run_wildcards, vision_chains
from weince.pipeline.claims import load_claims, validate_with_defaults
from weince.pipeline.config_check import ConfigError, check_config
from weince.pipeline.profile import Profile
from weince.pipeline.stages import RERUN_FREE
from weince.report import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED
from weince.utils.verdict_words import SCALE_ONLY
from weince.report.glance import MAX_ROW_CHARS
from weince.report.html import local_refs

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEFMT = str(BIN / "snakefmt") if (BIN / "snakefmt").exists() else "snakefmt"
PROFILES = ["config.yaml", "smoke.yaml", "paper.yaml"]
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, SCALE_ONLY)
# the claims come from the registry, however many (the paper's C's and the companion N's)
CLAIM_IDS = [c["id"] for c in load_claims(REPO / "config" / "claims.yaml")["claims"]]


# ----------------------------------------------------------------------------- static checks
def test_snakemake_lint_is_clean(run_snakemake):
    proc = run_snakemake(REPO, "--lint", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition" in proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which(SNAKEFMT) is None, reason="snakefmt not installed")
def test_snakefmt_check_is_clean():
    proc = subprocess.run([SNAKEFMT, "--check", "Snakefile", "workflow/"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", PROFILES)
def test_profiles_follow_the_schema(name):
    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    schema = read_schema(REPO / "workflow/schemas/config.schema.yaml")
    validate_with_defaults(cfg, schema, name)
    assert cfg["vision"]["arms"][0] == "infonce"  # the baseline of every table


def test_schema_rejects_an_unknown_arm():
    """An arm outside the arm registry (weince.pipeline.arms) fails the config's check."""
    cfg = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    cfg["vision"]["arms"].append("softmax2")
    with pytest.raises(ConfigError, match="vision.arms.3 = 'softmax2' is not a valid choice"):
        check_config(cfg, REPO / "workflow/schemas/config.schema.yaml",
                     workflow_dir=REPO / "workflow")


def _key_paths(d: dict, prefix: str = "") -> set[str]:
    """Key paths of nested mappings; name-keyed maps (one entry per arm/data set/model/rule)
    count as a whole, since extra names there change nothing."""
    name_keyed = {"vision.losses", "vision.pretrain_by_dataset", "text.model_paths",
                  "text.losses", "resources"}
    out = set()
    for k, v in d.items():
        path = f"{prefix}{k}"
        out.add(path)
        if isinstance(v, dict) and path not in name_keyed:
            out |= _key_paths(v, path + ".")
    return out


@pytest.mark.parametrize("name", ["smoke.yaml", "paper.yaml"])
def test_profile_sets_every_key_of_the_default(name):
    """Snakemake merges `--configfile` over config/config.yaml: a key a profile leaves out
    would silently keep the default's value."""
    default = yaml.safe_load((REPO / "config/config.yaml").read_text())
    prof = yaml.safe_load((REPO / "config" / name).read_text())
    missing = _key_paths(default) - _key_paths(prof)
    assert not missing, f"{name} does not set {sorted(missing)}"


def test_default_profile_sets_rerun_incomplete():
    prof = yaml.safe_load((REPO / "profiles/default/profile.yaml").read_text())
    assert prof == {"rerun-incomplete": True}


# ----------------------------------------------------------------------------- dry runs
@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml",
                                  pytest.param("paper.yaml", marks=pytest.mark.slow)])
def test_dry_run_builds_the_dag(name, tmp_path, copy_workflow, job_counts, run_snakemake):
    wf = copy_workflow(tmp_path / "wf")
    # the default's DAG as the per-step rules plan it (its own one job per arm:
    # test_default_runs_one_job_per_arm)
    args = ["-n", "--cores", "2"] + (["--config", "vision_jobs=per_step"] if name == "config.yaml"
                                     else ["--configfile", f"config/{name}"])
    # the paper's data are not here: plan its DAG without the data check
    proc = run_snakemake(wf, *args, timeout=300, WEINCE_SKIP_PREFLIGHT="1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    for rule in ("pretrain", "features", "linear", "knn", "collect_scores", "pot", "link",
                 "simcse", "sts", "timing", "special_case", "claim_tables", "report",
                 "select_grid_point", "noise_floor"):
        assert counts.get(rule, 0) >= 1, f"{name}: no {rule} job in {counts}"
    assert counts["claim_tables"] == len(CLAIM_IDS)   # one job per claim, its inputs alone
    cfg = yaml.safe_load((wf / "config" / name).read_text())
    v = cfg["vision"]
    pairs = len(v["datasets"]) * len(v["backbones"])
    g = v["grid"]
    points = 1
    for key in ("margin", "kappa_rho", "kappa_aic"):
        points *= max(1, len(g[key]))
    # a final grid arm adopts the chosen point's run at every grid seed instead of training
    # it again (four-seed grid, official, and smoke's one seed: every seed; the default's
    # one-seed grid: seed 7); k-NN runs on every grid run only in the four-seed grid
    shared = set(v["seeds"]) <= set(g["seeds"])
    at_grid_seeds = len(set(v["seeds"]) & set(g["seeds"]))
    adopted = pairs * len([a for a in g["arms"] if a in v["arms"]]) * at_grid_seeds
    final = pairs * len(v["arms"]) * len(v["seeds"]) - adopted
    grid = pairs * len(g["arms"]) * points * len(g["seeds"])
    # the ablation arms (the profile's ablations block) add the runs the main grid has not
    plan = ablation_plan(Profile.of(cfg))
    main = {(d, b, a, int(s)) for d in v["datasets"] for b in v["backbones"]
            for a in v["arms"] for s in v["seeds"]}
    extra = {(d, b, a, s) for d, b in plan.pairs for a in plan.run_arms()
             for s in plan.seeds} - main
    assert counts["pretrain"] == final + grid + len(extra)
    assert counts["knn"] == final + grid * shared + adopted * (not shared)
    assert counts.get("adopt_grid_run", 0) == adopted
    assert counts.get("select_knn", 0) == adopted * shared
    assert counts["select_grid_point"] == pairs * len(g["arms"])
    print(f"{name}: {counts['total']} jobs ({counts['pretrain']} pretraining runs)")
    if name == "paper.yaml":
        assert points == 27 and pairs == 15
        # the official grid: every point at all four seeds (108 runs per grid arm)
        assert shared and counts["pretrain"] == 15 * (2 * 4 + 2 * 27 * 4) + len(extra)


def test_one_table_plans_that_claims_job_alone(tmp_path, copy_workflow, job_counts,
                                               run_snakemake):
    """`snakemake reports/default/table_c8.md` plans C8's own table job and what it reads
    (the timing), nothing of the other claims and not the summary."""
    wf = copy_workflow(tmp_path / "wf")
    proc = run_snakemake(wf, "-n", "--cores", "2", "reports/default/table_c8.md")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts["claim_tables"] == 1 and counts["timing"] == 1, counts
    assert "report" not in counts and "all" not in counts, counts


_STEP_RULES = ("pretrain", "features", "linear", "knn", "linear_head", "collect_scores", "pot",
               "link", "norms_vision")


def _planned(stdout: str) -> tuple[set[str], set[str]]:
    """The output files and the log files of a dry run's jobs."""
    outs: set[str] = set()
    logs: set[str] = set()
    for line in stdout.splitlines():
        key, _, rest = line.strip().partition(": ")
        if key in ("output", "log"):
            (outs if key == "output" else logs).update(x.strip() for x in rest.split(","))
    return outs, logs


def test_default_runs_one_job_per_arm(tmp_path, copy_workflow, job_counts, run_snakemake):
    """`vision_jobs: per_arm` (the default's): one job per vision arm (its seeds in turn)
    and one per SimCSE run with its STS evaluation, planning exactly the files and logs the
    per-step rules plan, and no per-step vision job."""
    wf = copy_workflow(tmp_path / "wf")
    fused = run_snakemake(wf, "-n", "--cores", "2", timeout=300)
    per_step = run_snakemake(wf, "-n", "--cores", "2", "--config", "vision_jobs=per_step",
                             timeout=300)
    for proc in (fused, per_step):
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _planned(fused.stdout) == _planned(per_step.stdout)
    a, b = job_counts(fused.stdout), job_counts(per_step.stdout)
    assert not set(_STEP_RULES) & set(a), a
    encoders = b["features"]          # every trained or adopted encoder is read once
    prof = Profile.of(yaml.safe_load((wf / "config/config.yaml").read_text()))
    arms = {run_wildcards(t)["arm"] for ts in vision_chains(prof).values() for t in ts}
    assert encoders > len(arms) == 7
    assert sum(n for r, n in a.items() if r.startswith("vision_run_")) == len(arms)
    # and each SimCSE run with its STS evaluation in one job
    assert a["text_run"] == b["simcse"] == b["sts"] and not {"simcse", "sts"} & set(a)
    assert a["total"] == (b["total"] - sum(b.get(r, 0) for r in _STEP_RULES) + len(arms)
                          - b["sts"])
    for rule in set(a) - {"total", "text_run"}:
        assert rule.startswith("vision_run_") or a[rule] == b[rule], rule


@pytest.mark.parametrize("args", [["--configfile", "config/paper.yaml"],
                                  ["--configfile", "config/smoke.yaml"],
                                  ["--config", "vision_jobs=per_step"]])
def test_per_step_profiles_define_no_encoder_job(args, tmp_path, copy_workflow, run_snakemake):
    """The paper's and smoke's rules (and the default's with `vision_jobs=per_step`) are
    the per-step rules alone: their jobs, rerun triggers and partial targets are theirs."""
    wf = copy_workflow(tmp_path / "wf")
    proc = run_snakemake(wf, "--list-rules", *args, timeout=300, WEINCE_SKIP_PREFLIGHT="1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rules = set(proc.stdout.split())
    assert set(_STEP_RULES) <= rules and not any(r.startswith("vision_run_") for r in rules)


# ----------------------------------------------------------------------------- smoke, end to end
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, copy_workflow, run_snakemake):
    """The fast tier's one end-to-end DAG: the README's smoke command in a workflow copy,
    run once for this module's smoke tests (the slow tier's smoke run is killed and resumed
    instead: tests/workflow/test_resume.py)."""
    wf = copy_workflow(tmp_path_factory.mktemp("smoke") / "wf")
    proc = run_snakemake(wf, "--cores", "2", "--configfile", "config/smoke.yaml", timeout=1500)
    if proc.returncode != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-1500:]}"
                         for p in (wf / "results/smoke/logs").rglob("*.log"))
        pytest.fail(f"smoke run failed:\n{(proc.stdout + proc.stderr)[-4000:]}\n{logs[-8000:]}")
    return wf


def test_smoke_summary_lists_every_claim_with_a_verdict(smoke_run):
    summary = (smoke_run / "reports/smoke/summary.md").read_text()
    for cid in CLAIM_IDS:
        line = next((ln for ln in summary.splitlines() if ln.startswith(f"| {cid} |")), None)
        assert line is not None, f"{cid} missing from the summary"
        assert any(v in line for v in VERDICTS), line
        assert len(line) <= MAX_ROW_CHARS, (cid, len(line))
    assert "| Claim | What | Source | Paper | Ours | Verdict | Page |" in summary
    # every local link and image of the HTML pages the rules wrote resolves; a link to a
    # project doc (../../../docs/x.md) resolves in the repository, which this copy is not
    html_dir = smoke_run / "reports/smoke/html"
    pages = sorted(html_dir.rglob("*.html"))
    assert len(pages) >= len(CLAIM_IDS) + 1
    for page in pages:
        for ref in local_refs(page.read_text()):
            doc = re.fullmatch(r"(?:\.\./)+docs/([\w-]+\.md)", ref)
            if doc:
                assert (REPO / "docs" / doc.group(1)).is_file(), f"{page}: {ref}"
                continue
            assert (page.parent / ref.split("#")[0]).exists(), f"{page}: {ref}"
    claims = json.loads((smoke_run / "reports/smoke/claims.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in claims["claims"]}
    assert verdicts["C9"] == REPRODUCED      # lambda = 0 is InfoNCE, computed
    # no CIFAR-100 at the smoke profile: its digits / smallcnn gain is a scale-model number,
    # and the verdict says so instead of "not run" beside it
    assert verdicts["C3"] == SCALE_ONLY
    assert verdicts["C1"] == verdicts["C2"] == SCALE_ONLY   # digits: not a paper setting
    # N1-N3 follow the same rule: our encoders are not the companion paper's models
    assert verdicts["N1"] == verdicts["N2"] == verdicts["N3"] == SCALE_ONLY
    for cid in CLAIM_IDS:
        md = (smoke_run / f"reports/smoke/table_{cid.lower()}.md").read_text()
        assert "git commit" in md and "config hash" in md
    # N1-N3 are registry claims whose verdicts are the norms page's, from norms.json
    norms = json.loads((smoke_run / "reports/smoke/norms_summary.json").read_text())
    assert {"N1", "N2", "N3"} <= set(CLAIM_IDS)
    assert {c: verdicts[c] for c in ("N1", "N2", "N3")} == \
        {c: v["verdict"] for c, v in norms["claims"].items()}
    # the grid point each table's arm uses, chosen on what (per metric for k-NN)
    c3 = (smoke_run / "reports/smoke/table_c3.md").read_text()
    c6 = (smoke_run / "reports/smoke/table_c6.md").read_text()
    assert "## Grid selection" in c3 and "| val_acc |" in c3
    assert "| val.acc@50 |" in c6 and "| val.recall@1 |" in c6
    sel = json.loads((smoke_run / "results/smoke/vision/digits/smallcnn/weince/selection.json")
                     .read_text())
    knn = json.loads((smoke_run / "results/smoke/vision/digits/smallcnn/weince/seed7/knn.json")
                     .read_text())
    assert knn["selected_point"] == {m: c["chosen"] for m, c in sel["knn"].items()}
    # the scale line names the options the smoke profile takes off the official protocol
    assert "option(s) off the official protocol, listed on every vision claim's page" in summary
    assert "options off the official protocol: Adam weight decay" in c3


def test_smoke_every_job_has_a_benchmark(smoke_run):
    """Every rule has a `benchmark:` under results/{profile}/benchmarks (the rehearsal's cost
    forecast reads them): one benchmark per job, at the same place as the job's log."""
    logs = smoke_run / "results/smoke/logs"
    bench = smoke_run / "results/smoke/benchmarks"
    jobs = {p.relative_to(logs).with_suffix("").as_posix() for p in logs.rglob("*.log")}
    timed = {p.relative_to(bench).with_suffix("").as_posix() for p in bench.rglob("*.tsv")}
    assert jobs and jobs == timed, (sorted(jobs - timed), sorted(timed - jobs))
    for p in bench.rglob("*.tsv"):
        head, row = p.read_text().splitlines()[:2]
        assert head.split("\t")[0] == "s" and float(row.split("\t")[0]) >= 0, p


def test_smoke_deleting_one_result_reruns_only_its_dependents(smoke_run, job_counts,
                                                             run_snakemake):
    knn = smoke_run / "results/smoke/vision/digits/smallcnn/weince/seed7/knn.json"
    keep = smoke_run / "results/smoke/vision/digits/smallcnn/weince/seed7/linear.json"
    before = keep.stat().st_mtime_ns
    knn.unlink()
    proc = run_snakemake(smoke_run, "-n", "--cores", "2", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts, proc.stdout[-3000:]
    # the final grid arm's k-NN, assembled per metric from the grid runs (select_knn), the
    # two claim tables that read knn.json (C6 and C10), the summary, `all`
    assert counts == {"select_knn": 1, "claim_tables": 2, "report": 1, "all": 1, "total": 5}, \
        counts
    proc = run_snakemake(smoke_run, "--cores", "2", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert knn.exists() and keep.stat().st_mtime_ns == before


def test_smoke_keeps_no_features_and_no_finished_checkpoint(smoke_run):
    """Intermediate files a later job rebuilds cheaply are temporary: no features.pt is left
    once its readers are done; a finished training's checkpoint is gone once its features
    job ran; the final grid arm's adopted encoder is a link to the chosen point's, and its
    folder's ADOPTED.md says whose run it is."""
    runs = smoke_run / "results/smoke/vision"
    assert list(runs.rglob("encoder.pt"))
    assert not list(runs.rglob("features.pt"))
    assert not list(runs.rglob("checkpoint.pt"))
    adopted = runs / "digits/smallcnn/weince/seed7/encoder.pt"
    sel = json.loads((runs / "digits/smallcnn/weince/selection.json").read_text())
    assert adopted.is_symlink()
    assert adopted.resolve() == (runs / f"digits/smallcnn/weince@{sel['chosen']}/seed7"
                                 / "encoder.pt").resolve()
    note = (adopted.parent / "ADOPTED.md").read_text()
    assert f"grid point {sel['chosen']}'s run at seed 7, adopted, not retrained" in note
    assert "digits/smallcnn/weince/selection.json" in note


@pytest.mark.parametrize("change, retrained", [
    # settings that cannot change a result retrain nothing
    (["threads=2"], 0),
    (["download=True"], 0),
    (["vision={pretrain: {progress: true, keep_checkpoint: true}}"], 0),
    (["data_root=ABS"], 0),
    # what can change a result reruns exactly the runs it changes: every encoder...
    (["vision={pretrain: {epochs: 2}}"], 6),
    # ... or the one arm whose loss option it is
    (["vision={losses: {weince_recipe: {top_m: 40}}}"], 1),
])
def test_smoke_only_what_changes_a_result_plans_a_pretraining(smoke_run, run_snakemake,
                                                              job_counts, change, retrained):
    change = [c.replace("ABS", str((smoke_run / "data").resolve())) for c in change]
    proc = run_snakemake(smoke_run, "-n", "--cores", "2", "--configfile", "config/smoke.yaml",
                         "--config", *change)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts.get("pretrain", 0) == retrained, (change, counts)
    if not retrained:
        assert counts == {}, (change, counts)     # nothing at all: "Nothing to be done"


# every run-time setting the schema allows, anywhere (RERUN_FREE keys), and a value that
# differs from the smoke profile's; none of them may reach a rule's params
RUN_TIME_VALUES = {"device": "auto", "threads": 2, "offline": False, "data_root": "ABS",
                   "download": True, "num_workers": 2, "compile": True,
                   "compile_step": "default", "progress": True, "timing_warmup": 3,
                   "keep_checkpoint": True, "chunk": 7, "eval_batch_size": 3,
                   "tensorboard": True, "keep_states": "epochs"}
# not run-time there: the loss-timing mode is what C8 measures; a resource's threads are
# Snakemake's (threads_for), which never reruns a job either but is not a config of a stage
RUN_TIME_EXCEPT = {"timing.config.compile", "resources.*.threads"}


def _run_time_paths() -> list[tuple[str, ...]]:
    schema = read_schema(REPO / "src/weince/pipeline/config.schema.yaml")
    found: list[tuple[str, ...]] = []

    def walk(node, path):
        if not isinstance(node, dict):
            return
        for key, sub in (node.get("properties") or {}).items():
            if key in RERUN_FREE and ".".join((*path, key)) not in RUN_TIME_EXCEPT:
                found.append((*path, key))
            walk(sub, (*path, key))
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], (*path, "*"))

    walk(schema, ())
    return found


def _run_time_changes(abs_root: str) -> dict[str, list[str]]:
    """``--config`` arguments per case: each top-level run-time key alone, then every
    stage's run-time keys at once (``pretrain_by_dataset.*`` as the smoke data set)."""
    cases: dict[str, list[str]] = {}
    nested: dict = {}
    for path in _run_time_paths():
        value = RUN_TIME_VALUES[path[-1]]
        value = abs_root if value == "ABS" else value
        if len(path) == 1:   # Snakemake reads a top-level boolean as True / False only
            shown = str(value) if isinstance(value, bool) else json.dumps(value)
            cases[path[0]] = [f"{path[0]}={shown}"]
            continue
        node = nested
        for part in path[:-1]:
            node = node.setdefault("digits" if part == "*" else part, {})
        node[path[-1]] = value
    cases["every stage's run-time keys"] = [f"{k}={json.dumps(v)}" for k, v in nested.items()]
    return cases


@pytest.mark.slow   # one dry run per case on the finished smoke run
def test_smoke_no_run_time_setting_reaches_a_rules_params(smoke_run, run_snakemake,
                                                          job_counts):
    """Every run-time key the schema allows (device, threads, data_root, progress, ...),
    changed on a finished smoke run, plans nothing: none is in any rule's params."""
    cases = _run_time_changes(str((smoke_run / "data").resolve()))
    assert {"device", "threads", "offline", "data_root", "download"} <= set(cases)
    planned = {}
    for case, change in cases.items():
        proc = run_snakemake(smoke_run, "-n", "--cores", "2", "--configfile",
                             "config/smoke.yaml", "--config", *change)
        assert proc.returncode == 0, (change, proc.stdout[-3000:] + proc.stderr[-3000:])
        if job_counts(proc.stdout):
            planned[case] = (job_counts(proc.stdout), proc.stdout[-1500:])
    assert not planned, planned


@pytest.mark.slow   # a pretraining and what reads it, run again
def test_smoke_a_truncated_encoder_names_the_command_that_rebuilds_it(smoke_run,
                                                                      run_snakemake):
    """Deleting an encoder alone leaves Snakemake nothing to do (its features.pt is
    temporary, its readers are finished); truncated, it stops the job that reads it with its
    digest, and the command the error names rebuilds it, byte for byte."""
    enc = smoke_run / "results/smoke/vision/digits/smallcnn/infonce/seed7/encoder.pt"
    good = enc.read_bytes()
    args = ("--cores", "2", "--configfile", "config/smoke.yaml")
    enc.unlink()        # while every file made from it is finished: why deleting is not enough
    proc = run_snakemake(smoke_run, "-n", *args)
    assert "Nothing to be done" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    enc.write_bytes(good[:1000])     # its readers now run again, and stop at its digest
    proc = run_snakemake(smoke_run, *args, timeout=1500)
    assert proc.returncode != 0
    logs = "\n".join(p.read_text() for p in (smoke_run / "results/smoke/logs").rglob("*.log"))
    # the reader checks the encoder against the digest its train.json records, whatever its
    # mtime (weince.pipeline.digests)
    said = re.search(r"encoder\.pt: its SHA-256 \S+ is not the \S+ that \S+train\.json records "
                     r"for it \(truncated, edited or swapped\); rebuild it: snakemake ([^\n]*)",
                     logs)
    # the command as printed: the run's own --cores and --configfile, then --forcerun
    assert said, logs[-3000:]
    printed = shlex.split(said.group(1))
    assert printed == ["--forcerun", str(enc.relative_to(smoke_run)), *args], said.group(0)
    proc = run_snakemake(smoke_run, *printed, timeout=1500)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert enc.read_bytes() == good
    proc = run_snakemake(smoke_run, "-n", *args)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _logs_since(wf, t0: float) -> str:
    return "\n".join(p.read_text() for p in (wf / "results/smoke/logs").rglob("*.log")
                     if p.stat().st_mtime >= t0)


@pytest.mark.slow   # claim tables and a probe run again
def test_smoke_a_corrupt_result_and_a_damaged_log_name_commands_that_run_as_printed(
        smoke_run, run_snakemake):
    """A corrupt linear.json stops the claim table that reads it with a hint whose command
    carries the run's --cores and --configfile and rebuilds it as printed; one truncated line
    of the baseline's training log stops C3's figure naming the file and the line, never a
    figure without that curve."""
    args = ("--cores", "2", "--configfile", "config/smoke.yaml")
    run = smoke_run / "results/smoke/vision/digits/smallcnn/infonce/seed7"
    probe = run / "linear.json"
    acc = json.loads(probe.read_text())["test_acc"]
    probe.write_text(probe.read_text()[:40])
    t0 = time.time()
    proc = run_snakemake(smoke_run, *args, timeout=1500)
    assert proc.returncode != 0
    said = re.search(r"not valid JSON \(.*?\); delete it and re-run the rule that makes it "
                     r"\(`snakemake ([^`]*)`\)", _logs_since(smoke_run, t0))
    assert said, _logs_since(smoke_run, t0)[-3000:]
    printed = shlex.split(said.group(1))
    assert printed == [str(probe.relative_to(smoke_run)), *args], said.group(0)
    probe.unlink()
    proc = run_snakemake(smoke_run, *printed, timeout=1500)      # as printed
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert json.loads(probe.read_text())["test_acc"] == acc

    log = run / "train_log.jsonl"
    good = log.read_text()
    log.write_text(good[:-10])          # the last record cut mid-line
    t0 = time.time()
    # the table job draws the figure; the logs are not its declared inputs, so it is forced
    # (the target first: --configfile would take it for one more config file)
    proc = run_snakemake(smoke_run, "reports/smoke/table_c3.md", *args, "--forcerun",
                         "reports/smoke/table_c3.md", timeout=1500)
    assert proc.returncode != 0
    said = proc.stderr + _logs_since(smoke_run, t0)
    n = good.count("\n")
    assert re.search(rf"{re.escape(str(log.relative_to(smoke_run)))}:{n} is not valid JSON "
                     rf"[^\n]*`snakemake --forcerun {re.escape(str(log.relative_to(smoke_run)))} "
                     rf"--cores 2 --configfile config/smoke.yaml`", said), said[-3000:]
    log.write_text(good)
    proc = run_snakemake(smoke_run, *args, timeout=1500)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


# a probe setting (vision.linear.*), changed on a finished smoke run, reruns the probes and
# the tables and pages that read them; the grid arm's choice on validation reads the probes'
# val_acc, so its selection, the adopted run at the grid seed (its k-NN taken per metric, its
# features and norms analysis) and what reads them run again too. Never the features, k-NN
# or norms jobs of any other run (the probes extract their own features in memory).
PROBE_ONLY = {"linear": 6, "select_grid_point": 1, "adopt_grid_run": 1, "select_knn": 1,
              "features": 1, "norms_vision": 1, "claim_tables": 8, "ablations_report": 1,
              "norms_report": 1, "report": 1, "all": 1}
PROBE_VALUES = {"feature": "head", "seeds": [2], "epochs": 6, "lr": 2.0e-3,
                "batch_size": 128, "val_frac": 0.25, "split_seed": 2, "select": "best_epoch",
                "weight_decay": 1.0e-4, "standardize": True,
                "seeds_by_arm": {"infonce": [2]}}


def _probe_keys() -> list[str]:
    """Every result-relevant key of the schema's vision.linear block."""
    schema = read_schema(REPO / "src/weince/pipeline/config.schema.yaml")
    block = schema["properties"]["vision"]["properties"]["linear"]
    ref = block.get("$ref") or next((s["$ref"] for s in block.get("allOf", []) if "$ref" in s),
                                    None)
    keys = set(block.get("properties", {}))
    if ref:
        keys |= set(schema["$defs"][ref.rsplit("/", 1)[-1]]["properties"])
    return sorted(k for k in keys if k not in RERUN_FREE)


@pytest.mark.slow   # one dry run per probe key on the finished smoke run
def test_smoke_a_probe_setting_reruns_the_probes_and_what_reads_them(smoke_run,
                                                                     run_snakemake,
                                                                     job_counts):
    keys = _probe_keys()
    assert {"epochs", "lr", "seeds", "val_frac", "seeds_by_arm"} <= set(keys), keys
    assert set(keys) <= set(PROBE_VALUES), f"no test value for {set(keys) - set(PROBE_VALUES)}"
    planned = {}
    for key in keys:
        change = json.dumps({"linear": {key: PROBE_VALUES[key]}})
        proc = run_snakemake(smoke_run, "-n", "--cores", "2", "--configfile",
                             "config/smoke.yaml", "--config", f"vision={change}")
        assert proc.returncode == 0, (key, (proc.stdout + proc.stderr)[-3000:])
        counts = job_counts(proc.stdout)
        counts.pop("total", None)
        if key == "seeds_by_arm":   # one arm's probe: that arm's runs, not the grid's
            assert set(counts) <= set(PROBE_ONLY) - {"select_grid_point", "adopt_grid_run",
                                                     "select_knn", "features",
                                                     "norms_vision"}, counts
            assert 0 < counts.get("linear", 0) < PROBE_ONLY["linear"], counts
        elif counts != PROBE_ONLY:
            planned[key] = counts
    assert not planned, planned
