"""Snakemake adapter: STS evaluation of a trained SimCSE encoder (weince.eval.sts)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.sts import run_sts
    from weince.pipeline.digests import check_model
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_config, job_settings
    from weince.utils.checkpoint import release_checkpoint
    from weince.utils.results import reading

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what text.sts sets, as written (and its data), with its offline switch and device
    # (the profile's unless it sets them); run_sts' defaults fill the rest
    sts = prof.text.sts
    kwargs = job_settings(snakemake.params.kwargs, prof.text.sts_given, offline=sts.offline)
    if sts.device != "auto":
        kwargs.setdefault("device", sts.device)
    # the model as its SimCSE run recorded it, in the result
    with reading(check_model(snakemake.input.model, prof)):
        run_sts(snakemake.input.model, out=snakemake.output[0], **kwargs)
    # the SimCSE run's outputs are stored: its resume state goes, unless the profile keeps it
    if not job_config(prof, snakemake.wildcards).keep_checkpoint:
        release_checkpoint(Path(snakemake.input.model).parent)
