"""The summary at a glance (one short row per claim with our number) and the HTML pages
that link: every local link and image of the summary and claim pages resolves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from weince.pipeline import layout
from weince.pipeline.profile import Profile
from weince.report import build_report, load_claims
from weince.report.claim_file import record_of
from weince.report.glance import MAX_ROW_CHARS, headline, ours_cells, verdict_cell
from weince.report.html import (SUMMARY_CATEGORY, claim_categories, claim_page, html_page_for,
                                local_refs, write_markdown_page)
from weince.report.tables import summary_markdown
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"



def by_id(results):
    return {r.claim["id"]: r for r in results}


def claim_rows(summary: str) -> dict[str, str]:
    return {m.group(1): ln for ln in summary.splitlines()
            if (m := re.match(r"\| ([CN]\d+) \|", ln))}


def test_summary_has_an_ours_column_and_short_rows(fx):
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    summary = (Path(fx["reports"]) / "fx" / "summary.md").read_text()
    assert "| Claim | What | Source | Paper | Ours | Verdict | Page |" in summary
    rows = claim_rows(summary)
    assert set(rows) == set(res)
    for cid, line in rows.items():
        assert len(line) <= MAX_ROW_CHARS, (cid, len(line), line)
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        claim = res[cid].claim
        if cid.startswith("C"):   # the paper's claims: with the registry's source
            assert len(cells) == 7 and cells[2] == claim["source"], line
        else:                     # N1-N3: the companion paper heads their block
            assert len(cells) == 6, line
        assert cells[-2] == verdict_cell(res[cid].verdict)      # the verdict, one phrase
        assert cells[-1] == f"[{cid}](table_{cid.lower()}.md)"
    # the rules, attribution and notes live on the claim pages, not in the summary
    assert "Which difference carries the gain" not in summary
    assert "best of 27" not in summary
    assert summary.count("Reproduced when") == 0


def test_verdicts_are_styled_by_kind():
    assert verdict_cell(REPRODUCED) == f"**{REPRODUCED}**"
    assert verdict_cell(NOT_REPRODUCED) == f"**{NOT_REPRODUCED}**"
    assert verdict_cell("partially run: 1 of 6 rows reproduced").startswith("*partially")
    assert verdict_cell(NOT_RUN) == NOT_RUN and verdict_cell(NOT_TESTABLE) == NOT_TESTABLE


def test_companion_claims_stand_in_their_own_block_under_their_paper(fx):
    res = build_report(Profile.of(fx), with_figures=False)
    summary = (Path(fx["reports"]) / "fx" / "summary.md").read_text()
    head = summary.index("## Companion claims N1-N3")
    sources = {r.claim["source"] for r in res if r.claim["id"].startswith("N")}
    assert len(sources) == 1 and sources.pop() in summary[head:]
    assert all(summary.index(f"| {c} |") > head for c in ("N1", "N2", "N3"))
    assert all(summary.index(f"| {c} |") < head for c in ("C1", "C9"))


def test_claims_with_the_same_row_print_it_once(fx):
    """C3 and C5 stand on the same row (cifar100 / resnet18, the same gain): C5 says so
    instead of repeating the number; C4 has only scale-model rows and says it first."""
    res = build_report(Profile.of(fx), with_figures=False)
    cells = ours_cells([record_of(r) for r in res])
    assert cells["C5"] == "same row as C3"
    assert cells["C4"].startswith("scale model, cifar100 / resnet18: ")
    summary = (Path(fx["reports"]) / "fx" / "summary.md").read_text()
    rows = claim_rows(summary)
    c3_number = cells["C3"].split(": ", 1)[1].split(" (n=")[0]
    assert c3_number in rows["C3"] and c3_number not in rows["C5"]
    assert "same row as C3" in rows["C5"]
    # two claims whose only rows are the same scale-model row: the second points at the first
    fx["vision"]["datasets"] = ["digits"]
    cells = ours_cells([record_of(r) for r in build_report(Profile.of(fx), with_figures=False)])
    assert cells["C3"].startswith("scale model, digits / resnet18: ")
    assert cells["C4"] == cells["C5"] == "same scale-model row as C3"


def test_doc_references_are_links_from_the_report_folder(fx):
    build_report(Profile.of(fx), with_figures=False)
    out = Path(fx["reports"]) / "fx"
    summary = (out / "summary.md").read_text()
    assert "[docs/verdicts.md](../../docs/verdicts.md)" in summary
    assert "[docs/norms.md](../../docs/norms.md)" in summary
    assert "`docs/" not in summary
    html = write_markdown_page(out / "summary.md", out / "html" / "summary.html").read_text()
    assert 'href="../../../docs/verdicts.md"' in html      # from reports/<profile>/html/
    assert "<title>WEINCE reproduction: claims at profile fx</title>" in html
    repo = Path(__file__).resolve().parents[2]
    for name in set(re.findall(r"\]\(\.\./\.\./docs/([\w-]+\.md)\)", summary)):
        assert (repo / "docs" / name).is_file(), name   # from reports/<profile>/ in the repo


def test_ours_is_the_paper_setting_else_the_closest_scale_model_row(fx, fixture_linear):
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    # C3 ran its paper setting (cifar100 / resnet18): the recipe's gain there, with n
    h = headline(res["C3"])
    mean = lambda k: sum(fixture_linear[k]) / len(fixture_linear[k])  # noqa: E731
    gain = mean(("cifar100", "weince_recipe")) - mean(("cifar100", "infonce"))
    assert h.paper_setting and h.setting == "cifar100 / resnet18" and h.n == 3
    assert h.text.startswith(f"weince_recipe - infonce: {gain:+.2f} [")
    assert h.text.endswith("] pts")
    # C4's settings (ResNet-50, ViT-S) did not run: the closest scale-model row, said so
    h4 = headline(res["C4"])
    assert not h4.paper_setting and "scale model" in h4.cell()
    assert h4.setting == "cifar100 / resnet18"   # shares the data set with a paper row
    # C7: MiniLM on synthetic pairs only
    h7 = headline(res["C7"])
    assert not h7.paper_setting and h7.setting == "minilm / synthetic" and h7.n == 2
    # a single timing file: n = 1, with the interval over its timed steps
    assert headline(res["C8"]).text == ("overhead of weince: +0.90% [+0.20, +1.40] "
                                        "(timed steps of one run)") and headline(res["C8"]).n == 1


def test_c8_without_an_interval_says_it_is_one_run(fx):
    """A CPU overhead of one timing run ranged from -27% to +48% across identical runs: the
    summary never prints it bare."""
    p = Path(layout.TIMING.format(results=fx["results"], profile=fx["profile"])) / "timing.json"
    d = json.loads(p.read_text())
    for arm in d["whole_step"]["losses"].values():
        arm["overhead_ci"] = None
    p.write_text(json.dumps(d))
    h = headline(by_id(build_report(Profile.of(fx), with_figures=False))["C8"])
    assert h.text == "overhead of weince: +0.90% (noise: n = 1)" and h.n == 1


def test_no_interval_with_one_encoder(fx):
    fx["vision"]["seeds"] = [7]
    res = by_id(build_report(Profile.of(fx), with_figures=False))
    h = headline(res["C3"])
    assert h.n == 1 and "[" not in h.text


def test_html_pages_link_only_to_files_that_exist(fx):
    """Every local link and image of the HTML summary and of every claim page resolves;
    a claim page links back to the summary and to its neighbours."""
    out = Path(fx["reports"]) / "fx"
    out.mkdir(parents=True, exist_ok=True)
    (out / "norms.md").write_text("# norms\n\n[back](summary.md)\n")   # before the summary
    res = build_report(Profile.of(fx))
    pages = [write_markdown_page(out / "norms.md", html_page_for(out / "norms.md"))]
    for r in res:
        md = out / f"table_{r.claim['id'].lower()}.md"
        drawn = out / "figures" / f"forest_{r.claim['id'].lower()}.png"   # by the summary
        pages.append(claim_page(r, md, html_page_for(md), "fx", figure=drawn))
    pages.append(write_markdown_page(out / "summary.md", out / "html" / "summary.html"))
    checked = 0
    repo = Path(__file__).resolve().parents[2]
    for page in pages:
        text = page.read_text()
        for ref in local_refs(text):
            target = page.parent / ref.split("#")[0]
            docs = re.fullmatch(r"(?:\.\./)+docs/([\w-]+\.md)", ref)
            if docs:   # a project doc: it resolves where the report sits in the repository
                depth = ref.count("../")
                assert depth == (3 if page.parent.name == "html" else 4), f"{page.name}: {ref}"
                assert (repo / "docs" / docs.group(1)).is_file(), f"{page.name}: {ref}"
                continue
            assert target.exists(), f"{page.name}: {ref}"
            checked += 1
    assert checked > len(res)
    summary = (out / "html" / "summary.html").read_text()
    for r in res:
        assert f'href="claim_{r.claim["id"].lower()}.html"' in summary
    assert 'href="companions/norms.html"' in summary
    ids = [r.claim["id"] for r in res]
    c3 = (out / "html" / "claim_c3.html").read_text()
    i = ids.index("C3")
    assert 'href="summary.html"' in c3
    assert f'href="claim_{ids[i - 1].lower()}.html"' in c3
    assert f'href="claim_{ids[i + 1].lower()}.html"' in c3
    assert 'href="../table_c3.tex"' not in c3 or (out / "table_c3.tex").exists()


def test_report_categories_sort_in_claim_order_after_the_summary():
    cats = claim_categories(CLAIMS)
    names = [SUMMARY_CATEGORY, *cats.values(), "Ablations and norms"]
    # Snakemake's menu sorts category names (localeCompare); plain sorting agrees here
    assert sorted(names) == names
    ids = [c["id"] for c in load_claims(CLAIMS)["claims"]]
    assert [n.split(" ", 1)[1].split(":")[0] for n in sorted(cats.values())] == ids


def test_the_summary_says_which_lambda_is_one_encoders_and_which_the_mean():
    """The lambda profile figure shows one encoder's fit; the summary's C2 number is the
    mean across encoder seeds: the figure list says which is which."""
    text = summary_markdown([], {"profile": "p", "config_hash": "h", "built": "b",
                                 "git_commit": "c"},
                            ["figures/evt/digits_smallcnn_infonce_lambda_profile.png",
                             "figures/evt/digits_smallcnn_infonce_gpd_qq.png",
                             "figures/lambda_training_digits_smallcnn.png"], [])
    lines = {ln.split("](")[0]: ln for ln in text.splitlines() if ln.startswith("- [figures/")}
    prof = lines["- [figures/evt/digits_smallcnn_infonce_lambda_profile.png"]
    assert "one encoder's link fit" in prof and "C2 row above is the mean" in prof
    assert "C1 row above is the mean of xi" in \
        lines["- [figures/evt/digits_smallcnn_infonce_gpd_qq.png"]
    assert lines["- [figures/lambda_training_digits_smallcnn.png"].endswith(".png)")
