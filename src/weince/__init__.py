"""weince: reproduction artifact for *When Softmax Fails at the Top: Extreme Value
Corrections for InfoNCE* (ICML 2026).

Subpackages, by layer (imports run downwards only; ``tests/test_import_layers.py``):

0. building blocks
    weince.losses    InfoNCE, WEINCE, the authors' recipe terms, baselines (torch)
    weince.evt       POT/GPD tail fits and link-selection fits (numpy/scipy only)
    weince.data      vision and text data sets, SimCLR augmentations
    weince.models    backbones and projection heads
    weince.utils     result files (``weince.utils.results``) and provenance, checkpoints,
                     the seed summary and intervals, a judged claim's rows
                     (``weince.utils.claim_rows``), verdict words, the strict
                     dataclass-config loader (``weince.utils.config``)
1. stages that make result files
    weince.train     the SimCLR and SimCSE training loops
    weince.eval      feature extraction, linear probe, k-NN / recall@k, STS
    weince.norms     the norms room (N1-N3): the embedding-norm analysis, one
                     ``norms.json`` per encoder, the claims' verdicts and their page
    weince.timing    loss-alone and whole-step overhead timing (C8)
2. what a profile asks for, and the pages made from its results
    weince.pipeline  run layout and file names, the named training arms
                     (``weince.pipeline.arms``), the resolved ``Profile``, the claims
                     registry, resolved stage configs, grid choice, the ablation and norms
                     plans, ``all_targets(config)`` (the workflow's glue)
    weince.report    claims tables with verdicts (every claim of the registry; one module
                     per claim kind in ``weince.report.verdicts``), summary, ablations
                     page, figures
    weince.bundle    a profile's results as one checkable archive, and its offline check
                     (``weince bundle`` / ``weince verify``)
    weince.cost      what a profile costs: counted FLOPs, measured GPU throughputs,
                     GPU-hours per GPU type, SLURM requests, the rehearsal's forecast and
                     the dry-run planner (``weince cost`` / ``weince plan`` / ``weince job-times``)
3. the command line
    weince.cli       ``weince <command>``: the dispatcher and one module per command
                     (``weince.cli.pretrain``, ``weince.cli.evt``, ...), each parsing
                     arguments and calling the library; the only home of commands

The public losses are importable from here too (``from weince import WEINCELoss, info_nce``);
they load ``weince.losses`` (and torch) on first use.
"""

__version__ = "0.1.0"

# The loss names forwarded to ``weince.losses`` (its ``__all__``, spelled out so that reading
# this list costs no import).
_LOSS_NAMES = (
    "info_nce", "weince", "weince_statistics", "tail_size", "pair_similarities",
    "queue_similarities", "topm_softmax", "topm_weibull", "fit_batch_beta", "hcl", "dcl",
    "InfoNCELoss", "WEINCELoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss", "InfoNCETopMLoss",
    "HCLLoss", "DCLLoss", "DCLWLoss", "DualEncoderLoss", "dual_encoder_loss", "OpenCLIPLoss",
    "clip_dual_loss",
    "LOSSES", "build_loss", "register_loss", "ShortTailWarning",
)
__all__ = ["__version__", *_LOSS_NAMES]


def __getattr__(name: str):
    """Forward the public loss names to ``weince.losses`` on first use (PEP 562).

    Every ``import weince.<anything>`` runs this file first, and the torch-free layers
    (``weince.pipeline``, ``weince.report``, ``weince.bundle``, ``weince.evt``, the
    statistics commands) must stay torch-free; importing ``weince.losses`` here eagerly
    would load torch for all of them. So ``weince.WEINCELoss`` imports the losses only when
    it is asked for, and then it is the very object ``weince.losses.WEINCELoss``."""
    if name in _LOSS_NAMES:
        from weince import losses  # noqa: PLC0415 - on demand: the torch-free layers stay so

        value = getattr(losses, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'weince' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
