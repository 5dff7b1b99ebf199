"""What a reviewer may rely on in an archive: the re-evaluation's stratified pick (every kind
and arm), a grid arm's assembled k-NN named rather than crashing, the numbers taken on trust
named, and the manifest signed with an SSH key (``ssh-keygen -Y``) and checked against an
allowed-signers file. The smoke archive's full re-evaluation (every encoder and STS model)
is in tests/workflow/test_resume.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from weince.bundle import make_bundle, verify_bundle
from weince.bundle._pick import Unit, find_units, pick_units
from weince.bundle._trust import taken_on_trust, trust_lines
from weince.bundle.reevaluate import _settings
from weince.bundle.signing import check_signature, sign_manifest
from weince.eval.knn import knn_eval
from weince.pipeline.profile import Profile
from weince.report import build_report

REPO = Path(__file__).resolve().parents[1]
needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen (openssh-client) is not installed")


# ----------------------------------------------------------------------------- the pick
def _units() -> list[Unit]:
    out = [Unit(f"v/infonce/seed{s}", "plain", "infonce") for s in (1, 2, 3, 4)]
    out += [Unit(f"v/weince@m{m}/seed1", "grid point", "weince") for m in (0, 2)]
    out += [Unit(f"v/weince/seed{s}", "grid-adopted", "weince") for s in (1, 2)]
    out += [Unit(f"t/minilm/{a}/seed7", "sts", a) for a in ("infonce", "weince")]
    return out


def test_the_pick_covers_every_kind_and_arm_whatever_n():
    units = _units()
    picks, strata = pick_units(units, 1, seed=7)
    assert strata == 5 and len(picks) == 5
    assert {u.stratum for u in picks} == {u.stratum for u in units}


def test_the_pick_is_seeded_and_fills_up_to_n():
    units = _units()
    assert pick_units(units, 7, seed=3) == pick_units(units, 7, seed=3)
    assert len(pick_units(units, 7, seed=3)[0]) == 7
    assert pick_units(units, 100, seed=0)[0] == sorted(units)
    seen = {tuple(pick_units(units, 5, seed=s)[0]) for s in range(20)}
    assert len(seen) > 1, "the seed never changes the pick"


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_runs_are_sorted_into_their_kinds(tmp_path):
    v = tmp_path / "results/p/vision/digits/smallcnn"
    for arm in ("infonce", "weince@m2", "weince"):
        (v / arm / "seed7").mkdir(parents=True)
        (v / arm / "seed7/encoder.pt").write_bytes(b"x")
    _write(v / "infonce/seed7/linear.json", {})
    _write(v / "weince@m2/seed7/knn.json", {})
    _write(v / "weince/seed7/linear.json", {"selected_point": "m2"})
    _write(tmp_path / "results/p/text/minilm/infonce/seed7/sts.json", {})
    _write(tmp_path / "results/p/text/minilm/infonce/seed7/model/config.json", {})
    _write(tmp_path / "results/p/text/minilm/weince/seed7/sts.json", {})   # no model shipped
    kinds = {(u.kind, u.arm) for u in find_units(tmp_path, "results/p")}
    assert kinds == {("plain", "infonce"), ("grid point", "weince"),
                     ("grid-adopted", "weince"), ("sts", "infonce")}


def test_an_assembled_knn_setting_is_named_not_passed_on():
    """A grid arm's assembled knn.json records ``selection`` (a path), which knn_eval does
    not take: it was passed on as a keyword (TypeError, exit 1)."""
    kw, unknown = _settings({"provenance": {"config": {"selection": "a/selection.json"}}},
                            knn_eval)
    assert kw == {} and unknown == ["selection"]
    kw, unknown = _settings({"provenance": {"config": {"k": 50, "device": "cpu"}}}, knn_eval)
    assert kw == {"k": 50} and unknown == []


# ----------------------------------------------------------------------------- taken on trust
def test_every_claim_input_without_predictions_is_on_trust():
    files = [{"path": "r/vision/a/linear.json", "role": "report input (C3)"},
             {"path": "r/vision/b/linear.json", "role": "report input (C3)"},
             {"path": "r/text/m/sts.json", "role": "report input (C7)"},
             {"path": "r/timing/timing.json", "role": "report input (C8, figures)"},
             {"path": "r/vision/a/train_log.jsonl", "role": "report input (figures)"},
             {"path": "r/vision/a/train.json", "role": "result"}]
    trust = taken_on_trust({"files": files}, unchecked=["r/vision/b/linear.json"])
    assert trust == ["r/text/m/sts.json", "r/timing/timing.json", "r/vision/b/linear.json"]
    text = "\n".join(trust_lines(trust, 12))
    assert "3 file(s)" in text and "ON TRUST r/text/m/sts.json" in text
    assert "nothing" in trust_lines([], 12)[0]


# ----------------------------------------------------------------------------- signatures
@pytest.fixture(scope="module")
def site_key(tmp_path_factory) -> tuple[Path, Path]:
    """A throwaway ed25519 key of ``lab-a@example.org`` and an allowed-signers file naming it."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen (openssh-client) is not installed")
    d = tmp_path_factory.mktemp("key")
    key = d / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lab-a", "-f",
                    str(key)], check=True, capture_output=True)
    allowed = d / "allowed_signers"
    allowed.write_text(f"lab-a@example.org {key.with_suffix('.pub').read_text().strip()}\n")
    return key, allowed


