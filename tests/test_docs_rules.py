"""One source for each verdict rule: the code's ``RULES``, printed on docs/verdicts.md
(``tests/report/test_verdict_rules.py`` ties the two). No other page states a rule in its
own words, so no page can drift from what the code applies; and every workflow rule a page
tells a reader to run exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RULE_PAGE = DOCS / "verdicts.md"

# "is `reproduced` when ...", "Reproduced if ...", "reads reproduced only if ...": a verdict
# and its condition, which only the code (and docs/verdicts.md, printed from it) may state
RESTATED_RULE = re.compile(
    r"`?(?:not\s+)?reproduced`?\s+(?:when|if|only\s+if|unless|provided|as\s+long\s+as)\b",
    re.I)


def rule_statements(text: str) -> list[str]:
    """The passages of ``text`` that state a verdict rule in words (line breaks ignored)."""
    flat = re.sub(r"\s+", " ", text)
    return [flat[max(0, m.start() - 60):m.end() + 40] for m in RESTATED_RULE.finditer(flat)]


def pages() -> list[Path]:
    out = sorted(p for p in DOCS.glob("*.md") if p != RULE_PAGE)
    readme = ROOT / "README.md"
    return out + ([readme] if readme.exists() else [])


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_but_verdicts_md_states_a_rule(page):
    found = rule_statements(page.read_text())
    assert not found, (f"{page.relative_to(ROOT)} states a verdict rule in its own words; "
                       f"link docs/verdicts.md instead: {found}")


@pytest.mark.parametrize("text", [
    # the drifted README bullet this test was written against
    "gains are `reproduced` when our gain has the paper's sign and lies within the stated\n"
    "  tolerance (1.5 points) of the paper's gain",
    # the old N1-N3 lines of docs/norms.md
    "- **N1** reproduced when Pearson's r of `R_eq` vs `||z||` has an interval above 0.",
    "A claim is `reproduced` when every testable unit is",
    "C8 reads reproduced only if the overhead is small",
    "it is not reproduced unless both hold",
])
def test_the_check_sees_a_rule_in_words(text):
    assert rule_statements(text)


@pytest.mark.parametrize("text", [
    "gives `reproduced`, `not reproduced` or `not run at this profile`",
    "the rules are printed from the code on docs/verdicts.md",
    "STL-10 / ResNet-50 is `not reproduced` even though its mean is close",
])
def test_the_check_leaves_verdict_names_alone(text):
    assert not rule_statements(text)


def test_the_rule_page_itself_states_the_rules():
    """The check would find the rules on docs/verdicts.md: it is the one page allowed them."""
    assert len(rule_statements(RULE_PAGE.read_text())) >= 10


def workflow_rules() -> set[str]:
    names = set()
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        names |= set(re.findall(r"^\s*rule (\w+):", path.read_text(), flags=re.M))
    return names


def test_rules_a_page_tells_snakemake_to_run_exist():
    """``--allowed-rules`` / ``--forcerun`` lists on the docs name rules of the workflow (a
    renamed rule would otherwise leave a reviewer's rebuild command broken)."""
    known = workflow_rules()
    assert {"report", "all"} <= known
    named = {}
    for page in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]:
        if not page.exists():
            continue
        text = page.read_text().replace("\\\n", " ")
        for m in re.finditer(r"--(?:allowed-rules|forcerun)((?:\s+[a-z_]+\b(?![/.]))+)", text):
            for name in m.group(1).split():
                named.setdefault(name, page.relative_to(ROOT).as_posix())
    assert named, "no page names the report rules"
    unknown = {n: p for n, p in named.items() if n not in known}
    assert not unknown, f"rules named on the docs but not in the workflow: {unknown}"
