"""Snakemake adapter: frozen features of one encoder (weince.eval.features)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.features import extract_features
    from weince.pipeline.digests import check_encoder, record_derived
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import extraction_kwargs, job_config
    from weince.utils.checkpoint import release_checkpoint

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what vision.features sets, as written, with its device and data root (the profile's
    # unless it sets them); extract_features' defaults fill the rest
    kwargs = extraction_kwargs(prof, snakemake.params.kwargs)
    # the encoder as its training recorded it (a truncated or swapped file stops here)
    inputs = check_encoder(snakemake.input.encoder, prof)
    extract_features(snakemake.input.encoder, snakemake.output[0], **kwargs)
    record_derived(snakemake.output[0], inputs)   # its digest, for the jobs that read it
    # the encoder is stored (this job runs after its pretraining): the pretraining's resume
    # state is no longer needed, unless the profile keeps it
    if not job_config(prof, snakemake.wildcards).keep_checkpoint:
        release_checkpoint(Path(snakemake.input.encoder).parent)
