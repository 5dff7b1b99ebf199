"""``weince verify`` probed as a hostile reviewer would: every archive is built
from a real bundle of the report fixtures, then altered. Each probe asserts the exit code,
the message, and that nothing outside the temporary folder was read or written: a canary
file on the host (content and access time, and every file event Python audits), a host
folder (never listed), and the ``--keep`` / ``--extract`` folders (never created)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from weince import cli
from weince.bundle import _archive, make_bundle
from weince.bundle import _limits as limits_mod
from weince.bundle import _unpack as unpack_mod
from weince.bundle import verify as verify_mod
from weince.pipeline.profile import Profile
from weince.report import build_report

REPO = Path(__file__).resolve().parents[1]
LIN = "results/fx/vision/digits/resnet18/weince_recipe/seed21/linear.json"
META = "results/fx/bundle"


# ------------------------------------------------------------------ file events, audited
_EVENTS: list[tuple[str, str, str]] | None = None
_AUDITED = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove",
            "os.symlink", "os.link", "shutil.copyfile", "shutil.copytree", "os.utime"}


def _hook(event: str, args: tuple) -> None:
    if _EVENTS is None or event not in _AUDITED or not args:
        return
    path = args[0]
    if isinstance(path, int) or path is None:
        return
    dir_fd = {"os.remove": args[1:2], "os.mkdir": args[2:3], "os.rename": args[2:4]}.get(
        event, ())
    if any(fd is not None for fd in dir_fd):
        return  # relative to an open folder (shutil.rmtree of the temporary folder)
    mode = str(args[1]) if event == "open" and len(args) > 1 else ""
    _EVENTS.append((event, os.path.abspath(os.fsdecode(path)), mode))
    if event in ("shutil.copyfile", "shutil.copytree", "os.rename", "os.symlink", "os.link") \
            and len(args) > 1 and isinstance(args[1], (str, bytes, os.PathLike)):
        _EVENTS.append((event, os.path.abspath(os.fsdecode(args[1])), "w"))


sys.addaudithook(_hook)  # once per process; inert unless a probe is recording


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, fabricate_results) -> Path:
    """A report over fabricated results (profile ``fx``), bundled: a real bundle."""
    tmp = tmp_path_factory.mktemp("bundle")
    cfg = fabricate_results(tmp)
    build_report(Profile.of(cfg))
    out = tmp / "fx.tar.gz"
    make_bundle("fx", out, reports=cfg["reports"], config_dir=REPO / "config")
    return out


class Host:
    """What lies outside the check's temporary folder."""

    def __init__(self, root: Path):
        self.root = root
        self.area = root / "host"
        self.canary = self.area / "canary.txt"
        self.folder = self.area / "secret"
        self.folder.mkdir(parents=True)
        self.canary.write_text("host secret\n")
        (self.folder / "a.md").write_text("another host file\n")
        self.canary_sha = hashlib.sha256(b"host secret\n").hexdigest()
        st = self.canary.stat()
        os.utime(self.canary, (st.st_mtime - 100, st.st_mtime))  # relatime: a read shows
        self.atime = self.canary.stat().st_atime
        self.out = root / "out"      # --keep / --extract targets
        self.tmp = root / "tmp"      # the check's temporary folder lives here
        self.tmp.mkdir()


@pytest.fixture
def host(tmp_path, monkeypatch) -> Host:
    h = Host(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(h.tmp))
    return h


def verify(host: Host, archive: Path, capsys, *flags: str) -> tuple[int, str, list]:
    """``weince verify ARCHIVE FLAGS`` with every file event recorded."""
    global _EVENTS
    capsys.readouterr()
    _EVENTS = []
    try:
        rc = cli.main(["verify", str(archive), "--max-lines", "50", *flags])
    finally:
        events, _EVENTS = _EVENTS, None
    return rc, capsys.readouterr().out, events


