"""matplotlib's ``pyplot`` on the Agg canvas (files only, no display), for every figure of
the report and the norms page.

It is imported on the first figure, not with the modules that draw: matplotlib costs most
of a second, and the workflow imports the report to plan (``workflow/rules/report.smk``)
without drawing anything.

    from weince.utils.plotting import pyplot
    plt = pyplot()
    fig, ax = plt.subplots()
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["pyplot"]


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` with the Agg backend selected (imported here, on the first
    figure: the module docstring says why)."""
    import matplotlib  # noqa: PLC0415 - on the first figure (the module docstring says why)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after the backend is chosen

    return plt
