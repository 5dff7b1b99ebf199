"""The adopters' page runs as printed, and the method page has the sections that code
comments point to."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import weince.losses as L

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def python_blocks(page: Path) -> list[str]:
    """The page's python blocks that run with the core install alone: not those whose first
    line says they need the extras (tests/losses/test_dual_example.py runs the dual-encoder
    one)."""
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    return [b for b in blocks if not b.startswith("# needs the extras")]


def run_block(code: str, tmp_path: Path) -> str:
    """``code`` alone in a fresh interpreter (as a reader pastes it), warnings as errors."""
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", str(script)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, code + out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow          # fresh interpreters with torch, ~10 s each on a shared CPU
def test_using_the_loss_examples_run(tmp_path):
    """Every python block of docs/using-the-loss.md runs on its own, with its own imports."""
    blocks = python_blocks(DOCS / "using-the-loss.md")
    assert len(blocks) == 5, ("docs/using-the-loss.md: the two-view, the MoCo, open_clip's "
                              "call, the per-call options and the mixed-precision example")
    assert len(blocks[0].strip().splitlines()) <= 12, "the first example should stay short"
    out = run_block(blocks[0], tmp_path)
    # the example prints last_stats: the keys the page's table explains
    for key in ("lambda_mean", "rho0", "daic_mean", "beta_w_mean"):
        assert key in out
    # the MoCo example: the queue is full (Q = 512) after its ten calls of N = 64
    filled, lam = run_block(blocks[1], tmp_path).split()
    assert filled == "512" and 0.0 <= float(lam) <= 1.0
    # open_clip's call: its output dict, the (1,) logit scale's gradient, the statistics
    clip = run_block(blocks[2], tmp_path)
    assert clip.startswith("['contrastive_loss'] torch.Size([1]) "), clip
    assert 0.0 <= float(clip.split()[-1]) <= 1.0
    # the per-call options: (N,) losses of the examples, three finite losses
    options = run_block(blocks[3], tmp_path)
    found = re.fullmatch(r"torch\.Size\(\[64\]\) \[(.*)\]\n", options)
    assert found, options
    numbers = [float(v) for v in found.group(1).split(",")]
    assert len(numbers) == 3 and all(v > 0 for v in numbers), numbers
    # mixed precision: a bf16 model's outputs, a float32 loss, the gradient back in bf16
    mixed = next(b for b in blocks if "torch.autocast" in b)
    assert run_block(mixed, tmp_path).split() == ["torch.bfloat16", "torch.float32",
                                                  "torch.bfloat16"]


def test_using_the_loss_names_what_exists():
    text = (DOCS / "using-the-loss.md").read_text()
    for name in re.findall(r"`(?:weince\.losses\.)?([A-Z][A-Za-z]+Loss|ShortTailWarning)`", text):
        # the other libraries' losses, for comparison: lightly's, open_clip's,
        # pytorch-metric-learning's
        assert name in {"NTXentLoss", "ClipLoss", "SupConLoss"} or hasattr(L, name), name
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


# ---------------------------------------------------------------- pointers to sections
# where a pointer may stand, and how it names a page: README / README.md / docs/x.md / x.md
_PAGE = r"(?<![\w/\"'.-])(?P<page>README(?:\.md)?|(?:docs/)?[a-z][\w-]*\.md)"
# then the page's closing backticks or link, "," or "'s", and one or more quoted names
# ("WEINCE" / "Per-anchor statistics"; names may wrap over lines, even comment lines)
_POINTER = re.compile(_PAGE + r"`{0,2}(?:\]\([^)\s]*\))?(?:'s|`s|,)[ \t\n#]*"
                      r'(?P<names>"[^"]+"(?:\s*(?:/|and|,)\s*"[^"]+")*)')
_ANCHOR = re.compile(r"\]\((?P<page>[\w./-]*\.md)?#(?P<anchor>[\w-]+)\)")
SCANNED = ("src", "workflow", "docs", "README.md", "pyproject.toml", "Snakefile")


def _headings(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return [" ".join(h.split()) for h in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.M)]


def _names_a_place(name: str, page: Path) -> bool:
    """``name`` is a heading of ``page``, or its start up to a word's end ("Multi-GPU" for
    "Multi-GPU training (torchrun)"), or a table row's first cell (protocol.md's
    "precision"), or a bold run-in label (``**SimCSE.**``)."""
    if any(h == name or (h.startswith(name) and not h[len(name)].isalnum())
           for h in _headings(page)):
        return True
    text = page.read_text()
    return bool(re.search(r"^\|\s*" + re.escape(name) + r"\s*\|", text, flags=re.M)
                or re.search(r"\*\*" + re.escape(name) + r"[.:]?\*\*", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _target(page: str, where: Path, root: Path) -> Path:
    if page.startswith("README"):
        return root / "README.md"
    if page.startswith("docs/"):
        return root / page
    return (where.parent / page) if where.parent.name == "docs" else root / "docs" / page


def dead_pointers(root: Path, scanned=SCANNED) -> list[str]:
    """``README's "X"``, ``docs/x.md, "X"``, ``[x.md](x.md), "X"`` and ``x.md#anchor``
    pointers of the scanned files whose page, section or anchor does not exist."""
    files = [f for name in scanned for f in ([root / name] if (root / name).is_file()
                                             else sorted((root / name).rglob("*")))]
    dead = []
    for f in files:
        if not f.is_file() or f.suffix not in {"", ".py", ".md", ".smk", ".yaml", ".toml",
                                               ".txt", ".sh"}:
            continue
        text = f.read_text(errors="replace")
        for m in _POINTER.finditer(text):
            page = _target(m["page"], f, root)
            where = f"{f.relative_to(root)}: {m['page']}"
            if not page.is_file():
                dead.append(f"{where}: no such page")
                continue
            for name in re.findall(r'"([^"]+)"', m["names"]):
                name = " ".join(name.replace("#", " ").split())
                if not _names_a_place(name, page):
                    dead.append(f"{where} has no section {name!r}")
        if f.suffix == ".md":
            for m in _ANCHOR.finditer(re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)):
                page = (f.parent / m["page"]) if m["page"] else f
                if not page.is_file() or m["anchor"] not in map(slug, _headings(page)):
                    dead.append(f"{f.relative_to(root)}: no anchor {m[0]}")
    return dead


def test_pointers_to_sections_name_sections_that_exist():
    """A pointer to a README section or a docs heading that was renamed or moved leads
    nowhere (the package metadata cited the README's "Tested versions", which it lacks)."""
    assert not dead_pointers(ROOT), "\n".join(dead_pointers(ROOT))
    cited = [m for f in sorted((ROOT / "src").rglob("*.py")) for m in
             _POINTER.finditer(f.read_text()) if "method.md" in m["page"]]
    assert len(cited) > 10, "the scan no longer sees the code's docs/method.md pointers"


def test_the_pointer_check_sees_dead_pointers(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Title\n\n## Install\n")
    (tmp_path / "docs" / "m.md").write_text("# M\n\n## The loss\n\n| row | x |\n| --- | --- |\n"
                                            "| precision | y |\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(
        """# the README's "Install", README, "Tested versions", docs/m.md, "The loss"\n"""
        """# (docs/m.md, "The\n# loss" / "Gone"), ``docs/m.md``, "precision", docs/x.md, "A"\n"""
        """# docs/m.md, "The" (a prefix, not a word's end: "Th"), docs/m.md, "Th"\n"""
        """x = ("summary.md", "not a pointer")\n""")
    (tmp_path / "docs" / "p.md").write_text(
        "[m](m.md), \"The loss\" and [m.md](m.md#the-loss), [n](m.md#nope), [o](#m)\n")
    assert sorted(dead_pointers(tmp_path, ("src", "docs", "README.md"))) == sorted([
        "src/a.py: README has no section 'Tested versions'",
        "src/a.py: docs/m.md has no section 'Gone'",
        "src/a.py: docs/x.md: no such page",
        "src/a.py: docs/m.md has no section 'Th'",
        "docs/p.md: no anchor ](m.md#nope)",
        "docs/p.md: no anchor ](#m)",
    ])


def test_licence_and_citation():
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
