"""What a judged claim is made of: the setting each row is about, the cells of the arms that
ran there, and the claim's result (verdict, reasons, provenance).

Plain dataclasses, filled by each claim kind's rule (:mod:`weince.report.verdicts`, and
:mod:`weince.norms.rules` for N1-N3) and read by the pages (tables, summary, claim
files); they sit below both so that the norms room judges its claims without importing the
report.

    from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
    Setting("vision", dataset="cifar100", backbone="resnet18").label()   # 'cifar100 / resnet18'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # annotations only: planning imports Setting without scipy
    from weince.utils.results import Provenance
    from weince.utils.summary import Estimate

__all__ = ["Setting", "Cell", "Row", "ClaimResult"]


@dataclass(frozen=True)
class Setting:
    """Where a row's numbers come from: a vision pair, a text model/corpus, or a single
    profile-wide file (timing, checks, synthetic)."""

    stage: str
    dataset: str | None = None
    backbone: str | None = None
    model: str | None = None
    corpus: str | None = None

    def label(self) -> str:
        if self.stage == "vision" or (self.stage == "norms" and self.dataset):
            return f"{self.dataset} / {self.backbone}"
        if self.stage == "norms" and self.backbone:   # a model named without its data
            return self.backbone
        if self.stage == "text":
            return f"{self.model} / {self.corpus}"
        if self.stage == "norms":
            return f"{self.model} (text)"
        if self.stage == "timing":
            return f"whole step, {self.backbone}"
        if self.stage == "synthetic":
            return "synthetic (the paper's setting)"
        return self.stage


@dataclass
class Cell:
    """One arm in one row: per-encoder values, the estimate, files present and missing."""

    arm: str
    est: Estimate
    present: list[Path] = field(default_factory=list)
    missing: list[Path] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    """One line of a claim's table: a setting and a metric, one cell and one verdict (a
    paper setting) or reading (a scale-model one, or a metric without a paper figure) per
    arm."""

    setting: Setting
    label: str
    metric: str
    paper_setting: bool
    paper: dict[str, Any]
    cells: dict[str, Cell] = field(default_factory=dict)
    gains: dict[str, Estimate] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)  # arm -> verdict or reading
    reasons: dict[str, str] = field(default_factory=dict)   # arm -> why, in words
    contrasts: dict[str, Estimate | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reference: dict[str, Any] | None = None   # an outside published figure (C7)
    # a metric the paper gave no figure for, shown beside the judged ones: each arm gets a
    # reading (numbers in words), never a verdict, and the claim's verdict ignores the row
    reading: bool = False


@dataclass
class ClaimResult:
    """A judged claim: its rows, the verdict of its primary arm and why, the other arms'
    verdicts, the files' provenance, the profile's scale and the rule in words."""

    claim: dict[str, Any]
    rows: list[Row]
    verdict: str
    reason: str
    arm_verdicts: dict[str, str]
    provenance: Provenance
    scale: str
    rule: str = ""
    attribution: str = ""
    notes: list[str] = field(default_factory=list)   # profile-dependent notes (its page)
