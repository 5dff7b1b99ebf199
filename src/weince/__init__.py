"""weince: reproduction artifact for *When Softmax Fails at the Top: Extreme Value
Corrections for InfoNCE* (ICML 2026).

Subpackages, by layer (imports run downwards only; ``tests/test_import_layers.py``):

0. building blocks
    weince.losses    InfoNCE, WEINCE, the authors' recipe terms, baselines (torch); every
                     named arm in ``weince.losses.arms``
    weince.evt       POT/GPD tail fits and link-selection fits (numpy/scipy only)
    weince.data      vision and text data sets, SimCLR augmentations
    weince.models    backbones and projection heads
    weince.utils     result files (``weince.utils.results``) and provenance, checkpoints,
                     the seed summary, verdict words, the strict dataclass-config loader
                     (``weince.utils.config``)
1. stages that make result files
    weince.train     the SimCLR and SimCSE training loops
    weince.eval      feature extraction, linear probe, k-NN / recall@k, STS
    weince.norms     the embedding-norm analysis (N1-N3), one ``norms.json`` per encoder
    weince.timing    loss-alone and whole-step overhead timing (C8)
2. what a profile asks for, and the pages made from its results
    weince.pipeline  run layout and file names, the resolved ``Profile``, the claims
                     registry, resolved stage configs, grid choice, the ablation and norms
                     plans, ``all_targets(config)`` (the workflow's glue)
    weince.report    claims tables with verdicts (C1-C10 and N1-N3, from the registry),
                     summary, ablations and norms pages, figures
    weince.bundle    a profile's results as one checkable archive, and its offline check
                     (``weince bundle`` / ``weince verify``)
    weince.cost      what a profile costs: counted FLOPs, measured GPU throughputs,
                     GPU-hours per GPU type, SLURM requests, the rehearsal's forecast and
                     the dry-run planner (``weince cost`` / ``weince plan`` / ``weince times``)
3. the command line
    weince.cli       ``weince <command>``: the dispatcher and one module per command
                     (``weince.cli.pretrain``, ``weince.cli.evt``, ...), each parsing
                     arguments and calling the library; the only home of commands
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
