# One job per vision encoder (`vision_jobs: per_encoder`, the embedded default): the steps an
# encoder needs (weince.pipeline.fused.vision_chains) in one interpreter, each by its own
# rule's script with that rule's inputs, outputs, log and params. One rule per set of
# steps, its `run` wildcard constrained to the encoders with those steps; it takes
# precedence over the per-step rules for them, which still make any other file.
# `vision_jobs: per_step` (every other shipped profile) defines none of these rules.

from types import SimpleNamespace

from weince.pipeline.fused import STEPS, run_wildcards, step_params, vision_chains

VISION_CHAINS = vision_chains(PROFILE)
RUN = f"{RESULTS}/{{profile}}/vision/{{run}}"


def chain_params(steps):
    """Every step's params (the per-step rules' own values: the rerun triggers)."""

    def params(wildcards):
        wc = run_wildcards(wildcards.run)
        return {s: step_params(PROFILE, s, wc) for s in steps}

    return params


def chain_input(steps):
    """The selection of a final grid arm's run (before its pretraining), or the encoder
    of a run another rule trains or adopts."""

    def inputs(wildcards):
        if "pretrain" in steps:
            wc = dict(run_wildcards(wildcards.run), profile=wildcards.profile)
            sel = selection_input(SimpleNamespace(**wc))
            return {"selection": sel} if sel else {}
        return {"encoder": f"{RUN}/encoder.pt".format(**wildcards)}

    return inputs


def chain_outputs(steps):
    out = {}
    for s in steps:
        for key, name in STEPS[s].outputs.items():
            path = f"{RUN}/{name}"
            if name == "features.pt" and not PROFILE.keep_features:
                path = temp(path)
            out[f"{s}__{key}"] = path
    return out


def chain_priority(wildcards):
    return grid_chain_priority(SimpleNamespace(**run_wildcards(wildcards.run)))


for _n, (_steps, _tags) in enumerate(VISION_CHAINS.items(), start=1):

    rule:
        name:
            f"vision_run_{_n}"
        input:
            unpack(chain_input(_steps)),
        output:
            **chain_outputs(_steps),
        log:
            **{s: f"{LOGS}/{STEPS[s].log}/{{run}}.log" for s in _steps},
        benchmark:
            f"{BENCH}/vision_run/{{run}}.tsv"
        wildcard_constraints:
            run="|".join(re.escape(t) for t in _tags),
        priority: chain_priority
        retries: training_retries("vision") if "pretrain" in _steps else None
        threads: max(threads_for(s) for s in _steps)
        resources:
            **resources_for("pretrain" if "pretrain" in _steps else "features"),
        params:
            steps=list(_steps),
            settings=chain_params(_steps),
        script:
            "../scripts/vision_run.py"

    for _s in _steps:
        workflow.ruleorder(f"vision_run_{_n}", _s)