def assert_contained(host: Host, events: list, *, out_may_exist: bool = False) -> None:
    """Nothing outside the temporary folder was read or written."""
    assert host.canary.stat().st_atime == host.atime, "the canary was read"
    assert host.canary.read_text() == "host secret\n"
    area = str(host.area)
    touched = [e for e in events if e[1] == area or e[1].startswith(area + os.sep)]
    assert not touched, touched
    assert sorted(p.name for p in host.folder.iterdir()) == ["a.md"]
    if not out_may_exist:
        assert not host.out.exists(), sorted(str(p) for p in host.out.rglob("*"))
    # every write went to the temporary folder (or, after a passed check, to --extract)
    allowed = [str(host.tmp)] + ([str(host.out)] if out_may_exist else [])
    writes = [e for e in events if (e[0] == "open" and set(e[2]) & set("wxa+"))
              or e[0] in ("os.mkdir", "os.rename", "os.remove", "os.symlink", "os.link",
                          "shutil.copyfile", "shutil.copytree", "os.utime")]
    writes = [e for e in writes if "__pycache__" not in e[1]]
    stray = [e for e in writes if not any(e[1] == a or e[1].startswith(a + os.sep)
                                          for a in allowed)]
    assert not stray, stray
    assert list(host.tmp.iterdir()) == [], "the temporary folder was not removed"


# ------------------------------------------------------------------ forging archives
def _members(src: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(src) as tar:  # our own bundle: trusted
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]


def _info(name: str, size: int = 0, **kw) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mode = 0o644
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def forge(src: Path, dst: Path, *, manifest=None, files=None, extra=(), raw_manifest=None,
          relist: tuple[str, ...] = ()) -> Path:
    """A copy of bundle ``src`` with ``files(dict name -> bytes)`` and ``manifest(dict)``
    applied, the manifest entries of the files named in ``relist`` given their true hash and
    size and SHA256SUMS remade to agree (the forger controls both), then the ``extra``
    members ``(TarInfo, bytes or file object or None)`` appended."""
    data = {m.name: b for m, b in _members(src)}
    man = json.loads(data.pop(f"{META}/manifest.json"))
    data.pop(f"{META}/SHA256SUMS")
    if files:
        files(data)
    for f in man["files"]:
        if f["path"] in relist:
            f["sha256"] = hashlib.sha256(data[f["path"]]).hexdigest()
            f["bytes"] = len(data[f["path"]])
    if manifest:
        manifest(man)
    entries = man.get("files") if isinstance(man, dict) else None
    sums = "".join(f"{f.get('sha256')}  {f.get('path')}\n" for f in entries
                   if isinstance(f, dict)).encode() if isinstance(entries, list) else b""
    man_bytes = raw_manifest if raw_manifest is not None else (
        json.dumps(man, indent=1) + "\n").encode()
    with tarfile.open(dst, "w:gz", compresslevel=1) as tar:
        if isinstance(man_bytes, bytes):
            tar.addfile(_info(f"{META}/manifest.json", len(man_bytes)), io.BytesIO(man_bytes))
        else:  # (size, file object): streamed
            tar.addfile(_info(f"{META}/manifest.json", man_bytes[0]), man_bytes[1])
        tar.addfile(_info(f"{META}/SHA256SUMS", len(sums)), io.BytesIO(sums))
        for name, b in sorted(data.items()):
            tar.addfile(_info(name, len(b)), io.BytesIO(b))
        for ti, payload in extra:
            tar.addfile(ti, io.BytesIO(payload) if isinstance(payload, bytes) else payload)
    return dst


class Repeat(io.RawIOBase):
    """``n`` bytes of ``fill`` after ``head``, streamed (never held in memory)."""

    def __init__(self, n: int, fill: bytes = b"\0", head: bytes = b""):
        self.head, self.n, self.fill = head, n, fill

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.head:
            k = min(len(b), len(self.head))
            b[:k], self.head = self.head[:k], self.head[k:]
            return k
        k = min(len(b), self.n)
        b[:k] = self.fill * k
        self.n -= k
        return k


def stream(n: int, fill: bytes = b"\0", head: bytes = b"") -> io.BufferedReader:
    return io.BufferedReader(Repeat(n, fill, head), 1 << 20)


