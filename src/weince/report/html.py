"""HTML pages of the report (``reports/<profile>/html/``), also shown by ``snakemake --report``.

Snakemake's report shows images and HTML inline but offers Markdown only as a download, so
the rules that write the claim tables and the summary also write an HTML page of each
(``reports/<profile>/html/``): the Markdown rendered with markdown-it-py (tables enabled),
every local image embedded as a ``data:`` URI so that the page needs no other file. Links
between pages are rewritten to the HTML pages beside it (``table_c3.md`` ->
``claim_c3.html``, ``norms.md`` -> ``companions/norms.html``, ``summary.md`` ->
``summary.html``); any other local link (a ``.tex`` table, a figure) points at the file in
``reports/<profile>/``. The rules mark these pages and the figures with ``report()``; the
helpers below give each file its category in the report, numbered so that Snakemake's menu
(sorted by name) lists the summary first and the claims in the registry's order.
"""

from __future__ import annotations

import base64
import html
import mimetypes
import os
import re
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

from weince.report.curves import CURVES_HEADING, CURVES_NOTE
from weince.report.forest import forest_figure
from weince.report.tables import DETAILS_HEADING
from weince.utils.config import parse_yaml
from weince.utils.diskspace import write_text

__all__ = ["markdown_to_html", "write_markdown_page", "claim_page", "claim_categories",
           "figure_category", "figure_subcategory", "companion_pages", "html_page_for",
           "local_refs", "SUMMARY_CATEGORY", "COMPANION_CATEGORY"]

SUMMARY_CATEGORY = "01 Summary"
COMPANION_CATEGORY = "Ablations and norms"

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.2em 2em;
       color: #1b1b1b; max-width: 72em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #c8c8c8; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #eef2f6; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; border: 1px solid #e0e0e0; margin: 0.4em 0; }
