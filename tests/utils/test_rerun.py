"""The command an error message suggests carries the run's own --cores, --configfile and
--config (weince.utils.rerun), so that it runs as printed."""

from __future__ import annotations

import shlex

import pytest

from weince.utils.rerun import ARGS_VARIABLE, record_run_args, run_args, snakemake_command


@pytest.fixture(autouse=True)
def _no_recorded_run(monkeypatch):
    # set, then deleted: monkeypatch removes what record_run_args writes when the test ends
    monkeypatch.setenv(ARGS_VARIABLE, "")
    monkeypatch.delenv(ARGS_VARIABLE)


def test_a_run_records_its_config_arguments_for_its_jobs(tmp_path, monkeypatch):
    (tmp_path / "config").mkdir()
    files = [tmp_path / "config" / "paper.yaml", tmp_path / "config" / "rehearsal.yaml"]
    got = record_run_args(files, {"threads": 2, "vision": {"linear": {"epochs": 6}},
                                  "offline": True, "site": "lab a"}, cores=4, cwd=tmp_path)
    assert shlex.split(got) == ["--cores", "4", "--configfile", "config/paper.yaml",
                                "config/rehearsal.yaml", "--config", "threads=2",
                                'vision={"linear": {"epochs": 6}}', "offline=True",
                                "site=lab a"]
    cmd = snakemake_command("--forcerun", "results/paper/x/linear.json")
    assert cmd == f"`snakemake --forcerun results/paper/x/linear.json {got}`"
    # a target before the run's arguments: --configfile and --config would swallow it
    assert snakemake_command("results/paper/x/linear.json") == \
        f"`snakemake results/paper/x/linear.json {got}`"
    # a job started by another Snakemake process (a cluster job) keeps the submitter's
    assert record_run_args([], {}, cores=1, cwd=tmp_path) == got


def test_outside_a_run_the_profile_is_read_from_the_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "smoke.yaml").write_text("{}\n")
    assert run_args("results/smoke/vision/a/b/c/seed7/linear.json") == \
        "--cores 2 --configfile config/smoke.yaml"
    assert run_args("results/default/vision/x/linear.json") == "--cores 2"
    # a profile this checkout has no file for: the command says what to add
    cmd = snakemake_command("--forcerun", "results/mine/vision/x/linear.json")
    assert cmd == ("`snakemake --forcerun results/mine/vision/x/linear.json` with the run's "
                   "--cores, --configfile and --config")
