"""Count the jobs and the GPU-hours a profile asks a SLURM cluster for (a dry run).

    python workflow/tools/plan.py                              # paper grid
    python workflow/tools/plan.py --configfile config/smoke.yaml
    python workflow/tools/plan.py --markdown > plan.md
    python workflow/tools/plan.py --submissions          # + sbatch calls, arrays and groups

It runs ``snakemake --dry-run --forceall`` with the SLURM profile (nothing is submitted,
nothing needs SLURM installed: without snakemake-executor-plugin-slurm, the ``[slurm]``
extra, the dry run uses a copy of the profile without its executor settings, which keeps
every resource the jobs would ask for), reads each job's resources from the dry-run listing and
prints, per rule: the number of jobs, the GPUs per job, the requested wall time per job
(``runtime``, minutes) and the total ``jobs x gpus x runtime`` (GPU-hours). Wall times
are the limits the config requests (``sbatch -t``), so the total is an upper bound of
what the grid costs; the real durations are in each run's ``train.json`` (``wall_s``)
and ``results/<profile>/benchmarks/`` afterwards. (CPU-hours are not summed: a dry run
does not print the jobs' threads.)

``--forceall`` counts the whole grid as if nothing had run yet; ``--outstanding`` counts
only the jobs still to run in this checkout. ``--submissions`` also counts the ``sbatch``
calls: one per job (a profile without job arrays and groups) and with the profile's
``slurm-array-jobs`` and ``groups``/``group-components`` (:func:`submissions`).

``--gpu NAME --claims`` prints the GPU-hours of every claim and in total, estimated from
counted FLOPs without a GPU (weince.pipeline.cost, docs/cost.md); ``--out FILE`` also writes
that table (docs/cost_claims.md is made so). ``--target FILE --gpu NAME`` prints the jobs
one target needs (a dry run of that target, by rule), its GPU-hours, and the documented
cheaper options with their effect on the run count, the hours and the verdict:

    python workflow/tools/plan.py --gpu h100-sxm --claims --out docs/cost_claims.md
    python workflow/tools/plan.py --target reports/paper/table_c3.md --gpu h100-sxm

``--forecast`` prints instead the measured forecast of a finished rehearsal (the same page
as ``reports/rehearsal/forecast.md``, weince.report.forecast):

    python workflow/tools/plan.py --forecast --configfile config/paper.yaml config/rehearsal.yaml
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"

__all__ = ["JobInfo", "parse_dry_run", "summarise", "submissions", "profile_settings",
           "dry_run", "dry_run_profile", "forecast_text", "load_profile", "target_plan",
           "main"]

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
    rows: "OrderedDict[str, dict]" = OrderedDict()
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
        vals = sorted(values, key=str)
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
    import yaml

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
    import math

    slurm = [j for j in jobs if not j.local and j.output]
    producer = {f: i for i, j in enumerate(slurm) for f in j.output}
    patterns = settings.get("groups", {})
    rows: "OrderedDict[str, dict]" = OrderedDict()

    def row(unit, how):
        return rows.setdefault(unit, {"unit": unit, "rules": set(), "jobs": 0, "before": 0,
                                      "after": 0, "how": how, "_seen": set(), "_waves": {}})

    limit = max(1, int(settings.get("array_limit", 1000)))
    for i, j in enumerate(slurm):
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
    out = []
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
    import importlib.util

    return importlib.util.find_spec(name) is not None


def dry_run_profile(profile: Path, workdir: Path) -> Path:
    """``profile`` itself when its executor plugin is installed; else a copy in ``workdir``
    without the executor and its plugin's settings (``executor:``, ``<executor>-*`` keys),
    which a dry run does not use: the resources (``default-resources``, ``set-resources``)
    and everything else stay as they are, so the plan is the same."""
    import yaml

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
    import tempfile

    if not _has_module("snakemake"):
        raise SystemExit('plan.py needs Snakemake: pip install -e ".[all]"')
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


def forecast_text(configfiles: list[str]) -> str:
    """The forecast page of the rehearsal whose config is ``configfiles`` over the embedded
    default, read from its finished results (weince.report.forecast)."""
    import yaml

    from weince.pipeline.rehearsal import deep_merge, is_rehearsal, prepare_config
    from weince.report.forecast import build_forecast, forecast_markdown

    cfg: dict = {}
    for cf in ["config/config.yaml", *configfiles]:
        path = Path(cf) if Path(cf).exists() else REPO / cf
        deep_merge(cfg, yaml.safe_load(path.read_text()) or {})
    if not is_rehearsal(cfg):
        raise SystemExit("--forecast needs a rehearsal config: --configfile config/paper.yaml "
                         "config/rehearsal.yaml")
    return forecast_markdown(build_forecast(prepare_config(cfg)))


def load_profile(configfiles: list[str]) -> dict:
    """The merged config of ``configfiles`` over the embedded default, as Snakemake sees it."""
    import yaml

    from weince.pipeline.rehearsal import deep_merge, prepare_config

    cfg: dict = {}
    for cf in ["config/config.yaml", *configfiles]:
        path = Path(cf) if Path(cf).exists() else REPO / cf
        deep_merge(cfg, yaml.safe_load(path.read_text()) or {})
    if not Path(cfg.get("claims", "config/claims.yaml")).exists():
        cfg["claims"] = str(REPO / cfg.get("claims", "config/claims.yaml"))
    return prepare_config(cfg)


def _claim_of_target(target: str, cfg: dict) -> str | None:
    """The claim id a target reads (``table_c3.md`` -> C3), None for other targets."""
    from weince.pipeline.claims import load_claims

    m = re.search(r"table_([a-z0-9]+)\.(md|tex)$", target)
    if not m:
        return None
    ids = {c["id"].lower(): c["id"] for c in load_claims(cfg["claims"])["claims"]}
    if m.group(1) not in ids:
        raise SystemExit(f"{target}: no claim {m.group(1).upper()} in {cfg['claims']}")
    return ids[m.group(1)]


def target_plan(target: str, configfiles: list[str], gpu: str, jobs=None) -> str:
    """The plan of one target: its jobs by rule (``jobs``: a parsed dry run of the target),
    its GPU-hours on ``gpu`` and the cheaper options' effect (weince.pipeline.cost)."""
    from weince.pipeline.cost import (CHEAPER_OPTIONS, claim_rows, estimate, hours_range,
                                      with_overlay)

    cfg = load_profile(configfiles)
    cid = _claim_of_target(target, cfg)

    def row(c):
        rows = claim_rows(estimate(c, gpu), c)
        return next(r for r in rows if r["id"] == (cid or "total"))

    base = row(cfg)
    est = estimate(cfg, gpu)
    L = [f"Plan for {target} ({', '.join(configfiles)}), an estimate for --gpu {est.gpu} "
         f"({est.device['name']}):", ""]
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
            if j.rule in ("pretrain", "simcse") and j.output:
                parts = Path(j.output[0]).parts
                key = ("/".join(parts[3:5]) if j.rule == "pretrain" else f"text/{parts[3]}")
                s = est.settings.get(key)
                if s is not None:
                    lo, hi, n = lo + s.hours[0], hi + s.hours[1], n + 1
        L.append(f"training jobs of that dry run: {n}; GPU-hours {hours_range(lo, hi)} "
                 f"(every run the target's inputs reach, not only the claim's rows)")
    L += [f"training runs: {base['runs']} ({'the rows of claim ' + cid if cid else 'every run'})"
          f"; GPU-hours: {hours_range(base['low'], base['high'])} ({base['source']})", "",
          "Cheaper documented options (docs/protocol.md):", ""]
    for opt in CHEAPER_OPTIONS:
        r = row(with_overlay(cfg, opt["overlay"]))
        L.append(f"- `{opt['key']}`: {r['runs']} training runs (now {base['runs']}), "
                 f"GPU-hours {hours_range(r['low'], r['high'])}; verdict: {opt['verdict']}")
    L += ["", "Assumptions:"] + [f"- {a}" for a in est.assumptions]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", nargs="*", default=["config/paper.yaml"],
                   help="config file(s) of the profile to plan (default: config/paper.yaml)")
    p.add_argument("--profile", default=str(SLURM_PROFILE), help="Snakemake profile folder "
                   "(default: workflow/profiles/slurm)")
    p.add_argument("--outstanding", action="store_true",
                   help="count only jobs still to run here (default: the whole grid)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--submissions", action="store_true",
                   help="also count the sbatch calls: one per job (without arrays and "
                        "groups) and with the profile's job arrays and groups")
    p.add_argument("--forecast", action="store_true",
                   help="print the measured cost forecast of a finished rehearsal instead")
    p.add_argument("--gpu", help="estimate GPU-hours for this GPU (weince.pipeline.cost: "
                   "h100-sxm h100-pcie h200 a100-40gb a100-80gb l40s)")
    p.add_argument("--claims", action="store_true",
                   help="with --gpu: GPU-hours per claim and in total (no dry run)")
    p.add_argument("--target", help="with --gpu: the plan of one target, e.g. "
                   "reports/paper/table_c3.md")
    p.add_argument("--out", help="with --claims: also write the table to this file")
    args = p.parse_args(argv)

    if (args.claims or args.target) and not args.gpu:
        p.error("--claims and --target need --gpu NAME (e.g. --gpu h100-sxm)")
    for cf in args.configfile:
        if not (REPO / cf).exists() and not Path(cf).exists():
            p.error(f"config file {cf} not found (relative paths are taken from {REPO})")
    if args.forecast:
        print(forecast_text(args.configfile))
        return 0
    if args.claims:
        from weince.pipeline.cost import claims_markdown

        text = claims_markdown(load_profile(args.configfile), args.gpu,
                               " ".join(args.configfile))
        if args.out:
            Path(args.out).write_text(
                f"<!-- generated by: python workflow/tools/plan.py --configfile "
                f"{' '.join(args.configfile)} --gpu {args.gpu} --claims --out {args.out} -->\n"
                + text)
        print(text)
        return 0
    if args.target:
        listing = dry_run(args.configfile, Path(args.profile), forceall=True,
                          extra=[args.target])
        print(target_plan(args.target, args.configfile, args.gpu, parse_dry_run(listing)))
        return 0
    text = dry_run(args.configfile, Path(args.profile), forceall=not args.outstanding)
    rows = summarise(parse_dry_run(text))
    try:
        from tabulate import tabulate
    except ImportError:
        raise SystemExit('plan.py needs tabulate: pip install -e ".[all]"') from None

    headers = {"rule": "rule", "jobs": "jobs", "gpus_per_job": "GPUs/job",
               "runtime_min": "walltime/job (min)", "partition": "partition",
               "gpu_hours": "GPU-hours"}
    table = [[r[k] if not isinstance(r[k], float) else round(r[k], 1) for k in headers]
             for r in rows]
    fmt = "github" if args.markdown else "simple"
    print(f"Plan for {', '.join(args.configfile) or 'the default config'} with profile "
          f"{os.path.relpath(args.profile, REPO)} "
          f"({'outstanding jobs' if args.outstanding else 'whole grid, --forceall'}):\n")
    print(tabulate(table, headers=list(headers.values()), tablefmt=fmt))
    total = rows[-1]
    print(f"\n{total['jobs']} SLURM jobs, {total['gpu_jobs']} of them on GPUs; GPU-hours = "
          f"sum over jobs of GPUs x requested walltime (an upper bound).")
    if args.submissions:
        sub = submissions(parse_dry_run(text), profile_settings(Path(args.profile)))
        keys = {"unit": "rule or group", "rules": "rules", "jobs": "jobs",
                "before": "sbatch, one per job", "after": "sbatch, arrays + groups",
                "how": "how"}
        print("\nsbatch calls (submissions):\n")
        print(tabulate([[r[k] for k in keys] for r in sub], headers=list(keys.values()),
                       tablefmt=fmt))
        t = sub[-1]
        print(f"\n{t['before']} sbatch calls one job per call; {t['after']} with the "
              f"profile's job arrays and groups ({t['after'] / max(t['before'], 1):.1%}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
