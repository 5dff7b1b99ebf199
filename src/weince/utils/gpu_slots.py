"""A device for each GPU job on one machine without a cluster scheduler (docs/cluster.md,
"One machine with several GPUs").

    from weince.utils.gpu_slots import take_slot
    slot = take_slot(gpus=1, jobs_per_gpu=2)   # before torch is imported
    # CUDA_VISIBLE_DEVICES now names the slot's device; None: no pool here (CPU, SLURM)

Snakemake decides which jobs run (``--resources gpu=N``); this module only maps a running
job to a device. The machine's GPUs make a pool of ``gpus x jobs_per_gpu`` slots. Each slot
is an OS file lock (``fcntl.flock``) on a file of a lock folder outside the checkout
(``/tmp/weince-gpu-slots`` unless ``WEINCE_GPU_LOCK_DIR`` names another), so that

- a job that ends, fails or is killed frees its slot at once (the kernel drops the lock
  with the job's last open descriptor: no stale lock file to clean up);
- two workflow runs on one machine (two checkouts, two users) share one pool and never hold
  the same slot.

A job asking for one GPU takes the first free slot in the order slot 0 of every device,
then slot 1 of every device, ...: ``jobs_per_gpu`` jobs share a device only when every
device already has the ones before. A device's own lock keeps sharing honest: a job with
``jobs_per_gpu`` 1 holds it exclusively (it waits for the sharing jobs to end and they wait
for it); sharing jobs hold it together. A job asking for ``N > 1`` GPUs (torchrun) takes
``N`` whole devices. A job that finds no free slot (Snakemake started more GPU jobs than
the pool has slots, or another workflow holds them) waits for one and says so in its log.

The devices: ``WEINCE_FAKE_GPUS`` (tests: a count or a comma-separated list of ids; the
jobs then run on the CPU as they would anyway), else ``WEINCE_NODE_GPUS`` (the config's
``node.gpus``, which the workflow exports), else the ``CUDA_VISIBLE_DEVICES`` the workflow
was started with, else the GPUs the NVIDIA driver lists (``/proc/driver/nvidia/gpus``).
Inside a SLURM job (``SLURM_JOB_ID``) there is no pool: the allocation's devices are used
as they are. Torch-free: it must run before torch is imported, since CUDA reads
``CUDA_VISIBLE_DEVICES`` once.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Slot", "take_slot", "held", "release", "pool_devices", "lock_dir", "environment",
           "FAKE_ENV", "GPUS_ENV", "LOCK_DIR_ENV", "DEFAULT_LOCK_DIR"]

FAKE_ENV = "WEINCE_FAKE_GPUS"        # tests: a fake device list (count or ids)
GPUS_ENV = "WEINCE_NODE_GPUS"        # node.gpus: a count or a comma-separated list of ids
LOCK_DIR_ENV = "WEINCE_GPU_LOCK_DIR"  # node.lock_dir
DEFAULT_LOCK_DIR = "/tmp/weince-gpu-slots"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


@dataclass
class Slot:
    """The slot a job holds: its devices (ids as ``CUDA_VISIBLE_DEVICES`` names them), its
    index on the device (0 .. ``jobs_per_gpu`` - 1), the pool's size and how long the job
    waited for it."""

    devices: tuple[str, ...]
    index: int
    jobs_per_gpu: int
    pool: tuple[str, ...]
    lock_dir: str
    fake: bool
    waited_s: float = 0.0
    taken_at: float = 0.0     # time.time() when the slot was taken
    _fds: list[int] = field(default_factory=list, repr=False)

    @property
    def shared(self) -> bool:
        """Whether other jobs may run on the same device (``jobs_per_gpu`` > 1)."""
        return self.jobs_per_gpu > 1 and len(self.devices) == 1

    @property
    def name(self) -> str:
        """``gpu3/slot1``, or ``gpu0+gpu1`` for a multi-GPU job's whole devices."""
        if len(self.devices) > 1:
            return "+".join(f"gpu{d}" for d in self.devices)
        return f"gpu{self.devices[0]}/slot{self.index}"

    def record(self) -> dict[str, Any]:
        """What a result file records of the slot (train.json's ``step_timing``)."""
        return {"slot": self.name, "devices": list(self.devices), "index": self.index,
                "jobs_per_gpu": self.jobs_per_gpu, "shared": self.shared,
                "pool_devices": len(self.pool), "fake": self.fake,
                "waited_s": round(self.waited_s, 3), "taken_at": self._when()}

    def _when(self) -> str:
        return _dt.datetime.fromtimestamp(self.taken_at, _dt.UTC).isoformat(
            timespec="milliseconds")

    @staticmethod
    def now() -> str:
        """The time now, as the log's slot lines write it."""
        return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")

    def line(self) -> str:
        """The job log's line."""
        share = (f"shared: up to {self.jobs_per_gpu} jobs on this GPU (jobs_per_gpu "
                 f"{self.jobs_per_gpu}), so its step times are those of a shared device"
                 if self.shared else "not shared: the device is this job's alone")
        fake = " (fake device list, WEINCE_FAKE_GPUS: the job runs where it would)" \
            if self.fake else ""
        when = self._when()
        return (f"gpu slot: {self.name} of a pool of {len(self.pool)} GPU(s) x "
                f"{self.jobs_per_gpu}{fake}; CUDA_VISIBLE_DEVICES={','.join(self.devices)}; "
                f"{share}; taken at {when} after waiting {self.waited_s:.1f} s; "
                f"pid {os.getpid()}; locks in {self.lock_dir}")


