"""``weince merge`` on bundles of fabricated result trees (two sites): the Source column
(the site's provenance read as reported), replications side by side, a row under another
protocol than the reference profile's refused naming the key (exit 3), whatever the order
of the archives (the same bytes), one result bundled twice refused as a duplicate, numbers
taken on trust marked, the HTML twins, a claim no archive covers priced, and an archive that
fails ``weince verify`` stopping the merge."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

import yaml

from weince.bundle import _atomic, make_bundle
from weince.bundle.merge import merge_bundles
from weince.cli import merge as merge_cli
from weince.pipeline.profile import Profile
from weince.pipeline.stages import job_config, knn_settings, probe_settings
from weince.report import build_report
from weince.utils.config import to_dict

REPO = Path(__file__).resolve().parents[1]
GPU = {"lab-a": "NVIDIA H100 80GB HBM3", "lab-b": "NVIDIA A100-SXM4-40GB"}


def _stamp(results: Path, prof: Profile, site: str, epochs: dict[str, int]) -> None:
    """Give every probe result the provenance a real run writes: site, GPU, the probe's
    settings as the workflow records them, and a ``train.json`` beside it whose training
    config is the profile's, with ``epochs[arm folder]`` encoder epochs where given."""
    for f in sorted(results.rglob("*.json")):
        if f.name not in ("linear.json", "knn.json"):
            continue
        data = json.loads(f.read_text())
        rel = f.relative_to(results).as_posix()
        _, _, dataset, backbone, arm, seed = rel.split("/")[:6]
        settings = probe_settings(prof, arm) if f.name == "linear.json" else knn_settings(prof)
        stamp = {"site": site, "gpu": GPU[site], "container": None}
        data["provenance"].update(stamp, config={**settings, "device": "cuda"})
        f.write_text(json.dumps(data, indent=2))
        train = to_dict(job_config(prof, {"dataset": dataset, "backbone": backbone,
                                          "arm": arm, "seed": int(seed[4:])}))
        train["epochs"] = next((e for key, e in epochs.items() if key in rel), train["epochs"])
        (f.parent / "train.json").write_text(json.dumps(
            {"provenance": {**data["provenance"], "config": train}}, indent=2))


def _archive(tmp: Path, fabricate_results, site: str, epochs: dict[str, int]
             ) -> tuple[Path, dict]:
    cfg = fabricate_results(tmp)
    cfg["text"] = {"enabled": False}     # C7 is run by neither site
    prof = Profile.of(cfg)
    _stamp(Path(cfg["results"]), prof, site, epochs)
    build_report(prof)
    out = tmp.parent / f"{site}.tar.gz"
    make_bundle("fx", out, reports=cfg["reports"], config_dir=REPO / "config")
    return out, cfg


def _merge(bundles: list[Path], out: Path, refs: Path) -> tuple[int, str]:
    res = merge_bundles([str(b) for b in bundles], out, reference_config=refs)
    return res.exit_code, res.render(max_lines=5)


@pytest.fixture(scope="module")
def archives(tmp_path_factory, fabricate_results) -> tuple[Path, Path, Path, Path]:
    """lab-a, and lab-b whose cifar100 infonce encoders trained 3 epochs instead of the
    profile's 2; and the config folder whose ``fx`` profile is the protocol reference (the
    installed code's own profiles, in a real merge)."""
    tmp = tmp_path_factory.mktemp("merge")
    a, cfg = _archive(tmp / "a", fabricate_results, "lab-a", {})
    b, _ = _archive(tmp / "b", fabricate_results, "lab-b", {"cifar100/resnet18/infonce/": 3})
    refs = tmp / "config"
    refs.mkdir()
    (refs / "config.yaml").write_text(yaml.safe_dump(cfg))
    (refs / "fx.yaml").write_text("profile: fx\n")
    return a, b, refs, tmp


@pytest.fixture(scope="module")
def merged(archives) -> tuple[int, str, Path]:
    a, b, refs, tmp = archives
    rc, text = _merge([a, b], tmp / "merged", refs)
    return rc, text, tmp / "merged"


def test_merge_writes_one_summary_and_a_page_per_claim(merged):
    rc, text, out = merged
    assert rc == 3, text     # lab-b's infonce rows are refused
    summary = (out / "summary.md").read_text()
    for site in ("lab-a", "lab-b"):
        assert re.search(rf"\| {site}\.tar\.gz \| [0-9a-f]{{64}} \| {site} \(reported, "
                         rf"unsigned\) \| fx \|", summary)
    assert (out / "table_c3.md").is_file() and (out / "table_n3.md").is_file()
    assert "exit 3: " in text


