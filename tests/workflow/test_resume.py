"""The slow tier's smoke run: plain `snakemake` resumes after a hard kill, and the slow checks
that read the resumed run (a result file of the wrong schema, the LaTeX tables, the results
bundle round trip, Snakemake's HTML report).

The kill-and-resume run is built once for the module (the ``smoke_kill`` fixture runs
:func:`kill_mid_pretraining_then_resume`; the kill test checks it with
:func:`check_kill_and_resume`); every other test here reads the resumed run
(``smoke_resumed``). Both fixtures are slow-tier fixtures (``SLOW_FIXTURES`` in
tests/conftest.py): a test that uses one is in the slow tier whatever its own marks.

The smoke DAG is killed with `kill -9` of Snakemake's whole process group while a
pretraining job is between two epochs, then resumed with the README's exact commands:
the one-line unlock for the stale lock, then the same run command. The default workflow
profile (`profiles/default/`, read without a flag) sets `rerun-incomplete`, which is what
lets the second run redo the interrupted job; pretraining itself continues from its
checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from tests.test_docs_commands import documented_commands
from weince.bundle import rebuild_command, verify_bundle
from weince.bundle.make import REPORT_RULES
from weince.bundle.reevaluate import reevaluate
from weince.bundle.verify import normalise
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.report import build_report
from weince.report.html import SUMMARY_CATEGORY, claim_categories
from weince.utils.config import deep_merge

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
CLAIM_IDS = [c["id"] for c in load_claims(REPO / "config" / "claims.yaml")["claims"]]


def _readme_commands() -> tuple[list[str], list[str]]:
    """The smoke run command and the unlock command, as the README writes them."""
    text = (REPO / "README.md").read_text()
    run = re.search(r"`(snakemake --cores 2 --configfile config/smoke\.yaml)`", text)
    unlock = re.search(r"`(snakemake --unlock[^`]*)`", text)
    assert run and unlock, "README lost its smoke command or its unlock line"
    return shlex.split(run.group(1)), shlex.split(unlock.group(1))


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(cwd: Path, argv: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_env())


def kill_mid_pretraining_then_resume(wf: Path, logdir: Path) -> dict:
    """In the workflow copy ``wf`` (three pretraining epochs, so a kill can land after a
    checkpoint and before the encoder): the README's smoke command, ``kill -9`` of its whole
    process group as soon as a pretraining run has a checkpoint and no encoder, then the
    same command again (refused: stale lock), the unlock line, a dry run without the default
    profile, the unlock line and the command to the end. Records every step's outcome for
    :func:`check_kill_and_resume`; asserts nothing, so the run always reaches its end (the
    other tests of this module read it)."""
    run_cmd, unlock_cmd = _readme_commands()
    smoke = yaml.safe_load((wf / "config/smoke.yaml").read_text())
    smoke["vision"]["pretrain"]["epochs"] = 3
    (wf / "config/smoke.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))

    runs = wf / "results/smoke/vision"
    first_log = logdir / "first.log"
    log = open(first_log, "w")
    proc = subprocess.Popen(run_cmd, cwd=wf, stdout=log, stderr=subprocess.STDOUT,
                            env=_env(), start_new_session=True)
    killed = None
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            mid = [c.parent for c in runs.rglob("checkpoint.pt")
                   if not (c.parent / "encoder.pt").exists()] if runs.exists() else []
            if mid:
                os.killpg(proc.pid, signal.SIGKILL)  # snakemake and every job it started
                killed = mid[0]
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
    rec = {"killed": killed, "first_log": first_log.read_text(),
           "encoder_after_kill": killed is not None and (killed / "encoder.pt").exists()}
    rec["again"] = _run(wf, run_cmd, timeout=300)           # the dead run's lock is there
    rec["unlock1"] = _run(wf, unlock_cmd, timeout=300)
    rec["bare"] = _run(wf, run_cmd + ["-n", "--workflow-profile", "none"], timeout=300)
    rec["unlock2"] = _run(wf, unlock_cmd, timeout=300)
    rec["done"] = _run(wf, run_cmd, timeout=1500)
    return rec


def check_kill_and_resume(wf: Path, rec: dict) -> None:
    """The kill landed mid-pretraining; the README's commands then finish the DAG, the
    interrupted run continuing from its checkpoint."""
    killed = rec["killed"]
    assert killed is not None, "no pretraining job was caught mid-run:\n" + \
        rec["first_log"][-3000:]
    assert not rec["encoder_after_kill"]
    # the same command right away: the dead run's lock is still there
    again = rec["again"]
    assert again.returncode != 0 and "--unlock" in again.stdout + again.stderr
    # without the default profile the interrupted job blocks the DAG (what the profile fixes)
    assert rec["unlock1"].returncode == 0
    bare = rec["bare"]
    assert bare.returncode != 0 and "rerun-incomplete" in bare.stdout + bare.stderr
    # the README's unlock line, then its command: runs to the end
    assert rec["unlock2"].returncode == 0
    done = rec["done"]
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "workflow specific profile profiles/default" in out
    assert (wf / "reports/smoke/summary.md").exists()
    train = json.loads((killed / "train.json").read_text())
    assert train["resumed_from_epoch"] >= 1  # continued from the checkpoint, not from zero
    epochs = [json.loads(line)["epoch"] for line in
              (killed / "train_log.jsonl").read_text().splitlines() if line.strip()]
    assert epochs == [1, 2, 3]


# ----------------------------------------------------------------------------- the run, once
@pytest.fixture(scope="module")
def smoke_kill(tmp_path_factory, copy_workflow):
    """The smoke DAG as a user meets it after a crash: killed with ``kill -9`` mid-pretraining,
    then the README's unlock line and the same command to the end."""
    wf = copy_workflow(tmp_path_factory.mktemp("smoke") / "wf")
    record = kill_mid_pretraining_then_resume(wf, wf.parent)
    if record["done"].returncode != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-1500:]}"
                         for p in (wf / "results/smoke/logs").rglob("*.log"))
        out = record["done"].stdout + record["done"].stderr
        pytest.fail(f"smoke run failed:\n{out[-4000:]}\n{logs[-8000:]}")
    return wf, record


