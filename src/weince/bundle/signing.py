"""A bundle's manifest signed with the site's SSH key, and the check of that signature.

``weince bundle --sign KEY`` signs the bytes of ``manifest.json`` with ``ssh-keygen -Y sign
-n weince-bundle`` (the format git's SSH-signed commits use) and stores the signature
beside it in the archive as ``bundle/manifest.json.sig``. The manifest names the SHA-256 of
every other file, so the signature covers them all. ``weince verify`` / ``weince merge
--allowed-signers FILE`` check it with ``ssh-keygen -Y verify`` against an allowed-signers
file (one ``principal key-type key`` line per site, ``man ssh-keygen``, "ALLOWED
SIGNERS"): the principal that signed is then shown beside the site's provenance; without a
verified signature, the site, GPU and container an archive records are what the site
reported, and read so.

The key and the allowed-signers file are the reviewer's and the site's; nothing here
reaches the network. ``ssh-keygen`` is OpenSSH's (``openssh-client`` on Debian).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NAMESPACE", "SIG_NAME", "Signature", "sign_manifest", "check_signature",
           "ssh_keygen"]

NAMESPACE = "weince-bundle"
SIG_NAME = "manifest.json.sig"   # beside manifest.json, in the bundle's meta folder
_TIMEOUT = 60


def ssh_keygen() -> str:
    """The ``ssh-keygen`` to run: ``/usr/bin/ssh-keygen``, else the one on ``PATH``."""
    found = "/usr/bin/ssh-keygen" if Path("/usr/bin/ssh-keygen").is_file() else \
        shutil.which("ssh-keygen")
    if not found:
        raise ValueError("ssh-keygen is not installed (Debian: apt-get install "
                         "openssh-client): it signs and checks bundle manifests")
    return found


def _run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([ssh_keygen(), *args], input=stdin, capture_output=True,
                          timeout=_TIMEOUT, check=False)


def _first_line(proc: subprocess.CompletedProcess) -> str:
    text = (proc.stderr or proc.stdout or b"").decode(errors="replace").strip()
    return text.splitlines()[0] if text else f"exit status {proc.returncode}"


def sign_manifest(manifest: bytes, key: str | Path) -> bytes:
    """The ``ssh-keygen -Y sign`` signature of ``manifest`` with the private key ``key``
    (namespace :data:`NAMESPACE`); a one-line ``ValueError`` when it cannot sign."""
    key = Path(key).expanduser()
    if not key.is_file():
        raise ValueError(f"--sign {key}: no such key file (an SSH private key, e.g. "
                         f"~/.ssh/id_ed25519)")
    with tempfile.TemporaryDirectory(prefix="weince-sign-") as tmp:
        data = Path(tmp) / "manifest.json"
        data.write_bytes(manifest)
        proc = _run(["-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(data)])
        sig = data.with_name(data.name + ".sig")
        if proc.returncode != 0 or not sig.is_file():
            raise ValueError(f"--sign {key}: ssh-keygen could not sign ({_first_line(proc)}); "
                             f"pass an unencrypted SSH private key or one your ssh-agent holds")
        return sig.read_bytes()


@dataclass
class Signature:
    """What the check of an archive's signature found: ``present`` (the archive carries
    one), ``checked`` (an allowed-signers file was given), ``principal`` (who signed, when
    verified) and ``problem`` (why it does not verify; empty when it does or was not
    checked)."""

    present: bool = False
    checked: bool = False
    principal: str = ""
    problem: str = ""

    @property
    def verified(self) -> bool:
        return bool(self.checked and self.principal and not self.problem)

    def words(self) -> str:
        """One line for ``weince verify``'s output."""
        if self.verified:
            return (f"signature: the manifest is signed by {self.principal} (checked against "
                    f"the allowed signers): the provenance it records is the signer's")
        if self.problem:
            return f"SIGNATURE FAILS: {self.problem}"
        if self.present:
            return ("signature: the manifest is signed but not checked (pass "
                    "--allowed-signers FILE): its provenance reads as reported by the site")
        return ("signature: none (made without `weince bundle --sign`): site, GPU and "
                "container read as reported by the site")


def check_signature(manifest: bytes, sig: bytes | None, allowed: str | Path | None,
                    required: bool = True) -> Signature:
    """Check ``sig`` over ``manifest`` against the allowed-signers file ``allowed`` (None:
    not checked); ``required``: no signature is a problem (else it reads as unsigned).
    Never raises: a problem is the result's ``problem``."""
    out = Signature(present=sig is not None, checked=allowed is not None)
    if allowed is None:
        return out
    allowed = Path(allowed).expanduser()
    if not allowed.is_file():
        out.problem = f"--allowed-signers {allowed}: no such file"
        return out
    if sig is None and not required:
        return out
    if sig is None:
        out.problem = ("the archive carries no signature (bundle/manifest.json.sig), and "
                       "--allowed-signers asks for one: made without `weince bundle --sign`")
        return out
    with tempfile.TemporaryDirectory(prefix="weince-verify-sig-") as tmp:
        sig_path = Path(tmp) / SIG_NAME
        sig_path.write_bytes(sig)
        try:
            found = _run(["-Y", "find-principals", "-s", str(sig_path), "-f", str(allowed)])
            principals = found.stdout.decode(errors="replace").split() \
                if found.returncode == 0 else []
            if not principals:
                out.problem = (f"the signature's key is not in {allowed.name} (or the "
                               f"signature is malformed): {_first_line(found)}")
                return out
            proc = _run(["-Y", "verify", "-f", str(allowed), "-I", principals[0], "-n",
                         NAMESPACE, "-s", str(sig_path)], stdin=manifest)
        except (ValueError, OSError, subprocess.TimeoutExpired) as err:
            out.problem = f"ssh-keygen could not check the signature ({err})"
            return out
    if proc.returncode != 0:
        out.problem = (f"the signature does not verify the manifest for {principals[0]} "
                       f"(the manifest was changed after signing, or another key signed "
                       f"it): {_first_line(proc)}")
        return out
    out.principal = principals[0]
    return out
