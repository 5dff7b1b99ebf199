"""Before a run plans or starts a job: its data are on disk (else each missing path and
how to obtain it), its disk has room for its peak (printed, an error when short), no
live run writes its results (the paper profile used to plan 15,032 jobs without data), one
live run per profile, and every folder it writes writable; each refusal is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from weince.pipeline.preflight import (DataMissingError, LiveRunError, NotWritableError, check_data,
                                       check_no_live_writers, check_writable, data_items,
                                       fetch_command, missing_data, on_start, profile_lock_path,
                                       refusals, release_profile_lock)
from weince.pipeline.profile import Profile
from weince.utils.config import deep_merge

REPO = Path(__file__).resolve().parents[2]


def profile(*names, **top):
    cfg: dict = {}
    for n in ("config.yaml", *names):
        deep_merge(cfg, yaml.safe_load((REPO / "config" / n).read_text()))
    cfg.update(top)
    return dict(Profile.of(cfg).config)


@pytest.mark.parametrize("names", [(), ("smoke.yaml",)], ids=["default", "smoke"])
def test_offline_profiles_need_no_data_on_disk(names):
    assert missing_data(Profile.of(profile(*names))) == []


def test_paper_profile_without_data_names_each_missing_path_and_how(tmp_path):
    cfg = profile("paper.yaml", data_root=str(tmp_path / "data"))
    gone = missing_data(Profile.of(cfg))
    text = "\n".join(gone)
    for name, path in [("cifar100", "cifar-100-python/train"),
                       ("imagenet32", "imagenet32/train_data_batch_1"),
                       ("tinyimagenet", "tiny-imagenet-200/wnids.txt"),
                       ("stl10", "stl10_binary/unlabeled_X.bin")]:
        line = next(g for g in gone if g.startswith(f"{name}:"))
        assert str(tmp_path / "data" / path) in line, line
    assert "image-net.org" in text and "`weince fetch-data --configfile " in text
    assert f"wiki1m corpus not found at {tmp_path / 'data'}/wiki1m_for_simcse.txt" in text
    assert "STS-B test split not found" in text
    with pytest.raises(DataMissingError, match="weince synthetic-data"):
        check_data(Profile.of(cfg))


def test_download_true_does_not_excuse_a_missing_set_and_present_files_pass(tmp_path, monkeypatch):
    """Jobs never download, whatever ``download`` says: a downloadable set not on disk is
    missing, named with the fetch command that gets it (its profile's files and data root)."""
    monkeypatch.chdir(REPO)
    root = tmp_path / "data"
    cfg = profile("paper.yaml", data_root=str(root), download=True)
    gone = {g.split(":")[0]: g for g in missing_data(Profile.of(cfg))}
    assert {"cifar10", "cifar100", "stl10", "imagenet32", "tinyimagenet"} <= set(gone)
    fetch = f"`weince fetch-data --configfile config/paper.yaml --config data_root={root}`"
    assert all(fetch in gone[n] for n in ("cifar10", "cifar100", "stl10"))
    # the files a loader reads, present: nothing missing for that pair
    cfg = profile("paper.yaml", data_root=str(root))
    cfg["vision"]["pairs"] = [["cifar100", "resnet18"]]
    cfg["text"]["enabled"] = False
    cfg["norms"]["text"]["enabled"] = False
    cfg["ablations"]["enabled"] = False
    assert any(g.startswith("cifar100:") for g in missing_data(Profile.of(cfg)))
    for f in ("train", "test", "meta"):
        (root / "cifar-100-python").mkdir(parents=True, exist_ok=True)
        (root / "cifar-100-python" / f).write_bytes(b"")
    assert missing_data(Profile.of(cfg)) == []


def _text_only(root, **text):
    cfg = profile("paper.yaml", data_root=str(root))
    cfg["vision"]["enabled"] = False
    cfg["ablations"]["enabled"] = False
    cfg["text"].update(text)
    for f in ("wiki1m_for_simcse.txt", "stsbenchmark/sts-dev.csv", "stsbenchmark/sts-test.csv"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("x\n")
    return cfg


def test_a_missing_text_model_is_named_with_the_command_that_fetches_it(tmp_path, monkeypatch):
    """bert-base-uncased is read from the local copy {data_root}/models/bert-base-uncased
    (jobs never download): missing, the check names it and the fetch command, before
    planning; a complete copy (config, weights, vocabulary) passes, an incomplete one is
    named with what it lacks; MiniLM ships with its package."""
    monkeypatch.chdir(REPO)                  # the command names config/paper.yaml found here
    root = tmp_path / "data"
    cfg = _text_only(root)
    copy = root / "models" / "bert-base-uncased"
    gone = missing_data(Profile.of(cfg))
    assert len(gone) == 1 and gone[0].startswith("bert-base-uncased: "), gone
    assert f"local copy {copy} does not exist" in gone[0]
    assert ("`weince fetch-data --configfile config/paper.yaml --config data_root="
            f"{root}` saves a snapshot of the Hugging Face repository bert-base-uncased"
            in gone[0])
    with pytest.raises(DataMissingError, match="bert-base-uncased: the text model's local"):
        check_data(Profile.of(cfg))
    copy.mkdir(parents=True)
    (copy / "config.json").write_text("{}")
    (copy / "pytorch_model.bin").write_bytes(b"")        # the older weights file counts
    gone = missing_data(Profile.of(cfg))
    assert len(gone) == 1 and f"{copy} lacks vocab.txt" in gone[0], gone
    (copy / "tokenizer.json").write_text("{}")           # ... and so does a fast tokenizer
    assert missing_data(Profile.of(cfg)) == []
    check_data(Profile.of(cfg))


def test_a_stand_in_model_folder_is_checked_where_the_config_points(tmp_path):
    root = tmp_path / "data"
    cfg = _text_only(root, model_paths={"bert-base-uncased": str(tmp_path / "stand_in")})
    gone = missing_data(Profile.of(cfg))
    assert len(gone) == 1 and (f"text.model_paths points at {tmp_path / 'stand_in'}, which "
                               f"does not exist") in gone[0], gone
    assert "fetch-data" not in gone[0]     # a stand-in is the user's folder, not fetched


def test_data_items_are_what_the_profile_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    prof = Profile.of(profile("paper.yaml", data_root=str(tmp_path)))
    items = {(i.kind, i.name): i for i in data_items(prof)}
    assert set(items) == {("vision", n) for n in ("cifar10", "cifar100", "stl10", "imagenet32",
                                                   "tinyimagenet")} | {
        ("wiki1m", "wiki1m"), ("stsb", "stsb"), ("model", "bert-base-uncased"),
        ("model", "minilm")}
    assert items["vision", "stl10"].splits == ("unlabeled", "train", "test")
    assert items["stsb", "stsb"].splits == ("dev", "test")
    assert items["wiki1m", "wiki1m"].where == str(tmp_path / "wiki1m_for_simcse.txt")
    assert fetch_command(prof) == (f"weince fetch-data --configfile config/paper.yaml "
                                   f"--config data_root={tmp_path}")
    smoke = Profile.of(profile("smoke.yaml"))   # digits ship with scikit-learn: no files
    assert [(i.kind, i.name) for i in data_items(smoke)] == [("model", "minilm")]
    assert fetch_command(smoke) == "weince fetch-data --configfile config/smoke.yaml"


def test_dry_run_of_the_paper_profile_without_data_stops_before_planning(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                        "config/paper.yaml", "--config", f"data_root={tmp_path / 'none'}"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Job stats" not in out, out[-2000:]
    assert "weince: profile 'paper' reads data that are not on disk" in out
    assert "Traceback" not in out and "DataMissingError" not in out   # the reason alone
    assert str(tmp_path / "none" / "imagenet32" / "train_data_batch_1") in out


def test_a_live_writer_in_the_profiles_results_stops_a_second_run(tmp_path):
    cfg = profile("smoke.yaml", results=str(tmp_path / "results"))
    run = tmp_path / "results" / cfg["profile"] / "vision" / "x"
    check_no_live_writers(Profile.of(cfg))
    code = textwrap.dedent(f"""
        import time
        from weince.utils.runlock import run_lock
        with run_lock({str(run)!r}, "train"):
            print("held", flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(LiveRunError) as err:
            check_no_live_writers(Profile.of(cfg))
        assert f"PID {p.pid}" in str(err.value) and "--unlock" in str(err.value)
    finally:
        p.kill()
        p.wait()
    check_no_live_writers(Profile.of(cfg))


def test_the_skip_variable_plans_without_the_data(tmp_path, monkeypatch):
    cfg = profile("paper.yaml", data_root=str(tmp_path / "none"))
    monkeypatch.setenv("WEINCE_SKIP_PREFLIGHT", "1")
    check_data(Profile.of(cfg))                       # counting the jobs of a profile needs no data
    monkeypatch.delenv("WEINCE_SKIP_PREFLIGHT")
    with pytest.raises(DataMissingError, match="WEINCE_SKIP_PREFLIGHT=1 plans without"):
        check_data(Profile.of(cfg))


# ------------------------------------------------------------------ onstart: one line each
def _lock_holder(cfg: dict) -> subprocess.Popen:
    """Another process that took the profile's run lock as a live run's onstart does."""
    code = textwrap.dedent(f"""
        import time
        from weince.pipeline.preflight import hold_profile_lock
        from weince.pipeline.profile import Profile
        hold_profile_lock(Profile.of({dict(profile=cfg["profile"], results=cfg["results"])!r}))
        print("held", flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_run_of_a_profile_is_refused_in_one_line(tmp_path, monkeypatch):
    """Snakemake's own locks live in .snakemake/locks, shared by every profile of the clone,
    and a run that ends removes the whole folder; the profile's run lock is its own."""
    monkeypatch.setenv("WEINCE_SKIP_PREFLIGHT", "1")
    results = str(tmp_path / "results")
    a = profile("smoke.yaml", results=results, reports=str(tmp_path / "reports"))
    b = dict(a, profile="other")
    p = _lock_holder(a)
    try:
        (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
        on_start(Profile.of(b))                      # another profile runs beside it
        release_profile_lock(Profile.of(b))
        shutil.rmtree(tmp_path / ".snakemake")   # what the other profile's end does
        with pytest.raises(SystemExit) as err:
            on_start(Profile.of(a))
        msg = str(err.value.code)
        assert msg.startswith("weince: another Snakemake run of profile 'smoke' is live")
        assert f"PID {p.pid}" in msg and "\n" not in msg and "other profiles" in msg
    finally:
        p.kill()
        p.wait()
    on_start(Profile.of(a))                          # the kernel released it with the process
    release_profile_lock(Profile.of(a))


def test_the_profile_lock_is_not_a_live_writer_of_its_own_run(tmp_path):
    cfg = profile("smoke.yaml", results=str(tmp_path / "results"),
                  reports=str(tmp_path / "reports"))
    on_start(Profile.of(cfg))        # takes the lock, then finds no other writer
    try:
        assert profile_lock_path(Profile.of(cfg)).exists()
        check_no_live_writers(Profile.of(cfg))
    finally:
        release_profile_lock(Profile.of(cfg))


def test_an_unwritable_output_folder_stops_the_run_before_anything_is_deleted(
        tmp_path, monkeypatch):
    cfg = profile("smoke.yaml", results=str(tmp_path / "results"),
                  reports=str(tmp_path / "reports"))
    logs = tmp_path / "results" / "smoke" / "logs" / "report"
    logs.mkdir(parents=True)
    summary = tmp_path / "reports" / "smoke" / "summary.md"
    summary.parent.mkdir(parents=True)
    summary.write_text("old summary")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real(p, mode) and Path(p) != logs)
    with pytest.raises(NotWritableError) as err:
        check_writable(Profile.of(cfg))
    assert f"{logs}/" in str(err.value) and "nothing was deleted" in str(err.value)
    with pytest.raises(SystemExit) as stop:
        on_start(Profile.of(cfg))
    assert str(stop.value.code).startswith("weince: profile 'smoke' cannot write")
    assert summary.read_text() == "old summary"
    assert not profile_lock_path(Profile.of(cfg)).exists()


def test_refusals_end_the_run_with_the_reason_alone():
    with pytest.raises(SystemExit) as err:
        with refusals():
            raise LiveRunError("2 job(s) of another live run are writing results/smoke/")
    assert err.value.code == "weince: 2 job(s) of another live run are writing results/smoke/"
    with pytest.raises(KeyError):        # a bug is not a refusal: its traceback stays
        with refusals():
            raise KeyError("x")


READ_ONLY_PROBE = """
set -e
mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"
"""


@pytest.mark.slow
def test_a_read_only_results_folder_through_snakemake(tmp_path):
    """The review's probe: a forced re-run with a read-only results folder had Snakemake
    delete the job's old outputs (those in a writable folder), then the job die opening its
    log with an OSError traceback. Now onstart refuses in one line before Snakemake deletes
    anything (a read-only bind mount: root ignores file modes, so chmod proves nothing)."""
    results = tmp_path / "results"
    ro = results / "smoke" / "logs"     # where the job's log goes; its output is writable
    ro.mkdir(parents=True)
    old = results / "smoke" / "checks" / "special_case.json"
    old.parent.mkdir(parents=True)
    old.write_text('{"old": true}')
    mounted = subprocess.run(["bash", "-c", READ_ONLY_PROBE, "probe", str(ro)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"no read-only bind mount here ({mounted.stderr.strip()[:120]})")
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "WEINCE_SKIP_PREFLIGHT": "1"}
        r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile",
                            "config/smoke.yaml", "--config", f"results={results}",
                            f"reports={tmp_path / 'reports'}", "--forcerun", "special_case",
                            "--", str(old)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        assert r.returncode == 1, out[-3000:]
        assert f"weince: profile 'smoke' cannot write {ro}/" in out, out[-3000:]
        assert "Traceback" not in out and "Error" not in out, out[-3000:]
        assert old.read_text() == '{"old": true}'
    finally:
        subprocess.run(["umount", str(ro)], check=True)


@pytest.mark.slow
def test_two_profiles_side_by_side_through_snakemake(tmp_path):
    """A live run of profile smoke (its run lock held), and a run of another profile in the
    same clone: the other runs to the end (and its end removes .snakemake/locks, as
    Snakemake does), a second smoke run is refused in one line before and after that."""
    results, reports = tmp_path / "results", tmp_path / "reports"
    smoke = {"profile": "smoke", "results": str(results)}
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "WEINCE_SKIP_PREFLIGHT": "1"}

    def run(profile_name: str) -> tuple[int, str]:
        target = results / profile_name / "checks" / "special_case.json"
        r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile",
                            "config/smoke.yaml", "--config", f"profile={profile_name}",
                            f"results={results}", f"reports={reports}", "--", str(target)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        return r.returncode, r.stdout + r.stderr

    live = _lock_holder(smoke)
    try:
        rc, out = run("smoke")
        assert rc == 1 and f"another Snakemake run of profile 'smoke' is live (PID {live.pid}" \
            in out, out[-3000:]
        assert "Traceback" not in out
        rc, out = run("other")
        assert rc == 0, out[-3000:]
        assert (results / "other" / "checks" / "special_case.json").is_file()
        rc, out = run("smoke")
        assert rc == 1 and "is live" in out, out[-3000:]
        assert not (results / "smoke" / "checks" / "special_case.json").exists()
    finally:
        live.kill()
        live.wait()
