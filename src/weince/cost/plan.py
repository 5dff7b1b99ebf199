"""The dry-run planner: the jobs, GPU-hours and sbatch calls a profile asks a SLURM cluster
for, and the plan of one target (``weince plan``; docs/cluster.md, docs/cost.md).

    weince plan                                       # paper grid, per rule
    weince plan --configfile config/smoke.yaml
    weince plan --markdown > plan.md
    weince plan --submissions                         # + sbatch calls, arrays and groups
    weince plan --gpu h100-sxm --claims --out docs/cost_claims.md
    weince plan --totals --gpu a100-80gb,h100-sxm     # GPU-hours per GPU type and mixed
    weince plan --target reports/paper/table_c3.md --gpu h100-sxm
    weince plan --target reports/paper/table_c3.md --node 8xh100-sxm  # + wall time there
    weince plan --node 8xh100-sxm                     # the whole profile on one 8-GPU machine
    weince plan --forecast --configfile config/paper.yaml config/rehearsal.yaml

It runs ``snakemake --dry-run --forceall`` with the SLURM profile (nothing is submitted,
nothing needs SLURM installed: without snakemake-executor-plugin-slurm, the ``[slurm]``
extra, the dry run uses a copy of the profile without its executor settings, which keeps
every resource the jobs would ask for), reads each job's resources from the dry-run
listing and sums, per rule, the jobs, the GPUs per job, the requested wall time per job
(``runtime``, minutes) and ``jobs x gpus x runtime`` (GPU-hours): an upper bound of what
the grid costs (the real durations are in each run's ``train.json`` and
``results/<profile>/benchmarks/`` afterwards, ``weince job-times``).

``--claims``, ``--totals`` and ``--target`` price the training runs from counted FLOPs and
measured GPU throughputs without a dry run or a GPU (:mod:`weince.cost.estimate`), on the
profile the config files resolve to (:func:`load_profile`: merged over the embedded default
as Snakemake merges them, then :meth:`Profile.of <weince.pipeline.profile.Profile.of>`).
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from weince.cost.disk import disk_estimate, runs_of_jobs, trains, trains_text
from weince.cost.estimate import (CHEAPER_OPTIONS, assumptions, claim_rows, claim_runs,
                                  estimate, hours_range, with_overlay)
from weince.cost.forecast import build_forecast, forecast_markdown
from weince.cost.packing import node_lines, parse_node
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.utils.config import check_yaml_file, deep_merge, parse_yaml

# the checkout this package runs from (an editable install): the Snakefile and configs
REPO = Path(__file__).resolve().parents[3]
SLURM_PROFILE = REPO / "workflow" / "executors" / "slurm"   # Snakemake's --workflow-profile

__all__ = ["REPO", "SLURM_PROFILE", "JobInfo", "parse_dry_run", "summarise", "submissions",
           "check_config_files", "profile_settings", "dry_run", "dry_run_profile",
           "forecast_text", "load_profile", "target_plan", "rule_table", "claim_of_target",
           "node_plan"]

# placeholders so that a dry run works before the user has set the real values
_ENV_DEFAULTS = {
    "WEINCE_SLURM_ACCOUNT": "your_account",
    "WEINCE_SLURM_PARTITION": "your_cpu_partition",
    "WEINCE_SLURM_GPU_PARTITION": "your_gpu_partition",
    # a plan counts jobs: it is made before the data are on disk (the run itself checks them)
    "WEINCE_SKIP_PREFLIGHT": "1",
}

_RULE_RE = re.compile(r"^(\s*)(local)?rule (\S+):\s*$")
_GROUP_RE = re.compile(r"Group job (\S+) \(jobs")
_KV_RE = re.compile(r"(\w+)=([^,]*)")


@dataclass
class JobInfo:
    """One job of the dry-run listing: its rule, whether it runs on the submit host
    (``localrule``), its output files and its resources (strings as printed)."""

    rule: str
    local: bool
    output: list[str] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    threads: int = 1          # snakemake prints `threads:` only when it is above 1
    input: list[str] = field(default_factory=list)
    group: str | None = None  # the group job's id (`groups:` of the profile), if grouped
    group_job: int | None = None  # which group job of the listing (one sbatch each)

    def _int(self, key: str, default: int = 0) -> int:
        try:
            return int(float(self.resources.get(key, default)))
        except ValueError:
            return default

    @property
    def gpus(self) -> int:
        """GPUs requested: ``gpu``/``gpus`` resource, else the count in ``gres=gpu[:type]:N``."""
        n = self._int("gpu") or self._int("gpus")
        if not n and "gres" in self.resources:
            m = re.match(r"gpu(?::[\w.]+)?(?::(\d+))?$", self.resources["gres"].strip())
            if m:
                n = int(m.group(1) or 1)
        return n

    @property
    def cpus(self) -> int:
        """CPUs per job as the executor requests them: cpus_per_task, else threads."""
        return max(1, self._int("cpus_per_task") or self.threads)

    @property
    def runtime_min(self) -> int:
        return self._int("runtime")


def parse_dry_run(text: str) -> list[JobInfo]:
    """Jobs of a ``snakemake --dry-run`` listing (snakemake 9 layout: a ``rule NAME:`` or
    ``localrule NAME:`` line followed by indented ``input:``/``output:``/``threads:``/
    ``resources:`` lines; the jobs of a group job follow a ``Group job ID (...)`` line,
    one level further indented)."""
    jobs: list[JobInfo] = []
    cur: JobInfo | None = None
    group, n_groups = None, 0
    for line in text.splitlines():
        g = _GROUP_RE.search(line)
        if g and not line.startswith(" "):
            group, n_groups, cur = g.group(1), n_groups + 1, None
            continue
        m = _RULE_RE.match(line)
        if m:
            indented = bool(m.group(1))
            if not indented:
                group = None        # an unindented rule: the group job's listing ended
            cur = JobInfo(rule=m.group(3), local=bool(m.group(2)),
                          group=group if indented else None,
                          group_job=n_groups if indented and group else None)
            jobs.append(cur)
            continue
        if not line.startswith("    "):
            if line.strip():
                cur = None          # a block ends at the next unindented line
            continue
        if cur is None:
            continue
        body = line.strip()
        if body.startswith("input:"):
            cur.input = [s.strip() for s in body[len("input:"):].split(",") if s.strip()]
        elif body.startswith("output:"):
            cur.output = [s.strip() for s in body[len("output:"):].split(",") if s.strip()]
        elif body.startswith("threads:"):
            cur.threads = int(body.split(":", 1)[1])
        elif body.startswith("resources:"):
            cur.resources = {k: v.strip() for k, v in _KV_RE.findall(body[len("resources:"):])}
    return jobs


def summarise(jobs: list[JobInfo]) -> list[dict]:
    """Per-rule rows (most GPU-hours first, then most jobs, then by name) and a total row,
    for SLURM jobs only: ``localrule`` jobs and jobs without outputs (aggregation targets
    such as ``all``) run on the submit host."""
    rows: OrderedDict[str, dict] = OrderedDict()
    for j in jobs:
        if j.local or not j.output:
            continue
        r = rows.setdefault(j.rule, {"rule": j.rule, "jobs": 0, "gpus_per_job": set(),
                                     "runtime_min": set(), "partition": set(),
                                     "gpu_hours": 0.0, "gpu_jobs": 0})
        r["jobs"] += 1
        r["gpu_jobs"] += j.gpus > 0
        r["gpus_per_job"].add(j.gpus)
        r["runtime_min"].add(j.runtime_min)
        r["partition"].add(j.resources.get("slurm_partition", "-"))
        r["gpu_hours"] += j.gpus * j.runtime_min / 60.0

    def fmt(values: set) -> str:
        # numbers by value (a range reads low-high), names alphabetically
        vals = sorted(values, key=lambda v: (isinstance(v, str), v if not isinstance(v, str)
                                             else 0, str(v)))
        return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"

    out = []
    # the dry run lists independent jobs in no fixed order: rows go by cost, then name
    for r in sorted(rows.values(), key=lambda r: (-r["gpu_hours"], -r["jobs"], r["rule"])):
        out.append({**r, "gpus_per_job": fmt(r["gpus_per_job"]),
                    "runtime_min": fmt(r["runtime_min"]), "partition": fmt(r["partition"])})
    out.append({"rule": "total", "jobs": sum(r["jobs"] for r in out), "gpus_per_job": "",
                "runtime_min": "", "partition": "",
                "gpu_hours": sum(r["gpu_hours"] for r in out),
                "gpu_jobs": sum(r["gpu_jobs"] for r in out)})
    return out


def profile_settings(profile: Path) -> dict:
    """The job-array and group settings of a profile: ``array_rules`` (set),
    ``array_limit`` (int), ``groups`` (rule -> group id pattern), ``group_components``."""
    cfg = yaml.safe_load((Path(profile) / "config.yaml").read_text()) or {}
    arrays = str(cfg.get("slurm-array-jobs") or "").replace(";", ",")
    return {"array_rules": {r.strip() for r in arrays.split(",") if r.strip()},
            "array_limit": int(cfg.get("slurm-array-limit", 1000)),
            "groups": dict(cfg.get("groups") or {}),
            "group_components": dict(cfg.get("group-components") or {})}


def submissions(jobs: list[JobInfo], settings: dict) -> list[dict]:
    """``sbatch`` calls the SLURM executor makes for the jobs of a dry run, per rule or
    group, before (one per job) and after job arrays and groups.

    - A group job of the listing (Snakemake has already merged ``group-components``
      connected components into it) is one ``sbatch``.
    - The jobs of an array rule go out as one ``sbatch --array`` per batch that becomes
      ready together, split in chunks of ``array_limit``. A batch here is the set of jobs
      with the same upstream jobs (all roots of the DAG are one batch); batches may also
      coincide, so this is an upper bound (it is exact when every job of the rule is a
      root, as for pretraining and SimCSE in every shipped config).
    - Every other job is one ``sbatch``.

    Rows: ``unit`` (rule, or ``group <pattern>``), ``rules``, ``jobs``, ``before``, ``after``,
    ``how``; the last row is the total.
    """
    slurm = [j for j in jobs if not j.local and j.output]
    producer = {f: i for i, j in enumerate(slurm) for f in j.output}
    patterns = settings.get("groups", {})
    rows: OrderedDict[str, dict] = OrderedDict()

    def row(unit, how):
        return rows.setdefault(unit, {"unit": unit, "rules": set(), "jobs": 0, "before": 0,
                                      "after": 0, "how": how, "_seen": set(), "_waves": {}})

    limit = max(1, int(settings.get("array_limit", 1000)))
    for j in slurm:
        if j.group_job is not None:
            unit = f"group {patterns.get(j.rule, j.group)}"
            k = settings.get("group_components", {}).get(patterns.get(j.rule, j.group), 1)
            r = row(unit, f"groups of {k} connected components")
            if j.group_job not in r["_seen"]:
                r["_seen"].add(j.group_job)
                r["after"] += 1
        elif j.rule in settings.get("array_rules", set()):
            r = row(j.rule, f"job arrays (<= {limit} tasks)")
            ups = frozenset(producer[f] for f in j.input if f in producer)
            r["_waves"][ups] = r["_waves"].get(ups, 0) + 1
        else:
            r = row(j.rule, "one job each")
            r["after"] += 1
        r["rules"].add(j.rule)
        r["jobs"] += 1
        r["before"] += 1
    out: list[dict[str, Any]] = []
    for r in rows.values():
        r["after"] += sum(math.ceil(n / limit) for n in r["_waves"].values())
        out.append({k: (", ".join(sorted(v)) if k == "rules" else v)
                    for k, v in r.items() if not k.startswith("_")})
    out.sort(key=lambda r: (-r["before"], r["unit"]))
    out.append({"unit": "total", "rules": "", "jobs": sum(r["jobs"] for r in out),
                "before": sum(r["before"] for r in out),
                "after": sum(r["after"] for r in out), "how": ""})
    return out


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def dry_run_profile(profile: Path, workdir: Path) -> Path:
    """``profile`` itself when its executor plugin is installed; else a copy in ``workdir``
    without the executor and its plugin's settings (``executor:``, ``<executor>-*`` keys),
    which a dry run does not use: the resources (``default-resources``, ``set-resources``)
    and everything else stay as they are, so the plan is the same."""
    cfg = yaml.safe_load((Path(profile) / "config.yaml").read_text()) or {}
    executor = cfg.get("executor")
    if executor in (None, "local", "dryrun", "touch") or \
            _has_module(f"snakemake_executor_plugin_{executor}".replace("-", "_")):
        return Path(profile)
    lean = {k: v for k, v in cfg.items()
            if k != "executor" and not str(k).startswith(f"{executor}-")}
    out = Path(workdir) / "profile"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(lean, sort_keys=False))
    return out


def dry_run(configfiles: list[str], profile: Path, forceall: bool = True,
            extra: list[str] | None = None) -> str:
    """Run snakemake's dry run with ``profile`` and return its listing (stdout+stderr)."""
    if not _has_module("snakemake"):
        raise RuntimeError('weince plan needs Snakemake for a dry run: pip install -e ".[all]"')
    env = {**_ENV_DEFAULTS, **os.environ}
    with tempfile.TemporaryDirectory(prefix="weince-plan-") as tmp:
        return _dry_run(configfiles, dry_run_profile(profile, Path(tmp)), forceall, extra, env)