def one_error(out: str) -> str:
    errors = [ln for ln in out.splitlines() if ln.startswith("ERROR ")]
    assert len(errors) == 1, out
    assert out.rstrip().endswith("FAILED: see the lines above"), out
    return errors[0]


# ------------------------------------------------------------------ the clean bundle
def test_clean_bundle_passes_and_extract_unpacks_only_its_files(bundle, host, capsys):
    rc, out, events = verify(host, bundle, capsys, "--extract", str(host.out))
    assert rc == 0, out
    assert "OK: every file matches its hash" in out
    with tarfile.open(bundle) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    got = sorted(str(p.relative_to(host.out)) for p in host.out.rglob("*") if p.is_file())
    assert got == names
    assert not any(p.is_symlink() for p in host.out.rglob("*"))
    assert f"unpacked {len(names)} verified file(s) into {host.out}" in out
    with tarfile.open(bundle) as tar:
        assert (host.out / LIN).read_bytes() == tar.extractfile(LIN).read()
    assert_contained(host, events, out_may_exist=True)


def test_extract_replaces_a_link_already_in_the_checkout(bundle, host, capsys):
    """A link at a listed path (planted earlier) is replaced by the file, never written
    through."""
    target = host.out / LIN
    target.parent.mkdir(parents=True)
    target.symlink_to(host.canary)
    rc, out, events = verify(host, bundle, capsys, "--extract", str(host.out))
    assert rc == 0, out
    assert not target.is_symlink() and target.is_file()
    assert "(1 replaced an existing file)" in out
    assert_contained(host, events, out_may_exist=True)


# ------------------------------------------------------------------ probe 1-2: members
def test_a_symlink_member_is_a_finding_and_never_planted(bundle, host, tmp_path, capsys):
    link = _info(f"{META}/reports/x.md", type=tarfile.SYMTYPE, linkname=str(host.canary))
    bad = forge(bundle, tmp_path / "sym.tar.gz", extra=[(link, None)])
    rc, out, events = verify(host, bad, capsys, "--extract", str(host.out))
    assert rc == 2, out
    assert (f"UNSAFE MEMBER {META}/reports/x.md (symbolic link -> {host.canary}): not a "
            f"regular file or folder, not unpacked") in out
    assert f"not unpacked into {host.out}: the archive failed the checks" in out
    assert "OK:" not in out and out.rstrip().endswith("FAILED: see the lines above")
    assert_contained(host, events)


@pytest.mark.parametrize("kind, extra, what", [
    ("hard link", dict(type=tarfile.LNKTYPE, linkname="HOST"), "hard link to HOST"),
    ("fifo", dict(type=tarfile.FIFOTYPE), "fifo"),
    ("character device", dict(type=tarfile.CHRTYPE, devmajor=1, devminor=3),
     "character device 1,3"),
    ("block device", dict(type=tarfile.BLKTYPE, devmajor=8, devminor=0), "block device 8,0"),
])
def test_links_fifos_and_devices_are_findings(bundle, host, tmp_path, capsys, kind, extra,
                                              what):
    extra = {k: (str(host.canary) if v == "HOST" else v) for k, v in extra.items()}
    what = what.replace("HOST", str(host.canary))
    member = _info(f"{META}/reports/x.md", **extra)
    bad = forge(bundle, tmp_path / "m.tar.gz", extra=[(member, None)])
    rc, out, events = verify(host, bad, capsys, "--extract", str(host.out))
    assert rc == 2, out
    assert f"UNSAFE MEMBER {META}/reports/x.md ({what}): not a regular file" in out
    assert "OK:" not in out
    assert_contained(host, events)


@pytest.mark.parametrize("name", ["/tmp/evil.json", "results/../../evil.json"])
def test_a_member_outside_the_folder_is_a_finding(bundle, host, tmp_path, capsys, name):
    bad = forge(bundle, tmp_path / "o.tar.gz", extra=[(_info(name, 2), b"{}")])
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2 and f"UNSAFE MEMBER {name} (a path outside the folder)" in out, out
    assert_contained(host, events)


