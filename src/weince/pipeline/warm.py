"""Warm start: the rules' scripts run in processes forked from one that has imported torch.

Most of the embedded default's ~100 jobs are ~2-3 s of Python importing torch, torchvision,
numpy and the pipeline's modules around well under a second of work. With ``warm_start:
true`` (config key; the embedded default and smoke profiles) a local run starts one server
at its beginning (Snakefile ``onstart``) that imports them once and then waits on a Unix
socket. Each job's script still starts as Snakemake starts it (``python <script>``), but
:func:`weince.pipeline.logs.log_to` — the first thing every script enters — hands the job to
the server instead of importing anything: the server forks, and the fork runs the very same
script file with the job's arguments, working directory, environment and standard streams
(passed over the socket), in its own process group. The launcher waits, forwards the
signals Snakemake sends it (so a SIGTERM still writes a training checkpoint), and exits with
the job's exit status. The work itself is the same code on the same inputs: outputs are
bit-for-bit those of a cold start (``tests/pipeline/test_warm.py``).

Anything unusual falls back to the cold start, silently: no server (yet, or any more), a
server for another Python (a container's, a conda env's), a socket that does not answer. The
server runs only for local, non-container runs, only as long as the Snakemake process that
started it (it checks every second) and until ``IDLE_S`` without a job; its socket is
private (mode 0600, peer's uid checked). If the launcher dies (``kill -9``), the job's
process group is killed, as a cold job would have died with it.

One thing differs, and the job's log says so: Snakemake's ``benchmark:`` file measures the
launcher's process tree, so its memory and CPU columns are the launcher's (~20 MB); the
log's last line gives the job process's own peak memory and CPU time, and
:func:`weince.pipeline.benchmarks.job_times` (``weince times``, the rehearsal's forecast)
reads them from there. The paper profile (and the rehearsal that stands in for it) runs
cold: its jobs are long, so start-up is noise there, and each runs as it will on the GPU
nodes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ENV", "hand_off", "in_worker", "job_usage", "serve", "start_server", "stop_server",
           "wanted"]

ENV = "WEINCE_WARM_SOCKET"   # set in Snakemake's environment, so every job's launcher sees it
IDLE_S = 120.0               # a server with no job for this long exits
PRELOAD = (                  # imported before the server answers: what nearly every job uses
    "numpy",
    "torch",
    "torchvision",
    "snakemake.script",
    "weince.pipeline.logs",
    "weince.train.simclr",
    "weince.eval.features",
    "weince.eval.linear",
    "weince.eval.knn",
    "threadpoolctl",
)
EXTRAS = (                   # imported while it answers, one between two jobs: what the
    "scipy.stats",           # tail fits, reports, norms and text jobs add (a job forked
    "pandas",                # before one of them is in imports it itself)
    "matplotlib.pyplot",
    "weince.report",
    "weince.report.html",
    "weince.norms.run",
    "transformers",
    "transformers.models.bert.modeling_bert",
)
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2)
_IN_WORKER = False


def in_worker() -> bool:
    """True in a job forked by the server (its ``log_to`` must not hand off again)."""
    return _IN_WORKER


# ---------------------------------------------------------------------------- messages
def _send(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    frame = struct.pack("!I", len(data)) + data
    sent = socket.send_fds(sock, [frame], fds) if fds else 0   # fds ride on the first bytes
    sock.sendall(frame[sent:])       # sendmsg may send part of a large frame


def _read(sock: socket.socket, n: int, buf: bytes = b"") -> bytes:
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def _recv(sock: socket.socket, fds: list[int] | None = None) -> dict:
    """One message; with ``fds``, the descriptors that came with its first bytes too."""
    head = b""
    if fds is not None:
        head, got, _flags, _addr = socket.recv_fds(sock, 4, 8)
        fds.extend(got)
        if not head:
            raise EOFError("connection closed")
    (n,) = struct.unpack("!I", _read(sock, 4, head))
    return json.loads(_read(sock, n))


# ---------------------------------------------------------------------------- launcher
def hand_off(log: str | os.PathLike | None = None) -> None:
    """Run this job in a fork of the warm server and exit with its status; return at once
    (cold start) when there is no usable server. Called by ``log_to`` before any import."""
    path = os.environ.get(ENV)
    if not path or _IN_WORKER or not sys.argv or not sys.argv[0]:
        return
    script = os.path.abspath(sys.argv[0])
    if not os.path.isfile(script):
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(path)
        _send(sock, {"executable": sys.executable, "argv": [script, *sys.argv[1:]],
                     "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path},
              fds=[0, 1, 2])
        if "ready" not in _recv(sock):
            sock.close()
            return                  # refused (another Python): cold start
        # from here on the job is the server's: it forks only after this "go", so a
        # launcher that timed out above (and starts cold) can never have a twin
        _send(sock, {"go": True})
    except (OSError, EOFError, ValueError):
        sock.close()
        return                      # no server, or one too busy to answer: cold start
    sock.settimeout(None)

    def forward(signum: int, _frame: Any) -> None:
        try:
            _send(sock, {"signal": signum})
        except OSError:
            pass

    for sig in _SIGNALS:
        signal.signal(sig, forward)
    pid = None
    try:
        while True:
            msg = _recv(sock)
            pid = msg.get("pid", pid)
            if "rc" in msg:
                break
    except (OSError, EOFError, ValueError) as e:
        print(f"weince warm start: lost the job's supervisor ({e}); the job was stopped",
              file=sys.stderr)
        os._exit(1)
    if log and msg.get("maxrss_mb") is not None:
        try:
            with open(log, "a") as fh:
                fh.write(f"[warm start: the job ran in process {pid}, forked from "
                         f"the warm server; its peak memory {msg['maxrss_mb']:.0f} MB, CPU "
                         f"{msg['cpu_s']:.1f} s; the benchmark file's memory columns "
                         f"measure the launcher]\n")
        except OSError:
            pass
    os._exit(int(msg["rc"]))


_USAGE = re.compile(r"^\[warm start: .*peak memory (?P<rss>[0-9.]+) MB, CPU (?P<cpu>[0-9.]+) s")


def job_usage(log: str | os.PathLike) -> tuple[float, float] | None:
    """(peak MB, CPU s) of a job that ran warm, from the last line of its log that
    :func:`hand_off` wrote; None for a cold job or no log."""
    log = Path(log)
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 600))
            tail = fh.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return None
    m = _USAGE.match(tail[-1]) if tail else None
    return (float(m["rss"]), float(m["cpu"])) if m else None


# ---------------------------------------------------------------------------- server side
def _exit_code(status: int) -> int:
    """The status a shell reports: 128 + N for a job killed by signal N."""
    rc = os.waitstatus_to_exitcode(status)
    return 128 - rc if rc < 0 else rc


def _run_job(req: dict, fds: list[int]) -> None:
    """In the job's process (a fork of the server): become the job, run its script, exit."""
    global _IN_WORKER
    _IN_WORKER = True
    code = 1
    try:
        os.setpgid(0, 0)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for sig in (*_SIGNALS, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)   # as in a fresh interpreter
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ.pop(ENV, None)
        sys.argv = list(req["argv"])
        sys.path[:] = [os.path.dirname(sys.argv[0])] + [
            p for p in req["path"][1:] if p]
        _thread_limits(os.environ)
        import random

        random.seed()                # a fresh process's unseeded generators, not the server's
        try:
            import numpy as np

            np.random.seed()
        except ImportError:
            pass
        import runpy

        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        try:
            import atexit

            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    finally:
        os._exit(code)