def _dry_run(configfiles, profile, forceall, extra, env) -> str:
    cmd = [sys.executable, "-m", "snakemake", "--dry-run", "--workflow-profile", str(profile),
           "--nolock"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    if forceall:
        cmd.append("--forceall")
    cmd += list(extra or [])
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake dry run failed (exit {proc.returncode}): "
                           f"{' '.join(cmd)}\n{text[-4000:]}")
    return text


def forecast_text(prof: Profile) -> str:
    """The forecast page of the rehearsal profile ``prof``, read from its finished results
    (weince.cost.forecast)."""
    if not prof.rehearsal.enabled:
        raise ValueError("--forecast needs a rehearsal config: --configfile config/paper.yaml "
                         "config/rehearsal.yaml")
    return forecast_markdown(build_forecast(prof))


def check_config_files(configfiles: list[str]) -> None:
    """Refuse, in one line naming it, a config file whose YAML aliases expand past the
    bound, before Snakemake reads it: Snakemake's own loading copies every mapping of each
    ``--configfile`` into its config before any code of the workflow runs, so an alias
    bomb would grow there first (each candidate path: here, then in the checkout)."""
    for cf in configfiles:
        for path in dict.fromkeys([Path(cf), REPO / cf]):
            if path.is_file():
                check_yaml_file(path, f"config file {cf}")