@pytest.fixture(scope="module")
def smoke_resumed(smoke_kill):
    """The workflow copy the resumed smoke run finished in."""
    return smoke_kill[0]


def test_smoke_kill_9_mid_pretraining_then_the_readme_commands_finish(smoke_kill):
    check_kill_and_resume(*smoke_kill)


# ------------------------------------------------------------------------ slow checks of the run
def test_smoke_wrong_schema_result_is_a_clear_error(smoke_resumed, run_snakemake):
    lin = smoke_resumed / "results/smoke/vision/digits/smallcnn/infonce/seed7/linear.json"
    saved = lin.read_text()
    d = json.loads(saved)
    d.pop("test_acc")
    lin.write_text(json.dumps(d))
    try:
        # the file is now newer than table_c3.md: asking for the table re-runs its rule
        proc = run_snakemake(smoke_resumed, "reports/smoke/table_c3.md", "--cores", "1",
                         "--configfile", "config/smoke.yaml")
        assert proc.returncode != 0
        log = (smoke_resumed / "results/smoke/logs/claim_tables/c3.log").read_text()   # C3's job
        assert str(lin.relative_to(smoke_resumed)) in log and "'test_acc'" in log, log[-2000:]
    finally:
        lin.write_text(saved)
        # the failed job's table was removed by snakemake: rebuild it from the good file
        proc = run_snakemake(smoke_resumed, "reports/smoke/table_c3.md", "--cores", "1",
                         "--configfile", "config/smoke.yaml")
        assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex not installed (apt-get install texlive-latex-recommended)")
def test_smoke_latex_tables_compile(smoke_resumed):
    out = smoke_resumed / "reports/smoke"
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "tables.tex"], cwd=out, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]


