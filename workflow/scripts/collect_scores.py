"""Snakemake adapter: similarity scores of a frozen encoder (weince.evt)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.scores import collect_score_file
    from weince.pipeline.digests import check_encoder, record_derived
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_settings

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what vision.evt.collect sets, as written, with its device and data root (the
    # profile's unless it sets them); collect_score_file's defaults fill the rest
    c = prof.vision.evt.collect
    kwargs = job_settings(snakemake.params.kwargs, prof.vision.evt.collect_given,
                          device=c.device, data_root=c.data_root)
    inputs = check_encoder(snakemake.input.encoder, prof)
    collect_score_file(snakemake.input.encoder, snakemake.output[0], **kwargs)
    record_derived(snakemake.output[0], inputs)   # its digest, for the jobs that read it