def test_a_member_stored_twice_is_a_finding(bundle, host, tmp_path, capsys):
    with tarfile.open(bundle) as tar:
        size = tar.getmember(LIN).size
    bad = forge(bundle, tmp_path / "d.tar.gz", extra=[(_info(LIN, size), b"x" * size)])
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2 and f"UNSAFE MEMBER {LIN} (stored twice" in out, out
    assert_contained(host, events)


# ------------------------------------------------------------------ probe 3-4: manifest paths
def test_a_host_file_in_the_manifest_is_refused_unread(bundle, host, tmp_path, capsys):
    """The hash oracle: the manifest names a host file with its true hash, SHA256SUMS
    remade to agree."""
    entry = {"path": str(host.canary), "sha256": host.canary_sha,
             "bytes": host.canary.stat().st_size, "role": "result"}
    bad = forge(bundle, tmp_path / "h.tar.gz", manifest=lambda m: m["files"].append(entry))
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    err = one_error(out)
    assert "files[" in err and f".path '{host.canary}' is an absolute path" in err, err
    assert "no host file is read" in err
    assert "present with the manifest's SHA-256" not in out  # no count includes it
    assert_contained(host, events)


def _climb(host: Host, p: Path) -> str:
    """``p`` spelt relative to the check's extraction folder, with ``..``."""
    return "../" * 12 + str(p).lstrip("/")


@pytest.mark.parametrize("key", ["reports", "claims", "resolved_config", "results", "meta"])
@pytest.mark.parametrize("spelling", ["absolute", "dotdot"])
def test_every_manifest_path_must_stay_inside(bundle, host, tmp_path, capsys, key, spelling):
    """Probe 4 (``reports`` = a host folder, with ``--keep``), for every path the manifest
    names."""
    value = str(host.folder) if spelling == "absolute" else _climb(host, host.folder)
    bad = forge(bundle, tmp_path / "p.tar.gz", manifest=lambda m: m.update({key: value}))
    rc, out, events = verify(host, bad, capsys, "--keep", str(host.out))
    assert rc == 2, out
    err = one_error(out)
    what = "is an absolute path" if spelling == "absolute" else "climbs out with '..'"
    assert f"manifest.json: '{key}' {value!r} {what}" in err, err
    assert_contained(host, events)


@pytest.mark.parametrize("where", ["rebuilt", "absent", "files"])
def test_listed_paths_must_stay_inside(bundle, host, tmp_path, capsys, where):
    def edit(m):
        if where == "files":
            m["files"][3]["path"] = _climb(host, host.canary)
        else:
            m[where] = [str(host.canary)]
    bad = forge(bundle, tmp_path / "l.tar.gz", manifest=edit)
    rc, out, events = verify(host, bad, capsys, "--keep", str(host.out))
    assert rc == 2, out
    err = one_error(out)
    assert (f"{where}[0] '{host.canary}' is an absolute path" in err if where != "files"
            else "files[3].path" in err and "climbs out with '..'" in err), err
    assert_contained(host, events)


# ------------------------------------------------------------------ probe 5-6: sizes
def test_a_huge_unlisted_member_is_refused_at_its_header(bundle, host, tmp_path, capsys,
                                                        monkeypatch):
    """1 GiB of zeros (a few MB compressed), not in the manifest: refused from its header,
    none of it decompressed."""
    written: list[tuple[str, int]] = []
    real = unpack_mod.extract_member

    def spy(tar, m, root, name):
        written.append((name, m.size))
        return real(tar, m, root, name)

    monkeypatch.setattr(unpack_mod, "extract_member", spy)
    big = _info("results/fx/zeros.bin", 1 << 30)
    bad = forge(bundle, tmp_path / "z.tar.gz", extra=[(big, stream(1 << 30))])
    assert bad.stat().st_size < 16 << 20
    read = _count_reads(monkeypatch)
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    err = one_error(out)
    assert ("results/fx/zeros.bin: a member of 1.0 GiB that the manifest does not list; "
            "refused at its header (nothing of it unpacked)") in err, err
    assert "results/fx/zeros.bin" not in {n for n, _ in written}
    assert sum(s for _, s in written) < 8 << 20
    assert max(read) < 16 << 20, "the check decompressed the member it refused"
    assert_contained(host, events)


