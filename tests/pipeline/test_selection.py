"""Grid-point selection as the official aggregation makes it: mean validation over encoder
seeds, complete points first, one choice per k-NN metric; never a test value."""

from __future__ import annotations

import pytest

from weince.pipeline.profile import Profile
from weince.pipeline.protocol import adopted_seeds, shares_seeds
from weince.pipeline.grid import adoption_note, assemble_knn, choose_point, select_grid
from weince.report.grid import selection_markdown
from weince.utils import write_json

SEEDS = (7, 21, 63, 84)


def _summary(values):
    return {"mean": sum(values) / len(values), "n": len(values), "values": list(values)}


def test_choose_point_mean_over_seeds_complete_first_ties_first():
    vals = {
        "a": {7: 50.0, 21: 50.0, 63: 50.0, 84: 50.0},         # complete, mean 50
        "b": {7: 60.0, 21: None, 63: None, 84: None},          # best mean, but incomplete
        "c": {7: 49.0, 21: 51.0, 63: 50.0, 84: 50.0},          # complete, ties with a
    }
    ch = choose_point(vals, expected=4)
    assert ch["chosen"] == "a" and ch["complete_only"] is True
    assert ch["points"]["b"] == {"mean": 60.0, "n": 1, "seeds": [7], "values": [60.0],
                                 "complete": False}
    assert ch["points"]["c"]["mean"] == pytest.approx(50.0)
    # no complete point: every point competes (the official fallback)
    ch = choose_point({"a": {7: 50.0}, "b": {7: 60.0, 21: float("nan")}}, expected=4)
    assert ch["chosen"] == "b" and ch["complete_only"] is False
    with pytest.raises(ValueError, match="finite"):
        choose_point({"a": {7: None}}, expected=1)


def test_exact_ties_go_where_the_official_aggregator_puts_them():
    """Official: pandas groupby over the runs' yaml.dump-sorted config keys, then idxmax:
    the first of equal means in ascending (margin, kappa_aic, kappa_rho), whatever our
    grid order (margin, kappa_rho, kappa_aic) or the dict's order."""
    tie = {s: 60.0 for s in SEEDS}
    for order in (["m0_kr5_ka1", "m0_kr10_ka0.5"], ["m0_kr10_ka0.5", "m0_kr5_ka1"]):
        vals = {name: dict(tie) for name in order}
        assert choose_point(vals, expected=4)["chosen"] == "m0_kr10_ka0.5"
    # margin first, then kappa_aic, then kappa_rho
    vals = {"m2_kr5_ka0.5": dict(tie), "m0_kr20_ka2": dict(tie), "m0_kr5_ka2": dict(tie)}
    assert choose_point(vals, expected=4)["chosen"] == "m0_kr5_ka2"
    # a strictly better mean still wins, wherever it sorts
    vals["m6_kr20_ka2"] = {**tie, 7: 60.5}
    assert choose_point(vals, expected=4)["chosen"] == "m6_kr20_ka2"


def test_knn_metric_ties_follow_the_official_order(tmp_path):
    """The per-metric k-NN choice (counts over the validation split: exact ties plausible)
    breaks ties the same way."""
    linear, knn = {}, {}
    for name, lin in (("m0_kr5_ka1", 70.0), ("m0_kr10_ka0.5", 60.0)):
        linear[name], knn[name] = [], []
        for seed in SEEDS:
            d = tmp_path / f"weince@{name}" / f"seed{seed}"
            write_json(d / "linear.json", {"val_acc": _summary([lin])})
            write_json(d / "knn.json", {"recall@1": _summary([1.0]),
                                        "val": {"recall@1": _summary([60.0])}})
            linear[name].append(d / "linear.json")
            knn[name].append(d / "knn.json")
    sel = select_grid(linear, knn, expected_seeds=4)
    assert sel["chosen"] == "m0_kr5_ka1"                       # no tie: the better probe
    assert sel["knn"]["recall@1"]["chosen"] == "m0_kr10_ka0.5"  # tie: the official order


def _grid_files(tmp_path):
    """Two points, four seeds. At seed 7 alone point B wins every metric; over the four
    seeds A wins the linear probe and recall@1, B keeps acc@50. Test values point the other
    way everywhere, so a choice that looked at test would differ."""
    lin = {"A": [62.0, 70.0, 70.0, 70.0], "B": [64.0, 60.0, 60.0, 60.0]}
    acc = {"A": [40.0, 40.0, 40.0, 40.0], "B": [45.0, 44.0, 44.0, 44.0]}
    r1 = {"A": [30.0, 38.0, 38.0, 38.0], "B": [35.0, 30.0, 30.0, 30.0]}
    linear, knn = {}, {}
    for point in ("A", "B"):
        name = {"A": "m0_kr5_ka1", "B": "m2_kr10_ka0.5"}[point]
        linear[name], knn[name] = [], []
        for i, seed in enumerate(SEEDS):
            d = tmp_path / f"weince@{name}" / f"seed{seed}"
            # probe seeds inside an encoder are averaged first (+-1 around the value)
            write_json(d / "linear.json", {
                "val_acc": _summary([lin[point][i] - 1, lin[point][i] + 1]),
                "test_acc": _summary([100 - lin[point][i]])})
            write_json(d / "knn.json", {
                "acc@50": _summary([100 - acc[point][i]]),
                "recall@1": _summary([100 - r1[point][i]]),
                "val": {"acc@50": _summary([acc[point][i]] * 5),
                        "recall@1": _summary([r1[point][i] - 0.5, r1[point][i] + 0.5])},
                "settings": {"k": 50}})
            linear[name].append(d / "linear.json")
            knn[name].append(d / "knn.json")
    return linear, knn


