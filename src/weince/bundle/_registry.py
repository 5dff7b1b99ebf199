"""Which claims registry judges a bundle, and how the archive's differs from it.

A bundle carries the registry its report was built with (``bundle/claims.yaml``), but the
reviewer's rules are the installed ones: ``weince verify`` rebuilds every table with the
registry of the checkout the installed weince comes from (or ``--claims PATH``), and names
each difference from the archive's, claim by claim and key by key. Only ``--archive-registry``
judges by the archive's own, and the output then says so on every verdict line.

Nothing here imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import weince

__all__ = ["installed_registry", "registry_differences", "rule_differences"]

SHOWN = 120   # characters of a value quoted in a difference


def installed_registry(claims: str | Path | None = None) -> Path:
    """The installed claims registry: ``claims`` when given, else ``config/claims.yaml`` of
    the checkout the installed weince is imported from, else that of the working folder.
    FileNotFoundError (one line, with the fixes) when none exists."""
    if claims is not None:
        p = Path(claims)
        if not p.is_file():
            raise FileNotFoundError(f"--claims {p}: no such file; name the checkout's "
                                    f"config/claims.yaml")
        return p
    checkout = Path(weince.__file__).resolve().parents[2] / "config" / "claims.yaml"
    for p in (checkout, Path("config") / "claims.yaml"):
        if p.is_file():
            return p
    raise FileNotFoundError(
        f"no installed claims registry: neither {checkout} (the checkout weince is imported "
        f"from) nor config/claims.yaml here exists; run `weince verify` in a checkout, pass "
        f"--claims PATH, or --archive-registry to judge by the archive's own registry (said "
        f"on every verdict line)")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def _leaf_differences(a: Any, b: Any, key: str) -> list[tuple[str, Any, Any]]:
    """``(dotted key, archive value, installed value)`` of every leaf where ``a`` and ``b``
    differ (lists of equal length compared item by item)."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in [*a, *(k for k in b if k not in a)]:
            out += _leaf_differences(a.get(k, "<absent>"), b.get(k, "<absent>"),
                                     f"{key}.{k}" if key else str(k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _leaf_differences(x, y, f"{key}[{i}]")
        return out
    return [(key, a, b)]


def registry_differences(archive: dict[str, Any], installed: dict[str, Any]) -> list[str]:
    """One line per difference between two validated registries: ``C8 tolerance: archive
    50, installed 2.0``; a claim only in one of them; a registry-wide key (``alpha``)."""
    out = []
    for key in [*archive, *(k for k in installed if k not in archive)]:
        if key == "claims":
            continue
        for k, a, b in _leaf_differences(archive.get(key, "<absent>"),
                                         installed.get(key, "<absent>"), key):
            out.append(f"registry {k}: archive {_shown(a)}, installed {_shown(b)}")
    a_claims = {c["id"]: c for c in archive.get("claims", [])}
    b_claims = {c["id"]: c for c in installed.get("claims", [])}
    for cid in [*a_claims, *(c for c in b_claims if c not in a_claims)]:
        if cid not in b_claims:
            out.append(f"{cid}: only in the archive's registry")
        elif cid not in a_claims:
            out.append(f"{cid}: only in the installed registry")
        else:
            out += [f"{cid} {k}: archive {_shown(a)}, installed {_shown(b)}"
                    for k, a, b in _leaf_differences(a_claims[cid], b_claims[cid], "")]
    return out


def _where_they_differ(a: str, b: str, context: int = 40) -> tuple[str, str]:
    """The two texts from a little before their first difference (long rules in words
    differ in a number: that is what the line must show)."""
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, i - context)

    def cut(t: str) -> str:
        return (("..." if start else "") + t[start:start + 2 * context]
                + ("..." if len(t) > start + 2 * context else ""))

    return cut(a), cut(b)


def rule_differences(shipped: dict[str, str], rebuilt: dict[str, str]) -> list[str]:
    """The decision rules in words that the archive's claim files carry (``shipped``,
    claim id -> rule) against those the installed code writes for the same claims, each
    shown where the two first differ."""
    out = []
    for cid in shipped:
        if cid in rebuilt and shipped[cid] != rebuilt[cid]:
            a, b = _where_they_differ(shipped[cid], rebuilt[cid])
            out.append(f"{cid} rule: archive {a!r}, installed {b!r}")
    return out
