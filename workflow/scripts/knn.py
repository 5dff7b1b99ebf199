"""Snakemake adapter: k-NN accuracy and recall@k on cached features (weince.eval.knn)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.knn import knn_eval
    from weince.pipeline.digests import check_derived
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_settings
    from weince.utils import write_json
    from weince.utils.results import reading
    from weince.utils.runlock import hold_run_lock

    hold_run_lock(snakemake.output[0])   # one writer per output file
    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what vision.knn sets, as written, with its device (knn_eval's defaults fill the rest)
    kwargs = job_settings(snakemake.params.kwargs, prof.vision.knn_given,
                          device=prof.vision.knn.device)
    # the features as their job wrote them, and the encoder they came from, in the result
    inputs = check_derived(snakemake.input[0], "features", prof)
    result = knn_eval(snakemake.input[0], **kwargs)
    with reading(inputs):
        write_json(snakemake.output[0], result, cfg=kwargs)
