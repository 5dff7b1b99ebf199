"""Per-rule times from the rules' benchmark files (weince job-times, the rehearsal's forecast)."""

from __future__ import annotations

from argparse import Namespace

import pytest

from weince.cli.job_times import main
from weince.cost.job_times import job_times, per_rule

HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(folder, rel, s, rss="100.5"):
    f = folder / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(HEAD + f"{s}\t0:00:0{int(s)}\t{rss}\t1\t1\t1\t0\t0\t50\t{s}\n")


def test_per_rule_sums_every_job_and_names_the_rule_by_its_folder(tmp_path):
    _bench(tmp_path, "pretrain/digits/smallcnn/infonce/seed7.tsv", 9.5, "900")
    _bench(tmp_path, "pretrain/digits/smallcnn/weince/seed7.tsv", 10.5, "950")
    _bench(tmp_path, "timing.tsv", 8.0, "NA")            # a rule with one job: its file name
    (tmp_path / "knn").mkdir()
    (tmp_path / "knn" / "half.tsv").write_text("s\tmax_rss\n")   # written half: skipped
    times = job_times(tmp_path)
    assert sorted(t.rule for t in times) == ["pretrain", "pretrain", "timing"]
    rows = per_rule(times)
    assert [r.rule for r in rows] == ["pretrain", "timing"]    # most total time first
    pre = rows[0]
    assert (pre.jobs, pre.total_s, pre.mean_s, pre.max_s, pre.max_rss_mb) == (2, 20.0, 10.0,
                                                                              10.5, 950.0)
    assert rows[1].max_rss_mb is None
    assert job_times(tmp_path / "absent") == []


def test_weince_times_prints_the_table_and_says_what_to_run_without_files(tmp_path, capsys):
    _bench(tmp_path / "default" / "benchmarks", "linear/digits/a/seed7.tsv", 2.0)
    assert main(Namespace(results=str(tmp_path), profile="default", jobs=1)) == 0
    out = capsys.readouterr().out
    assert "linear" in out and "1 jobs, 2 s of job time" in out and "slowest jobs" in out
    with pytest.raises(FileNotFoundError, match="--configfile config/smoke.yaml"):
        main(Namespace(results=str(tmp_path), profile="smoke", jobs=0))


def test_repeats_count_their_longest_time_and_highest_memory(tmp_path):
    f = tmp_path / "link" / "a.tsv"
    f.parent.mkdir()
    f.write_text(HEAD + "2.0\t0:00:02\t300\t1\t1\t1\t0\t0\t50\t2.0\n"
                        "3.5\t0:00:03\t100\t1\t1\t1\t0\t0\t50\t3.4\n")
    (t,) = job_times(tmp_path)
    assert (t.seconds, t.max_rss_mb, t.cpu_seconds) == (3.5, 300.0, 3.4)