_HELD: Slot | None = None


def held() -> Slot | None:
    """The slot this process holds, if any."""
    return _HELD


def release() -> None:
    """Give the slot back now (a job's end does it anyway; for tests and long processes)."""
    global _HELD
    if _HELD is not None:
        for fd in _HELD._fds:
            os.close(fd)
        _HELD = None


def _parse(value: str, what: str) -> tuple[str, ...]:
    text = value.strip()
    if "," not in text:
        if not text.isdigit():
            raise ValueError(f"{what}={value!r} is neither a GPU count nor a comma-separated "
                             f"list of device ids; give e.g. 4 or 0,1,2,3")
        return tuple(str(i) for i in range(int(text)))
    ids = tuple(s.strip() for s in text.split(",") if s.strip())
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what}={value!r} names a device twice; list each id once")
    return ids


def pool_devices(env: Mapping[str, str] | None = None) -> tuple[tuple[str, ...], bool]:
    """The pool's devices and whether they are fake (module docstring); empty where the
    machine has no pool (no GPU, or inside a SLURM job)."""
    env = os.environ if env is None else env
    if env.get(FAKE_ENV, "").strip():
        return _parse(env[FAKE_ENV], FAKE_ENV), True
    if env.get("SLURM_JOB_ID"):
        return (), False
    given = env.get(GPUS_ENV, "").strip()
    if given and given != "auto":
        return _parse(given, GPUS_ENV), False
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return tuple(s.strip() for s in visible.split(",")
                     if s.strip() and not s.strip().startswith("-")), False
    try:
        return tuple(str(i) for i in range(len(list(NVIDIA_GPUS.iterdir())))), False
    except OSError:
        return (), False