def test_every_page_has_an_html_twin_with_its_sources(merged):
    out = merged[2]
    summary = (out / "html" / "summary.html").read_text()
    assert 'href="claim_c3.html"' in summary and "lab-a.tar.gz" in summary
    page = (out / "html" / "claim_c3.html").read_text()
    assert "<table>" in page and "reported by the site, unsigned" in page
    assert 'href="summary.html"' in page


def test_every_row_names_its_source(merged):
    page = (merged[2] / "table_c3.md").read_text()
    rows = [ln for ln in page.splitlines() if ln.startswith("| cifar100")]
    a = [r for r in rows if "lab-a.tar.gz (sha256 " in r]
    assert a and all("site lab-a" in r and "GPU NVIDIA H100 80GB HBM3" in r
                     and re.search(r"commit [0-9a-f]{12}", r)
                     and "(reported by the site, unsigned)" in r for r in a)


def test_same_protocol_is_a_replication_with_its_difference(merged):
    page = (merged[2] / "table_c3.md").read_text()
    rows = [ln for ln in page.splitlines() if ln.startswith("| cifar100 / resnet18 | linear "
                                                           "top-1 | weince\\_recipe |")]
    assert len(rows) == 2 and {"lab-a.tar.gz" in r for r in rows} == {True, False}
    rep = [ln for ln in page.splitlines() if ln.startswith("- C3 \\[cifar100 / resnet18 / "
                                                          "linear top-1 / weince\\_recipe")]
    assert len(rep) == 1 and "difference +0; intervals overlap: yes" in rep[0]


def test_another_protocol_is_refused_naming_the_key_and_both_values(merged):
    page = (merged[2] / "table_c3.md").read_text()
    infonce = [ln for ln in page.splitlines() if ln.startswith("| cifar100 / resnet18 | linear "
                                                              "top-1 | infonce |")]
    assert len(infonce) == 1 and "lab-a.tar.gz" in infonce[0]
    assert ("- C3 \\[cifar100 / resnet18 / linear top-1 / infonce\\] of lab-b.tar.gz: another "
            "protocol than the installed code's profile 'fx': pretrain.epochs is 3 here and 2 "
            "there") in page
    # lab-b's gains were measured against its refused baseline: not shown
    b = [ln for ln in page.splitlines() if ln.startswith("| cifar100 / resnet18 | linear top-1 |")
         and "lab-b.tar.gz" in ln]
    assert b and all("| baseline refused |" in ln for ln in b)


def test_an_uncovered_claim_keeps_not_run_and_its_price(merged):
    page = (merged[2] / "table_c7.md").read_text()
    assert "**not run** in any merged archive" in page
    assert re.search(r"Price of running it: [\d,]+ training runs, [\d.,-]+ GPU-hours on "
                     r"h100-sxm \(`weince plan --configfile config/paper.yaml --target "
                     r"reports/paper/table_c7.md", page)
    line = next(ln for ln in (merged[2] / "summary.md").read_text().splitlines()
                if ln.startswith("| C7 |"))
    assert "not run; price: " in line and "GPU-hours" in line


@pytest.mark.slow   # verifies a good archive again (~10 s of CPU)
def test_a_failing_archive_stops_the_merge(tmp_path, merged, capsys):
    bad = tmp_path / "broken.tar.gz"
    bad.write_bytes(b"not an archive")
    good = next(merged[2].parent.glob("lab-a.tar.gz"))
    out = tmp_path / "m"
    rc = merge_cli.main(Namespace(bundles=[str(good), str(bad)], out=str(out), claims=None,
                                  max_bytes=8 << 30, max_manifest_bytes=32 << 20, max_lines=5))
    text = capsys.readouterr().out
    assert rc == 1 and "FAILED: no merged report written" in text and not out.exists()

def test_one_archive_twice_is_no_replication(tmp_path, merged, capsys):
    good = next(merged[2].parent.glob("lab-a.tar.gz"))
    twin = tmp_path / "copy.tar.gz"
    shutil.copy(good, twin)
    rc = merge_cli.main(Namespace(bundles=[str(good), str(twin)], out=str(tmp_path / "m"),
                                  claims=None, max_bytes=8 << 30,
                                  max_manifest_bytes=32 << 20, max_lines=5))
    assert rc == 2 and "are one archive (the same SHA-256)" in capsys.readouterr().out


def _merge_cli(paths: list[Path], out: Path) -> int:
    return merge_cli.main(Namespace(bundles=[str(p) for p in paths], out=str(out), claims=None,
                                    max_bytes=8 << 30, max_manifest_bytes=32 << 20,
                                    max_lines=5))


