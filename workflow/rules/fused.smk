# Fused vision jobs (`vision_jobs: per_arm`, the embedded default, or `per_encoder`): the
# steps an encoder needs (weince.pipeline.fused.vision_chains) in one interpreter, each by
# its own rule's script with that rule's inputs, outputs, log and params; `per_arm` runs
# every seed of an arm in one job, one after the other, each with the steps it needs. One
# rule per set of seeds and their steps (weince.pipeline.fused.vision_jobs), its `prefix`
# wildcard (dataset/backbone/arm) constrained to the arms with those seeds and steps; it
# takes precedence over the per-step rules for them, which still make any other file.
# `vision_jobs: per_step` (every other shipped profile) defines none of these rules.

from types import SimpleNamespace

from weince.pipeline.fused import (
    STEPS,
    log_key,
    output_key,
    run_wildcards,
    step_params,
    vision_jobs,
)

VISION_JOBS = vision_jobs(PROFILE)
PREFIX = f"{RESULTS}/{{profile}}/vision/{{prefix}}"


def _wildcards(prefix, seed):
    return run_wildcards(f"{prefix}/seed{seed}")


def chain_params(runs):
    """Every run's steps' params (the per-step rules' own values: the rerun triggers)."""

    def params(wildcards):
        return {
            x: {
                s: step_params(PROFILE, s, _wildcards(wildcards.prefix, x))
                for s in steps
            }
            for x, steps in runs
        }

    return params


def chain_input(runs):
    """The selection of a final grid arm's runs (before their pretraining), and the
    encoders of runs another rule trains or adopts."""

    def inputs(wildcards):
        out = {}
        for x, steps in runs:
            if "pretrain" in steps:
                wc = dict(_wildcards(wildcards.prefix, x), profile=wildcards.profile)
                sel = selection_input(SimpleNamespace(**wc))
                if sel:
                    out["selection"] = sel
            else:
                out[f"encoder__s{x}"] = f"{PREFIX}/seed{x}/encoder.pt".format(
                    **wildcards
                )
        return out

    return inputs


def chain_outputs(runs):
    out = {}
    for x, steps in runs:
        for s in steps:
            for key, name in STEPS[s].outputs.items():
                path = f"{PREFIX}/seed{x}/{name}"
                if name == "features.pt" and not PROFILE.keep_features:
                    path = temp(path)
                out[output_key(s, key, x)] = path
    return out


def chain_priority(wildcards):
    """2 for the grid's chain (its points, then the final grid arm), 1 for the other arms:
    a vision job is the longest kind, so a ready one starts before the claim tables and
    reports, which then fill the gaps, and none is left running alone at the end."""
    arm = wildcards.prefix.rsplit("/", 1)[-1]  # prefix: dataset/backbone/arm
    return 1 + grid_chain_priority(SimpleNamespace(arm=arm))


for _n, (_runs, _prefixes) in enumerate(VISION_JOBS.items(), start=1):
    _steps = sorted({s for _, steps in _runs for s in steps}, key=list(STEPS).index)

    rule:
        name:
            f"vision_run_{_n}"
        input:
            unpack(chain_input(_runs)),
        output:
            **chain_outputs(_runs),
        log:
            **{
                log_key(s, x): f"{LOGS}/{STEPS[s].log}/{{prefix}}/seed{x}.log"
                for x, steps in _runs
                for s in steps
            },
        benchmark:
            f"{BENCH}/vision_run/{{prefix}}/seed{'+'.join(x for x, _ in _runs)}.tsv"
        wildcard_constraints:
            prefix="|".join(re.escape(t) for t in _prefixes),
        priority: chain_priority
        retries: training_retries("vision") if "pretrain" in _steps else None
        threads: max(threads_for(s) for s in _steps)
        resources:
            **resources_for("pretrain" if "pretrain" in _steps else "features"),
        params:
            steps={x: list(steps) for x, steps in _runs},
            settings=chain_params(_runs),
        script:
            "../scripts/vision_run.py"

    for _s in _steps:
        workflow.ruleorder(f"vision_run_{_n}", _s)