def lock_dir(env: Mapping[str, str] | None = None) -> Path:
    """The lock folder (``WEINCE_GPU_LOCK_DIR``, else ``/tmp/weince-gpu-slots``), made
    writable by every user of the machine (sticky, as /tmp) so that their runs share it."""
    env = os.environ if env is None else env
    path = Path(env.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(f"cannot make the GPU slot lock folder {path} ({err.strerror or err}); "
                      f"set node.lock_dir (or {LOCK_DIR_ENV}) to a writable folder outside "
                      f"the checkout") from None
    if path.stat().st_uid == os.getuid():
        try:
            path.chmod(0o1777)
        except OSError:
            pass
    return path


def environment(node: Mapping[str, Any]) -> dict[str, str]:
    """The variables a workflow exports for its jobs from its config's ``node`` block: the
    pool's GPUs (``gpus``, unless ``auto``) and the lock folder (``lock_dir``, where set)."""
    out = {}
    gpus = node.get("gpus", "auto")
    if gpus not in (None, "auto"):
        out[GPUS_ENV] = (str(int(gpus)) if isinstance(gpus, int)
                         else ",".join(str(int(g)) for g in gpus) + ("," if len(gpus) == 1
                                                                     else ""))
    if node.get("lock_dir"):
        out[LOCK_DIR_ENV] = str(node["lock_dir"])
    return out


def _lock(path: Path, mode: int) -> int | None:
    """An open descriptor holding ``flock(mode)`` on ``path``, or None when it is taken."""
    old = os.umask(0)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    finally:
        os.umask(old)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _note(fd: int, text: str) -> None:
    """Who holds a slot, for a person looking at the lock folder (``cat *.lock``)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _try_one(folder: Path, pool: tuple[str, ...], jobs_per_gpu: int
             ) -> tuple[tuple[str, ...], int, list[int]] | None:
    for k in range(jobs_per_gpu):
        for dev in pool:
            mode = fcntl.LOCK_SH if jobs_per_gpu > 1 else fcntl.LOCK_EX
            dfd = _lock(folder / f"gpu{dev}.lock", mode)
            if dfd is None:
                continue
            sfd = _lock(folder / f"gpu{dev}.slot{k}.lock", fcntl.LOCK_EX)
            if sfd is None:
                os.close(dfd)
                continue
            return (dev,), k, [dfd, sfd]
    return None


def _try_whole(folder: Path, pool: tuple[str, ...], n: int
               ) -> tuple[tuple[str, ...], int, list[int]] | None:
    got: list[tuple[str, int]] = []
    for dev in pool:
        fd = _lock(folder / f"gpu{dev}.lock", fcntl.LOCK_EX)
        if fd is not None:
            got.append((dev, fd))
            if len(got) == n:
                return tuple(d for d, _ in got), 0, [fd for _, fd in got]
    for _, fd in got:
        os.close(fd)
    return None


def take_slot(gpus: int = 1, jobs_per_gpu: int = 1, *, env: Mapping[str, str] | None = None,
              poll_s: float = 0.5, say: Callable[[str], None] | None = None,
              who: str = "") -> Slot | None:
    """Take a slot for a job asking for ``gpus`` GPUs (waiting while none is free), set
    ``CUDA_VISIBLE_DEVICES`` to its device(s) and return it; None where the machine has no
    pool (module docstring) or ``gpus`` < 1. A process takes one slot: a second call returns
    the slot it holds. ``say``: told once when the job has to wait.

    Raises:
        ValueError: the job asks for more GPUs than the pool has, or a device list that
            does not parse.
    """
    global _HELD
    if gpus < 1:
        return None
    if _HELD is not None:
        return _HELD
    pool, fake = pool_devices(env)
    if not pool:
        return None
    if gpus > len(pool):
        raise ValueError(f"the job asks for {gpus} GPUs but this machine's pool has "
                         f"{len(pool)} ({', '.join(pool)}); lower its resources: gpu or set "
                         f"node.gpus")
    per = max(1, int(jobs_per_gpu)) if gpus == 1 else 1
    folder = lock_dir(env)
    t0, told = time.monotonic(), False
    while True:
        got = _try_one(folder, pool, per) if gpus == 1 else _try_whole(folder, pool, gpus)
        if got is not None:
            break
        if say is not None and not told:
            say(f"gpu slot: every slot of the pool ({len(pool)} GPU(s) x {per}) is taken; "
                f"waiting for one to free (locks in {folder})")
            told = True
        time.sleep(poll_s)
    devices, index, fds = got
    slot = Slot(devices, index, per, pool, str(folder), fake, time.monotonic() - t0,
                time.time(), fds)
    for fd in fds[-1:]:
        _note(fd, f"pid {os.getpid()} {who}\n")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    _HELD = slot
    return slot
