"""The SLURM jobs of one workflow folder, for ``weince progress`` (weince.cost.progress).

Snakemake's ``slurm`` executor leaves two traces in the folder it runs in, and this module
reads nothing else besides ``sacct``:

- ``.snakemake/log/*.snakemake.log``: each run's ``SLURM run ID: <name>`` line; every job
  of that run carries the name as its SLURM job name, so ``sacct --name`` finds this
  folder's jobs (pending ones included) and no one else's;
- ``.snakemake/slurm_logs/<rule_x|group_x>/.../<jobid>[_<task>].log``: one log per job that
  started; inside, each ``localrule <rule>:`` block the job executed names that job's own
  log (``    log: results/<profile>/logs/...``). That is how a job, or an array task
  (whose ``--comment`` names the array's first member only), is tied to its training run.

    from weince.cost.slurm_jobs import slurm_jobs
    jobs = slurm_jobs(".")        # None: no SLURM run here, or no sacct
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SlurmJob", "SlurmView", "run_names", "job_logs", "parse_sacct", "slurm_jobs",
           "ENDED_BADLY", "INTERRUPTED", "job_order"]

# sacct states of a job that ended without its outputs (sacct(1), "JOB STATE CODES")
ENDED_BADLY = frozenset({"FAILED", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
                         "DEADLINE"})
# ended by the scheduler at its time limit or for a higher-priority job: the run's next
# segment (Snakemake's retry) resumes it from its checkpoint
INTERRUPTED = frozenset({"TIMEOUT", "PREEMPTED"})
LIVE = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT",
                  "RESIZING", "SIGNALING"})
_RUN_ID = re.compile(r"SLURM run ID: (\S+)")
_LOG_NAME = re.compile(r"^(\d+)(?:_(\d+))?\.log$")


@dataclass
class SlurmJob:
    """One SLURM job (or array task) of the folder's runs, as sacct sees it."""

    jobid: str                  # "12" or "12_3" (an array task)
    state: str                  # sacct's State, first word (CANCELLED of "CANCELLED by 0")
    exit_code: str = ""         # sacct's ExitCode, "<code>:<signal>"
    slurm_log: Path | None = None    # .snakemake/slurm_logs/... (None: never started)
    job_logs: tuple[str, ...] = ()   # the logs of the rule jobs it executed

    @property
    def reason(self) -> str:
        return f"SLURM job {self.jobid} {self.state} (exit code {self.exit_code or '?'})"


@dataclass
class SlurmView:
    """The folder's SLURM jobs: every job sacct lists, and per rule job's log the jobs that
    executed it, oldest first."""

    names: list[str]
    jobs: list[SlurmJob] = field(default_factory=list)
    by_log: dict[str, list[SlurmJob]] = field(default_factory=dict)

    def states(self) -> Counter:
        return Counter(j.state for j in self.jobs)

    def latest(self, log: str | os.PathLike) -> SlurmJob | None:
        """The newest SLURM job that executed the rule job of ``log`` (a path relative to
        the workflow folder), None when none did."""
        js = self.by_log.get(os.path.normpath(log))
        return js[-1] if js else None


def job_order(jobid: str) -> tuple[int, int]:
    head, _, task = jobid.partition("_")
    return (int(head) if head.isdigit() else -1, int(task) if task.isdigit() else -1)


def run_names(workdir: str | os.PathLike) -> list[str]:
    """The SLURM run IDs (job names) of every Snakemake run logged in ``workdir``."""
    out: list[str] = []
    for f in sorted((Path(workdir) / ".snakemake" / "log").glob("*.snakemake.log")):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        out += [m for m in _RUN_ID.findall(text) if m not in out]
    return out


def _executed_logs(text: str) -> tuple[str, ...]:
    """The ``log:`` paths of the ``localrule`` blocks a job's SLURM log shows: the jobs it
    executed (an array task's log starts with its array's first member as a ``rule``
    block, so those say nothing); none before the first such block."""
    out: list[str] = []
    local = False
    for line in text.splitlines():
        if line[:1].strip():            # a header: `localrule x:`, `Error in rule x:`, ...
            local = re.match(r"localrule \S+:$", line) is not None
        elif local and line.startswith("    log: "):
            paths = line[len("    log: "):].split(" (")[0]     # no "(check log file(s)...)"
            out += [os.path.normpath(s.strip()) for s in paths.split(",")]
    return tuple(dict.fromkeys(out))


def job_logs(workdir: str | os.PathLike) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """jobid -> (its SLURM log, the rule jobs' logs it names) for every log under
    ``.snakemake/slurm_logs`` of ``workdir``."""
    base = Path(workdir) / ".snakemake" / "slurm_logs"
    out: dict[str, tuple[Path, tuple[str, ...]]] = {}
    if not base.is_dir():
        return out
    for f in base.rglob("*.log"):
        m = _LOG_NAME.match(f.name)
        if not m:
            continue
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        jobid = m.group(1) + (f"_{m.group(2)}" if m.group(2) else "")
        out[jobid] = (f.relative_to(workdir), _executed_logs(text))
    return out


def parse_sacct(text: str) -> list[SlurmJob]:
    """Jobs of ``sacct -X -n -P -o JobID,State,ExitCode`` output; a pending array's
    ``12_[3-5,7]`` line becomes its tasks."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        jid, state = parts[0], (parts[1].split() or ["?"])[0]
        code = parts[2] if len(parts) > 2 else ""
        m = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", jid)
        if not m:
            out.append(SlurmJob(jid, state, code))
            continue
        for piece in m.group(2).split(","):
            lo, _, hi = piece.partition("-")
            out += [SlurmJob(f"{m.group(1)}_{t}", state, code)
                    for t in range(int(lo), int(hi or lo) + 1)]
    return out


def slurm_jobs(workdir: str | os.PathLike, *, timeout: float = 20) -> SlurmView | None:
    """The SLURM jobs of the Snakemake runs of ``workdir`` (module docstring); None where
    no run there used the slurm executor, or ``sacct`` is missing or does not answer."""
    names = run_names(workdir)
    if not names or shutil.which("sacct") is None:
        return None
    try:
        proc = subprocess.run(["sacct", "-X", "-n", "-P", "--starttime=now-60days",
                               "--name", ",".join(names), "-o", "JobID,State,ExitCode"],
                              capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    view = SlurmView(names, jobs=sorted(parse_sacct(proc.stdout),
                                        key=lambda j: job_order(j.jobid)))
    logs = job_logs(workdir)
    for j in view.jobs:
        if j.jobid in logs:
            j.slurm_log, j.job_logs = logs[j.jobid]
        for rel in j.job_logs:
            view.by_log.setdefault(rel, []).append(j)
    return view
