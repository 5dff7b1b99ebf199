"""The digest chain on a real smoke run: what the jobs record, an honest archive that
verifies, an arm swap that fails ``weince verify`` alone, and a truncated
encoder with its old modification time that the next job reading it, ``weince progress``
and ``weince bundle --with-models`` all refuse, naming it and the command that rebuilds it
(which then runs as printed)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from weince.bundle.make import rebuild_command
from weince.utils.digest import sha256_file, sha256_path

pytestmark = pytest.mark.slow

SMOKE = ("--cores", "2", "--configfile", "config/smoke.yaml")
PAIR = "results/smoke/vision/digits/smallcnn"


def _weince(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "weince", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, copy_workflow, run_snakemake):
    wf = copy_workflow(tmp_path_factory.mktemp("chain") / "wf")
    proc = run_snakemake(wf, *SMOKE, timeout=2400)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return wf


def test_every_run_records_its_encoder_and_every_result_what_it_read(smoke):
    runs = sorted((smoke / "results/smoke").glob("vision/*/*/*/seed*/train.json"))
    assert runs
    for rec in runs:
        train, run = _json(rec), rec.parent
        arm, seed = run.parent.name, int(run.name[len("seed"):])
        assert train["encoder_sha256"] == sha256_file(run / "encoder.pt"), run
        assert train["arm"] == arm and train["seed"] == seed, run
        sel = run.parent / "selection.json"   # a final grid arm: the point chosen there
        point = _json(sel)["chosen"] if sel.exists() else (arm.split("@", 1)[1] if "@" in arm
                                                            else None)
        assert train["point"] == point, run
        for name in ("linear.json", "linear_head.json", "pot.json", "link.json", "norms.json"):
            if (run / name).exists():
                enc = _json(run / name)["provenance"]["inputs"]["encoder"]
                assert enc["sha256"] == train["encoder_sha256"], (run, name)
    for rec in (smoke / "results/smoke").glob("text/*/*/seed*/train.json"):
        train = _json(rec)
        assert train["model_sha256"] == sha256_path(rec.parent / "model")
        sts = _json(rec.parent / "sts.json")["provenance"]["inputs"]["model"]
        assert sts["sha256"] == train["model_sha256"]


def _bundle(wf: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return _weince(wf, "bundle", "--profile", "smoke", "--out", str(out), "--no-check",
                   *extra)


def test_an_honest_archive_with_its_models_verifies(smoke, tmp_path):
    out = tmp_path / "honest.tar.gz"
    made = _bundle(smoke, out, "--with-models")
    assert made.returncode == 0, made.stderr
    proc = _weince(smoke, "verify", str(out))
    assert proc.returncode == 0 and "CHAIN BROKEN" not in proc.stdout, proc.stdout[-3000:]


def test_the_arm_swap_fails_verify_alone_naming_the_link(smoke, tmp_path, run_snakemake):
    """A reviewer's arm swap: the infonce and weince_recipe runs' encoder.pt and linear.json
    exchanged, the tables rebuilt, a fresh bundle: `verify` without `--reevaluate` fails on
    the chain alone (the rebuilt report is identical); `bundle --with-models` refuses it."""
    wf = tmp_path / "wf"
    shutil.copytree(smoke, wf, symlinks=True,
                    ignore=shutil.ignore_patterns("checkpoint.pt", ".snakemake"))
    a, b = wf / PAIR / "infonce/seed7", wf / PAIR / "weince_recipe/seed7"
    for name in ("encoder.pt", "linear.json"):
        tmp = a / f"{name}.swap"
        os.replace(a / name, tmp)
        os.replace(b / name, a / name)
        os.replace(tmp, b / name)
    tables = run_snakemake(wf, *shlex.split(rebuild_command("smoke"))[1:], timeout=900)
    assert tables.returncode == 0, tables.stderr[-3000:]
    refused = _bundle(wf, tmp_path / "models.tar.gz", "--with-models")
    assert refused.returncode == 2 and f"{PAIR}/infonce/seed7/encoder.pt" in refused.stderr
    out = tmp_path / "swapped.tar.gz"
    made = _bundle(wf, out)
    assert made.returncode == 0, made.stderr
    proc = _weince(wf, "verify", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "DIFFERS" not in proc.stdout and "NUMBER MISMATCH" not in proc.stdout
    run = f"{PAIR}/infonce/seed7"
    assert re.search(rf"CHAIN BROKEN: \S*{run}/linear\.json -> \S*{run}/train\.json",
                     proc.stdout), proc.stdout[-3000:]


def test_a_truncated_encoder_with_its_old_mtime_is_refused_and_rebuilt(smoke, run_snakemake,
                                                                      tmp_path):
    rel = f"{PAIR}/weince_recipe_no_weib/seed7"
    run = smoke / rel
    enc = run / "encoder.pt"
    st = enc.stat()
    data = enc.read_bytes()
    enc.write_bytes(data[: len(data) // 2])
    os.utime(enc, ns=(st.st_atime_ns, st.st_mtime_ns))
    # the plan sees nothing (the timestamps say up to date); progress and bundle do
    progress = _weince(smoke, "progress", "--configfile", "config/smoke.yaml", "--no-sacct")
    assert progress.returncode == 0, progress.stderr
    assert "corrupt runs (1" in progress.stdout and f"{rel}/encoder.pt" in progress.stdout, \
        progress.stdout[-3000:]
    made = _bundle(smoke, tmp_path / "x.tar.gz", "--with-models")
    assert made.returncode == 2 and f"{rel}/encoder.pt" in made.stderr, made.stderr
    assert len(made.stderr.strip().splitlines()) == 1
    # the next job that reads it fails in one line naming it and its rebuild command
    (run / "linear.json").unlink()
    proc = run_snakemake(smoke, *SMOKE, timeout=900)
    assert proc.returncode != 0
    said = re.search(r"^weince job failed: DigestMismatch: (\S*encoder\.pt): .*rebuild it: "
                     r"(snakemake .*?) \(traceback: ", proc.stdout + proc.stderr, re.M)
    assert said and said.group(1) == f"{rel}/encoder.pt", proc.stderr[-3000:]
    assert "--configfile config/smoke.yaml" in said.group(2)
    # ... which runs as printed and leaves the run whole
    cmd = shlex.split(said.group(2))
    assert cmd[0] == "snakemake"
    fixed = run_snakemake(smoke, *cmd[1:], timeout=1500)
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-4000:]
    assert _json(run / "train.json")["encoder_sha256"] == sha256_file(enc)
    assert _json(run / "linear.json")["provenance"]["inputs"]["encoder"]["sha256"] == \
        sha256_file(enc)


def _hint(text: str) -> list[str]:
    """The first backquoted ``snakemake ...`` command of an error message, as words."""
    m = re.search(r"`(snakemake [^`]+)`", text)
    assert m, text[-3000:]
    return shlex.split(m.group(1))


def test_the_report_hints_run_as_printed(smoke, run_snakemake):
    """`weince report` outside a workflow run: a norms result with a bad verdict word, and
    one holding a NaN, each fail in one line whose command (with the smoke profile's
    --configfile, read from the path) runs as printed and mends the run."""
    report = ("report", "--config", "config/config.yaml", "--config", "config/smoke.yaml")
    norms = smoke / f"{PAIR}/weince_recipe/seed7/norms.json"
    word, nan = _json(norms), _json(norms)
    word["verdicts"]["N1"] = "mostly"
    nan["checks_extra"] = float("nan")
    for bad in (word, nan):
        norms.write_text(json.dumps(bad))
        failed = _weince(smoke, *report)
        assert failed.returncode != 0, failed.stdout[-2000:]
        cmd = _hint(failed.stderr + failed.stdout)
        assert cmd[:2] == ["snakemake", "--forcerun"], cmd
        assert cmd[2].endswith(f"{PAIR}/weince_recipe/seed7/norms.json"), cmd
        assert cmd[-2:] == ["--configfile", "config/smoke.yaml"], cmd
        fixed = run_snakemake(smoke, *cmd[1:], timeout=900)
        assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-4000:]
        assert _json(norms)["verdicts"]["N1"] != "mostly" and "checks_extra" not in _json(norms)
    again = _weince(smoke, *report)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
