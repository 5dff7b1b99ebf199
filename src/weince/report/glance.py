"""The summary at a glance: one short row per claim (claim, what, source, paper, ours,
verdict, page), the profile's scale as a short list, and the notes that depend on the
profile.

``headline(result)`` picks the number that stands for a claim on the summary: the primary
arm's estimate on the first of the paper's settings that ran, else on the scale-model row
closest to the paper's settings (most of dataset / backbone / model / corpus in common),
labelled with its setting. Gains (kinds ``gain`` and ``noninferior``) show the primary arm's
gain over the baseline, named as ``primary - baseline``. An interval is shown only where the
table has one (n >= 2 encoders across seeds; with one encoder, the fit's own interval where
the claim reads one), the count ``n`` always. Where several claims stand on the same row
with the same number (C3, C4 and C5 on one scale-model row), :func:`ours_cells` prints it
once and the later claims say whose it is. Nothing here decides a verdict: the rows come
from :func:`weince.report.verdicts.evaluate_claim`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re

from weince.pipeline.claims import paper_rows
from weince.pipeline.layout import norms_text_runs, norms_vision_runs
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import protocol_options
from weince.utils.summary import Estimate
from weince.report.verdicts import noise_note, overhead_interval
from weince.utils.verdict_words import NOT_REPRODUCED, PARTIAL, REPRODUCED

__all__ = ["Headline", "headline", "summary_row", "ours_cells", "verdict_cell", "doc_links",
           "scale_items", "claim_notes", "is_companion", "MAX_ROW_CHARS", "DOCS_FROM_REPORT"]

MAX_ROW_CHARS = 300   # a summary row (Markdown source) is at most this long

_KEYS = ("dataset", "backbone", "model", "corpus")


@dataclass(frozen=True)
class Headline:
    """The claim's number on the summary: ``text`` (e.g. ``"gain +1.95 [-1.25, +5.14]"``),
    ``n`` (encoders, or units for N claims), the row's ``setting`` label and whether that
    row is one of the paper's settings."""

    text: str
    n: int
    setting: str
    paper_setting: bool
    n_of: str = ""   # what n counts where it is not encoders (C8: timing files)

    def cell(self) -> str:
        """``"<number> (n=3; <setting>)"`` on a paper setting; a scale-model row says so
        first: ``"scale model, <setting>: <number> (n=3)"``."""
        n = f"n={self.n}" + (f" {self.n_of}" if self.n_of else "")
        if self.paper_setting:
            return f"{self.text} ({n}; {self.setting})"
        return f"scale model, {self.setting}: {self.text} ({n})"


def _closeness(row, paper_rows: list[dict[str, Any]]) -> int:
    s = row.setting
    return max((sum(1 for k in _KEYS if r.get(k) is not None and getattr(s, k, None) == r[k])
                for r in paper_rows), default=0)


def _num(x: float, digits: int, signed: bool) -> str:
    if x != 0 and (abs(x) < 10 ** (-digits) or abs(x) >= 1e6):
        return f"{x:.1e}"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _fmt(e: Estimate, digits: int, signed: bool,
         fit_iv: tuple[float, float] | None = None) -> str:
    if e.mean is None:    # the callers format run cells only
        raise ValueError("an estimate with no mean has no number to show")
    s = _num(e.mean, digits, signed)
    if e.lo is not None and e.hi is not None:
        s += f" [{_num(e.lo, digits, signed)}, {_num(e.hi, digits, signed)}]"
    elif fit_iv is not None:
        s += f" [{_num(fit_iv[0], digits, signed)}, {_num(fit_iv[1], digits, signed)}] (fit)"
    return s


def _what(claim: dict[str, Any], row, several: bool, arm: str | None = None) -> str:
    """The quantity's short name, with the arm it is of (``xi of infonce``, ``weince_recipe
    - infonce``): the row's metric label first when a claim has several."""
    kind = claim["kind"]
    arms = claim["arms"]
    if kind in ("gain", "noninferior"):
        name = f"{arms['primary']} - {arms.get('baseline', 'baseline')}:"
    elif kind == "norms":
        name = ""
    else:
        name = {"sign": "xi", "reject": "lambda", "overhead": "overhead",
                "exact": "max |diff|"}.get(kind, "")
        if arm and arm != "all":
            name += f" of {arm}"
        name += ":"
    if several or kind == "norms":
        lab = row.label or row.metric
        name = f"{lab}:" if kind == "norms" else f"{lab}, {name}"
    return name