@needs_ssh_keygen
def test_a_signature_verifies_and_an_edited_manifest_does_not(site_key, tmp_path):
    key, allowed = site_key
    man = b'{"files": []}\n'
    sig = sign_manifest(man, key)
    assert sig.startswith(b"-----BEGIN SSH SIGNATURE-----")
    ok = check_signature(man, sig, allowed)
    assert ok.verified and ok.principal == "lab-a@example.org", ok
    bad = check_signature(b'{"files": [1]}\n', sig, allowed)
    assert not bad.verified and "does not verify" in bad.problem
    other = tmp_path / "allowed_signers"
    other.write_text("")
    assert "not in allowed_signers" in check_signature(man, sig, other).problem
    assert "carries no signature" in check_signature(man, None, allowed).problem
    unsigned = check_signature(man, None, allowed, required=False)   # weince merge's
    assert not unsigned.problem and not unsigned.verified
    unchecked = check_signature(man, sig, None)
    assert unchecked.present and not unchecked.verified and not unchecked.problem


@needs_ssh_keygen
def test_a_missing_key_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"--sign .*no such key file"):
        sign_manifest(b"{}", tmp_path / "nope")


@pytest.fixture(scope="module")
def signed(tmp_path_factory, fabricate_results, site_key) -> Path:
    tmp = tmp_path_factory.mktemp("signed")
    cfg = fabricate_results(tmp)
    cfg["text"] = {"enabled": False}
    build_report(Profile.of(cfg))
    out = tmp / "lab-a.tar.gz"
    make_bundle("fx", out, reports=cfg["reports"], config_dir=REPO / "config", sign=site_key[0])
    return out


@pytest.mark.slow   # builds a report and a bundle, verifies it twice (~30 s of CPU)
@needs_ssh_keygen
def test_a_signed_archive_verifies_against_its_allowed_signers(signed, site_key):
    res = verify_bundle(signed, allowed_signers=site_key[1])
    assert res.ok and res.signature.principal == "lab-a@example.org", res.render()
    assert "signed by lab-a@example.org (checked against the allowed signers)" in res.render()
    plain = verify_bundle(signed)
    assert plain.ok and "signed but not checked" in plain.render()


@pytest.mark.slow   # verifies the edited archive (~15 s of CPU)
@needs_ssh_keygen
def test_an_edited_signed_archive_fails(signed, site_key, tmp_path):
    """A number edited with the manifest and SHA256SUMS rewritten to match: the hashes pass,
    the signature does not."""
    work = tmp_path / "w"
    with tarfile.open(signed) as tar:
        tar.extractall(work, filter="data")
    man_path = next(work.glob("**/bundle/manifest.json"))
    man = json.loads(man_path.read_text())
    man["site"] = "lab-z"
    man_path.write_text(json.dumps(man, indent=1) + "\n")
    bad = tmp_path / "edited.tar.gz"
    own = [man_path, man_path.parent / "SHA256SUMS"]   # the manifest first, as bundle writes
    with tarfile.open(bad, "w:gz") as tar:
        for f in own + sorted(p for p in work.rglob("*") if p.is_file() and p not in own):
            tar.add(f, arcname=str(f.relative_to(work)))
    res = verify_bundle(bad, allowed_signers=site_key[1])
    assert not res.ok and res.exit_code == 1, res.render()
    assert "SIGNATURE FAILS: the signature does not verify the manifest" in res.render()