def _merged(configfiles: list[str]) -> dict:
    cfg: dict = {}
    for cf in ["config/config.yaml", *configfiles]:
        path = Path(cf) if Path(cf).exists() else REPO / cf
        if not path.is_file():
            raise FileNotFoundError(f"config file {cf} not found (relative paths are taken "
                                    f"from the current folder, then from {REPO})")
        deep_merge(cfg, parse_yaml(path.read_text(), f"config file {cf}") or {})
    return cfg


def load_profile(configfiles: list[str]) -> Profile:
    """The profile of ``configfiles`` merged over the embedded default, as Snakemake merges
    them, resolved (:meth:`Profile.of`); a relative claims registry that is not found here
    is the checkout's."""
    cfg = _merged(configfiles)
    if not Path(cfg.get("claims", "config/claims.yaml")).exists():
        cfg["claims"] = str(REPO / cfg.get("claims", "config/claims.yaml"))
    return Profile.of(cfg)


def claim_of_target(target: str, prof: Profile) -> str | None:
    """The claim id a target reads (``table_c3.md`` -> C3), None for other targets."""
    m = re.search(r"table_([a-z0-9]+)\.(md|tex)$", target)
    if not m:
        return None
    ids = {c["id"].lower(): c["id"] for c in load_claims(prof.claims)["claims"]}
    if m.group(1) not in ids:
        raise ValueError(f"{target}: no claim {m.group(1).upper()} in {prof.claims}")
    return ids[m.group(1)]


