"""The adopters' page runs as printed, and the method page has the sections that code
comments point to."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def run_block(code: str, tmp_path: Path) -> str:
    """``code`` alone in a fresh interpreter (as a reader pastes it), warnings as errors."""
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", str(script)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, code + out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow          # two fresh interpreters with torch, ~10 s each on a shared CPU
def test_using_the_loss_examples_run(tmp_path):
    """Every python block of docs/using-the-loss.md runs on its own, with its own imports."""
    blocks = python_blocks(DOCS / "using-the-loss.md")
    assert len(blocks) == 2, "docs/using-the-loss.md: the two-view and the MoCo example"
    assert len(blocks[0].strip().splitlines()) <= 12, "the first example should stay short"
    out = run_block(blocks[0], tmp_path)
    # the example prints last_stats: the keys the page's table explains
    for key in ("lambda_mean", "rho0", "daic_mean", "beta_w_mean"):
        assert key in out
    # the MoCo example: the queue is full (Q = 512) after its ten calls of N = 64
    filled, lam = run_block(blocks[1], tmp_path).split()
    assert filled == "512" and 0.0 <= float(lam) <= 1.0


def test_using_the_loss_names_what_exists():
    text = (DOCS / "using-the-loss.md").read_text()
    import weince.losses as L

    for name in re.findall(r"`(?:weince\.losses\.)?([A-Z][A-Za-z]+Loss|ShortTailWarning)`", text):
        assert name == "NTXentLoss" or hasattr(L, name), name   # NTXentLoss: lightly's, for comparison
    for link in re.findall(r"\]\(([a-z\-]+\.md)\)", text):
        assert (DOCS / link).exists(), link
    for key in re.findall(r"^\| `([a-z_0-9]+)`", text, flags=re.M):
        assert key in {"lambda_mean", "rho0", "daic_mean", "beta_w_mean", "beta_t", "beta_hat"}, key


def test_method_page_has_the_sections_code_points_to():
    text = (DOCS / "method.md").read_text()
    heads = re.findall(r"^(#{2,3}) (.+)$", text, flags=re.M)
    assert [h for _, h in heads] == [
        "Notation", "InfoNCE", "WEINCE", "Per-anchor statistics", "The loss", "Options",
        "The authors' recipe", "Tail diagnostics", "Link selection", "The synthetic noise floor",
        "Claims"]
    assert dict((h, lvl) for lvl, h in heads)["Per-anchor statistics"] == "###"


def test_sections_cited_in_the_code_exist():
    """Every ``docs/method.md``, "Section" reference in src/ names a heading of the page."""
    heads = set(re.findall(r"^#{2,3} (.+)$", (DOCS / "method.md").read_text(), flags=re.M))
    cited = set()
    for path in (ROOT / "src").rglob("*.py"):
        text = path.read_text()
        for m in re.finditer(r'docs/method\.md``?,\s*"([^"]+)"(?:\s*/\s*"([^"]+)")?', text):
            cited |= {" ".join(g.split()) for g in m.groups() if g}   # names wrapped over lines
    assert cited, "no code cites docs/method.md"
    assert cited <= heads, cited - heads


def test_licence_and_citation():
    import tomllib

    import yaml

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    licence = (ROOT / "LICENSE").read_text()
    assert meta["license"] == "MIT" and licence.startswith("MIT License")
    assert re.search(r"Copyright \(c\) 20\d\d ", licence)
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == meta["version"] and cff["license"] == "MIT"
    paper = cff["preferred-citation"]
    assert paper["title"] == "When Softmax Fails at the Top: Extreme Value Corrections for InfoNCE"
    assert [a["family-names"] for a in paper["authors"]] == [
        "Erol", "Evren", "Ozel", "Morgan", "Ryu", "Zheng"]
    assert paper["year"] == 2026 and "2606.00262" in paper["url"]


def relative_links(page: Path) -> list[str]:
    """The relative targets of a page's Markdown links ``[text](target)``, anchors dropped."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)   # not in code
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue                                  # https:, mailto:, an anchor on the page
        out.append(target.split("#", 1)[0])
    return out


def test_relative_links_of_the_docs_point_to_files():
    """Every relative link of docs/*.md names a file of the repository (pages move; a link
    to a page that does not exist reads as a dead end)."""
    dead = {}
    for page in sorted(DOCS.glob("*.md")):
        for target in relative_links(page):
            if not (page.parent / target).exists():
                dead.setdefault(page.name, []).append(target)
    assert not dead, dead


def test_relative_links_check_sees_a_dead_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("[a](there.md) [b](https://x.org/y.md) [c](#sec) [d](p.md#sec)\n"
                    "```\n[e](code.md)\n```\n")
    assert relative_links(page) == ["there.md", "p.md"]
