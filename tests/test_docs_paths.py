"""Every repository file a page cites exists: the paths named on docs/*.md, the README and
the config and claims schemas (``tests/pipeline/test_config.py`` stayed cited for a round
after the file was split), and the local targets of the pages' Markdown links. Paths under
the output folders (``reports/<profile>/...``, ``results/...``) name what a run writes and
are left out, as are templates (``{profile}``, ``<id>``); a ``*`` must match a file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = ("reports/", "results/", "runs/")
SCHEMAS = [ROOT / "src/weince/pipeline/config.schema.yaml",
           ROOT / "src/weince/pipeline/claims.schema.yaml"]


def tracked_folders() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return sorted({p.split("/")[0] for p in out if "/" in p} - {"reports"})


def cited_paths(text: str, folders: list[str]) -> list[str]:
    """The repository paths ``text`` names: a token starting with one of ``folders`` and a
    slash, without trailing punctuation or a ``::test`` suffix; templates left out."""
    heads = "|".join(map(re.escape, folders))
    pat = re.compile(r"(?<![\w./{<-])((?:" + heads + r")/[\w./*{}<>-]*[\w*}>/])")
    found = []
    for m in pat.finditer(text):
        path = m.group(1).split("::")[0].rstrip("./")
        if not any(c in path for c in "{}<>") and not path.startswith(OUTPUTS):
            found.append(path)
    return found


def link_targets(text: str) -> list[str]:
    """The local targets of Markdown links ``[..](target)``, anchors dropped."""
    out = []
    for t in re.findall(r"\]\(([^)\s]+)\)", text):
        t = t.split("#")[0]
        if t and not re.match(r"[a-z]+:", t):
            out.append(t)
    return out


def exists(path: str, base: Path = ROOT) -> bool:
    if "*" in path:
        return any(base.glob(path))
    return (base / path).exists()


def pages() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"] + SCHEMAS


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cited_file_exists(page):
    text = page.read_text()
    missing = [p for p in cited_paths(text, tracked_folders()) if not exists(p)]
    if page.suffix == ".md":
        missing += [t for t in link_targets(text)
                    if not t.startswith(OUTPUTS) and not exists(t, page.parent)]
    assert not missing, f"{page.relative_to(ROOT)} cites files that do not exist: {missing}"


def test_the_check_sees_a_stale_path_and_leaves_outputs_and_templates_alone():
    folders = ["docs", "src", "tests", "workflow"]
    text = ("choices [`tests/pipeline/test_config.py`]. See src/weince/pipeline/profile.py, "
            "`tests/x.py::test_y`, reports/default/summary.md, workflow/scripts/*.py and "
            "results/{profile}/vision/ or docs/<page>.md.")
    assert cited_paths(text, folders) == ["tests/pipeline/test_config.py",
                                          "src/weince/pipeline/profile.py", "tests/x.py",
                                          "workflow/scripts/*.py"]
    assert not exists("tests/pipeline/test_config.py")
    assert exists("src/weince/pipeline/profile.py") and exists("workflow/scripts/*.py")
    assert link_targets("[a](method.md#x) [b](https://x.org/a.md) [c](../LICENSE)") == [
        "method.md", "../LICENSE"]