def _count_reads(monkeypatch) -> list[int]:
    """The decompressed bytes each pass over an archive read (appended when it ends)."""
    counts: list[int] = []
    real = unpack_mod.unpack

    def spy(*a, **kw):
        try:
            u = real(*a, **kw)
        except Exception:
            counts.append(_LAST_BUDGET[-1].read_bytes if _LAST_BUDGET else -1)
            raise
        counts.append(u.read_bytes)
        return u

    class Spied(limits_mod.Budget):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            _LAST_BUDGET.append(self)

    _LAST_BUDGET.clear()
    monkeypatch.setattr(verify_mod, "unpack", spy)
    monkeypatch.setattr(unpack_mod, "Budget", Spied)
    return counts


_LAST_BUDGET: list = []


def test_the_unpacked_size_is_capped_before_unpacking(bundle, host, tmp_path, capsys,
                                                      monkeypatch):
    """A listed 64 MiB member (its true hash and size in the manifest) over --max-bytes."""
    n = 64 << 20
    h = hashlib.sha256()
    for _ in range(64):
        h.update(bytes(1 << 20))
    entry = {"path": "results/fx/big.bin", "sha256": h.hexdigest(), "bytes": n,
             "role": "result"}
    written: list[str] = []
    monkeypatch.setattr(unpack_mod, "extract_member",
                        lambda *a: written.append(a[3]) or "0" * 64)
    bad = forge(bundle, tmp_path / "c.tar.gz", manifest=lambda m: m["files"].append(entry),
                extra=[(_info("results/fx/big.bin", n), stream(n))])
    rc, out, events = verify(host, bad, capsys, "--max-bytes", "16M")
    assert rc == 2, out
    err = one_error(out)
    assert f"over the cap of {16 << 20}" in err and "--max-bytes" in err, err
    assert written == []
    assert_contained(host, events)


def test_a_member_whose_size_differs_from_the_manifest_is_named(bundle, host, tmp_path,
                                                                 capsys):
    bad = forge(bundle, tmp_path / "s.tar.gz", manifest=lambda m: next(
        f for f in m["files"] if f["path"] == LIN).update(bytes=10))
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    with tarfile.open(bundle) as tar:
        size = tar.getmember(LIN).size
    assert (f"{LIN} is {_archive._fmt(size)} in the archive, its manifest declares 10 "
            f"bytes: refused at its header (nothing of it unpacked)") in one_error(out)
    assert "present with the manifest's SHA-256" not in out  # the pass did not finish
    assert_contained(host, events)


