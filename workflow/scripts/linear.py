"""Snakemake adapter: linear probe on cached features (weince.eval.linear)."""

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
    from weince.utils.runlock import hold_run_lock

    hold_run_lock(snakemake.output[0])   # one writer per output file
    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what vision.linear sets, as written, with its device (linear_probe's defaults fill the rest)
    full = probe_kwargs(prof, snakemake.wildcards.arm)
    kwargs = job_settings(snakemake.params.kwargs, full, device=prof.vision.linear.device)
    # the features as their job wrote them, and the encoder they came from, in the result
    inputs = check_derived(snakemake.input[0], "features", prof)
    result = linear_probe(snakemake.input[0], **kwargs)
    with reading(inputs):
        write_json(snakemake.output[0], result, cfg=kwargs)
