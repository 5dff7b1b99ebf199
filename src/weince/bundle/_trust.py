"""What a reviewer takes on trust in an archive, and whether its provenance is the site's
word or a signed one.

``weince verify`` recomputes every linear-probe and k-NN number from the per-example test
predictions its file carries; ``--reevaluate`` reruns picked encoders and text models. The
claim tables read other numbers too (STS correlations, timings, tail fits, norms, the
special case, the noise floor) and probe files made before predictions were saved: nothing
recomputes those, and :func:`taken_on_trust` names them so that ``verify``'s output and the
merged pages can say so beside each.

Nothing here imports torch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from weince.bundle.signing import SIG_NAME, Signature, check_signature

__all__ = ["RECOMPUTED", "taken_on_trust", "trust_lines", "signature_of"]

# result files whose every number `weince verify` recomputes from their predictions
RECOMPUTED = ("linear.json", "knn.json")


def _claim_input(f: dict[str, Any]) -> bool:
    """A file some claim table reads (its role names a claim, not only the figures)."""
    role = str(f.get("role") or "")
    if not role.startswith("report input ("):
        return False
    readers = [r.strip() for r in role[len("report input ("):].rstrip(")").split(",")]
    return any(r != "figures" for r in readers)


def taken_on_trust(manifest: dict[str, Any], unchecked: list[str]) -> list[str]:
    """The archive's claim-table inputs whose numbers nothing recomputes: every such file
    but the probe results (``linear.json``, ``knn.json``) that carry predictions, sorted."""
    out = set(unchecked)
    for f in manifest.get("files") or []:
        path = str(f.get("path", ""))
        if _claim_input(f) and path.rsplit("/", 1)[-1] not in RECOMPUTED:
            out.add(path)
    return sorted(out)


def trust_lines(on_trust: list[str], max_lines: int) -> list[str]:
    """``weince verify``'s lines for :func:`taken_on_trust`."""
    if not on_trust:
        return ["taken on trust: nothing (every number the claim tables read is recomputed "
                "from per-example predictions)"]
    kinds = Counter(p.rsplit("/", 1)[-1] for p in on_trust)
    out = [f"taken on trust: {len(on_trust)} file(s) the claim tables read whose numbers "
           f"nothing here recomputes (no per-example predictions): "
           + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
           + "; --reevaluate recomputes STS numbers from shipped models (--with-models)"]
    out += [f"  ON TRUST {p}" for p in on_trust[:max_lines]]
    if len(on_trust) > max_lines:
        out.append(f"  ... and {len(on_trust) - max_lines} more")
    return out


def signature_of(root: Path, meta: str, allowed: str | Path | None,
                 required: bool = True) -> Signature:
    """The archive's manifest signature (``{meta}/manifest.json.sig``, unpacked under
    ``root`` beside the manifest by :func:`weince.bundle._unpack.unpack`), checked against
    ``allowed`` when given (``required``: an unsigned archive fails)."""
    sig_path = root / meta / SIG_NAME
    sig = sig_path.read_bytes() if sig_path.is_file() else None
    return check_signature((root / meta / "manifest.json").read_bytes(), sig, allowed, required)