def test_a_second_merge_into_one_out_is_refused(tmp_path, merged, capsys):
    """While one merge stages ``--out`` (its staging folder held), another is refused at
    once, before any archive is checked, and writes nothing."""
    good = next(merged[2].parent.glob("lab-a.tar.gz"))
    out = tmp_path / "m"
    stage = out.with_name(".m.weince-merge")
    fd = _atomic._claim(stage, out)
    try:
        capsys.readouterr()
        rc = _merge_cli([good], out)
        text = capsys.readouterr().out
    finally:
        os.close(fd)
        shutil.rmtree(stage)
    assert rc == 2, text
    assert f"ERROR {out}: another weince merge is writing it now" in text
    assert "== lab-a.tar.gz" not in text          # refused before checking an archive
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow   # two merges at once, each verifying an archive (~20 s of CPU)
def test_two_merges_at_once_one_is_refused(tmp_path, merged):
    good = next(merged[2].parent.glob("lab-a.tar.gz"))
    out = tmp_path / "m"
    cmd = [sys.executable, "-m", "weince", "merge", str(good), "--out", str(out)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    results = sorted((p.wait(timeout=600), p.stdout.read()) for p in procs)
    assert [rc for rc, _ in results] == [0, 2], results
    assert "another weince merge is writing it now" in results[1][1]
    assert (out / "summary.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_a_merge_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, merged, capsys,
                                                                 small_disk, monkeypatch):
    good = next(merged[2].parent.glob("lab-a.tar.gz"))
    disk = small_disk(48 << 10, leave=4 << 10)
    if disk is None:   # no tmpfs here: the disk fills at the first page written
        disk = tmp_path / "disk"
        disk.mkdir()
        real = Path.write_text

        def full(self, *a, **kw):
            if str(self).startswith(str(disk)):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(self, *a, **kw)
        monkeypatch.setattr(Path, "write_text", full)
    before = sorted(p.name for p in disk.iterdir())
    capsys.readouterr()
    rc = _merge_cli([good], disk / "merged")
    text = capsys.readouterr().out
    assert rc == 4, text
    assert text.count("\n") == 1, text
    assert text.startswith(f"weince merge: {disk}/merged: no space left on the device "
                           f"while writing it"), text
    assert text.rstrip().endswith("nothing was left")
    assert sorted(p.name for p in disk.iterdir()) == before


def test_a_number_without_predictions_is_marked_on_its_page(merged):
    """The fabricated probe files carry no per-example predictions: every number from them
    is marked beside it, and the page says what the mark means."""
    page = (merged[2] / "table_c3.md").read_text()
    rows = [ln for ln in page.splitlines() if ln.startswith("| cifar100 / resnet18 | linear")]
    assert rows and all("(on trust)" in r for r in rows)
    assert "(on trust): a number nothing re-checked" in page


@pytest.mark.slow   # merges the two archives again (~20 s of CPU)
def test_any_order_gives_the_same_pages_byte_for_byte(archives, merged):
    a, b, refs, tmp = archives
    rc, _ = _merge([b, a], tmp / "reversed", refs)
    assert rc == merged[0] == 3
    first = sorted(p.relative_to(merged[2]) for p in merged[2].rglob("*") if p.is_file())
    again = sorted(p.relative_to(tmp / "reversed") for p in (tmp / "reversed").rglob("*")
                   if p.is_file())
    assert first == again and any(str(p).endswith(".html") for p in first)
    for rel in first:
        assert (merged[2] / rel).read_bytes() == (tmp / "reversed" / rel).read_bytes(), rel


@pytest.mark.slow   # bundles and merges again (~20 s of CPU)
def test_the_same_results_bundled_twice_are_a_duplicate(archives, tmp_path):
    """Two archives of one result tree (different manifests: made at different times) are
    one result: refused as a duplicate, not shown as a replication."""
    a, _, refs, tmp = archives
    again = tmp_path / "lab-a-again.tar.gz"
    make_bundle("fx", again, reports=tmp / "a" / "reports", config_dir=REPO / "config")
    res = merge_bundles([str(a), str(again)], tmp_path / "m", reference_config=refs)
    assert res.exit_code == 3 and not res.replications, res.render()
    assert res.duplicates and all("one result bundled twice is not a replication" in d
                                  and "of lab-a.tar.gz: the same result as lab-a-again.tar.gz"
                                  in d for d in res.duplicates)
    page = (tmp_path / "m" / "table_c3.md").read_text()
    assert "- duplicate: C3 \\[" in page