def test_a_padded_manifest_is_refused_unread(bundle, host, tmp_path, capsys):
    """256 MiB of spaces after the manifest's JSON: refused from its header."""
    with tarfile.open(bundle) as tar:
        head = tar.extractfile(f"{META}/manifest.json").read()
    n = 256 << 20
    bad = forge(bundle, tmp_path / "pad.tar.gz",
                raw_manifest=(len(head) + n, stream(n, b" ", head)))
    tracemalloc.start()
    try:
        rc, out, events = verify(host, bad, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 2, out
    err = one_error(out)
    size = (len(head) + n) / (1 << 20)
    assert f"{META}/manifest.json is {size:.1f} MiB, over the cap of 32.0 MiB" in err, err
    assert "--max-manifest-bytes" in err
    assert peak < 64 << 20, f"{peak} bytes held"
    assert_contained(host, events)


def test_the_caps_are_flags(bundle, host, capsys):
    rc, out, events = verify(host, bundle, capsys, "--max-manifest-bytes", "1K")
    assert rc == 2 and "over the cap of 1.0 KiB" in one_error(out), out
    rc, out, _ = verify(host, bundle, capsys, "--max-bytes", "1K")
    assert rc == 2 and "over the cap of 1024 (refused before unpacking" in one_error(out), out
    with pytest.raises(SystemExit):
        cli.main(["verify", str(bundle), "--max-bytes", "lots"])
    assert "'lots' is not a size" in capsys.readouterr().err
    assert _archive.parse_size("8G") == 8 << 30 and _archive.parse_size("1000") == 1000
    assert_contained(host, events)


# ------------------------------------------------------------------ probe 7-8: malformed
@pytest.mark.parametrize("text, message", [
    ("!!python/object/apply:os.system ['touch PWNED']\n",
     "resolved.yaml is not plain YAML"),
    ("- a\n- b\n", "resolved.yaml must hold a YAML mapping (the workflow config), got list"),
    ("a: &x [1]\nb: *x\n", "resolved.yaml uses YAML aliases"),
    ("profile: [unclosed\n", "resolved.yaml is not plain YAML"),
])
def test_a_hostile_resolved_config_is_one_error_after_the_hash_report(bundle, host, tmp_path,
                                                                      capsys, text, message):
    pwned = host.area / "pwned"
    name = f"{META}/resolved.yaml"
    text = text.replace("PWNED", str(pwned))
    bad = forge(bundle, tmp_path / "y.tar.gz",
                files=lambda d: d.update({name: text.encode()}), relist=(name,))
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    assert message in one_error(out)
    assert "present with the manifest's SHA-256 (all)" in out  # the hash report is kept
    assert not pwned.exists()
    assert_contained(host, events)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("profile"), "'profile' must be a string, got nothing"),
    (lambda m: m.update(files="all of them"), "'files' must be a list of file entries, got str"),
    (lambda m: m.update(files=[1]), "files[0] must be an object with path, sha256 and bytes"),
    (lambda m: m["files"][0].pop("sha256"), "files[0].sha256"),
    (lambda m: m["files"][0].update(bytes=-1), "files[0].bytes"),
    (lambda m: m["files"][0].update(bytes="12"), "files[0].bytes"),
    (lambda m: m.update(profile="../../x"), "profile '../../x' is not a profile name"),
    (lambda m: m.update(rebuilt="table_c3.md"), "'rebuilt' must be a list of paths, got str"),
    (lambda m: m["files"].append(dict(m["files"][0])), "is listed twice"),
    (lambda m: m.update(format="weince-bundle/0"), "bundle format 'weince-bundle/0'"),
])
def test_a_malformed_manifest_is_one_error(bundle, host, tmp_path, capsys, edit, message):
    bad = forge(bundle, tmp_path / "mm.tar.gz", manifest=edit)
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    assert message in one_error(out)
    assert "Traceback" not in out
    assert_contained(host, events)


@pytest.mark.parametrize("raw, message", [
    (b"[1, 2]", "manifest.json must hold a JSON object, got list"),
    (b"{not json", "manifest.json is not valid JSON"),
    (b"\xff\xfe", "manifest.json is not valid JSON"),
])
def test_a_manifest_that_is_not_an_object_is_one_error(bundle, host, tmp_path, capsys, raw,
                                                       message):
    bad = forge(bundle, tmp_path / "mj.tar.gz", raw_manifest=raw)
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2 and message in one_error(out), out
    assert_contained(host, events)


def test_a_malformed_result_file_is_one_error(bundle, host, tmp_path, capsys):
    bad = forge(bundle, tmp_path / "rj.tar.gz", files=lambda d: d.update({LIN: b"{oops"}),
                relist=(LIN,))
    rc, out, events = verify(host, bad, capsys)
    assert rc == 2, out
    err = one_error(out)
    assert err.startswith("ERROR rebuilding the report failed:") and LIN in err, err
    assert "present with the manifest's SHA-256 (all)" in out
    assert_contained(host, events)


