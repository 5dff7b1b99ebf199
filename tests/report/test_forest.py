"""Forest plots: one per claim, our intervals beside the paper's figures, inline in summary.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from weince.pipeline.profile import Profile
from weince.report import build_report
from weince.report.forest import forest_figures, forest_lines, forest_panels, has_forest
from weince.report.html import claim_page, figure_category, write_markdown_page


def by_id(results):
    return {r.claim["id"]: r for r in results}


def test_forest_lines_carry_our_estimates_and_the_papers_figures(fx):
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    c3 = res["C3"]
    per_arm, gains = forest_lines(c3)
    arms = c3.claim["arms"]
    row = c3.rows[0]
    base = next(ln for ln in per_arm if ln.label.endswith(f"| {arms['baseline']}"))
    prim = next(ln for ln in per_arm if ln.label.endswith(f"| {arms['primary']}"))
    # the lines are the table's estimates, the diamonds the registry's paper values
    assert base.mean == row.cells[arms["baseline"]].est.mean
    assert (base.lo, base.hi) == (row.cells[arms["baseline"]].est.lo,
                                  row.cells[arms["baseline"]].est.hi)
    assert base.paper == row.paper["baseline"] and prim.paper == row.paper["treatment"]
    # C2: the paper gives a range, drawn as a band on the primary arm's lines on the
    # paper's own settings only (a scale-model row's table rules the comparison out)
    c2_lines, _ = forest_lines(res["C2"])
    assert all(ln.paper_range is None and ln.paper is None for ln in c2_lines
               if ln.label.startswith("digits"))
    primary = res["C2"].claim["arms"]["primary"]
    paper_settings = {f"{r['dataset']} / {r['backbone']}" for r in res["C2"].claim["rows"]}
    arm_of = {id(ln): ln.label.split(" | ")[-1].split(" (")[0] for ln in c2_lines}
    banded = [ln for ln in c2_lines if ln.label.split(" | ")[0] in paper_settings
              and arm_of[id(ln)] == primary]
    assert banded and all(ln.paper_range == (0.33, 0.50) for ln in banded)
    assert all(ln.paper_range is None for ln in c2_lines if arm_of[id(ln)] != primary)


@pytest.fixture(scope="module")
def drawn(fx_module):
    """The fixture report built once with its figures (drawing 13 forest plots is most of a
    report's time), for the tests below that only read it."""
    return fx_module, build_report(Profile.of(fx_module))


def test_summary_shows_one_forest_plot_per_claim_inline(drawn):
    fx, res = drawn
    out = Path(fx["reports"], "fx")
    summary = (out / "summary.md").read_text()
    images = re.findall(r"!\[forest plot ([CN]\d+)\]\((figures/forest_[cn]\d+\.png)\)", summary)
    drawn = {cid for cid, _ in images}
    # every claim with a forest plot to draw (a finite estimate; C11 has the paper's own
    # figure instead) has its figure, and it exists on disk
    expected = {r.claim["id"] for r in res if has_forest(r)}
    assert expected == {r.claim["id"] for r in res if r.claim["kind"] != "noise_floor"
                        and any(ln.mean is not None for lines in forest_lines(r)
                                for ln in lines)}
    assert drawn == expected and {"C1", "C2", "C3", "N1", "N2", "N3"} <= drawn
    for _, rel in images:
        assert (out / rel).stat().st_size > 2000
    assert summary.index("## Forest plots") < summary.index("## Provenance")


def test_html_pages_embed_the_forest_plot_and_render_the_table(drawn, tmp_path):
    fx, res = drawn
    res = by_id(res)
    out = Path(fx["reports"], "fx")
    page = claim_page(res["C3"], out / "table_c3.md", tmp_path / "claim_c3.html", "fx")
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 1   # the forest plot, self-contained
    assert "<table>" in text and "C3" in text
    summary = write_markdown_page(out / "summary.md", tmp_path / "summary.html").read_text()
    n_forest = len(re.findall(r"!\[forest plot", (out / "summary.md").read_text()))
    assert summary.count("data:image/png;base64,") == n_forest > 0
    assert summary.count("<table>") >= 1 and "figures/forest_" not in summary


def test_the_summary_copies_the_plot_a_claim_page_kept(fx, tmp_path):
    """The workflow's table job draws a claim's plot once for its page; the summary copies
    that file, and draws only a plot that nobody drew."""
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    out = Path(fx["reports"], "fx")
    keep = tmp_path / "forest" / "c3"
    claim_page(res["C3"], out / "table_c3.md", tmp_path / "claim_c3.html", "fx",
               figure_dir=keep)
    kept = keep / "forest_c3.png"
    assert kept.stat().st_size > 2000
    kept.write_bytes(kept.read_bytes() + b"drawn-once")   # a mark that only a copy carries
    made = forest_figures([res["C3"], res["C1"]], tmp_path / "figures", "fx",
                          drawn={"C3": kept, "C1": tmp_path / "not-drawn.png"})
    assert [p.name for p in made] == ["forest_c3.png", "forest_c1.png"]
    assert made[0].read_bytes() == kept.read_bytes()
    assert not made[1].read_bytes().endswith(b"drawn-once") and made[1].stat().st_size > 2000


def test_names_only_mode_lists_the_same_plots_and_draws_none(fx, tmp_path):
    """A bundle's verification compares the summary's text: the forest section must name the
    same plots whether or not they are drawn."""
    res = build_report(Profile.of(fx), with_figures=False)
    named = forest_figures(res, tmp_path / "named", "fx", draw=False)
    assert named and not (tmp_path / "named").exists()
    some = [r for r in res if r.claim["id"] in ("C1", "C3", "C9")]
    assert ([p.name for p in forest_figures(some, tmp_path / "drawn", "fx")]
            == [p.name for p in named if p.stem.split("_")[1].upper() in ("C1", "C3", "C9")])


def test_figures_are_grouped_by_claim():
    cats = {"C1": "C1: tail", "C2": "C2: link", "C3": "C3: probe", "C10": "C10: k-NN",
            "N2": "N2: heat"}
    assert figure_category("forest_c3", cats) == "C3: probe"
    assert figure_category("forest_c10", cats) == "C10: k-NN"   # not C1's
    assert figure_category("forest_n2", cats) == "N2: heat"
    assert figure_category("c1_estimates", cats) == "C1: tail"
    assert figure_category("evt/digits_smallcnn_infonce_qq", cats) == "C1: tail"
    assert figure_category("evt/digits_smallcnn_infonce_lambda_profile", cats) == "C2: link"
    assert figure_category("lambda_training_digits_smallcnn", cats) == "WEINCE lambda over training"


def test_forest_panels_show_the_papers_figure_and_one_metric_each(fx):
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    # C4: none of its settings ran; the gain panel still shows each paper gain
    _, gains = forest_lines(res["C4"])
    paper_gains = sorted(ln.paper for ln in gains if ln.mean is None)
    assert paper_gains == sorted(r["paper"]["gain"] for r in res["C4"].claim["rows"])
    assert all(ln.paper is None for ln in gains if ln.mean is not None)   # scale rows
    # C3's gain panel carries the paper's gain, treatment minus baseline
    _, g3 = forest_lines(res["C3"])
    p = res["C3"].claim["rows"][0]["paper"]
    assert any(ln.paper == pytest.approx(p["treatment"] - p["baseline"]) for ln in g3)
    # C5: the paper's ">= 0" on its settings that ran; not a line per setting that did not
    _, g5 = forest_lines(res["C5"])
    assert any(ln.paper_range == (0.0, float("inf")) for ln in g5)
    assert not [ln for ln in g5 if ln.mean is None]
    # C9: the tolerance band
    per9, _ = forest_lines(res["C9"])
    assert per9[0].paper_range == (0.0, res["C9"].claim["tolerance"])
    # C6: seven metrics in a group's two panels (values and gains), each line naming its
    # metric; C6 reads its own setting alone where the profile runs it (no scale-model
    # panels beside it: test_paper_and_scale_model_settings_never_share_an_axis has those)
    panels = forest_panels(res["C6"])
    assert len(panels) == 2 and all(lines[0].paper_setting for _, lines, _ in panels)
    for title, lines, _ in panels:
        assert len({ln.metric for ln in lines}) == 7
        assert all(ln.label.startswith(f"{ln.metric} | ") for ln in lines)
        assert len({ln.paper_setting for ln in lines}) == 1   # never both on one axis
        paper_group = lines[0].paper_setting
        assert title.lower().startswith("the paper's settings" if paper_group else "scale-model")
        assert ("cifar100 / resnet18" if paper_group else "digits / resnet18") in title
        if not paper_group:
            assert all(ln.paper is None and ln.paper_range is None for ln in lines)
    # units once: C8's label carries "(%)", C7's unit is "(x100)"
    assert all(xl.count("(%)") == 1 for _, _, xl in forest_panels(res["C8"]))
    assert all("((x100))" not in xl for _, _, xl in forest_panels(res["C7"]))
    # C8: one timing file, its own interval drawn (as the table prints it), marked n = 1
    per8, _ = forest_lines(res["C8"])
    w = next(ln for ln in per8 if ln.label.endswith("| weince"))
    assert (w.lo, w.hi, w.fit_interval) == (0.2, 1.4, True)


@pytest.mark.parametrize("cid", ["C3", "C4", "C7", "N2"])
def test_paper_and_scale_model_settings_never_share_an_axis(fx, cid):
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    panels = forest_panels(res[cid])
    assert panels
    for _, lines, _ in panels:
        assert len({ln.paper_setting for ln in lines}) == 1, [ln.label for ln in lines]
    # the paper's settings first
    groups = [lines[0].paper_setting for _, lines, _ in panels]
    assert groups == sorted(groups, reverse=True)
