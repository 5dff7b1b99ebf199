"""Timing harness (claim C8): structure and statistics, not speed (speed lives in benchmarks)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from scipy import stats

import weince.timing as timing
from weince.losses import build_loss
from weince.timing import TimingConfig, across_runs, paired_summary, run_timing


def test_paired_summary_recovers_a_known_ratio():
    rng = np.random.default_rng(0)
    base = rng.uniform(1.0, 2.0, size=200)            # drifting machine speed
    times = {"infonce": list(base), "weince": list(base * 1.25 * rng.uniform(0.99, 1.01, 200))}
    s = paired_summary(times, "infonce")
    assert s["infonce"]["ratio"] == 1.0 and s["infonce"]["overhead_pct"] == 0.0
    assert s["weince"]["ratio"] == pytest.approx(1.25, abs=0.005)
    lo, hi = s["weince"]["ratio_ci"]
    assert lo <= 1.25 <= hi and hi - lo < 0.01
    assert s["weince"]["n"] == 200


def test_run_timing_small(tmp_path):
    cfg = TimingConfig(sizes=[16, 32], dim=8, loss_reps=3, warmup=1, backbone="smallcnn",
                       image_size=8, channels=1, step_batch=4, step_reps=2, device="cpu",
                       runs=1)
    res = run_timing(cfg)
    assert res["trainable_parameters"] == {"infonce": 0, "weince": 0, "weince_recipe": 0}
    assert [r["2N"] for r in res["loss_alone"]] == [16, 32]
    for r in res["loss_alone"]:
        assert set(r["losses"]) == {"infonce", "weince", "weince_recipe"}
        assert r["losses"]["infonce"]["ratio"] == 1.0
        assert all(v["median_ms"] > 0 for v in r["losses"].values())
    st = res["whole_step"]
    assert st["mode"] == "eager" and "modes" not in st
    assert st["losses"]["weince"]["n"] == 2 and len(st["losses"]["weince"]["times_ms"]) == 2
    lo, hi = st["losses"]["weince"]["overhead_ci"]
    assert lo <= st["losses"]["weince"]["overhead_pct"] <= hi
    att = st["attributed"]
    assert att["infonce"]["extra_ms"] == 0.0 and att["weince"]["loss_ms"] > 0
    json.dumps(res)  # JSON-able


@pytest.mark.slow
def test_compile_both_times_eager_and_compiled_side_by_side(monkeypatch):
    """``compile: both``: every loss twice, ratios within a mode, compiled / eager per loss.
    (aot_eager stands in for inductor: the same tracing, no C++ build.)"""
    real = torch.compile
    monkeypatch.setattr(timing.torch, "compile", lambda m: real(m, backend="aot_eager"))
    cfg = TimingConfig(losses=["infonce", "weince"], sizes=[64], dim=8, loss_reps=2, warmup=1,
                       backbone="smallcnn", image_size=8, channels=1, step_batch=8, step_reps=2,
                       device="cpu", compile="both")
    res = run_timing(cfg)
    assert res["compile"] == "both"
    for block in (res["loss_alone"][0], res["whole_step"]):
        assert block["mode"] == "compiled"
        assert set(block["modes"]) == {"eager", "compiled"}
        assert block["losses"] is not block["modes"]["eager"]
        for mode in ("eager", "compiled"):
            assert block["modes"][mode]["infonce"]["ratio"] == 1.0
        assert set(block["compiled_vs_eager"]) == {"infonce", "weince"}
        assert all(v["ratio"] > 0 for v in block["compiled_vs_eager"].values())


@pytest.mark.slow
def test_weince_compiles_without_graph_breaks():
    """The CUDA path of ``compile: compiled`` needs one graph per loss call: under
    ``torch.compile`` the CPU-only numpy selection gives way to ``torch.topk``."""
    z1 = torch.randn(32, 8, requires_grad=True)
    z2 = torch.randn(32, 8, requires_grad=True)
    for name in ("infonce", "weince", "weince_recipe"):
        explained = torch._dynamo.explain(build_loss(name, tau=0.5))(z1, z2)
        assert explained.graph_break_count == 0, (name, explained.break_reasons)


def test_bad_baseline_and_device_rejected():
    with pytest.raises(ValueError, match="baseline"):
        run_timing(TimingConfig(losses=["weince", "infonce"], sizes=[16], backbone=""))
    with pytest.raises(ValueError, match="compile must be one of"):
        TimingConfig(compile="fast")
    with pytest.raises(ValueError, match="even numbers"):
        TimingConfig(sizes=[15])
    assert TimingConfig(compile=True).modes == ["compiled"]


def test_c8_is_timed_in_the_paper_profiles_pretraining_precision():
    """C8 times the step the paper profile trains: float32 (no autocast) unless the profile
    pretrains in bf16, and eager and compiled side by side (the paper's figure is a compiled
    ratio, so the compiled one is the headline and the eager one is kept beside it)."""
    root = Path(__file__).resolve().parents[1]
    assert TimingConfig().amp is False
    for name in ("paper.yaml", "config.yaml", "smoke.yaml"):
        prof = yaml.safe_load((root / "config" / name).read_text())
        timing = TimingConfig(**prof["timing"]["config"])
        assert timing.amp == prof["vision"]["pretrain"].get("amp", False), name
    paper = TimingConfig(**yaml.safe_load((root / "config" / "paper.yaml").read_text())
                         ["timing"]["config"])
    assert paper.modes == ["eager", "compiled"]


def test_across_runs_recovers_known_run_overheads_and_their_interval():
    """Runs of a machine whose speed changes between runs (x1, x2, x0.5 ...): each run's
    paired ratio is exact, the headline is their geometric mean and the interval the
    t-interval of the log ratios, so it widens with the run-to-run spread."""
    rng = np.random.default_rng(1)
    ratios = [1.02, 1.10, 0.95, 1.30, 1.05]
    base, arm = [], []
    for r in ratios:
        t = rng.uniform(1.0, 2.0, size=7) * rng.choice([0.5, 1.0, 2.0])
        base.append(list(t))
        arm.append(list(t * r))
    out = across_runs({"infonce": base, "weince": arm}, "infonce")
    w = out["weince"]
    assert w["runs"] == 5
    assert w["run_overheads_pct"] == pytest.approx([100 * (r - 1) for r in ratios])
    logs = np.log(ratios)
    half = stats.t.ppf(0.975, 4) * logs.std(ddof=1) / np.sqrt(5)
    assert w["overhead_pct"] == pytest.approx(100 * (np.exp(logs.mean()) - 1))
    assert w["overhead_ci_runs"] == pytest.approx([100 * (np.exp(logs.mean() - half) - 1),
                                                   100 * (np.exp(logs.mean() + half) - 1)])
    assert w["noise_pct"] == pytest.approx((w["overhead_ci_runs"][1]
                                            - w["overhead_ci_runs"][0]) / 2)
    assert out["infonce"]["overhead_ci_runs"] == [0.0, 0.0]
    assert w["overhead_ci_runs"][0] > -100.0
    one = across_runs({"infonce": base[:1], "weince": arm[:1]}, "infonce")["weince"]
    assert one["overhead_ci_runs"] is None and one["noise_pct"] is None
    assert one["overhead_pct"] == pytest.approx(2.0)


def test_the_whole_step_is_timed_in_independent_runs():
    cfg = TimingConfig(losses=["infonce", "weince"], sizes=[16], dim=8, loss_reps=2, warmup=1,
                       backbone="smallcnn", image_size=8, channels=1, step_batch=4,
                       step_reps=2, device="cpu", runs=3)
    st = run_timing(cfg)["whole_step"]
    w = st["losses"]["weince"]
    assert st["runs"] == 3 and w["runs"] == 3 and len(w["run_overheads_pct"]) == 3
    assert w["n"] == 6 and len(w["times_ms"]) == 6        # the steps of all runs, pooled
    lo, hi = w["overhead_ci_runs"]
    assert lo <= w["overhead_pct"] <= hi
    assert "pooled_overhead_pct" in w and len(w["overhead_ci"]) == 2
    with pytest.raises(ValueError, match="runs must be >= 1"):
        TimingConfig(runs=0)