# ------------------------------------------------------------------ probe 9: the reports
def test_a_markdown_image_in_a_provenance_string_is_refused(bundle, host, tmp_path, capsys):
    image = f"![x]({host.canary})"

    def edit(d):
        data = json.loads(d[LIN])
        data["provenance"]["git_commit"] = image
        d[LIN] = json.dumps(data).encode()
    bad = forge(bundle, tmp_path / "img.tar.gz", files=edit, relist=(LIN,))
    rc, out, events = verify(host, bad, capsys, "--keep", str(host.out))
    assert rc == 2, out
    err = one_error(out)
    assert "ResultSchemaError" in err and f"{LIN}: provenance.git_commit" in err, err
    assert "weince-verify-" not in err  # named as in the archive
    assert "is not a git commit" in err
    assert_contained(host, events)


# ------------------------------------------------------------ the reviewer's page, next step
def test_the_unpacking_commands_we_document_are_the_safe_one(bundle):
    section = (REPO / "docs" / "reviewing.md").read_text()
    assert "weince verify default.tar.gz --extract CHECKOUT && cd CHECKOUT" in section
    assert "-C CHECKOUT" not in section.replace("--extract CHECKOUT", "")
    with tarfile.open(bundle) as tar:
        readme = tar.extractfile(f"{META}/README.md").read().decode()
    assert "weince verify THIS_FILE.tar.gz --extract CHECKOUT" in readme
    assert "-C CHECKOUT" not in readme


# ------------------------------------------------------------ the hostile-archive corpus
# One archive per attack a reviewer met, each unpacked with --extract into a git
# checkout: refused with its exit code, naming the member, nothing written outside the
# temporary folder (the checkout's git status stays clean), the temporary folder's peak
# size and the bytes decompressed bounded.
class Peak:
    """The largest total size of the files under ``folder``, sampled every millisecond
    while the block runs."""

    def __init__(self, folder: Path):
        self.folder, self.peak, self._stop = folder, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _size(self) -> int:
        total = 0
        for dirpath, _, names in os.walk(self.folder):
            for n in names:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, n)).st_size
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._size())
            time.sleep(0.001)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def checkout(host) -> Path:
    """A git checkout beside the host area: its code, a hook, one commit."""
    co = host.root / "checkout"
    (co / "workflow" / "scripts").mkdir(parents=True)
    (co / "workflow" / "scripts" / "report.py").write_text("print('the real report')\n")
    (co / "config").mkdir()
    (co / "config" / "claims.yaml").write_text("claims: []\n")
    _git(host.root, "init", "-q", str(co))
    _git(co, "add", "-A")
    _git(co, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    return co


PLANT = b"import os\nos.system('touch PWNED')\n"


def _entry(path: str, data: bytes) -> dict:
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "role": "result"}


def _truncated(src: Path, dst: Path, name: str, size: int, *, manifest=None,
               written: int = 16 << 20) -> Path:
    """A copy of bundle ``src`` (``manifest`` applied) with a last member ``name`` whose
    header says ``size`` bytes, of which only ``written`` zeros follow: an archive that
    would take ``size`` bytes of decompression to read to its end."""
    body = tmp_tar = dst.with_suffix(".body.tar.gz")
    forge(src, body, manifest=manifest)
    with gzip.open(tmp_tar, "rb") as fh:
        tar_bytes = fh.read()
    end = len(tar_bytes)
    while end >= 512 and tar_bytes[end - 512:end] == bytes(512):
        end -= 512       # the end-of-archive blocks
    with gzip.open(dst, "wb", compresslevel=1) as out:
        out.write(tar_bytes[:end])
        out.write(_info(name, size).tobuf(tarfile.PAX_FORMAT))
        for _ in range(written >> 20):
            out.write(bytes(1 << 20))
    body.unlink()
    return dst


def _plant(m, path, data):
    m["files"].append(_entry(path, data))


