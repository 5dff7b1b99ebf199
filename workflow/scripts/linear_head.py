"""Snakemake adapter: linear probe on projection-head features (the `features` ablation)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.linear import linear_probe
    from weince.pipeline.digests import check_derived
    from weince.pipeline.profile import Profile
    from weince.pipeline.protocol import probe_kwargs
    from weince.pipeline.stages import job_settings
    from weince.utils import write_json
    from weince.utils.results import reading

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    full = probe_kwargs(prof, snakemake.wildcards.arm)
    kwargs = job_settings(snakemake.params.kwargs, full, device=prof.vision.linear.device)
    kwargs["feature"] = "head"
    inputs = check_derived(snakemake.input[0], "features", prof)
    with reading(inputs):
        write_json(snakemake.output[0], linear_probe(snakemake.input[0], **kwargs), cfg=kwargs)
