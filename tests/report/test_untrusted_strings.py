"""Strings from result files reach the reports validated or escaped: a
provenance string must have its format (hex commit, hex config hash, ISO date), and the
HTML builder embeds only images inside the report folder (before: any local file a
Markdown image named, absolute or ``../``, was inlined as base64)."""
from __future__ import annotations

import base64
import json
import os

import pytest

from weince.pipeline import layout
from weince.report import build_report
from weince.report.html import markdown_to_html
from weince.utils.results import Provenance, ResultSchemaError
from weince.pipeline.profile import Profile


def _first_linear(cfg):
    run = next(iter(layout.vision_runs(Profile.of(cfg))))
    return layout.run_dir(Profile.of(cfg), run) / "linear.json"


@pytest.mark.parametrize("key, value, message", [
    ("git_commit", "![x](/etc/passwd)", "is not a git commit"),
    ("git_commit", "abc", "is not a git commit"),
    ("config_hash", "<b>hash</b>", "is not a hex config hash"),
    ("date", "yesterday | at noon", "is not an ISO 8601 date"),
    ("date", 20261201, "is not an ISO 8601 date"),
])
def test_a_provenance_string_without_its_format_stops_the_report(fx, key, value, message):
    p = _first_linear(fx)
    data = json.loads(p.read_text())
    data["provenance"][key] = value
    p.write_text(json.dumps(data))
    with pytest.raises(ResultSchemaError) as err:
        build_report(Profile.of(fx))
    msg = str(err.value)
    assert f"{p}: provenance.{key}" in msg and message in msg and "re-run" in msg, msg


@pytest.mark.parametrize("prov", [
    {"git_commit": "unknown"},
    {"git_commit": "0123456789ab+dirty", "config_hash": "a1b2c3d4e5f6",
     "date": "2026-12-01T08:41:08+00:00"},
    {"git_commit": "0" * 40, "date": "2026-12-01"},
])
def test_provenance_in_its_format_is_read(prov):
    p = Provenance()
    p.add({"provenance": prov}, "x.json")
    assert p.files == 1 and p.describe()["git_commit"] != "none"


@pytest.fixture
def canary(tmp_path):
    c = tmp_path / "host" / "canary.png"
    c.parent.mkdir()
    c.write_bytes(b"\x89PNG host secret")
    st = c.stat()
    os.utime(c, (st.st_mtime - 100, st.st_mtime))
    return c


def test_html_embeds_only_images_inside_the_report_folder(tmp_path, canary):
    rep = tmp_path / "reports" / "p"
    (rep / "figures").mkdir(parents=True)
    (rep / "figures" / "ok.png").write_bytes(b"\x89PNG inside")
    (rep / "figures" / "link.png").symlink_to(canary)
    md = (f"![ok](figures/ok.png)\n\n![abs]({canary})\n\n![up](../../host/canary.png)\n\n"
          f"![link](figures/link.png)\n\n![file](file://{canary})\n")
    page = markdown_to_html(md, "t", rep)
    inside = base64.b64encode(b"\x89PNG inside").decode()
    secret = base64.b64encode(canary.read_bytes()).decode()
    assert f"data:image/png;base64,{inside}" in page
    assert secret not in page and "../../host" not in page
    assert f'src="{canary}' not in page and 'src="file:' not in page
    assert page.count('title="image outside the report folder: not embedded"') == 3


def test_html_does_not_read_a_host_image(tmp_path, canary):
    rep = tmp_path / "reports" / "p"
    rep.mkdir(parents=True)
    atime = canary.stat().st_atime
    markdown_to_html(f"![abs]({canary})\n\n![up](../../host/canary.png)\n", "t", rep)
    assert canary.stat().st_atime == atime
