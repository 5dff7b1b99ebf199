"""The time and memory of every job of a run, from the files of the rules' ``benchmark:``.

Every rule writes ``results/<profile>/benchmarks/<rule>/<job>.tsv`` (a rule with a single
job: ``benchmarks/<name>.tsv``), Snakemake's columns ``s`` (wall seconds), ``max_rss`` (MB),
``cpu_time``, ... . ``weince job-times`` prints them per rule; the rehearsal's forecast reads
them (:mod:`weince.cost.forecast`).

    from weince.cost.job_times import job_times, per_rule
    rows = per_rule(job_times("results/default/benchmarks"))
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JobTime", "RuleTime", "job_times", "per_rule"]


@dataclass(frozen=True)
class JobTime:
    rule: str
    job: str            # the benchmark file relative to the folder, without ``.tsv``
    seconds: float
    max_rss_mb: float | None
    cpu_seconds: float | None


@dataclass(frozen=True)
class RuleTime:
    rule: str
    jobs: int
    total_s: float
    mean_s: float
    max_s: float
    max_rss_mb: float | None


def _number(value: str | None) -> float | None:
    if value in (None, "", "NA", "-"):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def job_times(folder: str | os.PathLike) -> list[JobTime]:
    """One entry per benchmark file under ``folder`` (none when it does not exist); a file
    Snakemake left unreadable or half-written is skipped. With ``--benchmark-repeats`` a
    file has a row per repeat: the longest time and the highest peak memory count."""
    base = Path(folder)
    out: list[JobTime] = []
    if not base.is_dir():
        return out
    for f in sorted(base.rglob("*.tsv")):
        rel = f.relative_to(base)
        rule = rel.parts[0] if len(rel.parts) > 1 else f.stem
        try:
            with f.open() as fh:
                rows = list(csv.DictReader(fh, delimiter="\t"))
        except (OSError, csv.Error):
            continue
        timed = [(s, row) for row in rows if (s := _number(row.get("s"))) is not None]
        if timed:
            s, row = max(timed, key=lambda t: t[0])
            rss = [m for r in rows if (m := _number(r.get("max_rss"))) is not None]
            peak, cpu = (max(rss) if rss else None), _number(row.get("cpu_time"))
            out.append(JobTime(rule, rel.with_suffix("").as_posix(), s, peak, cpu))
    return out


def per_rule(times: list[JobTime]) -> list[RuleTime]:
    """Jobs, total, mean and longest wall seconds and peak memory per rule, the rule with
    the most total time first."""
    by: dict[str, list[JobTime]] = {}
    for t in times:
        by.setdefault(t.rule, []).append(t)
    rows = []
    for rule, ts in by.items():
        total = sum(t.seconds for t in ts)
        rss = [t.max_rss_mb for t in ts if t.max_rss_mb is not None]
        rows.append(RuleTime(rule, len(ts), total, total / len(ts),
                             max(t.seconds for t in ts), max(rss) if rss else None))
    return sorted(rows, key=lambda r: (-r.total_s, r.rule))
