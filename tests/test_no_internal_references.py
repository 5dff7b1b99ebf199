"""The repository points its readers only to places they can open: ``docs/*.md`` (with a
section name), the paper, a public repository. It never cites the team's internal
specification document or internal issue numbers, which a reader outside the team cannot
follow: every tracked text file is scanned, and each hit is reported as ``file:line``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One pattern per kind of reference; each is narrow enough that ordinary text passes
# (see test_patterns_flag_references_and_pass_ordinary_text).
PATTERNS = {
    # the internal specification: "SPEC", "SPEC 3.1", "SPEC-5", "SPEC's", "shared/SPEC.md";
    # not an identifier that merely contains the letters (``_MD_SPECIAL``)
    "internal spec": re.compile(r"(?<![A-Za-z])SPEC(?![A-Za-z])"),
    "team-shared document": re.compile(r"\bshared/[A-Z]+\.md\b"),
    # "issue 23", "issues 17 and 24", "Issue 25, item 5", "issue #9"
    "issue number": re.compile(r"\b[Ii]ssues? #?[0-9]+"),
    # "(#38)", "#3: the ...", "see #12"; not "owner/repo#473" (a public tracker, named), not
    # "#1" as a number or "\#1", "&#123;" (escapes), not a CSS colour ("#333", "#1b1b1b"),
    # not a Markdown anchor "(#sec)"
    "issue tag": re.compile(r"\(#[0-9]+[),]|(?:^|[\s(\[])#[0-9]+:(?!\S)|"
                            r"\b(?:[Ss]ee|in|per|cf\.|[Ff]ixes|[Cc]loses)\s+#[0-9]+\b"),
    # progress tags of a task list: "[3/6]"
    "task tag": re.compile(r"\[[0-9]+/[0-9]+\]"),
}

# the lock file is generated (package names and hashes), not prose; this file holds the
# patterns' own examples
SKIP = {"requirements/lock.txt", "tests/test_no_internal_references.py"}


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode()
    files = []
    for name in filter(None, out.split("\0")):
        path = ROOT / name
        if name in SKIP or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:                 # binary (images, archives)
            continue
        files.append(path)
    return files


def references(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, line)`` of every internal reference in ``text``."""
    hits = []
    for no, line in enumerate(text.splitlines(), 1):
        for kind, pattern in PATTERNS.items():
            if pattern.search(line):
                hits.append((no, kind, line.strip()))
    return hits


def test_no_tracked_file_cites_internal_documents_or_issues():
    files = tracked_text_files()
    assert any(p.name == "method.md" for p in files), "git ls-files found no docs"
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for no, kind, line in references(text):
            found.append(f"{path.relative_to(ROOT)}:{no}: {kind}: {line[:120]}")
    assert not found, ("internal references (point to docs/method.md, docs/protocol.md, "
                       "docs/verdicts.md or the paper instead):\n" + "\n".join(found))


# ``docs/method.md``, "Section" (or `docs/method.md`, "Section" in Markdown, or
# docs/method.md, "Section" in YAML and Snakemake comments); a second name after " / "
# (a name starts with a capital and may wrap once)
NAME = r'"([A-Z][^"\n]{0,40}(?:\n\s*[^"\n]{1,40})?)"'
METHOD_SECTION = re.compile(rf"docs/method\.md`{{0,2}},?\s*{NAME}(?:\s*/\s*{NAME})?")
# the pages that describe the reference format itself
FORMAT_PAGES = {"tests/test_docs_pages.py", "tests/test_no_internal_references.py"}


def test_method_sections_cited_anywhere_exist():
    """The pointers that replace the internal references name real headings of
    docs/method.md, in every tracked file (tests/test_docs_pages.py checks src/ alone)."""
    heads = set(re.findall(r"^#{2,3} (.+)$", (ROOT / "docs/method.md").read_text(),
                           flags=re.M))
    wrong = []
    for path in tracked_text_files():
        if str(path.relative_to(ROOT)) in FORMAT_PAGES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in METHOD_SECTION.finditer(text):
            for name in filter(None, m.groups()):
                name = " ".join(name.split())          # names wrapped over lines
                if name not in heads:
                    line = text.count("\n", 0, m.start()) + 1
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {name!r}")
    assert not wrong, "no such section of docs/method.md:\n" + "\n".join(wrong)


@pytest.mark.parametrize("line", [
    "Vocabulary (SPEC 6): reproduced",
    "the grid of SPEC section 6",
    "winners drawn from the SPEC-5 family",
    "threshold stability over SPEC's q grid",
    "batch of ``shared/SPEC.md``",
    "from weince.evt.fits import SPEC_QS",
    "The GPU acceptance run (issues 17 and 24)",
    '"""Issue 25, item 5: a result',
    "(issue #9)",
    "fixed upstream (#38)",
    "#3: the probe seeds",
    "see #12.",
    "(#4, #5)",
    "- #7: the probe",
    "[3/6] tail fits",
])
def test_patterns_flag_references(line):
    assert references(line), line


@pytest.mark.parametrize("line", [
    "_MD_SPECIAL = re.compile(r'([\\\\`*_])')",
    "SPECIAL, SPECTRUM, INSPECT, spec = importlib.util.spec_from_file_location",
    "(snakemake-executor-plugin-slurm#473)",
    "[plugin#473](https://github.com/snakemake/snakemake-executor-plugin-slurm/issues/473)",
    "color: #1b1b1b; background: #333;",
    r"latex_escape('a & #1 +- 0.2') == r'a \& \#1'",
    "the #1 cause, rank #2:3",
    "&#123; an HTML entity",
    "[the loss](method.md#the-loss) and [claims](#claims)",
    "# 1. Heading, # comment, issues with the tail, 3/6 of the rows, [3 / 6]",
    "``docs/method.md``, \"Tail diagnostics\"",
])
def test_patterns_pass_ordinary_text(line):
    assert not references(line), references(line)
