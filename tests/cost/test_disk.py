"""The disk a profile needs at its peak (weince.cost.disk): what stays and what comes and goes,
the paper profile within about a terabyte, the start-up check against the free space and the
user's quota."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from weince.cost.counts import vision_counts
from weince.cost.disk import QUOTA_ENV, check_disk, disk_estimate, parse_bytes, runs_of_jobs
from weince.cost.plan import JobInfo
from weince.models import build_simclr_model
from weince.pipeline.layout import TextRun, VisionRun
from weince.pipeline.preflight import DiskSpaceError
from weince.pipeline.profile import Profile

REPO = Path(__file__).resolve().parents[2]


def _cfg(name: str, **over) -> dict:
    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    for k, v in over.items():
        cfg[k] = v
    return cfg


def test_the_encoder_size_is_the_models_parameter_count():
    model = build_simclr_model("smallcnn", 16, 1, out_dim=32)
    c = vision_counts("smallcnn", 16, 1, "proj32")
    assert c["params"] == sum(p.numel() for p in model.parameters())


def test_temporaries_scale_with_the_runs_at_once_and_features_can_be_kept():
    smoke = _cfg("smoke.yaml")
    one = disk_estimate(Profile.of(smoke), concurrent=1)
    two = disk_estimate(Profile.of(smoke), concurrent=2)
    assert one.permanent == two.permanent > 0
    assert two.temporary > one.temporary > 0 and two.peak == two.permanent + two.temporary
    assert disk_estimate(Profile.of(smoke), concurrent=8, parallel=2).temporary == two.temporary
    every = disk_estimate(Profile.of(smoke), concurrent=100)
    kept = disk_estimate(Profile.of(_cfg("smoke.yaml", keep_features=True)), concurrent=100)
    assert kept.permanent > every.permanent and kept.temporary < every.temporary


def test_the_paper_profile_peaks_within_a_terabyte_and_says_so():
    paper = Profile.of(_cfg("paper.yaml"))
    est = disk_estimate(paper)
    assert 100e9 < est.peak <= 1.0e12, est.line()
    assert est.line().startswith("peak disk: ") and "3424 trained and 120 adopted" in est.line()
    # keeping every features.pt is what needed about 4.9 TB
    kept = disk_estimate(Profile.of(_cfg("paper.yaml", keep_features=True)))
    assert kept.peak > 4 * est.peak


def test_a_targets_runs_come_from_its_dry_run():
    jobs = [JobInfo("pretrain", False, ["results/p/vision/cifar100/resnet18/infonce/seed7/"
                                        "encoder.pt"]),
            JobInfo("adopt_grid_run", False, ["results/p/vision/cifar100/resnet18/weince/"
                                              "seed7/encoder.pt"]),
            JobInfo("linear", False, ["results/p/vision/cifar100/resnet18/infonce/seed7/"
                                      "linear.json"])]
    trained, adopted, text = runs_of_jobs(jobs)
    assert trained == {VisionRun("cifar100", "resnet18", "infonce", 7)}
    assert adopted == {VisionRun("cifar100", "resnet18", "weince", 7)} and not text


def test_an_encoders_whole_job_counts_as_training_only_when_it_writes_the_encoder():
    """`vision_jobs: per_encoder`: a `vision_run_<n>` job trains when it writes encoder.pt;
    the adopted run's job (features onwards) does not."""
    run = "results/p/vision/digits/smallcnn/{}/seed7/{}"
    jobs = [JobInfo("vision_run_1", False, [run.format("infonce", "encoder.pt"),
                                            run.format("infonce", "linear.json")]),
            JobInfo("vision_run_2", False, [run.format("weince", "features.pt"),
                                            run.format("weince", "knn.json")])]
    trained, adopted, text = runs_of_jobs(jobs)
    assert trained == {VisionRun("digits", "smallcnn", "infonce", 7)}
    assert not adopted and not text
    # `per_arm`: one job trains seeds 21 and 63 and starts the adopted seed 7 at its features
    arm = [JobInfo("vision_run_3", False, [run.format("weince", "features.pt"),
                                           run.format("weince", "knn.json").replace("7", "21"),
                                           run.format("weince", "encoder.pt").replace("7", "21"),
                                           run.format("weince", "encoder.pt").replace("7", "63")])]
    trained, adopted, text = runs_of_jobs(arm)
    assert trained == {VisionRun("digits", "smallcnn", "weince", s) for s in (21, 63)}
    # and its text runs: `text_run` trains SimCSE as a `simcse` job does
    t = "results/p/text/minilm/weince/seed7/{}"
    for rule in ("simcse", "text_run"):
        _, _, text = runs_of_jobs([JobInfo(rule, False, [t.format("model"),
                                                         t.format("train.json")])])
        assert text == {TextRun("minilm", "weince", 7)}, rule


@pytest.mark.parametrize("text, n", [("2TB", 2 * 10**12), ("500 GB", 500 * 10**9),
                                     ("1.5t", 15 * 10**11), (3000, 3000)])