code { background: #f3f3f3; padding: 0 0.2em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 1.4em; }
"""

_IMG_RE = re.compile(r'(<img\s[^>]*src=")([^"]+)(")')
_HREF_RE = re.compile(r'(<a\s[^>]*href=")([^"]+)(")')
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|/)", re.I)


def html_page_for(md_path: str | Path) -> Path | None:
    """The HTML page the report writes for a Markdown page of ``reports/<profile>/``, or
    None for a file with no HTML page: ``summary.md`` -> ``html/summary.html``,
    ``table_<id>.md`` -> ``html/claim_<id>.html``, ``<page>.md`` of a companion page
    (``norms.md``, ``ablations.md``) -> ``html/companions/<page>.html``."""
    md_path = Path(md_path)
    if md_path.suffix != ".md":
        return None
    html_dir = md_path.parent / "html"
    if md_path.name == "summary.md":
        return html_dir / "summary.html"
    m = re.fullmatch(r"table_([a-z0-9]+)\.md", md_path.name)
    if m:
        return html_dir / f"claim_{m.group(1)}.html"
    if md_path.name in ("norms.md", "ablations.md"):
        return html_dir / "companions" / md_path.name.replace(".md", ".html")
    return None


def _rewrite_links(body: str, base: Path, page: Path) -> str:
    """Local ``href``s of a page rendered from a Markdown file in ``base`` and written to
    ``page``: to the HTML twin of a Markdown page, else to the file itself, relative to the
    page's folder."""

    def sub(m: re.Match) -> str:
        href = html.unescape(m.group(2))
        if _EXTERNAL.match(href):
            return m.group(0)
        path, _, frag = href.partition("#")
        target = (base / path).resolve()
        # a page of the report (beside the Markdown) has an HTML twin; a project doc
        # (../../docs/norms.md) is linked as it is
        twin = html_page_for(target) if target.parent == base.resolve() else None
        if twin is not None:
            target = twin
        rel = os.path.relpath(target, page.parent.resolve()).replace(os.sep, "/")
        return f"{m.group(1)}{html.escape(rel + ('#' + frag if frag else ''))}{m.group(3)}"

    return _HREF_RE.sub(sub, body)


def local_refs(page_html: str) -> list[str]:
    """Every local ``href`` and ``src`` of a page (not ``data:``, not an external URL, not
    an in-page anchor): what a reader's browser would have to find beside the page."""
    refs = [html.unescape(m.group(2)) for m in _HREF_RE.finditer(page_html)]
    refs += [html.unescape(m.group(2)) for m in _IMG_RE.finditer(page_html)]
    return [r for r in refs if not _EXTERNAL.match(r)]


def _renderer():
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _embed_images(body: str, base: Path) -> str:
    """Replace ``src`` of local images (relative to ``base``) with ``data:`` URIs. Only
    images inside ``base`` once links are resolved are read; the ``src`` of any other
    (absolute, ``../``, a link out of the folder) is emptied, so that a page never carries
    or points at a file from elsewhere on the host."""
    root = base.resolve()

    def sub(m: re.Match) -> str:
        src = html.unescape(m.group(2))
        if re.match(r"^[a-z]+:", src) and not src.lower().startswith("file:"):
            return m.group(0)
        path = (root / src).resolve()
        if src.lower().startswith("file:") or not path.is_relative_to(root):
            return f'{m.group(1)}{m.group(3)} title="image outside the report folder: not embedded"'
        if not path.is_file():
            return m.group(0)
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{m.group(1)}data:{mime};base64,{data}{m.group(3)}"

    return _IMG_RE.sub(sub, body)


def markdown_to_html(text: str, title: str, base: str | Path = ".",
                     page: str | Path | None = None) -> str:
    """A standalone HTML page of Markdown ``text``; images relative to ``base`` embedded;
    with ``page`` (where the HTML goes), local links rewritten to resolve from there."""
    body = _embed_images(_renderer().render(text), Path(base))
    if page is not None:
        body = _rewrite_links(body, Path(base), Path(page))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n{body}</body></html>\n")


def write_markdown_page(md_path: str | Path, out: str | Path, title: str | None = None) -> Path:
    """Render the Markdown file ``md_path`` to the HTML page ``out``."""
    md_path, out = Path(md_path), Path(out)
    text = md_path.read_text()
    if title is None:
        m = re.search(r"^#\s+(.+)$", text, re.M)
        title = m.group(1).replace("`", "").strip() if m else md_path.stem
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, markdown_to_html(text, title, md_path.parent, out))
    return out


def claim_page(result, table_md: str | Path, out: str | Path, profile: str = "",
               figure_dir: str | Path | None = None, figure: str | Path | None = None,
               curves: str | Path | None = None) -> Path:
    """One claim's page: the table rule's Markdown with the forest plot between the table
    and the rule and notes (:data:`~weince.report.tables.DETAILS_HEADING`), in one HTML
    file. ``figure_dir``: keep the plot there as
    ``forest_<id>.png`` (the workflow's summary copies it instead of drawing it again);
    else it is drawn in a temporary folder. ``figure``: the plot already drawn from the same
    results (the summary's ``figures/forest_<id>.png``), embedded as it is. ``curves``: the
    training curves of the claim's rows (:func:`weince.report.curves.claim_curves`), shown
    below the forest plot, in place of the Markdown page's link to the summary's copy
    (``figures/curves_<id>.png``, not written yet when this page is built)."""
    table_md, out = Path(table_md), Path(out)
    cid = result.claim["id"]
    with tempfile.TemporaryDirectory() as tmp:
        if figure_dir is not None:
            Path(figure_dir).mkdir(parents=True, exist_ok=True)
        fig: Path | None
        if figure is not None and Path(figure).is_file():
            fig = Path(figure)
        else:
            target = Path(figure_dir or tmp) / f"forest_{cid.lower()}.png"
            target.unlink(missing_ok=True)   # nothing to draw this time: no stale plot left
            fig = forest_figure(result, target, profile)
        text = table_md.read_text()
        if fig is not None:
            # drawn outside the report folder: embedded here, not by _embed_images
            data = base64.b64encode(fig.read_bytes()).decode("ascii")
            plot = (f"![forest plot {cid}](data:image/png;base64,{data})\n\n*Forest plot: "
                    "our mean and 95% interval per setting x arm (blue); the paper's figure "
                    "(orange) only in the panels of the paper's own settings, which never "
                    "share an axis with the scale-model rows.*\n\n")
            # below the table, above the rule and notes; else after the page's links
            marker = f"\n{DETAILS_HEADING}\n"
            if marker in text:
                text = text.replace(marker, "\n" + plot + DETAILS_HEADING + "\n", 1)
            else:
                nav, sep, rest = text.partition("\n\n")
                text = (nav + sep + plot + rest) if nav.startswith("[Summary]") else plot + text
        text = _without_curves_section(text)
        if curves is not None and Path(curves).is_file():
            block = f"{_embedded(Path(curves), f'training curves {cid}')}\n\n{CURVES_NOTE}\n\n"
            marker = f"\n{DETAILS_HEADING}\n"
            text = (text.replace(marker, "\n" + block + DETAILS_HEADING + "\n", 1)
                    if marker in text else text + "\n\n" + block)
        page = markdown_to_html(text, f"{cid}: {result.claim.get('title', '')}",
                                table_md.parent, out)
    write_text(out, page)
    return out


