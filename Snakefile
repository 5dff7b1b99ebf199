"""WEINCE reproduction workflow: every claim's table, with verdicts, from one command.

    snakemake --cores 2                                  # embedded default -> reports/default/
    snakemake --cores 2 --configfile config/smoke.yaml   # smallest sizes (tests)
    snakemake --configfile config/paper.yaml --workflow-profile workflow/executors/slurm   # paper grid
    snakemake --cores 2 reports/default/table_c3.md      # the claim tables, not the summary

Containers: add `--sdm apptainer --apptainer-args "--nv"` to run every rule in the pinned
image (config key `container`).
"""

from snakemake.utils import min_version

from weince.pipeline.config_check import (
    check_config,
    retype_overrides,
    set_run_environment,
)
from weince.cost.disk import check_disk, dag_jobs, warn_after_dry_run
from weince.pipeline import preflight
from weince.pipeline.preflight import check_data
from weince.pipeline.profile import CONFIG_SCHEMA, Profile
from weince.pipeline.digests import export_run_args

min_version("9.0")


configfile: "config/config.yaml"


# every refusal below ends the run with its reason alone (no traceback)
with preflight.refusals():
    # one profile = one config file; unknown keys and bad values stop here, naming the
    # file (--config values, nested ones typed as YAML like the top-level ones, are named
    # as such). Its size comes first: aliases expanding past a bound are refused before
    # anything walks them
    check_config(
        config,
        CONFIG_SCHEMA,
        [*workflow.configfiles, *(workflow.overwrite_configfiles or [])],
        command_line=retype_overrides(config, workflow.config_settings.config),
        workflow_dir=f"{workflow.basedir}/workflow",
    )
    # the profile, resolved once (schema defaults, {data_root} placeholders, a rehearsal's
    # CPU sizes), typed without checking it again: every rule below takes PROFILE, never
    # the raw config
    PROFILE = Profile.of(config, checked=True)
    # offline: HF_HUB_OFFLINE=1 for every job (transformers reads it at import); the site
    # label (`--config site=NAME`) reaches every job's result provenance
    set_run_environment(PROFILE, site=config.get("site"))
    # this run's --configfile and --config, for the rebuild command a job's error names
    export_run_args(workflow.overwrite_configfiles or [], workflow.config_settings.config)
    # the data sets the profile reads: each missing path and how to obtain it, before
    # planning
    check_data(PROFILE)
    # a dry run prices the disk its jobs need too, once they are planned (a warning)
    if not preflight.skipped():
        warn_after_dry_run(PROFILE, workflow)


container: PROFILE.container


include: "workflow/rules/common.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/tail.smk"
include: "workflow/rules/link.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/simcse.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/norms.smk"
include: "workflow/rules/synthetic.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/rehearsal.smk"
include: "workflow/rules/fused.smk"


onstart:
    # before Snakemake deletes any output: the output folders writable, this profile's run
    # lock (one live run per profile, whatever other profiles run beside it), no job of
    # another live run in its results, the disk space it needs; each refusal one line
    preflight.on_start(PROFILE)
    # the peak disk of the jobs this run will run (the requested targets, what is missing)
    # against the free space and the user's quota (disk.quota)
    with preflight.refusals():
        if not preflight.skipped():
            check_disk(
                PROFILE,
                workflow.cores if workflow.local_exec else workflow.nodes,
                jobs=dag_jobs(workflow.dag),
            )


rule all:
    default_target: True
    input:
        all_targets(PROFILE),
