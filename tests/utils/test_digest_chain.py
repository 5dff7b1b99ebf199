"""The digest chain's parts: a writer's record and a reader's check (whatever the file's
modification time), the inputs a result records, the complete rebuild command, and the
chain walk that ``weince verify`` and ``weince bundle --with-models`` make."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from weince.bundle.chain import chain_breaks, model_problems
from weince.utils.rerun import ARGS_VARIABLE
from weince.pipeline.digests import (check_derived, check_encoder, output_problem,
                                     rebuild_command, record_derived, record_identity,
                                     run_identity)
from weince.utils import write_json
from weince.utils.checkpoint import UnreadableFileError, load_checkpoint, save_checkpoint
from weince.utils.digest import (DigestMismatch, check_recorded, folder_digest, record_file,
                                 record_path, sha256_file, sha256_path)
from weince.utils.results import load_result, reading


def _truncate_keeping_mtime(path: Path) -> None:
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _run(root: Path, arm: str, seed: int, payload: bytes) -> Path:
    """A vision run folder: an encoder file and its train.json recording its digest."""
    run = root / "results/p/vision/digits/smallcnn" / arm / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "encoder.pt").write_bytes(payload)
    write_json(run / "train.json", {"loss": arm, "seed": seed, "arm": arm, "point": None,
                                    "encoder_sha256": sha256_file(run / "encoder.pt")})
    with reading(check_encoder(run / "encoder.pt")):
        write_json(run / "linear.json", {"test_acc": 50.0})
    return run


def test_a_truncated_file_with_its_old_mtime_fails_naming_it_and_the_rebuild(tmp_path):
    f = tmp_path / "features.pt"
    f.write_bytes(b"x" * 4096)
    digest = record_file(f, {"encoder": {"path": "e.pt", "sha256": "ab" * 32}})
    rec = check_recorded(f)
    assert rec["sha256"] == digest and rec["inputs"]["encoder"]["sha256"] == "ab" * 32
    _truncate_keeping_mtime(f)   # hashed once in this process already: the check rehashes
    with pytest.raises(DigestMismatch) as err:
        check_recorded(f, rebuild=f"snakemake --forcerun {f}")
    msg = str(err.value)
    assert "\n" not in msg and str(f) in msg and f"snakemake --forcerun {f}" in msg


def test_results_record_the_inputs_read_inside_reading_only(tmp_path):
    inputs = {"encoder": {"path": "a/encoder.pt", "sha256": "cd" * 32}}
    with reading(inputs):
        write_json(tmp_path / "a.json", {"x": 1})
    write_json(tmp_path / "b.json", {"x": 1})
    assert load_result(tmp_path / "a.json")["provenance"]["inputs"] == inputs
    assert "inputs" not in load_result(tmp_path / "b.json")["provenance"]


def test_the_rebuild_command_is_the_runs_own(monkeypatch):
    monkeypatch.setenv(ARGS_VARIABLE, "--cores 2 --configfile config/smoke.yaml "
                                      "--config device=cpu")
    cmd = rebuild_command("results/smoke/x/encoder.pt")
    assert cmd == ("snakemake --forcerun results/smoke/x/encoder.pt --cores 2 --configfile "
                   "config/smoke.yaml --config device=cpu")
    monkeypatch.delenv(ARGS_VARIABLE)
    assert "--configfile" not in rebuild_command("x")   # the embedded default needs none


def test_readers_check_the_encoder_and_what_was_made_from_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ARGS_VARIABLE, "--cores 2 --configfile config/smoke.yaml")
    run = _run(tmp_path, "infonce", 0, b"weights" * 100)
    inputs = check_encoder(run / "encoder.pt")
    feats = run / "features.pt"
    feats.write_bytes(b"features")
    record_derived(feats, inputs)
    got = check_derived(feats, "features")
    assert got["encoder"] == inputs["encoder"] and got["features"]["sha256"] == \
        sha256_file(feats)
    assert output_problem(run, "vision") is None
    _truncate_keeping_mtime(run / "encoder.pt")
    with pytest.raises(DigestMismatch, match="--forcerun .*--configfile config/smoke.yaml"):
        check_encoder(run / "encoder.pt")
    assert "encoder.pt" in output_problem(run, "vision")
    (run / "encoder.pt").unlink()
    assert "missing" in output_problem(run, "vision")


def test_the_run_identity_goes_into_train_json(tmp_path):
    class Wc:
        arm, seed = "weince@m2_kr10", "7"

    write_json(tmp_path / "train.json", {"loss": "weince", "seed": 7})
    ident = run_identity(Wc())
    assert ident == {"arm": "weince@m2_kr10", "point": "m2_kr10", "seed": 7}
    record_identity(tmp_path, ident)
    saved = load_result(tmp_path / "train.json")
    assert saved["arm"] == "weince@m2_kr10" and saved["loss"] == "weince"


def _paths(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
            and not p.name.startswith(".")]


def test_an_honest_tree_has_an_unbroken_chain(tmp_path):
    _run(tmp_path, "infonce", 0, b"a" * 64)
    _run(tmp_path, "weince_recipe", 0, b"b" * 64)
    breaks, notes = chain_breaks(tmp_path, _paths(tmp_path))
    assert breaks == [] and notes == ["digest chain: 2 training run(s), 2 result link(s) to "
                                      "the encoder or model they read, all hold"]
    assert model_problems(tmp_path / "results/p") == []


def test_an_arm_swap_breaks_the_chain_naming_both_files(tmp_path):
    a = _run(tmp_path, "infonce", 0, b"a" * 64)
    b = _run(tmp_path, "weince_recipe", 0, b"b" * 64)
    for name in ("encoder.pt", "linear.json"):   # a consistent arm swap
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        (a / name).write_bytes(y)
        (b / name).write_bytes(x)
    breaks, _ = chain_breaks(tmp_path, _paths(tmp_path))
    rel = "results/p/vision/digits/smallcnn/infonce/seed0"
    assert any(f"{rel}/linear.json -> {rel}/train.json" in x for x in breaks), breaks
    assert any(f"{rel}/encoder.pt -> {rel}/train.json" in x for x in breaks), breaks
    # the swap with the training records too: the records no longer match their folders
    for name in ("train.json",):
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        (a / name).write_bytes(y)
        (b / name).write_bytes(x)
    breaks, _ = chain_breaks(tmp_path, _paths(tmp_path))
    assert any(f"{rel}/train.json: arm 'weince_recipe', not the folder's 'infonce'" in x
               for x in breaks), breaks


def test_bundle_models_check_names_missing_and_broken_encoders(tmp_path):
    a = _run(tmp_path, "infonce", 0, b"a" * 64)
    b = _run(tmp_path, "weince_recipe", 0, b"b" * 64)
    (a / "encoder.pt").unlink()
    _truncate_keeping_mtime(b / "encoder.pt")
    bad = model_problems(tmp_path / "results/p")
    assert len(bad) == 2 and "missing" in bad[0] and "infonce" in bad[0]
    assert str(b / "encoder.pt") in bad[1] and "truncated" in bad[1]


def test_a_folder_digest_follows_its_files(tmp_path):
    m = tmp_path / "model"
    (m / "sub").mkdir(parents=True)
    (m / "config.json").write_text("{}")
    (m / "sub" / "w.bin").write_bytes(b"w")
    before = sha256_path(m)
    (m / "sub" / "w.bin").write_bytes(b"v")
    assert sha256_path(m) != before


def test_a_checkpoint_is_checked_before_a_resume(tmp_path):
    ckpt = tmp_path / "checkpoint.pt"
    save_checkpoint(ckpt, w=torch.arange(1000.0), epoch=1)
    old = ckpt.read_bytes()
    save_checkpoint(ckpt, w=torch.arange(1000.0) * 2, epoch=2)
    assert load_checkpoint(ckpt)["epoch"] == 2
    # killed between the record and the rename: the previous checkpoint, whole, still loads
    ckpt.write_bytes(old)
    assert load_checkpoint(ckpt)["epoch"] == 1
    assert json.loads(record_path(ckpt).read_text())["previous"] is not None
    _truncate_keeping_mtime(ckpt)
    with pytest.raises(UnreadableFileError, match="checkpoint.pt: its SHA-256") as err:
        load_checkpoint(ckpt, remake="re-run the command")
    assert "\n" not in str(err.value)


def test_a_folder_digest_from_listed_digests_is_the_folders(tmp_path):
    m = tmp_path / "model"
    (m / "a").mkdir(parents=True)
    for rel in ("a.b", "a/b", "c.json", ".snakemake_timestamp"):
        (m / rel).write_text(rel)
    listed = {p.relative_to(m).as_posix(): sha256_file(p) for p in m.rglob("*") if p.is_file()}
    assert folder_digest(listed) == sha256_path(m)
    assert folder_digest({k: v for k, v in listed.items() if not k.startswith(".")}) == \
        sha256_path(m)   # a bundle ships no hidden file: the same digest
