"""Log redirection for the rules' scripts.

    from weince.pipeline.logs import log_to
    with log_to(snakemake.log[0]):
        ...
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Iterator

__all__ = ["log_to"]


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None, resources: Any = None,
           device: str | None = None) -> Iterator[None]:
    """Send stdout, stderr and ``logging`` of a rule's script to its log file.

    ``resources`` (the rule's ``snakemake.resources``): a job given ``gpu >= 1`` that sees
    no CUDA device fails at once, with the reason in its log
    (:func:`weince.utils.device.require_gpu`), unless the profile's ``device`` is ``cpu``:
    then the GPUs are slots asked for on purpose (a CPU/gloo run of the multi-GPU rule).

    Start-up and exit cost more than the work in most of the DAG's ~100 small jobs, and
    much of that is the garbage collector walking the ~10^6 objects that importing torch,
    torch._dynamo (every optimiser) and transformers create: see :func:`_quiet_start_up`.
    Nothing is skipped: files are closed and exit handlers run as before.

    With a warm server running (``warm_start``, :mod:`weince.pipeline.warm`) the job is
    handed to a fork of it here, before anything is imported, and this process exits with
    the job's status; the fork runs the script again and passes through here as usual."""
    from weince.pipeline.warm import hand_off

    hand_off(path)
    gpus = int(getattr(resources, "gpu", 0) or 0) if resources is not None else 0
    if str(device or "").strip().lower() == "cpu":
        gpus = 0
    with _quiet_start_up():
        if not path:
            _check_gpu(gpus, path)
            yield
            return
        with _redirected(path):
            _check_gpu(gpus, path)
            yield


@contextlib.contextmanager
def _redirected(path: str | os.PathLike) -> Iterator[None]:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        try:
            yield
        except SystemExit as e:   # a deliberate exit (e.g. SIGTERM: checkpoint written)
            print(f"exit {e.code}: {e}", file=fh)
            raise
        except BaseException:
            traceback.print_exc(file=fh)  # the log names the error; snakemake shows the log
            raise
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            root.removeHandler(handler)


START_UP_S = 10.0   # longer than the imports of the heaviest job (SimCSE: ~8 s on 2 cores)


@contextlib.contextmanager
def _quiet_start_up(seconds: float = START_UP_S) -> Iterator[None]:
    """No garbage collection during a job's first ``seconds`` (its imports), none at exit.

    While modules load, the collector's full passes walk a heap that keeps growing (about
    0.5 s of a 2 s job); at the interpreter's exit it walks it all again (another 0.5 s).
    So collection is off for the first ``seconds``; then (a timer thread) everything alive
    is frozen (:func:`gc.freeze`: the loaded modules, never garbage) and collection resumes
    as usual, so a long training run collects its cycles like any other program. A job that
    ends sooner never collects: the cycles a few seconds can make are a few MB at most. On
    the way out everything alive is frozen too, so the exit does not walk it; the
    collector's state is restored (this runs in-process under the tests too). A process
    forked meanwhile (a data loader's worker) collects as usual from its start."""
    was_enabled = gc.isenabled()
    gc.disable()
    _QUIET["restore"] = was_enabled

    def resume() -> None:
        _QUIET["restore"] = False
        gc.freeze()
        if was_enabled:
            gc.enable()

    timer = threading.Timer(seconds, resume)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        resume()


_QUIET = {"restore": False}   # a quiet start-up is on, and collection was on before it


def _after_fork_in_child() -> None:
    if _QUIET["restore"]:   # the timer thread is not in the child: collect from the start
        _QUIET["restore"] = False
        gc.enable()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_gpu(gpus: int, log: Any) -> None:
    if gpus:
        from weince.utils.device import require_gpu

        require_gpu(gpus, f"the job logging to {log}" if log else "this job")
