"""The ``weince`` console command.

Each subcommand lives in its own module, which defines ``add_arguments(parser)`` and
``main(args) -> int``. Modules are imported lazily so that ``weince evt`` does not import
torch and ``weince --help`` stays fast.

    weince --help
    weince <command> --help
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("weince.losses.demo", "tiny end-to-end demo of the losses on random data"),
    "bench-loss": ("weince.losses.bench", "benchmark loss forward+backward, WEINCE vs InfoNCE"),
    "evt": ("weince.evt.cli", "POT/GPD tail fit and link-selection fit on a saved score file"),
    "collect-scores": ("weince.evt.collect_cli", "collect similarity scores from a frozen encoder"),
    "pretrain": ("weince.train.simclr_cli", "SimCLR pretraining (resumes automatically)"),
    "features": ("weince.eval.features_cli", "extract frozen features from a pretrained encoder"),
    "eval": ("weince.eval.cli", "linear probe and k-NN / recall@k on cached features"),
    "simcse": ("weince.train.simcse_cli", "unsupervised SimCSE training"),
    "sts": ("weince.eval.sts_cli", "STS evaluation (Spearman/Pearson) of a sentence encoder"),
    "timing": ("weince.timing", "overhead timing: WEINCE vs InfoNCE, loss alone and whole step"),
    "norms": ("weince.norms.cli", "embedding-norm dynamics analysis (N1-N3)"),
    "report": ("weince.report.cli", "claims registry -> Markdown/LaTeX tables with verdicts"),
}


def _available() -> dict[str, tuple[str, str]]:
    """Commands whose module file exists, found on disk so that no package (and no torch)
    is imported before a command is chosen."""
    root = Path(__file__).resolve().parent
    found = {}
    for name, (mod, hlp) in COMMANDS.items():
        rel = Path(*mod.split(".")[1:])
        if (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists():
            found[name] = (mod, hlp)
    return found


def version_string() -> str:
    """``weince <version>``, plus ``(git <commit>)`` when this package is a file tracked in a git
    checkout (an editable install; an installed wheel has no commit to report)."""
    import subprocess

    from weince import __version__

    here = Path(__file__).resolve().parent
    text = f"weince {__version__}"
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "__init__.py"], cwd=here,
                                 capture_output=True, text=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        tracked = False
    if tracked:
        from weince.utils.provenance import git_commit

        commit = git_commit()
        if commit != "unknown":
            text += f" (git {commit})"
    return text


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = _available()
    parser = argparse.ArgumentParser(
        prog="weince",
        description="WEINCE reproduction artifact: losses, diagnostics, training, reports.",
    )
    if "--version" in argv[:1] or "-V" in argv[:1]:
        print(version_string())
        return 0
    parser.add_argument("-V", "--version", action="store_true",
                        help="print the version (and the git commit of a checkout) and exit")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    # only the chosen command's module is imported
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (mod, hlp) in commands.items():
        p = sub.add_parser(name, help=hlp, description=hlp)
        if name == chosen:
            module = importlib.import_module(mod)
            module.add_arguments(p)
            p.set_defaults(_module=module)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._module.main(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