def test_four_seed_mean_and_seed7_choice_disagree(tmp_path):
    linear, knn = _grid_files(tmp_path)
    seed7 = select_grid({p: fs[:1] for p, fs in linear.items()},
                        {p: fs[:1] for p, fs in knn.items()}, expected_seeds=1)
    assert seed7["chosen"] == "m2_kr10_ka0.5"
    assert {m: c["chosen"] for m, c in seed7["knn"].items()} == {
        "acc@50": "m2_kr10_ka0.5", "recall@1": "m2_kr10_ka0.5"}

    sel = select_grid(linear, knn, expected_seeds=4)
    assert sel["chosen"] == "m0_kr5_ka1"
    assert sel["params"] == {"margin": 0.0, "kappa_rho": 5.0, "kappa_aic": 1.0}
    assert sel["points"]["m0_kr5_ka1"]["mean"] == pytest.approx(68.0)
    assert sel["points"]["m2_kr10_ka0.5"]["mean"] == pytest.approx(61.0)
    assert sel["points"]["m0_kr5_ka1"]["seeds"] == list(SEEDS)
    # one choice per k-NN metric, each on that metric's validation mean
    assert sel["knn"]["acc@50"]["chosen"] == "m2_kr10_ka0.5"
    assert sel["knn"]["recall@1"]["chosen"] == "m0_kr5_ka1"
    assert sel["knn"]["recall@1"]["metric"] == "val.recall@1"
    assert sel["knn"]["acc@50"]["points"]["m2_kr10_ka0.5"]["mean"] == pytest.approx(44.25)

    # the final arm's knn.json at seed 21 takes each metric from its own point's run
    out = assemble_knn(sel, {p: fs[1] for p, fs in knn.items()})
    assert out["selected_point"] == {"acc@50": "m2_kr10_ka0.5", "recall@1": "m0_kr5_ka1"}
    assert out["acc@50"]["mean"] == pytest.approx(56.0)       # 100 - 44 (B at seed 21)
    assert out["recall@1"]["mean"] == pytest.approx(62.0)     # 100 - 38 (A at seed 21)
    assert out["val"]["recall@1"]["mean"] == pytest.approx(38.0)

    md = selection_markdown({"cifar100/resnet18 weince": sel}, ["acc@50", "recall@1"])
    assert "| cifar100/resnet18 weince | val.acc@50 | m2_kr10_ka0.5 | 44.25 (4) |" in md
    assert "| val.recall@1 | m0_kr5_ka1 |" in md
    md = selection_markdown({"x": sel})
    assert "| x | val_acc | m0_kr5_ka1 | 68.00 (4) | m2_kr10_ka0.5 61.00 |" in md


def test_incomplete_point_loses_to_complete_one(tmp_path):
    linear, _ = _grid_files(tmp_path)
    # B only at seed 7 (mean 64 there), A complete with a lower mean over its seeds
    linear["m2_kr10_ka0.5"] = linear["m2_kr10_ka0.5"][:1]
    for f in linear["m0_kr5_ka1"][1:]:
        write_json(f, {"val_acc": _summary([62.0]), "test_acc": _summary([1.0])})
    sel = select_grid(linear, expected_seeds=4)
    assert sel["points"]["m0_kr5_ka1"]["mean"] == pytest.approx(62.0)
    assert sel["points"]["m2_kr10_ka0.5"]["mean"] == pytest.approx(64.0)
    assert sel["chosen"] == "m0_kr5_ka1" and sel["complete_only"]
    assert sel["knn"] is None


def test_selection_refuses_test_keys_and_needs_points(tmp_path):
    linear, knn = _grid_files(tmp_path)
    with pytest.raises(ValueError, match="validation split only"):
        select_grid(linear, metric="test_acc")
    with pytest.raises(ValueError, match="at least one"):
        select_grid({})
    sel = select_grid(linear)
    with pytest.raises(ValueError, match="one-seed grid"):
        assemble_knn(sel, {})


def _grid(seeds, grid_seeds, arms=("weince",)):
    return Profile.of({"profile": "t", "vision": {
        "seeds": list(seeds), "arms": ["infonce", "weince"],
        "grid": {"arms": list(arms), "seeds": list(grid_seeds)}}})


def test_shares_seeds_tells_the_official_grid_from_the_one_seed_option():
    four = _grid([7, 21, 63, 84], [7, 21, 63, 84])
    one = _grid([7, 21, 63, 84], [7])
    assert shares_seeds(four) and not shares_seeds(one)
    assert not shares_seeds(_grid([7], [7], arms=()))
    # the final arm adopts the point's run wherever the grid ran that seed
    assert adopted_seeds(four) == [7, 21, 63, 84] and adopted_seeds(one) == [7]
    assert adopted_seeds(_grid([21], [7])) == []
    assert adopted_seeds(_grid([7], [7], arms=())) == []


def test_an_adopted_runs_note_names_its_point_seed_and_selection(tmp_path):
    pair = tmp_path / "results/p/vision/cifar100/resnet18"
    text = adoption_note(pair / "weince/seed21", pair / "weince@m2_kr10_ka1/seed21",
                         pair / "weince/selection.json", "val_acc")
    assert "weince, seed21: adopted, not retrained" in text
    assert "grid point m2_kr10_ka1's run at seed 21" in text
    assert f"`{pair / 'weince@m2_kr10_ka1/seed21'}/encoder.pt`" in text
    assert f"chosen by `{pair / 'weince/selection.json'}`" in text and "val_acc" in text