def _thread_limits(env: dict) -> None:
    """The thread counts Snakemake gives the job (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``
    = its ``threads``): a cold job's BLAS and OpenMP read them as they load; here they were
    loaded by the server, so they are set now (threadpoolctl), to the same numbers."""
    blas, omp = env.get("OPENBLAS_NUM_THREADS"), env.get("OMP_NUM_THREADS")
    if not (blas or omp):
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    if blas and blas.isdigit():
        threadpool_limits(int(blas), user_api="blas")
    if omp and omp.isdigit():
        threadpool_limits(int(omp), user_api="openmp")


def _supervise(conn: socket.socket) -> None:
    """In a fork of the server: take one job, fork it, relay its signals and exit status."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        fds: list[int] = []
        req = _recv(conn, fds)
        if os.path.realpath(req.get("executable", "")) != os.path.realpath(sys.executable):
            _send(conn, {"refuse": f"the server runs {sys.executable}"})
            return
        if len(fds) != 3:
            _send(conn, {"refuse": "expected the job's three standard streams"})
            return
        _send(conn, {"ready": True})
        try:
            if "go" not in _recv(conn):
                return
        except (OSError, EOFError, ValueError):
            return                   # the launcher gave up waiting and starts cold
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run_job(req, fds)
        for fd in fds:
            os.close(fd)
        _send(conn, {"pid": pid})
        import select

        pidfd = os.pidfd_open(pid)
        lost = False
        while True:
            ready, _, _ = select.select([conn, pidfd], [], [])
            if pidfd in ready:
                break
            try:
                msg = _recv(conn)
            except (OSError, EOFError, ValueError):
                lost = True          # the launcher died: so does its job, with its children
                _kill_group(pid, signal.SIGKILL)
                break
            if "signal" in msg:
                _kill_group(pid, int(msg["signal"]))
        _, status, usage = os.wait4(pid, 0)
        if not lost:
            _send(conn, {"rc": _exit_code(status), "maxrss_mb": usage.ru_maxrss / 1024,
                         "cpu_s": usage.ru_utime + usage.ru_stime})
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def serve(path: str, owner: int | None = None, idle: float = IDLE_S,
          preload: tuple[str, ...] = PRELOAD, extras: tuple[str, ...] = EXTRAS) -> None:
    """Import ``preload``, then fork a supervisor per connection on the Unix socket ``path``
    until ``owner`` (a pid) exits or no job came for ``idle`` seconds; import ``extras``
    one at a time whenever no connection is waiting."""
    import gc
    import importlib
    import select

    t0 = time.monotonic()
    for name in preload:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()                      # forks share these pages; nobody walks them again
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # supervisors are reaped by the kernel
    stop = {"now": False}

    def halt(_signum: int, _frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, halt)
    signal.signal(signal.SIGINT, halt)
    tmp = f"{path}.{os.getpid()}.tmp"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(tmp)
    finally:
        os.umask(old)
    server.listen(64)
    os.replace(tmp, path)            # clients see a socket only once it answers
    print(f"weince warm server {os.getpid()}: {', '.join(preload)} imported in "
          f"{time.monotonic() - t0:.1f} s; listening on {path}", flush=True)
    pending = list(extras)
    last = time.monotonic()
    served = 0
    try:
        while not stop["now"]:
            if owner is not None and not _alive(owner):
                break
            if time.monotonic() - last > idle:
                break
            try:
                ready, _, _ = select.select([server], [], [], 0.0 if pending else 1.0)
            except InterruptedError:
                continue
            if not ready:
                if pending:
                    _import_extra(pending.pop(0))
                continue
            conn, _ = server.accept()
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            if uid != os.getuid():
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                server.close()
                _supervise(conn)
            conn.close()
            served += 1
            last = time.monotonic()
    finally:
        server.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        print(f"weince warm server {os.getpid()}: stopped after {served} jobs", flush=True)


def _import_extra(name: str) -> None:
    import gc
    import importlib

    t0 = time.monotonic()
    try:
        importlib.import_module(name)
    except Exception as e:           # an optional extra (no transformers): jobs import it
        print(f"weince warm server: {name} not imported ({type(e).__name__}: {e})",
              flush=True)
        return
    gc.freeze()
    print(f"weince warm server: {name} imported in {time.monotonic() - t0:.1f} s",
          flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------- Snakefile side
MIN_JOBS = 8   # fewer jobs than this: the server's own imports would cost what it saves


def wanted(config: dict, workflow: Any) -> bool:
    """The profile asks for it, the run has at least ``MIN_JOBS`` jobs to run, and they run
    here, on this Python, as processes: not on a cluster's nodes, not in a container or
    conda env, not as threads; Linux (pidfd)."""
    if not config.get("warm_start") or not hasattr(os, "pidfd_open"):
        return False
    try:
        methods = workflow.deployment_settings.deployment_method
        return bool(workflow.local_exec and workflow.is_main_process
                    and not workflow.use_threads and not methods
                    and len(workflow.dag) >= MIN_JOBS)
    except (AttributeError, TypeError):   # another Snakemake's workflow object: stay cold
        return False


def start_server(log: str | os.PathLike, *, owner: int | None = None) -> str:
    """Start a server in the background for the calling process (Snakemake's), logging to
    ``log`` (the Snakefile: ``.snakemake/log/weince-warm-<profile>.log``), point ``ENV``
    at its socket in this process's environment (jobs inherit it), return the socket's
    path. Jobs that start before it listens (its imports take a few seconds) start cold."""
    import subprocess

    owner = os.getpid() if owner is None else owner
    path = os.path.join(tempfile.gettempdir(),
                        f"weince-warm-{os.getuid()}-{owner}-{os.urandom(3).hex()}.sock")
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        subprocess.Popen([sys.executable, "-m", "weince.pipeline.warm", path, str(owner)],
                         stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)
    os.environ[ENV] = path
    return path


def stop_server() -> None:
    """Ask this process's server to stop (Snakefile ``onsuccess`` / ``onerror``); the jobs
    it runs finish on their own. Later jobs of this process start cold."""
    path = os.environ.pop(ENV, None)
    if not path:
        return
    try:
        os.unlink(path)              # no new connections; the server sees its owner leave
    except OSError:
        pass


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m weince.pipeline.warm",
                                 description="the warm server of weince's rules' jobs")
    ap.add_argument("socket", help="path of the Unix socket to listen on")
    ap.add_argument("owner", nargs="?", type=int, help="stop when this pid exits")
    ap.add_argument("--idle", type=float, default=IDLE_S, help="stop after this many "
                    f"seconds without a job (default {IDLE_S:.0f})")
    ap.add_argument("--preload", default=",".join(PRELOAD),
                    help="comma-separated modules to import before answering")
    ap.add_argument("--extras", default=",".join(EXTRAS),
                    help="comma-separated modules to import between jobs")
    args = ap.parse_args(argv)
    serve(args.socket, owner=args.owner, idle=args.idle,
          preload=tuple(m for m in args.preload.split(",") if m),
          extras=tuple(m for m in args.extras.split(",") if m))


if __name__ == "__main__":   # run as the importable module, whose flags the jobs read
    from weince.pipeline.warm import main as _main

    _main()