# ----------------------------------------------------------------------------- results bundle
def test_smoke_bundle_verifies_and_rebuilds_without_training(
        smoke_resumed, tmp_path, report_only_venv, verify_no_torch, copy_workflow, job_counts,
        run_snakemake):
    """Bundle the smoke run, verify it, unpack it into a fresh checkout and run
    the documented command: only report jobs, and the same tables."""
    out = tmp_path / "smoke.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "weince.cli", "bundle", "--profile", "smoke",
                           "--out", str(out)], cwd=smoke_resumed, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "OK: every file matches its hash" in proc.stdout
    assert verify_bundle(out).ok
    # ... and in a fresh virtual environment holding only the report's dependencies
    py = report_only_venv(tmp_path / "venv")
    proc = subprocess.run([str(py), "-c", verify_no_torch, str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    checkout = copy_workflow(tmp_path / "checkout")
    # the commit the bundle came from: the run's own smoke.yaml (three pretraining epochs,
    # set by the smoke_kill fixture so that the kill lands between two epochs)
    shutil.copy2(smoke_resumed / "config/smoke.yaml", checkout / "config/smoke.yaml")
    # the README's unpacking command: `weince verify ARCHIVE --extract CHECKOUT`
    res = verify_bundle(out, extract=checkout)
    assert res.ok and res.extracted.startswith("unpacked "), res.render()
    assert not list(checkout.rglob("encoder.pt")) and not list(checkout.rglob("features.pt"))
    args = rebuild_command("smoke").split()[1:]
    proc = run_snakemake(checkout, "-n", *args, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert set(counts) - {"total", "all"} == set(REPORT_RULES), counts
    assert counts["claim_tables"] == len(CLAIM_IDS)   # one job per claim's table
    proc = run_snakemake(checkout, *args, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shipped = checkout / "results/smoke/bundle/reports"
    names = ["summary.md", "tables.tex", "ablations.md", "norms.md"] + [
        f"table_{cid.lower()}.{ext}" for cid in CLAIM_IDS for ext in ("md", "tex")] + [
        f"claims/{cid.lower()}.json" for cid in CLAIM_IDS]
    for name in names:
        assert normalise((checkout / "reports/smoke" / name).read_text()) == \
            normalise((shipped / name).read_text()), name


def _edit_consistently(src: Path, dst: Path, member: str, edit) -> None:
    """A copy of bundle ``src`` whose ``member`` (a JSON result) is ``edit``-ed, its size and
    SHA-256 rewritten in the manifest and SHA256SUMS: what a sender who changes a number
    everywhere it is hashed ships."""
    work = dst.parent / (dst.name + ".d")
    with tarfile.open(src) as tar:
        tar.extractall(work, filter="data")
    f = work / member
    data = json.loads(f.read_text())
    edit(data)
    f.write_text(json.dumps(data, indent=2) + "\n")
    man_path = next(work.glob("**/bundle/manifest.json"))
    man = json.loads(man_path.read_text())
    for entry in man["files"]:
        if entry["path"] == member:
            entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
            entry["bytes"] = f.stat().st_size
    man_path.write_text(json.dumps(man, indent=1) + "\n")
    (man_path.parent / "SHA256SUMS").write_text(
        "".join(f"{e['sha256']}  {e['path']}\n" for e in man["files"]))
    with tarfile.open(dst, "w:gz") as tar:   # the manifest first, as weince bundle writes it
        for p in sorted((q for q in work.rglob("*") if q.is_file()),
                        key=lambda q: (q != man_path, str(q))):
            tar.add(p, arcname=str(p.relative_to(work)))


def test_smoke_numbers_are_recomputed_and_reevaluated(smoke_resumed, tmp_path, capsys):
    """A bundle with its encoders and text models: every probe number follows from its
    predictions, the re-evaluated runs (one of every kind and arm) match, and a test_acc
    edited consistently with the manifest fails through its predictions."""
    out = tmp_path / "smoke.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "weince.cli", "bundle", "--profile", "smoke",
                           "--out", str(out), "--with-models", "--no-check"],
                          cwd=smoke_resumed, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "results made at GPU types: cpu" in proc.stdout
    res = verify_bundle(out)
    assert res.ok and res.recheck_files > 0 and not res.unchecked, res.render()
    lines: list[str] = []
    assert reevaluate(out, 2, seed=0, say=lines.append) == 0, "\n".join(lines)
    text = "\n".join(lines)
    # N = 2 is raised to cover every kind and arm: a grid arm's assembled k-NN and the
    # SimCSE models' STS numbers included
    assert "picked with seed 0 (--seed): one of each of the" in text
    for kind in ("(plain, ", "(grid point, ", "(grid-adopted, ", "(sts, "):
        assert kind in text, text
    assert "assembled: grid point" in text and "CANNOT RE-EVALUATE" not in text
    assert "CPU time per encoder" in text and "CPU time per STS model" in text
    assert "REEVALUATED: every number matches" in text
    member = next(p for p in (f["path"] for f in json.loads(tarfile.open(out).extractfile(
        "results/smoke/bundle/manifest.json").read())["files"]) if p.endswith("/linear.json"))

    def edit(d):
        d["per_seed"][0]["test_acc"] += 5.0
        d["test_acc"]["values"][0] += 5.0
        d["test_acc"]["mean"] = sum(d["test_acc"]["values"]) / len(d["test_acc"]["values"])
    bad = tmp_path / "edited.tar.gz"
    _edit_consistently(out, bad, member, edit)
    res = verify_bundle(bad)
    assert not res.mismatched and not res.ok and res.exit_code == 1
    assert any(f.startswith(f"{member}: per_seed[0]") for f in res.recheck_failed), res.render()
    assert f"NUMBER MISMATCH {member}: per_seed[0] (seed 1) test_acc" in res.render()


def test_smoke_snakemake_html_report_shows_every_claim(smoke_resumed, run_snakemake):
    """`snakemake --report` builds the standard self-contained report with every claim's
    page (table + forest plot) in its own category, the summary and the figures."""
    proc = run_snakemake(smoke_resumed, "--report", "reports/smoke/report.html",
                     "--configfile", "config/smoke.yaml", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (smoke_resumed / "reports/smoke/report.html").read_text()
    cats = claim_categories(smoke_resumed / "config/claims.yaml")
    assert set(cats) == set(CLAIM_IDS)
    for cid in CLAIM_IDS:
        assert f"claim_{cid.lower()}.html" in html, f"{cid} page missing from the report"
        assert f'"{cats[cid]}' in html, f"{cid} category missing from the report"
    for name in ("summary.html", "forest_c1.png", "Ablations and norms", SUMMARY_CATEGORY):
        assert name in html, name


# ------------------------------------------------------------------------ the documented commands
def _docs_world(smoke: Path, tmp: Path, copy_workflow) -> tuple[Path, dict]:
    """A folder where every command of docs/reviewing.md and the README's site and reviewer
    commands can run as printed: a workflow checkout whose profile ``default`` is the smoke
    profile's sizes (its ``config/config.yaml`` is the smoke one under the name
    ``default``), with the resumed smoke run's results and a report built from them; the
    smoke run's archive with its encoders (``smoke.tar.gz``); a site's SSH key in ``~/.ssh``
    (``HOME`` is the world's) with ``allowed_signers`` naming it; ``~/data`` (the smoke
    run's data); an empty ``results/paper`` for the paper profile's site commands; and
    ``CHECKOUT``, a second checkout with the same config to unpack into."""
    world = copy_workflow(tmp / "world")
    cfg = yaml.safe_load((world / "config/config.yaml").read_text())
    deep_merge(cfg, yaml.safe_load((world / "config/smoke.yaml").read_text()))
    cfg["profile"] = "default"
    (world / "config/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    shutil.copytree(smoke / "results" / "smoke", world / "results" / "default", symlinks=True)
    # the smoke run under its own name too, for the commands that name the smoke profile
    # (the training audit's bundle and replays), with its data
    shutil.copytree(smoke / "results" / "smoke", world / "results" / "smoke", symlinks=True)
    shutil.copytree(smoke / "reports" / "smoke", world / "reports" / "smoke")
    if not (world / "data").exists():
        (world / "data").symlink_to((smoke / "data").resolve(), target_is_directory=True)
    cwd = os.getcwd()
    os.chdir(world)
    try:
        build_report(Profile.of(cfg))
    finally:
        os.chdir(cwd)
    (world / "results" / "paper").mkdir()
    home = tmp / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "site", "-f",
                    str(key)], check=True, capture_output=True)
    (world / "allowed_signers").write_text(
        f"lab-a@example.org {key.with_suffix('.pub').read_text().strip()}\n")
    (home / "data").symlink_to((smoke / "data").resolve(), target_is_directory=True)
    proc = _run(smoke, [sys.executable, "-m", "weince.cli", "bundle", "--profile", "smoke",
                        "--out", str(world / "smoke.tar.gz"), "--with-models", "--no-check"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    copy_workflow(world / "CHECKOUT")
    shutil.copyfile(world / "config/config.yaml", world / "CHECKOUT/config/config.yaml")
    env = {**_env(), "HOME": str(home), "WEINCE_SKIP_PREFLIGHT": "1"}
    return world, env


# archives a page names but makes elsewhere: made before the first command that reads them,
# as the page's own commands make theirs (another site's archive, another copy's name)
_NAMED_ARCHIVES = {
    "lab-b-c7.tar.gz": "weince bundle --profile paper --out lab-b-c7.tar.gz --no-check",
    "lab-c-c3.tar.gz": "weince bundle --profile paper --out lab-c-c3.tar.gz --no-check",
    # two independent results (default.tar.gz holds the smoke run's files, as smoke.tar.gz
    # does: merged, they would be one result twice)
    "A.tar.gz": "cp smoke.tar.gz A.tar.gz",
    "B.tar.gz": "cp lab-a-c3.tar.gz B.tar.gz",
    "their-results.tar.gz": "cp default.tar.gz their-results.tar.gz",
    # a config file from someone else, checked before Snakemake reads it
    "their.yaml": "cp config/smoke.yaml their.yaml",
}


# commands whose right answer in this world is not 0: (exit code, a line it must print).
# The world's smoke run trains 3 epochs (the kill must land between two), the installed smoke
# profile 1: its rows are another protocol than the installed code's, which merge refuses
# while it writes the pages of the rest (exit 3, docs/reviewing.md).
_EXPECTED = {
    "weince merge A.tar.gz B.tar.gz --out merged/":
        (3, "another protocol than the installed code's profile 'smoke'"),
}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_every_documented_command_runs_as_printed(smoke_resumed, tmp_path, copy_workflow):
    """Each command of docs/reviewing.md's blocks and the README's site and reviewer
    commands, in order, exactly as printed (through bash: ``~`` is the world's home), each
    Snakemake command as a dry run (``-n``: they plan training or the report rules); every
    one must exit 0."""
    world, env = _docs_world(smoke_resumed, tmp_path, copy_workflow)
    cwd, page = world, ""
    for where, command in documented_commands():
        if where != page:   # each page's commands start in the world's root
            cwd, page = world, where
        if command.startswith("cd "):
            cwd = cwd / command[3:].strip()
            continue
        for name, make in _NAMED_ARCHIVES.items():
            if name in command.split() and not (cwd / name).exists():
                made = subprocess.run(["bash", "-c", make], cwd=cwd, env=env, text=True,
                                      capture_output=True, timeout=900)
                assert made.returncode == 0, f"{make}: {made.stdout[-1500:]}{made.stderr[-1500:]}"
        run = command.replace("snakemake ", "snakemake -n ", 1) \
            if command.startswith("snakemake ") else command
        proc = subprocess.run(["bash", "-c", run], cwd=cwd, env=env, text=True,
                              capture_output=True, timeout=900)
        code, line = _EXPECTED.get(command, (0, ""))
        assert proc.returncode == code and line in proc.stdout + proc.stderr, (
            f"{where}: `{command}` exits {proc.returncode} as printed:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        if command.startswith("weince merge"):      # the merged pages are there either way
            out = cwd / command.split("--out ")[1].split()[0]
            assert (out / "summary.md").is_file() and (out / "html/summary.html").is_file(), out
    assert set(_EXPECTED) <= {c for _, c in documented_commands()}


def _verify_retrain(archive: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "weince.cli", "verify", str(archive),
                           "--retrain", *extra], capture_output=True, text=True, timeout=3600,
                          env=_env())


def test_smoke_training_audit_replays_and_catches_swaps_and_relabels(smoke_resumed, tmp_path):
    """The README's bundle with --with-audit, then `verify --retrain 2`: bit for bit on this
    CPU. Two arms swapped with every hash made consistent are refused by the digest chain
    before any replay; an end state trained with InfoNCE in WEINCE-recipe's folder, its
    digest committed in train.json (which the chain cannot see), does not replay to the
    committed end and fails by attribution, with every distance printed."""
    from audit_archives import relabel_last_segment, repack, swap_arms   # noqa: PLC0415

    out = tmp_path / "smoke.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "weince.cli", "bundle", "--profile", "smoke",
                           "--out", str(out), "--with-models", "--with-audit", "--no-check"],
                          cwd=smoke_resumed, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = proc.stdout
    assert said.index("training audit states:") < said.index("packed ")   # size first
    assert "without its states" not in said, said
    honest = _verify_retrain(out, "2")
    text = honest.stdout
    assert honest.returncode == 0, text[-4000:] + honest.stderr[-3000:]
    assert "retraining 2 of " in text and "stratified over arms" in text
    assert "expected time: about" in text and "replayed bit for bit" in text
    assert "RETRAINED: every replayed segment passed" in text

    # two arms' folders swapped, every hash consistent: the digest chain refuses the archive
    # before anything is replayed (each train.json names the arm and loss that trained it)
    swapped = repack(out, tmp_path / "swapped.tar.gz", swap_arms("infonce", "weince_recipe"))
    bad = _verify_retrain(swapped, "10")
    assert bad.returncode == 2, bad.stdout[-4000:] + bad.stderr[-3000:]
    assert "CHAIN BROKEN: results/smoke/vision/digits/smallcnn/weince_recipe/seed7/train.json: " \
           "loss 'infonce', where the profile's arm 'weince_recipe' trains 'weince_recipe'" \
        in bad.stdout
    assert "not retrained: the archive failed the checks above" in bad.stdout
    assert "replayed" not in bad.stdout

    relabelled = repack(out, tmp_path / "relabelled.tar.gz",
                        relabel_last_segment("weince_recipe", "infonce"))
    for extra in ((), ("--replay-dtype", "float64")):
        # 3 picks, stratified over the 3 arms (infonce, weince, weince_recipe): the forged
        # run, weince_recipe's only one, is among them whatever the seed
        bad = _verify_retrain(relabelled, "3", *extra)
        assert bad.returncode == 1, bad.stdout[-4000:] + bad.stderr[-3000:]
        block = bad.stdout.split("vision/digits/smallcnn/weince_recipe/seed7 (arm")[1]
        if not extra:       # bit for bit first, then the attribution of the shipped end
            assert "FAILED: the replay under weince_recipe does not reach the committed " \
                   "end state" in block, block[:3000]
        assert "nearest: infonce" in block, block[:3000]
        assert all(f"d({a}) = " in block for a in ("infonce", "weince", "weince_recipe"))
    assert "FAILED: not attributed to weince_recipe; nearest: infonce" in bad.stdout