def _without_curves_section(text: str) -> str:
    """The table page without its training-curves section (a link to the summary's
    ``figures/``, not there yet when the claim's page is built: the page embeds the
    figure itself)."""
    start = text.find(f"\n{CURVES_HEADING}\n")
    if start < 0:
        return text
    nxt = text.find("\n#", start + len(CURVES_HEADING) + 2)
    return text[:start] + (text[nxt:] if nxt >= 0 else "\n")


def _embedded(png: Path, alt: str) -> str:
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()})"


def companion_pages(md_files, out_dir: str | Path) -> list[Path]:
    """An HTML page per companion Markdown page (ablations, norms) in ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [write_markdown_page(f, out_dir / f"{Path(f).stem}.html") for f in md_files]


# ----------------------------------------------------------------------------- categories
def claim_categories(claims_path: str | Path) -> dict[str, str]:
    """``{"C1": "02 C1: <title>", ...}`` from the claims registry: the report's categories,
    numbered in the registry's order after the summary's (``01 Summary``), since Snakemake's
    menu sorts categories by name."""
    data = parse_yaml(Path(claims_path).read_text()) or {}
    claims = data.get("claims", [])
    width = max(2, len(str(len(claims) + 1)))
    return {c["id"]: f"{i + 2:0{width}d} {c['id']}: {c.get('title', '')}".strip()
            for i, c in enumerate(claims)}


def figure_category(name: str, categories: dict[str, str]) -> str:
    """The claim a figure of ``reports/<profile>/figures`` belongs to (its report category):
    forest and estimate plots by their claim id, tail diagnostics to C1, the link-selection
    profile to C2, lambda over training to its own category."""
    base = Path(name).name
    m = re.match(r"(?:forest_|curves_)?([cn]\d+)(?:_|\.|$)", base)
    cid = None
    if m:
        cid = m.group(1).upper()
    elif base.startswith("lambda_training"):
        return "WEINCE lambda over training"
    elif name.startswith("evt/"):
        cid = "C2" if "lambda_profile" in base or "link" in base else "C1"
    return categories.get(cid, cid) if cid else "Other figures"


def figure_subcategory(name: str) -> str:
    base = Path(name).name
    if base.startswith("forest_"):
        return "forest plot (ours vs paper)"
    if base.startswith("curves_"):
        return "training curves of its rows"
    if base.startswith("lambda_training"):
        return "vision" if "_text_" not in base else "text"
    if name.startswith("evt/"):
        return "diagnostics per encoder"
    return "estimates per encoder"
