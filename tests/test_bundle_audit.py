"""``weince bundle --with-audit`` (weince.bundle.audit): the segment states of the runs that
feed verdict rows, only when asked, their size said before the archive is written. The
replay of such an archive (``weince verify --retrain``) is tested end to end on the smoke
run (tests/workflow/test_resume.py) and on training runs (tests/train/test_audit.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

import pytest

from weince.bundle import make_bundle, verify_bundle
from weince.bundle.make import classify
from weince.report.build import build_report
from weince.pipeline.profile import Profile
from weince.utils import write_json
from weince.utils.diskspace import human_bytes

REPO = Path(__file__).resolve().parents[1]
FEEDS = "fx/vision/digits/resnet18/infonce/seed7"     # its linear.json feeds C3's rows
ASIDE = "fx/ablations/vision/digits/resnet18/infonce_tau0p2/seed7"   # read by no table


def _run_with_states(run: Path, steps: list[int], extra: list[int]) -> None:
    segs = [{"start": a, "end": a + 2, "start_sha256": "0" * 64, "end_sha256": "1" * 64,
             "start_file": f"audit/step-{a:06d}.pt", "end_file": f"audit/step-{a + 2:06d}.pt"}
            for a in steps]
    write_json(run / "train.json", {"loss": "infonce", "audit": {"segments": segs}}, seed=7)
    (run / "audit").mkdir(parents=True, exist_ok=True)
    for s in sorted({x for a in steps for x in (a, a + 2)} | set(extra)):
        (run / "audit" / f"step-{s:06d}.pt").write_bytes(b"state" * (100 + s))


@pytest.fixture(scope="module")
def fx(tmp_path_factory, fabricate_results):
    tmp = tmp_path_factory.mktemp("bundle_audit")
    cfg = fabricate_results(tmp)
    results = Path(cfg["results"])
    _run_with_states(results / FEEDS, [1, 3], extra=[8])   # step 8: an epoch's end state
    _run_with_states(results / ASIDE, [0], extra=[])
    build_report(Profile.of(cfg))
    return tmp, cfg


def test_audit_states_are_their_own_kind():
    assert classify(PurePosixPath("vision/d/b/a/seed7/audit/step-000004.pt")) == "audit"
    assert classify(PurePosixPath("vision/d/b/a/seed7/encoder.pt")) == "model"


def test_with_audit_ships_the_segments_of_runs_feeding_verdict_rows(fx, capsys):
    tmp, cfg = fx
    out = tmp / "audit.tar.gz"
    man = make_bundle("fx", out, reports=cfg["reports"], config_dir=REPO / "config",
                      with_models=True, with_audit=True)
    said = capsys.readouterr().out
    shipped = sorted(f["path"] for f in man["files"] if f["role"] == "training audit state")
    assert [p.rsplit("/", 1)[1] for p in shipped] == [
        "step-000001.pt", "step-000003.pt", "step-000005.pt"]
    assert all(FEEDS in p for p in shipped)
    size = sum((Path(cfg["results"]) / FEEDS / "audit" / p.rsplit("/", 1)[1]).stat().st_size
               for p in shipped)
    assert (f"training audit states: 3 file(s) of 1 run(s) feeding verdict rows, "
            f"{human_bytes(size)}, to be written") in said
    assert man["options"]["with_audit"] is True
    assert verify_bundle(out).archive_ok


def test_without_the_option_no_state_is_shipped(fx):
    tmp, cfg = fx
    out = tmp / "models.tar.gz"
    make_bundle("fx", out, reports=cfg["reports"], config_dir=REPO / "config",
                with_models=True)
    with tarfile.open(out) as tar:
        assert not [n for n in tar.getnames() if "/audit/" in n]
