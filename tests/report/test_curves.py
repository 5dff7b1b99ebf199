"""The training curves on a claim's page (weince.report.curves): the runs a claim reads, the
mean and range over seeds, a run that ended early marked, and the figure embedded in the
claim's HTML page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from weince.pipeline.profile import Profile
from weince.pipeline.targets import claims
from weince.report.build import copy_curves
from weince.report.curves import (CURVES_HEADING, CURVES_NOTE, UnreadableLogError, _read,
                                  claim_curve_logs, claim_curves, claim_planned, curves_figure,
                                  curves_section)
from weince.report.html import claim_page
from weince.report.tables import DETAILS_HEADING

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prof(tmp_path: Path) -> Profile:
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    cfg["claims"] = str(REPO / "config" / "claims.yaml")
    return Profile.of(cfg)


def _log(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _epochs(n: int, loss0: float, lam: float = 0.2) -> list[dict]:
    return [{"epoch": e, "loss": loss0 - 0.1 * e, "lambda_mean": lam, "lambda_q10": 0.0,
             "lambda_q90": 0.9, "beta_t": 4.0 + e} for e in range(1, n + 1)]


def test_the_claim_reads_its_rows_runs_and_their_planned_end(prof):
    c3 = next(c for c in claims(prof) if c["id"] == "C3")
    logs = claim_curve_logs(prof, c3)
    assert list(logs) == ["digits/smallcnn"]
    assert sorted(logs["digits/smallcnn"]) == ["infonce", "weince", "weince_recipe"]
    (seed, path), = logs["digits/smallcnn"]["infonce"]
    assert seed == 7 and path == (prof.results / "smoke" / "vision" / "digits" / "smallcnn"
                                  / "infonce" / "seed7" / "train_log.jsonl")
    assert claim_planned(prof, logs) == {"digits/smallcnn": 1}
    c7 = next(c for c in claims(prof) if c["id"] == "C7")
    assert sorted(claim_curve_logs(prof, c7)["text/minilm"]) == ["infonce", "weince"]


def test_seeds_pool_per_epoch_and_an_early_end_or_a_nan_is_found(tmp_path):
    a = _log(tmp_path / "a.jsonl", _epochs(3, 5.0))
    b = _log(tmp_path / "b.jsonl", _epochs(2, 6.0))
    c = _log(tmp_path / "c.jsonl", [*_epochs(1, 7.0), {"epoch": 2, "loss": None}])
    series, ends = _read([(1, a), (2, b), (3, c)], ["loss"])
    assert series["loss"][1.0] == pytest.approx([4.9, 5.9, 6.9])
    assert series["loss"][3.0] == pytest.approx([4.7])
    assert [(s, last, bad) for s, last, bad, _ in ends] == [(1, 3.0, None), (2, 2.0, None),
                                                            (3, 2.0, 2.0)]
    assert ends[2][3]["loss"] == pytest.approx((1.0, 6.9))   # its last finite point


def test_the_figure_is_drawn_from_the_logs_and_never_empty(prof, tmp_path):
    base = prof.results / "smoke" / "vision" / "digits" / "smallcnn"
    for arm in ("infonce", "weince_recipe"):
        _log(base / arm / "seed7" / "train_log.jsonl", _epochs(1, 5.0))
    c3 = next(c for c in claims(prof) if c["id"] == "C3")
    out = claim_curves(prof, c3, tmp_path / "fig")
    assert out == tmp_path / "fig" / "curves_c3.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.with_suffix(".pdf").is_file()
    assert curves_figure({"x/y": {"a": [(7, tmp_path / "none.jsonl")]}},
                         tmp_path / "empty.png", "t") is None
    c1 = next(c for c in claims(prof) if c["id"] == "C8")   # timing: no training run
    assert claim_curves(prof, c1, tmp_path / "fig") is None


def test_a_log_with_an_unreadable_line_stops_the_figure_naming_file_and_line(
        prof, tmp_path, monkeypatch):
    """One truncated line of the baseline's log must not remove its curve without a word: the
    figure's job stops with one line naming the file, the line and the command that rebuilds
    the log, complete for the run (its --configfile)."""
    monkeypatch.delenv("WEINCE_SNAKEMAKE_ARGS", raising=False)
    monkeypatch.chdir(REPO)        # config/smoke.yaml is found from the results path
    base = prof.results / "smoke" / "vision" / "digits" / "smallcnn"
    good = _log(base / "weince" / "seed7" / "train_log.jsonl", _epochs(2, 5.0))
    bad = _log(base / "infonce" / "seed7" / "train_log.jsonl", _epochs(2, 5.0))
    lines = bad.read_text().splitlines()
    bad.write_text(lines[0] + "\n" + lines[1][:17] + "\n")     # the last line cut mid-record
    c3 = next(c for c in claims(prof) if c["id"] == "C3")
    with pytest.raises(UnreadableLogError) as err:
        claim_curves(prof, c3, tmp_path / "fig")
    msg = str(err.value)
    assert "\n" not in msg and f"{bad}:2 is not valid JSON" in msg
    assert f"`snakemake --forcerun {bad} --cores 2 --configfile config/smoke.yaml`" in msg
    assert not (tmp_path / "fig" / "curves_c3.png").exists()
    bad.write_text(lines[0] + "\n")               # a readable log is drawn again
    assert claim_curves(prof, c3, tmp_path / "fig") is not None and good.is_file()

def test_the_claim_page_embeds_the_curves(tmp_path):
    class R:
        claim: ClassVar[dict] = {"id": "C3", "title": "t", "kind": "gain", "arms": {}}
        rows: ClassVar[list] = []

    md = tmp_path / "table_c3.md"
    md.write_text("# C3\n\n| a |\n| - |\n| 1 |\n")
    png = curves_figure({"x/y": {"a": [(7, _log(tmp_path / "l.jsonl", _epochs(2, 3.0)))]}},
                        tmp_path / "curves_c3.png", "t")
    page = claim_page(R(), md, tmp_path / "c3.html", figure=tmp_path / "none.png",
                      curves=png).read_text()
    assert 'alt="training curves C3"' in page and CURVES_NOTE.strip("*")[:40] in page
    assert md.read_text() == "# C3\n\n| a |\n| - |\n| 1 |\n"      # the table page untouched


def test_the_table_page_links_the_curves_the_summary_copies(prof, tmp_path):
    c3 = next(c for c in claims(prof) if c["id"] == "C3")
    c8 = next(c for c in claims(prof) if c["id"] == "C8")   # timing: no training run
    section = curves_section(prof, c3)
    assert section.startswith(f"\n{CURVES_HEADING}\n\n")
    assert "![training curves C3](figures/curves_c3.png)" in section and CURVES_NOTE in section
    assert curves_section(prof, c8) == ""
    png = curves_figure({"x/y": {"a": [(7, _log(tmp_path / "l.jsonl", _epochs(2, 3.0)))]}},
                        tmp_path / "forest" / "c3" / "curves_c3.png", "t")
    made = copy_curves({"C3": png, "C8": tmp_path / "forest" / "c8" / "curves_c8.png"},
                       tmp_path / "figures")
    assert made == [tmp_path / "figures" / "curves_c3.png"]
    assert made[0].read_bytes() == png.read_bytes()


def test_the_claim_page_shows_the_figure_in_place_of_the_pages_link(tmp_path):
    class R:
        claim: ClassVar[dict] = {"id": "C3", "title": "t", "kind": "gain", "arms": {}}
        rows: ClassVar[list] = []

    md = tmp_path / "table_c3.md"
    text = (f"# C3\n\n| a |\n| - |\n| 1 |\n\n{DETAILS_HEADING}\n\nrule\n\n{CURVES_HEADING}\n\n"
            f"![training curves C3](figures/curves_c3.png)\n\n{CURVES_NOTE}\n")
    md.write_text(text)
    png = curves_figure({"x/y": {"a": [(7, _log(tmp_path / "l.jsonl", _epochs(2, 3.0)))]}},
                        tmp_path / "curves_c3.png", "t")
    page = claim_page(R(), md, tmp_path / "c3.html", figure=tmp_path / "none.png",
                      curves=png).read_text()
    assert page.count('alt="training curves C3"') == 1 and "figures/curves_c3.png" not in page
    assert page.index('alt="training curves C3"') < page.index("Rule, selection and scale")
    assert md.read_text() == text
    # without a figure (none drawn), the page drops the link to a file it does not have
    page = claim_page(R(), md, tmp_path / "c3b.html", figure=tmp_path / "none.png",
                      curves=None).read_text()
    assert "curves_c3.png" not in page and "training curves C3" not in page