def headline(result) -> Headline | None:
    """The claim's summary number (see the module docstring); None when nothing ran."""
    claim = result.claim
    kind = claim["kind"]
    primary = claim["arms"]["primary"]
    base = claim["arms"].get("baseline")

    def value(row):
        if kind in ("gain", "noninferior"):
            g = row.gains.get(primary)
            return g if g is not None and g.mean is not None else None
        arm = primary if primary in row.cells else next(iter(row.cells), None)
        c = row.cells.get(arm) if arm else None
        return c.est if c is not None and c.est.mean is not None else None

    ran = [r for r in result.rows if value(r) is not None]
    if not ran:
        return None
    paper = [r for r in ran if r.paper_setting and not r.reading]
    if paper:
        row = paper[0]
    else:
        prows = paper_rows(claim)
        row = max(ran, key=lambda r: _closeness(r, prows))   # first of the closest
    e = value(row)
    several = len({r.metric for r in result.rows}) > 1   # e.g. C6: acc@50 and R@k
    digits = {"sign": 3, "reject": 3, "norms": 2}.get(kind, 2)
    signed = kind not in ("reject", "exact")
    fit_iv = None
    arm = primary if primary in row.cells else next(iter(row.cells), "")
    cell = row.cells.get(arm)
    if kind in ("sign", "reject") and cell is not None and not e.has_interval \
            and cell.extra.get("lo") is not None:
        fit_iv = (cell.extra["lo"], cell.extra["hi"])
    if kind == "noise_floor":
        last = result.rows[-1]
        sm, fl = last.cells.get(base), None
        if sm is not None:
            fl = sm.extra["theory"]["floor"]
        text = (f"Weibit slope {e.mean:+.2f} [{e.lo:+.2f}, {e.hi:+.2f}]"
                + (f"; softmax MSE {sm.est.mean:.2e}, floor {fl:.2e} at "
                   f"{last.label[7:].replace(' = ', '=')}"
                   if sm is not None else ""))
        n = int(last.cells[primary].extra["replicates"]) if primary in last.cells else e.n
        return Headline(text, n, "replicates per n", True)
    if kind == "exact":
        text = f"max |diff| {max(e.values):.1e}"
    else:
        text = f"{_what(claim, row, several, arm)} {_fmt(e, digits, signed, fit_iv)}".strip()
        if kind == "overhead":   # its interval across timing runs (else one run's steps),
            # and whether the machine's noise exceeds the effect; never a bare number
            iv = overhead_interval(cell) if cell is not None else None
            text += ("% (noise: n = 1)" if iv is None else
                     f"% [{_num(iv[0], 2, True)}, {_num(iv[1], 2, True)}] ({iv[2]})"
                     + noise_note(e.mean, iv[0], iv[1]))
        elif kind in ("gain", "noninferior") and claim.get("unit") == "%":
            text += " pts"
    if kind == "gain" and base is None:   # pragma: no cover - the registry requires one
        raise ValueError(f"claim {claim['id']}: a gain claim needs arms.baseline")
    return Headline(text, e.n, row.setting.label(), bool(row.paper_setting),
                    "timing file(s)" if kind == "overhead" else "")


def verdict_cell(verdict: str) -> str:
    """A verdict styled by what it says: ``reproduced`` and ``not reproduced`` in bold, a
    partial run in italics, ``not run at this profile`` (and any other) plain."""
    if verdict in (REPRODUCED, NOT_REPRODUCED):
        return f"**{verdict}**"
    if verdict.startswith(PARTIAL):
        return f"*{verdict}*"
    return verdict


def ours_cells(records) -> dict[str, str]:
    """The Ours cell of each claim (:class:`weince.report.claim_file.ClaimRecord` objects, in
    order): the cell its table job wrote, or, where an earlier claim shows the same number on
    the same row, ``same scale-model row as C3`` (``same row as C3`` on a paper setting)."""
    first: dict[tuple, str] = {}
    out = {}
    for r in records:
        cid, h = r.claim["id"], r.headline
        out[cid] = r.ours
        if not h:
            continue
        key = (h["text"], h["setting"], h["n"], h["paper_setting"])
        if key in first:
            what = "row" if h["paper_setting"] else "scale-model row"
            out[cid] = f"same {what} as {first[key]}"
        else:
            first[key] = cid
    return out


def is_companion(claim: dict[str, Any]) -> bool:
    """An N claim: from the companion paper on embedding norms, not from the WEINCE paper
    (the registry's id pattern)."""
    return str(claim["id"]).startswith("N")


# what a claim is, where its kind makes it something else than an empirical result
# what kind of claim C9 and C11 are, shown beside their title (docs/glossary.md): an identity
# of this code, and the paper's own synthetic experiment at its own setting
NATURE = {"exact": "implementation check", "noise_floor": "synthetic experiment"}


def claim_nature(claim: dict[str, Any]) -> str | None:
    """``implementation check`` for C9, ``synthetic experiment`` for C11 (by their kind),
    None for the empirical claims."""
    return NATURE.get(claim.get("kind", ""))