def target_plan(target: str, prof: Profile, gpu: str, jobs: list[JobInfo] | None = None,
                config_name: str | None = None, node: str | None = None) -> str:
    """The plan of one target of ``prof`` (``config_name``: the config files it came from):
    its jobs by rule (``jobs``: a parsed dry run of the target), its GPU-hours on ``gpu``
    and the cheaper options' effect (weince.cost.estimate); with ``node`` (``8xh100-sxm``)
    also the wall time of its training runs on that machine (weince.cost.packing)."""
    cid = claim_of_target(target, prof)

    def row(p: Profile) -> dict:
        rows = claim_rows(estimate(p, gpu), p)
        return next(r for r in rows if r["id"] == (cid or "total"))

    base = row(prof)
    est = estimate(prof, gpu)
    name = prof.name if config_name is None else config_name
    L = [f"Plan for {target} ({name}), an estimate for {est.label}:", ""]
    if jobs is not None:
        by_rule: dict = {}
        for j in jobs:
            if j.output:
                by_rule[j.rule] = by_rule.get(j.rule, 0) + 1
        L.append("jobs by rule (dry run of the target): " + ", ".join(
            f"{r} {n}" for r, n in sorted(by_rule.items(), key=lambda x: (-x[1], x[0]))))
        lo = hi = 0.0
        n = 0
        for j in jobs:
            if (trains(j) or trains_text(j)) and j.output:
                parts = Path(j.output[0]).parts
                key = ("/".join(parts[3:5]) if trains(j) else f"text/{parts[3]}")
                s = est.settings.get(key)
                if s is not None:
                    lo, hi, n = lo + s.hours[0], hi + s.hours[1], n + 1
        L.append(f"training jobs of that dry run: {n}; GPU-hours {hours_range(lo, hi)} "
                 f"(every run the target's inputs reach, not only the claim's rows)")
        L.append(disk_estimate(prof, runs=runs_of_jobs(jobs)).line())
    L += [f"training runs: {base['runs']} ({'the rows of claim ' + cid if cid else 'every run'})"
          f"; GPU-hours: {hours_range(base['low'], base['high'])} ({base['source']})", ""]
    if node is not None:
        L += node_plan(prof, cid, node) + [""]
    L += ["Cheaper documented options (docs/protocol.md):", ""]
    for opt in CHEAPER_OPTIONS:
        r = row(with_overlay(prof, opt["overlay"]))
        L.append(f"- `{opt['key']}`: {r['runs']} training runs (now {base['runs']}), "
                 f"GPU-hours {hours_range(r['low'], r['high'])}; verdict: {opt['verdict']}")
    L += ["", "Assumptions:"] + [f"- {a}" for a in assumptions(est)]
    return "\n".join(L) + "\n"


def node_plan(prof: Profile, cid: str | None, node: str) -> list[str]:
    """The lines of ``--node``: claim ``cid``'s training runs (every run for None) priced on
    the node's GPU, and their wall time on it alone and packed (weince.cost.packing)."""
    _, gpu = parse_node(node)
    est = estimate(prof, gpu)
    runs = claim_runs(est, prof, cid)
    return node_lines(runs, est.total(runs), node, prof)


RULE_HEADERS = {"rule": "rule", "jobs": "jobs", "gpus_per_job": "GPUs/job",
                "runtime_min": "walltime/job (min)", "partition": "partition",
                "gpu_hours": "GPU-hours"}


def rule_table(rows: list[dict]) -> list[list]:
    """The rows of :func:`summarise` as table cells (GPU-hours to one decimal)."""
    return [[r[k] if not isinstance(r[k], float) else round(r[k], 1) for k in RULE_HEADERS]
            for r in rows]
