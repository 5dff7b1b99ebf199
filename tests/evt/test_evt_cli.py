"""`weince evt` and `weince collect-scores` end to end on small inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from weince.cli import main as weince_main
from weince.evt.scorefile import load_scores, save_scores
from weince.models import build_simclr_model, save_encoder

FIGS = ["gpd_density", "gpd_qq", "xi_threshold", "mean_excess"]


@pytest.mark.slow
def test_evt_cli_writes_json_and_figures(tmp_path, capsys, endpoint_scores, link_data):
    sim, t = link_data(2000, 64, c=3.0, lam=0.4, seed=2)
    mask = np.ones_like(sim, dtype=bool)
    src = save_scores(tmp_path / "scores.npz", endpoint_scores(100_000, 2.56, seed=1),
                      {"sim": sim, "targets": t, "mask": mask}, meta={"tau": 0.5},
                      batch=np.repeat(np.arange(50), 2000))
    out = tmp_path / "evt"
    rc = weince_main(["evt", "--scores", str(src), "--out", str(out), "--n-boot", "10",
                      "--gof-boot", "5"])
    assert rc == 0
    pot = json.loads((out / "pot.json").read_text())
    link = json.loads((out / "link.json").read_text())
    assert abs(pot["fit"]["xi"] + 1 / 2.56) < 0.1 and pot["fit"]["n_exceed"] == 1000
    assert [r["q"] for r in pot["threshold_stability"]] == [0.95, 0.975, 0.99, 0.995]
    assert pot["fit"]["xi_ci_boot"] is not None and pot["provenance"]["config"]["q"] == 0.99
    lo, hi = pot["fit"]["xi_ci_batch"]
    assert lo < pot["fit"]["xi"] < hi and pot["fit"]["n_batches"] == 50
    assert link["status"] == "fitted" and link["fit"]["tau"] == 0.5
    assert link["fit"]["p_value_pairs"] is None    # not the SimCLR layout: no pairs known
    assert link["fit"]["lam_ci"][0] < link["fit"]["lam"] < link["fit"]["lam_ci"][1]
    assert "provenance" in link
    for name in FIGS + ["lambda_profile"]:
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000
    assert "xi =" in capsys.readouterr().out


@pytest.mark.slow
def test_evt_cli_without_link_batches_and_with_warnings(tmp_path, endpoint_scores):
    src = save_scores(tmp_path / "s.npz", endpoint_scores(15_000, 2.56, seed=1),
                      meta={"tau": 0.2})                   # 150 exceedances: a warning
    out = tmp_path / "evt"
    assert weince_main(["evt", "--scores", str(src), "--out", str(out), "--n-boot", "0",
                        "--gof-boot", "0", "--no-figures"]) == 0
    pot = json.loads((out / "pot.json").read_text())
    assert any("only 150 exceedances" in w for w in pot["warnings"])
    link = json.loads((out / "link.json").read_text())
    assert link["status"] == "not_run" and "sim/targets" in link["reason"]
    assert not (out / "figures").exists()


def test_evt_cli_missing_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="collect-scores"):
        weince_main(["evt", "--scores", str(tmp_path / "nope.npz"), "--out", str(tmp_path)])


@pytest.mark.slow
def test_collect_scores_cli_with_a_saved_encoder(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = build_simclr_model("smallcnn", 16, 1, out_dim=8)
    cfg = {"dataset": "digits", "backbone": "smallcnn", "image_size": 16, "channels": 1,
           "tau": 0.3, "loss": "infonce", "aug_kwargs": {}}
    enc = save_encoder(tmp_path / "encoder.pt", model, cfg)
    out = tmp_path / "scores.npz"
    rc = weince_main(["collect-scores", "--encoder", str(enc), "--out", str(out),
                      "--batch-size", "32", "--n-batches", "2", "--link-batches", "2",
                      "--link-batch-size", "16", "--device", "cpu"])
    assert rc == 0
    d = load_scores(out)
    assert d["scores"].shape == (2 * 32 * 31 // 2,)
    assert d["batch"].tolist() == [0] * (32 * 31 // 2) + [1] * (32 * 31 // 2)
    assert "batch_ids" not in d["meta"]      # stored, not rebuilt
    assert d["sim"].shape == (2 * 32, 32) and d["mask"].shape == (64, 32)
    assert np.all(np.abs(d["scores"]) <= 1 + 1e-5)
    assert d["meta"]["tau"] == 0.3 and d["meta"]["dataset"] == "digits"
    assert d["meta"]["augment"]["image_size"] == 16
