"""`weince fetch-data`: every data set and text model of a profile fetched once, before any
job; compute jobs never download. All offline: the downloaders (torchvision's, the Hugging
Face hub's) are fakes here, and any socket connection fails the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import huggingface_hub
import pytest
import torchvision.datasets
import torchvision.datasets.utils as tvu

from weince.cli import main
from weince.data.fetch import MODEL_PATTERNS, TORCHVISION_CLASS, Item, fetch_model
from weince.data.locations import ARCHIVES, CIFAR, STL_FILES, missing_files
from weince.data.synthetic_formats import write_synthetic_data

REPO = Path(__file__).resolve().parents[2]
PAPER_ITEMS = ("cifar10", "cifar100", "stl10", "imagenet32", "tinyimagenet", "wiki1m", "stsb",
               "bert-base-uncased", "minilm")
DOWNLOADABLE = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "stl10": "STL10"}
# what a person must get for each item that cannot be downloaded: (the file, the place)
BY_HAND = {"imagenet32": ("Imagenet32_train.zip", "imagenet32/"),
           "tinyimagenet": ("tiny-imagenet-200.zip", "tiny-imagenet-200/"),
           "wiki1m": ("wiki1m_for_simcse.txt", "wiki1m_for_simcse.txt"),
           "stsb": ("Stsbenchmark.tar.gz", "stsbenchmark/sts-dev.csv")}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No network: a socket connection, a torchvision download or a hub snapshot fails the
    test unless the test puts its own fake in (``fakes``)."""
    def refuse(*a, **k):
        raise AssertionError("a test tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(tvu, "download_url", refuse)
    monkeypatch.setattr(tvu, "download_and_extract_archive", refuse)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")    # restored after the test (the command sets 0)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.chdir(REPO)                      # config/config.yaml, as for snakemake


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def _write_model(folder: Path) -> None:
    for f in ("config.json", "model.safetensors", "vocab.txt"):
        _touch(folder / f)


@pytest.fixture
def fakes(monkeypatch):
    """The downloaders replaced by fakes that write the files an archive or a snapshot
    holds (empty) and record each call; ``fail`` names data sets whose download raises."""
    calls: dict = {"archive": [], "snapshot": [], "fail": set()}
    by_url = {url: name for name, url in ARCHIVES.items()}

    def archive(url, download_root, extract_root=None, filename=None, md5=None,
                remove_finished=False):
        calls["archive"].append(dict(url=url, root=download_root, filename=filename, md5=md5))
        name = by_url[url]
        if name in calls["fail"]:
            raise OSError(f"connection refused for {url}")
        splits = ("train", "test", "unlabeled") if name == "stl10" else ("train", "test")
        for s in splits:
            for p in missing_files(name, Path(download_root), s):
                _touch(p)

    def snapshot(repo_id, *, local_dir=None, allow_patterns=None, **kw):
        calls["snapshot"].append(dict(repo_id=repo_id, local_dir=local_dir,
                                      allow_patterns=allow_patterns))
        _write_model(Path(local_dir))
        return local_dir

    monkeypatch.setattr(tvu, "download_and_extract_archive", archive)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    return calls


def _by_hand(root: Path) -> None:
    """The items no command downloads, put in place as a person would (empty files)."""
    for f in ["imagenet32/val_data", "tiny-imagenet-200/wnids.txt",
              "tiny-imagenet-200/val/val_annotations.txt", "wiki1m_for_simcse.txt",
              "stsbenchmark/sts-dev.csv", "stsbenchmark/sts-test.csv",
              *[f"imagenet32/train_data_batch_{i}" for i in range(1, 11)]]:
        _touch(root / f)
    (root / "tiny-imagenet-200" / "train").mkdir(parents=True)


def _lines(out: str) -> dict[str, str]:
    """The command's line per item, by item name."""
    return {line.split(":", 1)[0]: line for line in out.splitlines()
            if line.split(":", 1)[0] in PAPER_ITEMS}


def _run(capsys, root: Path, *extra: str) -> tuple[int, dict[str, str], str]:
    rc = main(["fetch-data", "--configfile", "config/paper.yaml",
               "--config", f"data_root={root}", *extra])
    out, err = capsys.readouterr()
    return rc, _lines(out), out + err


def _files(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*")}


# ------------------------------------------------------------------ everything present
@pytest.mark.slow   # the synthetic tree (a tiny BERT included) takes several seconds to write
def test_synthetic_files_in_the_real_formats_are_all_present_and_untouched(tmp_path, capsys):
    root = write_synthetic_data(tmp_path / "data")
    before = _files(root)
    rc, lines, out = _run(capsys, root)
    assert rc == 0, out
    assert set(lines) == set(PAPER_ITEMS)
    for name, line in lines.items():
        assert line.startswith(f"{name}: present, not touched"), line
        if name != "minilm":   # the shipped model is not a synthetic file
            assert "synthetic files of `weince synthetic-data`" in line, line
    assert f"all {len(PAPER_ITEMS)} item(s) on disk" in out
    assert _files(root) == before


def test_every_item_in_place_exits_0_and_nothing_is_downloaded(tmp_path, capsys):
    root = tmp_path / "data"
    _by_hand(root)
    for name in DOWNLOADABLE:
        for s in ("train", "test", "unlabeled") if name == "stl10" else ("train", "test"):
            for p in missing_files(name, root, s):
                _touch(p)
    _write_model(root / "models" / "bert-base-uncased")
    before = _files(root)
    rc, lines, out = _run(capsys, root)
    assert rc == 0, out
    assert all(line.startswith(f"{n}: present, not touched") for n, line in lines.items())
    assert lines["bert-base-uncased"].endswith(str(root / "models" / "bert-base-uncased"))
    assert _files(root) == before


# ------------------------------------------------------------------ missing items
def test_check_names_each_missing_item_the_file_to_get_and_what_it_would_download(
        tmp_path, capsys, fakes):
    root = tmp_path / "data"
    rc, lines, out = _run(capsys, root, "--check")
    assert rc == 1
    assert set(lines) == set(PAPER_ITEMS)
    for name in DOWNLOADABLE:
        assert f"{name}: missing; would download {ARCHIVES[name]}" in lines[name]
    assert ("would download https://huggingface.co/bert-base-uncased"
            in lines["bert-base-uncased"])
    assert str(root / "models" / "bert-base-uncased") in lines["bert-base-uncased"]
    for name, (get, place) in BY_HAND.items():
        line = lines[name]
        assert line.startswith(f"{name}: MISSING, get it by hand"), line
        assert get in line and str(root / place) in line, line
    assert lines["minilm"].startswith("minilm: present")   # ships with its package
    assert "8 of 9 item(s) not on disk" in out
    assert fakes["archive"] == fakes["snapshot"] == [] and not root.exists()


def test_fetch_downloads_each_downloadable_item_once_then_finds_it_present(
        tmp_path, capsys, fakes):
    root = tmp_path / "data"
    rc, lines, out = _run(capsys, root)
    assert rc == 1   # the items to get by hand are still missing
    assert sorted(c["url"] for c in fakes["archive"]) == sorted(ARCHIVES.values())
    for call in fakes["archive"]:   # the official archive, its MD5, into the data root
        cls = getattr(torchvision.datasets, DOWNLOADABLE[next(
            n for n, u in ARCHIVES.items() if u == call["url"])])
        assert (call["root"], call["filename"], call["md5"]) == \
            (str(root), cls.filename, cls.tgz_md5)
    assert fakes["snapshot"] == [dict(repo_id="bert-base-uncased",
                                      local_dir=str(root / "models" / "bert-base-uncased"),
                                      allow_patterns=MODEL_PATTERNS)]
    for name in (*DOWNLOADABLE, "bert-base-uncased"):
        assert lines[name].startswith(f"{name}: fetched"), lines[name]
    for name in BY_HAND:
        assert lines[name].startswith(f"{name}: MISSING"), lines[name]
    assert "4 of 9 item(s) not on disk" in out
    _by_hand(root)   # a person puts the rest in place; a second run downloads nothing
    rc, lines, out = _run(capsys, root)
    assert rc == 0, out
    assert all(line.startswith(f"{n}: present, not touched") for n, line in lines.items())
    assert len(fakes["archive"]) == 3 and len(fakes["snapshot"]) == 1


def test_a_failed_download_is_named_and_the_other_items_are_still_fetched(
        tmp_path, capsys, fakes):
    root = tmp_path / "data"
    _by_hand(root)
    fakes["fail"].add("cifar100")
    rc, lines, out = _run(capsys, root)
    assert rc == 1
    assert lines["cifar100"].startswith("cifar100: download FAILED: connection refused")
    for name in ("cifar10", "stl10", "bert-base-uncased"):
        assert lines[name].startswith(f"{name}: fetched"), lines[name]
    assert "1 of 9 item(s) not on disk" in out


def test_a_model_is_not_fetched_while_the_hub_is_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE=0 weince fetch-data"):
        fetch_model("bert-base-uncased", tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_what_is_fetched_and_from_where():
    for name, cls_name in TORCHVISION_CLASS.items():   # our archive list is torchvision's
        assert ARCHIVES[name] == getattr(torchvision.datasets, cls_name).url
    assert set(TORCHVISION_CLASS) == set(ARCHIVES) == set(DOWNLOADABLE)
    assert {"cifar-10-batches-py", "cifar-100-python"} == {v["folder"] for v in CIFAR.values()}
    assert set(STL_FILES) == {"train", "test", "unlabeled"}
    # a model snapshot takes the files from_pretrained reads, not the other frameworks'
    def taken(f):
        return any(fnmatch(f, p) for p in MODEL_PATTERNS)

    assert all(taken(f) for f in ("config.json", "model.safetensors", "vocab.txt",
                                  "tokenizer.json", "tokenizer_config.json"))
    assert not any(taken(f) for f in ("tf_model.h5", "flax_model.msgpack", "rust_model.ot",
                                      "pytorch_model.bin"))
    assert Item("model", "bert-base-uncased", "d").downloadable
    assert Item("model", "org/model", "d").downloadable
    assert not Item("model", "minilm", "d").downloadable
    assert not Item("model", "x", "d", location="/stand/in", source="model_paths").downloadable
    assert not Item("vision", "imagenet32", "d", ("train",)).downloadable
    with pytest.raises(ValueError, match="unknown item kind"):
        Item("images", "cifar10", "d")


def test_the_profile_comes_from_the_same_files_and_values_as_snakemakes(tmp_path, capsys):
    rc = main(["fetch-data", "--configfile", "config/smoke.yaml", "--check"])
    out = capsys.readouterr().out
    assert rc == 0 and "profile 'smoke'" in out and "1 item(s)" in out   # MiniLM only
    with pytest.raises(FileNotFoundError, match="config file nope.yaml does not exist"):
        main(["fetch-data", "--configfile", "nope.yaml"])


# ------------------------------------------------------------------ a fresh interpreter
# The tests above import huggingface_hub and its submodules themselves; these run the code
# in an interpreter that imports only what the code imports, with every connection refused.
NO_NETWORK = """
import socket
def refuse(*a, **k):
    raise ConnectionRefusedError("no network in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
"""


def _fresh(code: str, hub_offline: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": hub_offline, "TRANSFORMERS_OFFLINE": hub_offline,
           "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-c", NO_NETWORK + code], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)


FETCH_ONE = """
import sys
from weince.data.fetch import fetch_model
try:
    fetch_model("bert-base-uncased", {folder!r})
except RuntimeError as err:
    print("REFUSED", err)
"""


@pytest.mark.parametrize("hub_offline, says", [
    ("1", "HF_HUB_OFFLINE=0 weince fetch-data"),
    ("0", "could not reach the Hugging Face hub (https://huggingface.co): ConnectError")])
def test_fetch_model_in_a_fresh_interpreter_names_offline_mode_or_the_network(
        tmp_path, hub_offline, says):
    out = _fresh(FETCH_ONE.format(folder=str(tmp_path / "m")), hub_offline)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("REFUSED bert-base-uncased: "), out.stdout + out.stderr
    assert says in out.stdout and "attribute" not in out.stdout
    assert not (tmp_path / "m").exists()      # a failed download leaves no empty folder


@pytest.mark.slow   # a fresh interpreter imports torchvision for the vision items
def test_fetch_data_offline_reports_the_text_model_as_a_network_failure(tmp_path):
    code = ("from weince.cli import main\n"
            f"main(['fetch-data', '--configfile', 'config/paper.yaml', '--config', "
            f"'data_root={tmp_path / 'data'}'])\n")
    out = _fresh(code, "1")    # the container's setting: the command lifts it
    line = _lines(out.stdout)["bert-base-uncased"]
    assert line.startswith("bert-base-uncased: download FAILED: could not reach the Hugging "
                           "Face hub"), out.stdout + out.stderr
    assert "attribute" not in line and "\n" not in line
