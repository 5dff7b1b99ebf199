"""weince: reproduction artifact for *When Softmax Fails at the Top: Extreme Value
Corrections for InfoNCE* (ICML 2026).

Subpackages:
    weince.losses   InfoNCE, WEINCE, the authors' recipe terms, baselines (torch)
    weince.evt      POT/GPD tail fits and link-selection fits (numpy/scipy only)
    weince.data     vision and text data sets, SimCLR augmentations
    weince.models   backbones and projection heads
    weince.train    the SimCLR and SimCSE training loops
    weince.eval     linear probe, k-NN / recall@k, STS
    weince.report   claims registry, tables, figures
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
