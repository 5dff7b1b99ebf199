"""Result files hold only values their metric can take: the reader refuses an accuracy
of 150 %, a lambda of 2, a negative time, a p-value above 1 and a summary whose mean is
not the mean of its values, naming the file, the key, the value and the range."""

from __future__ import annotations

import json
import math

import pytest

from weince.utils.results import (InvalidResultError, check_plausible, encoder_value,
                                  load_result, range_of, write_json)
from weince.utils.summary import summary


@pytest.mark.parametrize("data, key, shown, rng", [
    ({"test_acc": 150.0}, "test_acc", "150.0", "[0, 100]"),
    ({"acc@50": summary([20.0, -1.0])}, "acc@50.values[1]", "-1.0", "[0, 100]"),
    ({"recall@5": {"mean": 101.0, "std": None, "n": 1, "values": [101.0]}},
     "recall@5.mean", "101.0", "[0, 100]"),
    ({"test": {"spearman": 120.0}}, "test.spearman", "120.0", "[-100, 100]"),
    ({"fit": {"lam": 1.5}}, "fit.lam", "1.5", "[0, 1]"),
    ({"fit": {"lam_ci_pairs": [0.2, 1.2]}}, "fit.lam_ci_pairs[1]", "1.2", "[0, 1]"),
    ({"fit": {"xi": math.inf}}, "fit.xi", "inf", None),
    ({"fit": {"p_value_pairs": 1.5}}, "fit.p_value_pairs", "1.5", "[0, 1]"),
    ({"whole_step": {"losses": {"w": {"median_ms": -3.0}}}}, "whole_step.losses.w.median_ms",
     "-3.0", "> 0"),
    ({"whole_step": {"losses": {"w": {"overhead_pct": -120.0}}}},
     "whole_step.losses.w.overhead_pct", "-120.0", "> -100"),
    ({"max_abs_diff": -1e-9}, "max_abs_diff", "-1e-09", ">= 0"),
    ({"n2": {"heat": {"pearson": {"r": 1.3, "ci": [0, 1], "n": 9}}}}, "n2.heat.pearson.r",
     "1.3", "[-1, 1]"),
    ({"per_seed": [{"seed": 1, "test_acc": 100.5}]}, "per_seed[0].test_acc", "100.5",
     "[0, 100]"),
])
def test_a_value_outside_its_range_names_file_key_value_range(tmp_path, data, key, shown, rng):
    p = write_json(tmp_path / "r.json", data)
    with pytest.raises(InvalidResultError) as err:
        load_result(p)
    msg = str(err.value)
    assert str(p) in msg and repr(key) in msg and shown in msg, msg
    if rng:
        assert f"({rng})" in msg, msg
    assert "\n" not in msg


def test_values_on_the_edges_and_written_results_pass(tmp_path):
    data = {"test_acc": summary([0.0, 100.0]), "val_acc": 100, "fit": {"lam": 0.0,
            "lam_ci": [0.0, 1.0], "xi": -0.4, "p_value": 0.0},
            "test": {"spearman": -100.0}, "ratio": 0.97, "overhead_pct": -3.0,
            "max_abs_diff": 0.0, "wall_s": 0.0, "best_epoch": summary([1, 2, 4])}
    p = write_json(tmp_path / "ok.json", data)
    assert load_result(p)["test_acc"]["mean"] == 50.0


def test_a_mean_beside_other_values_is_refused(tmp_path):
    s = summary([20.0, 20.6, 21.2])
    s["mean"] = 90.0
    p = write_json(tmp_path / "linear.json", {"test_acc": s})
    with pytest.raises(InvalidResultError, match=r"'test_acc\.mean' = 90\.0 but the mean"):
        load_result(p)
    s = summary([20.0, 20.6, 21.2])
    s["n"] = 5
    with pytest.raises(InvalidResultError, match=r"'test_acc\.n' = 5 but"):
        check_plausible({"test_acc": s}, "f.json")


def test_a_mean_within_float_tolerance_passes():
    vals = [0.1 * i for i in range(1, 8)]
    s = {"mean": sum(vals) / len(vals) * (1 + 1e-12), "values": vals}
    assert encoder_value(s, "f.json", "test_acc") == pytest.approx(0.4)


def test_encoder_value_checks_ranges_too():
    with pytest.raises(InvalidResultError, match=r"'whole_step\.x\.overhead_pct' = -150\.0"):
        encoder_value(-150.0, "t.json", "whole_step.x.overhead_pct")
    assert encoder_value(5.0, "t.json", "unranged_key") == 5.0


def test_nan_at_a_ranged_key_is_still_the_invalid_result_message(tmp_path):
    p = tmp_path / "linear.json"
    p.write_text(json.dumps({"test_acc": float("nan")}))
    with pytest.raises(InvalidResultError, match="not a missing one"):
        load_result(p)


def test_range_lookup_uses_the_last_part_of_the_key():
    assert str(range_of("whole_step.losses.weince.overhead_pct")) == "> -100"
    assert range_of("lambda_rad") is None and range_of("n_exceed") is None