def summary_row(record, page: str, ours: str | None = None) -> list[str]:
    """The summary's cells of one claim (a :class:`weince.report.claim_file.ClaimRecord`):
    id, what, source (the paper's table or section; left out for a companion claim, whose
    source heads its block), paper, ours, verdict, page link. ``ours``: the cell from
    :func:`ours_cells` (default: the cell the claim's table job wrote)."""
    c = record.claim
    if ours is None:
        ours = record.ours
    nature = claim_nature(c)
    cells = [c["id"], c.get("short_title", c["title"]) + (f" ({nature})"
                                                          if nature else "")]
    if not is_companion(c):
        cells.append(c.get("source", ""))
    return cells + [c.get("short_paper", c["paper_figure"]), ours,
                    verdict_cell(record.verdict), f"[{c['id']}]({page})"]


# the project's docs/ from a report page: reports/<profile>/ is two levels below the
# repository (the HTML twins' links are rewritten from there by weince.report.html)
DOCS_FROM_REPORT = "../../docs"
_DOC_RE = re.compile(r"(?<!\]\()(?<![\[/\w`])`?docs/([A-Za-z0-9_-]+\.md)`?")


def doc_links(text: str) -> str:
    """Every mention of ``docs/<page>.md`` in Markdown ``text`` as a link that works from
    ``reports/<profile>/`` (``[docs/verdicts.md](../../docs/verdicts.md)``); a mention that is
    already a link target is left alone."""
    return _DOC_RE.sub(lambda m: f"[docs/{m.group(1)}]({DOCS_FROM_REPORT}/{m.group(1)})", text)


def pairs_text(prof: Profile) -> str:
    """The vision pairs the profile runs: ``d x b, ...`` when ``vision.pairs`` narrows them,
    else ``datasets x backbones``."""
    v = prof.vision
    if len(v.pairs) != len(v.datasets) * len(v.backbones):
        return ", ".join(f"{d} x {b}" for d, b in v.pairs) or "none"
    return f"{', '.join(v.datasets) or 'none'} x {', '.join(v.backbones) or 'none'}"


def scale_items(prof: Profile) -> list[str]:
    """What the profile ran, one short item per stage (the claim pages have the details)."""
    items = []
    v = prof.vision
    if v.enabled and v.datasets:
        items.append(f"vision: {pairs_text(prof)}, {v.pretrain.epochs} epoch(s), "
                     f"encoder seeds {', '.join(map(str, v.seeds))}")
        g = v.grid
        if g.arms:
            items.append(f"grid: {len(g.points)} point(s) for {', '.join(g.arms)} at "
                         f"seed(s) {', '.join(map(str, g.seeds))}, chosen on validation")
        opts = protocol_options(prof)
        if opts:
            items.append(f"{len(opts)} option(s) off the official protocol, listed on every "
                         f"vision claim's page (docs/protocol.md)")
    t = prof.text
    if t.enabled and t.models:
        items.append(f"text: {', '.join(t.models)} on "
                     + ("SYNTHETIC sentences and pairs (a pipeline check, not STS-B)"
                        if t.corpus == "synthetic" else t.corpus)
                     + f", {t.simcse.epochs} epoch(s), seeds "
                     f"{', '.join(map(str, t.seeds))}")
    if prof.timing.enabled:
        tc = prof.timing.config
        items.append(f"timing: {tc.backbone} step on {tc.device}")
    nv, nt = norms_vision_runs(prof), norms_text_runs(prof)
    if nv or nt:
        items.append(f"norms: {len(nv)} vision and {len(nt)} text unit(s)")
    return items


def claim_notes(prof: Profile, claim: dict[str, Any]) -> list[str]:
    """Notes computed from the profile: for a claim whose comparison involves a tuned arm,
    the paper's selection (the registry's ``paper_selection``) beside this profile's own
    (how many grid points, at which seeds, for which arms), which are different facts."""
    out = []
    if claim.get("paper_selection"):
        v = prof.vision
        g = v.grid
        arms = [a for a in [claim["arms"].get("primary"), *claim["arms"].get("others", [])]
                if a]
        tuned = [a for a in arms if a in g.arms]
        fixed = [a for a in arms if a not in tuned and a != claim["arms"].get("baseline")
                 and a in v.arms]
        n = len(g.points)
        here = []
        if tuned and n:
            here.append(f"{', '.join(tuned)}: the best of {n} grid point(s) of this profile "
                        f"({', '.join(g.points)}) at encoder seed(s) "
                        f"{', '.join(map(str, g.seeds))}, chosen on validation")
        if fixed:
            here.append(f"{', '.join(fixed)}: one fixed configuration")
        base = claim["arms"].get("baseline")
        here_txt = "; ".join(here) if here else "no tuned arm ran"
        out.append(f"Selection. Paper: {claim['paper_selection']} Here: {here_txt}"
                   + (f"; {base}: one fixed configuration." if base else ".")
                   + (" A selection advantage that the gain's interval does not account "
                      "for." if tuned and n > 1 else ""))
    if claim.get("note"):
        out.append(claim["note"])
    return out