ATTACKS = {
    # name: (how the archive is made, exit code, what the one error line says)
    "planted code": (lambda b, d: forge(
        b, d, files=lambda f: f.update({"workflow/scripts/report.py": PLANT}),
        manifest=lambda m: _plant(m, "workflow/scripts/report.py", PLANT)),
        2, "manifest.json lists workflow/scripts/report.py (a file), outside the archive's "
           "results folder results/fx/"),
    "git hook": (lambda b, d: forge(
        b, d, files=lambda f: f.update({".git/hooks/pre-commit": PLANT}),
        manifest=lambda m: _plant(m, ".git/hooks/pre-commit", PLANT)),
        2, "manifest.json lists .git/hooks/pre-commit (a file), outside the archive's "
           "results folder"),
    "manifest lists a config path": (lambda b, d: forge(
        b, d, manifest=lambda m: _plant(m, "config/claims.yaml", b"claims: []\n")),
        2, "manifest.json lists config/claims.yaml (a file), outside"),
    "link to a file outside": (lambda b, d: forge(
        b, d, extra=[(_info(f"{META}/../key.json", type=tarfile.SYMTYPE,
                            linkname="/etc/passwd"), None)]),
        2, None),
    "listed link outside": (lambda b, d: forge(
        b, d, manifest=lambda m: m["files"].append(
            {**m["files"][3], "path": "results/fx/key.json", "bytes": 0,
             "link": "../../../../etc/passwd"})),
        2, "manifest.json: results/fx/key.json is a link to '../../../../etc/passwd', not a "
           "relative link to a file inside results/fx/"),
    "bomb within the cap": (lambda b, d: _truncated(
        b, d, "results/fx/big.json", 6 << 30,
        manifest=lambda m: m["files"].append(
            {"path": "results/fx/big.json", "sha256": "0" * 64, "bytes": 6 << 30,
             "role": "result"})),
        2, "results/fx/big.json: the manifest declares 6.0 GiB, over the 64.0 MiB that a "
           "result JSON can hold (refused before unpacking anything)"),
    "member larger than declared": (lambda b, d: _truncated(
        b, d, "results/fx/vision/extra.json", 1 << 30,
        manifest=lambda m: m["files"].append(
            {"path": "results/fx/vision/extra.json", "sha256": "0" * 64, "bytes": 100,
             "role": "result"})),
        2, "results/fx/vision/extra.json is 1.0 GiB in the archive, its manifest declares "
           "100 bytes: refused at its header (nothing of it unpacked)"),
    "duplicate member": (lambda b, d: forge(
        b, d, extra=[(_info(LIN, 2), b"{}")]),
        2, None),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_hostile_archive_corpus(bundle, host, checkout, tmp_path, capsys, monkeypatch,
                                    attack):
    make, code, message = ATTACKS[attack]
    bad = make(bundle, tmp_path / "attack.tar.gz")
    assert bad.stat().st_size < 32 << 20
    repo_status = _git(REPO, "status", "--porcelain")
    read = _count_reads(monkeypatch)
    t0 = time.process_time()
    with Peak(host.tmp) as peak:
        rc, out, events = verify(host, bad, capsys, "--extract", str(checkout))
    cpu = time.process_time() - t0
    assert rc == code, out
    if message:
        assert message in one_error(out), out
    elif attack == "duplicate member":
        assert (f"UNSAFE MEMBER {LIN} (stored twice: which copy counts is ambiguous; "
                f"refused)") in out and "not a regular file" not in out, out
    else:
        assert f"UNSAFE MEMBER {META}/../key.json (a path outside the folder)" in out, out
    assert f"not unpacked into {checkout}" in out
    assert _git(checkout, "status", "--porcelain", "--ignored") == ""
    assert (checkout / "workflow" / "scripts" / "report.py").read_text() == \
        "print('the real report')\n"
    assert not (checkout / ".git" / "hooks" / "pre-commit").exists()
    assert not list(host.root.rglob("PWNED")) and not (checkout / "results").exists()
    assert _git(REPO, "status", "--porcelain") == repo_status
    assert peak.peak < 50 << 20, f"{peak.peak} bytes in the temporary folder"
    assert max(read) < 48 << 20, f"{max(read)} bytes decompressed"
    assert cpu < 30, cpu
    assert_contained(host, events)
