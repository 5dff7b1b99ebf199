"""Timing harness (claim C8): structure and statistics, not speed (speed lives in benchmarks)."""

import json

import numpy as np
import pytest

from weince.timing import TimingConfig, paired_summary, run_timing


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
                       image_size=8, channels=1, step_batch=4, step_reps=2, device="cpu")
    res = run_timing(cfg)
    assert res["trainable_parameters"] == {"infonce": 0, "weince": 0, "weince_recipe": 0}
    assert [r["2N"] for r in res["loss_alone"]] == [16, 32]
    for r in res["loss_alone"]:
        assert set(r["losses"]) == {"infonce", "weince", "weince_recipe"}
        assert r["losses"]["infonce"]["ratio"] == 1.0
        assert all(v["median_ms"] > 0 for v in r["losses"].values())
    assert res["whole_step"]["losses"]["weince"]["n"] == 2
    json.dumps(res)  # JSON-able


def test_bad_baseline_and_device_rejected():
    with pytest.raises(ValueError, match="baseline"):
        run_timing(TimingConfig(losses=["weince", "infonce"], sizes=[16], backbone=""))