def test_sizes_parse_in_decimal_units(text, n):
    assert parse_bytes(text) == n


def test_a_bad_size_names_the_key():
    with pytest.raises(ValueError, match="disk.quota"):
        parse_bytes("two terabytes")


def test_a_disk_too_small_or_a_quota_stops_the_run_with_the_numbers(monkeypatch, capsys,
                                                                     tmp_path):
    cfg = _cfg("smoke.yaml", results=str(tmp_path / "results"))
    monkeypatch.setattr("weince.cost.disk.free_bytes", lambda p: 10_000_000)
    with pytest.raises(DiskSpaceError) as err:
        check_disk(Profile.of(cfg), 2)
    msg = str(err.value)
    assert "10.0 MB free" in msg and "still needs about" in msg and "disk.concurrent_runs" in msg
    assert "disk: peak disk:" in capsys.readouterr().err
    monkeypatch.setattr("weince.cost.disk.free_bytes", lambda p: 10**13)
    assert check_disk(Profile.of(cfg), 2).peak > 0
    quota = copy.deepcopy(cfg)
    quota["disk"] = {"quota": "100MB"}
    with pytest.raises(DiskSpaceError, match="quota is 100.0 MB"):
        check_disk(Profile.of(quota), 2)
    monkeypatch.setenv(QUOTA_ENV, "1TB")        # the environment overrides the config
    assert check_disk(Profile.of(quota), 2).peak > 0


def _pretrain_jobs(dataset: str, backbone: str, arms, seeds) -> list[JobInfo]:
    return [JobInfo("pretrain", False, [f"results/paper/vision/{dataset}/{backbone}/{arm}/"
                                        f"seed{s}/encoder.pt"]) for arm in arms for s in seeds]


def test_the_start_up_check_prices_the_jobs_of_this_run_not_the_profile(
        monkeypatch, capsys, tmp_path):
    """A 50 GB quota lets a run whose jobs need less start and refuses the whole paper; in
    a dry run the refusal is a warning."""
    paper = Profile.of(_cfg("paper.yaml", results=str(tmp_path / "results")))
    monkeypatch.setenv(QUOTA_ENV, "50GB")
    monkeypatch.setattr("weince.cost.disk.free_bytes", lambda p: 10**15)
    jobs = _pretrain_jobs("cifar100", "resnet18", ("infonce", "weince_recipe"), (7, 21, 63, 84))
    est = check_disk(paper, 32, jobs=jobs)
    assert est.peak == disk_estimate(paper, runs=runs_of_jobs(jobs), parallel=32).peak
    assert 0 < est.peak < 50e9 and "8 trained and 0 adopted" in est.line()
    with pytest.raises(DiskSpaceError, match=r"profile 'paper' needs about .* quota is 50.0 GB"):
        check_disk(paper, 32)                   # the whole profile: hundreds of GB
    capsys.readouterr()
    check_disk(paper, 32, warn=True)            # a dry run: said, not raised
    assert "warning (dry run): a real run would stop here: profile 'paper' needs about" in \
        capsys.readouterr().err
    # the free space is compared with what this run's jobs write, not the whole profile
    monkeypatch.delenv(QUOTA_ENV)
    monkeypatch.setattr("weince.cost.disk.free_bytes", lambda p: int(est.peak) + 1)
    check_disk(paper, 32, jobs=jobs)
    with pytest.raises(DiskSpaceError, match="still needs about .* for the 10 job"):
        check_disk(paper, 32, jobs=jobs + _pretrain_jobs("cifar10", "resnet50", ("infonce",),
                                                         (7, 21)))


@pytest.mark.slow   # two dry runs of the smoke profile
def test_the_dry_run_warns_of_the_disk_and_a_bad_quota_is_refused(tmp_path, copy_workflow,
                                                                  run_snakemake):
    wf = copy_workflow(tmp_path / "wf")
    proc = run_snakemake(wf, "-n", "--cores", "1", "--configfile", "config/smoke.yaml",
                         timeout=300, **{QUOTA_ENV: "1MB"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "warning (dry run): a real run would stop here: profile 'smoke' needs about" in out
    assert "quota is 1.0 MB" in out
    proc = run_snakemake(wf, "-n", "--cores", "1", "--configfile", "config/smoke.yaml",
                         "--config", "disk={quota: lots}", timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert "disk.quota = 'lots' is not a size; write one such as 2TB" in out, out[-3000:]


def test_the_run_refuses_a_quota_it_would_pass_in_one_line(tmp_path, copy_workflow,
                                                           run_snakemake):
    """The Snakefile's start-up check: a stated quota below the peak ends the run before any
    job, with the reason alone."""
    wf = copy_workflow(tmp_path / "wf")
    proc = run_snakemake(wf, "--cores", "1", "--configfile", "config/smoke.yaml",
                         timeout=300, **{QUOTA_ENV: "1MB"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "weince: profile 'smoke' needs about" in out, out[-3000:]
    assert "quota is 1.0 MB" in out and "Traceback" not in out
    assert not (wf / "results/smoke/vision").exists()
