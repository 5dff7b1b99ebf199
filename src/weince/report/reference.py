"""The reference run: the embedded default's claim files, committed in the repository.

``reference/<profile>/claims/<id>.json`` are byte copies of the claim files a finished run of
the current code wrote under ``reports/<profile>/claims/`` (as shipped: the embedded default
only). The README's profile columns are read from them (:mod:`weince.report.status`), so
``weince status --readme README.md --check`` passes on a fresh clone, before any run; and
``weince status`` compares a user's own claim files with them, claim by claim.

    from weince.report.reference import update_reference, stale_reference, differences
    update_reference("reports", "reference", "config/claims.yaml")   # after `snakemake`
    stale_reference("reference", "config/claims.yaml")    # [] when the reference is current

A reference claim file is checked the way any claim file is (sealed: not edited by hand;
computed from the registry entry the claims registry now holds), except against its result
files, which are not in the repository. It is stale when the registry entry of its claim
changed, when a registry claim has none, or when it names a claim the registry no longer
has; that the code still computes the same numbers is the ``slow`` tier's check, which runs
the default and compares (:func:`differences`). :data:`REFRESH` is the one command that
refreshes it.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weince.pipeline.claims import load_claims
from weince.report.claim_file import (ClaimRecord, check_inputs, claim_file, read_claim_file,
                                      registry_digest)

__all__ = ["REFERENCE", "REFERENCE_PROFILE", "REFRESH", "RELATIVE_KINDS", "reference_dir",
           "read_reference", "stale_reference", "update_reference", "differences",
           "compare_runs"]

REFERENCE = "reference"          # the committed reference run, beside reports/
REFERENCE_PROFILE = "default"    # the profile whose run is committed
REFRESH = ("run the embedded default (`snakemake --cores 2`), then refresh the reference: "
           "`weince status --update-reference --readme README.md`")
RELATIVE_KINDS = ("noise_floor",)   # kinds whose registry tolerance is relative (C11)


def reference_dir(reference: str | os.PathLike, profile: str) -> Path:
    """``{reference}/{profile}``: the reference run of one profile (its ``claims/``)."""
    return Path(reference) / profile


def read_reference(path: str | os.PathLike, claim: Mapping[str, Any],
                   alpha: float) -> ClaimRecord:
    """A reference claim file, checked: sealed and computed from the registry entry
    ``claim`` (its result files are not in the repository, so they are not compared);
    ValueError, one line naming the file and :data:`REFRESH`, when it is not."""
    try:
        record = read_claim_file(path)
    except (FileNotFoundError, ValueError) as err:
        raise ValueError(f"reference {str(err).split('; ')[0]}; {REFRESH}") from err
    if (record.inputs or {}).get("registry") != registry_digest(claim, alpha):
        raise ValueError(f"reference claim file {path} is stale: it was computed from another "
                         f"registry entry of {record.id} than config/claims.yaml's now "
                         f"(tolerance, rows or arms changed since); {REFRESH}")
    return record


def stale_reference(reference: str | os.PathLike = REFERENCE,
                    claims_path: str | os.PathLike = "config/claims.yaml") -> list[str]:
    """What makes the reference stale, one line each (empty when it is current): for every
    profile folder under ``reference``, a registry claim without a claim file, a claim file
    that is edited or computed from another registry entry, a file of a claim the registry
    no longer has."""
    reg = load_claims(claims_path)
    root = Path(reference)
    problems: list[str] = []
    for folder in sorted(p for p in root.glob("*/claims") if p.is_dir()):
        ids = {str(c["id"]).lower() for c in reg["claims"]}
        for c in reg["claims"]:
            try:
                read_reference(claim_file(folder.parent, c["id"]), c, reg.get("alpha", 0.05))
            except ValueError as err:
                problems.append(str(err))
        problems += [f"reference claim file {p} names no claim of the registry; {REFRESH}"
                     for p in sorted(folder.glob("*.json")) if p.stem not in ids]
    return problems


def update_reference(reports: str | os.PathLike = "reports",
                     reference: str | os.PathLike = REFERENCE,
                     claims_path: str | os.PathLike = "config/claims.yaml",
                     profile: str = REFERENCE_PROFILE) -> list[Path]:
    """Copy the claim files of a finished run (``{reports}/{profile}/claims/``) into
    ``{reference}/{profile}/claims/``, replacing what was there. Every registry claim must
    have one, sealed and current (its registry entry and result files unchanged since the
    claim tables wrote it), so that a half-finished or stale run is refused in one line."""
    reg = load_claims(claims_path)
    alpha = reg.get("alpha", 0.05)
    source = Path(reports) / profile
    files = []
    for c in reg["claims"]:
        path = claim_file(source, c["id"])
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: the run of profile {profile} is "
                                    f"not finished; run it (`snakemake --cores 2` for the "
                                    f"default) before refreshing the reference")
        check_inputs(read_claim_file(path), c, alpha)
        files.append(path)
    if not files:
        raise ValueError(f"the claims registry {claims_path} has no claim: nothing to refresh")
    dest = claim_file(reference_dir(reference, profile), "x").parent
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    return [Path(shutil.copyfile(f, dest / f.name)) for f in files]


# ------------------------------------------------------------------ comparing two runs
def _num(est: Mapping[str, Any] | None) -> float | None:
    return None if not est or est.get("mean") is None else float(est["mean"])


def _same(x: float | None, y: float | None, claim: Mapping[str, Any]) -> bool:
    """Whether two numbers of a claim agree: within the claim's ``tolerance`` (relative for
    :data:`RELATIVE_KINDS`), or to the four significant digits the pages show when the
    registry gives none."""
    if x is None or y is None:
        return x is None and y is None
    tol = claim.get("tolerance")
    if tol is None:
        return f"{x:.4g}" == f"{y:.4g}"
    if claim.get("kind") in RELATIVE_KINDS:
        return abs(x - y) <= float(tol) * abs(y)
    return abs(x - y) <= float(tol) or math.isclose(x, y)


def _row_numbers(row: Mapping[str, Any]) -> dict[str, float | None]:
    """A row's numbers by name: each arm's estimate and each gain."""
    out = {arm: _num(cell.get("estimate")) for arm, cell in row.get("cells", {}).items()}
    out.update({f"gain of {arm}": _num(g) for arm, g in row.get("gains", {}).items()})
    return out


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


def differences(ref: ClaimRecord, ours: ClaimRecord, claim: Mapping[str, Any], *,
                numbers: bool = True) -> list[str]:
    """Where the claim record ``ours`` differs from the reference ``ref``: the verdict,
    each arm's verdict and (``numbers``) each number of each row outside the claim's
    tolerance (:func:`_same`), one phrase each."""
    out = []
    if ours.verdict != ref.verdict:
        out.append(f"verdict {ours.verdict!r} (reference {ref.verdict!r})")
    for arm in dict.fromkeys([*ref.arm_verdicts, *ours.arm_verdicts]):
        a, b = ours.arm_verdicts.get(arm), ref.arm_verdicts.get(arm)
        if a != b:
            out.append(f"{arm}'s verdict {a!r} (reference {b!r})")
    if not numbers:
        return out
    tol = claim.get("tolerance")
    within = (f"tolerance {tol:g}" + (" relative" if claim.get("kind") in RELATIVE_KINDS
                                       else "")) if tol is not None else "4 digits"
    rows = {(r["setting"], r["label"], str(r["metric"])): r for r in ref.rows}
    for r in ours.rows:
        key = (r["setting"], r["label"], str(r["metric"]))
        where = f"{r['setting']} {r['label']}".strip()
        if key not in rows:
            out.append(f"{where}: a row the reference does not have")
            continue
        theirs = _row_numbers(rows.pop(key))
        for name, x in _row_numbers(r).items():
            y = theirs.get(name)
            if not _same(x, y, claim):
                out.append(f"{where}, {name}: {_fmt(x)} (reference {_fmt(y)}, {within})")
    out += [f"{s} {lab}: a row of the reference this run does not have"
            for s, lab, _ in rows]
    return out


def compare_runs(claims_path: str | os.PathLike = "config/claims.yaml",
                 reports: str | os.PathLike = "reports",
                 reference: str | os.PathLike = REFERENCE) -> list[str]:
    """Lines saying where the claim files under ``reports`` differ from the reference, for
    each profile the reference has (verdicts, and numbers outside each claim's tolerance);
    one line for such a profile that you have not run."""
    reg = load_claims(claims_path)
    alpha = reg.get("alpha", 0.05)
    lines = []
    for folder in sorted(p for p in Path(reference).glob("*/claims") if p.is_dir()):
        profile, ref_dir = folder.parent.name, folder.parent
        ours_dir = Path(reports) / profile
        if not claim_file(ours_dir, "x").parent.is_dir():
            lines.append(f"{profile}: no run of yours to compare with the reference "
                         f"({ref_dir}/claims/); `snakemake --cores 2` makes one")
            continue
        diffs = []
        for c in reg["claims"]:
            path = claim_file(ours_dir, c["id"])
            if not path.is_file():
                diffs.append(f"  {c['id']}: not run here")
                continue
            ours = read_claim_file(path)
            check_inputs(ours, c, alpha)
            ref = read_reference(claim_file(ref_dir, c["id"]), c, alpha)
            diffs += [f"  {c['id']}: {d}" for d in differences(ref, ours, dict(c))]
        n = len({d.split(':')[0] for d in diffs})
        lines.append(f"{profile}: your run ({ours_dir}/claims/) against the reference "
                     f"({ref_dir}/claims/): " + (f"{n} claim(s) differ" if diffs else
                                                 "every verdict the same, every number "
                                                 "within its claim's tolerance"))
        lines += diffs
    return lines
