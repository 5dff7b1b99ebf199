"""The ``weince`` console command: every listed subcommand resolves, and choosing the
statistics command does not import torch."""

import argparse
import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import weince
from weince.cli import COMMANDS, EXTRA_MODULES, _available, main, missing_extra
from weince.cli.bench_loss import MAX_CI_REL, MIN_STABLE_REPS, noise_warnings
from weince.utils.provenance import git_commit


def test_every_command_module_exists():
    assert set(_available()) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert "usage: weince " + name in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "<command>" in capsys.readouterr().out


def test_version_prints_the_version_and_the_checkout_commit(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"weince {weince.__version__}")
    commit = git_commit()
    if commit != "unknown":   # this test runs from the git checkout
        assert out == f"weince {weince.__version__} (git {commit})"


def test_evt_command_does_not_import_torch(modules_loaded):
    code = ("from weince.cli import main\n"
            "try:\n    main(['evt', '--help'])\nexcept SystemExit:\n    pass")
    assert modules_loaded(code, ["torch"]) == {"torch": False}


@pytest.mark.parametrize("argv", [
    ["bench-loss", "--sizes", "16", "--reps", "2", "--losses", "infonce", "weince"],
    ["timing", "--set", "sizes=[16]", "--set", "dim=8", "--set", "loss_reps=2", "--set", "warmup=1",
     "--set", "backbone=", "--set", "losses=[infonce,weince]"],
])
def test_benchmark_commands_write_json(argv, tmp_path, capsys):
    """The benchmark commands run through the dispatcher and save JSON with provenance."""
    out = tmp_path / "out.json"
    assert main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert "provenance" in data
    assert "weince" in capsys.readouterr().out


def _options(parser, prefix):
    """``(command path, action)`` of every argument of ``parser`` and its sub-commands."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _options(sub, f"{prefix} {name}")
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield prefix, a


def _undocumented(parser, prefix):
    """Arguments with no help text, and options whose help does not state their default
    (a flag's False and an absent None need no word; ``[]`` and ``""`` do)."""
    bad = []
    for where, a in _options(parser, prefix):
        name = "/".join(a.option_strings) or a.dest
        if not (a.help or "").strip():
            bad.append(f"{where} {name}: no help")
        elif a.option_strings and a.default not in (None, False) \
                and "%(default)" not in a.help and "default" not in a.help.lower():
            bad.append(f"{where} {name}: help does not state the default {a.default!r}")
    return bad


def test_every_option_of_every_command_has_help_with_its_default():
    bad = []
    for name, (mod, _) in COMMANDS.items():
        p = argparse.ArgumentParser(prog=f"weince {name}")
        importlib.import_module(mod).add_arguments(p)
        bad += _undocumented(p, f"weince {name}")
    assert not bad, "\n".join(bad)


def test_the_help_check_catches_an_option_without_help():
    p = argparse.ArgumentParser()
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--reps", type=int, default=30, help="repetitions")
    p.add_argument("--ok", type=int, default=3, help="fine (default %(default)s)")
    bad = _undocumented(p, "x")
    assert len(bad) == 2 and "--dim: no help" in bad[0] and "--reps" in bad[1]


def test_bench_loss_states_its_spread_and_warns_on_few_repetitions(capsys):
    assert main(["bench-loss", "--sizes", "16", "--dim", "8", "--reps", "3",
                 "--losses", "infonce", "weince", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert "95% CI" in out and "min-max" in out
    assert "3 repetition(s) per loss are too few" in err and f"at least {MIN_STABLE_REPS}" in err


def test_noise_warnings_threshold_and_interval_width():
    tight = {"loss": "weince", "2N": 512, "device": "cpu", "ratio": 1.5, "ratio_ci": [1.45, 1.55]}
    wide = {**tight, "ratio_ci": [1.5 - MAX_CI_REL, 1.5 + MAX_CI_REL]}   # width 0.4 > 0.3
    assert noise_warnings([tight], MIN_STABLE_REPS) == []
    assert len(noise_warnings([tight], MIN_STABLE_REPS - 1)) == 1
    w = noise_warnings([tight, wide], MIN_STABLE_REPS)
    assert len(w) == 1 and "[1.30, 1.70]" in w[0]


# ---------------------------------------------------------------- missing extras
_WITHOUT_EXTRAS = """
import contextlib, io, json, sys
for name in {blocked!r}:
    sys.modules[name] = None             # as if not installed: importing it fails
from weince.cli import COMMANDS, main


def run(argv, console=False):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            if console:
                sys.argv = ["weince", *argv]
                rc = main()
            else:
                rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        except Exception as exc:
            rc = type(exc).__name__
    return [rc, err.getvalue().splitlines()]


out = {{cmd: run([cmd, "--help"]) for cmd in sorted(COMMANDS)}}
out["console pretrain --help"] = run(["pretrain", "--help"], console=True)
out["debug pretrain --help"] = run(["pretrain", "--help", "--debug"], console=True)
out["bench-loss run"] = run(["bench-loss", "--sizes", "16", "--dim", "4", "--reps", "1",
                             "--losses", "infonce", "--device", "cpu"])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def without_extras():
    """Every command's ``--help`` (and a bench-loss run) in an interpreter where the
    modules of every extra fail to import: the core install, simulated."""
    blocked = sorted(m for mods in EXTRA_MODULES.values() for m in mods)
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS.format(blocked=blocked)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_without_an_extra_a_command_names_it_in_one_line(without_extras):
    """``weince status --help`` on the core install printed a ModuleNotFoundError traceback;
    now each command either works or says which extra to install, exit 2."""
    named = {}
    for key, (rc, err) in without_extras.items():
        if key.startswith(("console", "debug")):
            continue
        if rc == 0 and key != "bench-loss run":
            assert err == [], (key, err)
            continue
        assert rc == 2 and len(err) == 1, (key, rc, err)
        cmd = key.split()[0]
        assert err[0].startswith(
            f"weince {cmd}: error: this command needs the 'workflow' extra"), err
        assert err[0].endswith('install it with: pip install "weince[workflow]"'), err
        named[cmd] = err[0]
    # the commands of the report (and bench-loss's run) cannot work without the extra
    assert {"status", "report", "pretrain", "verify", "bench-loss"} <= set(named), sorted(named)


def test_the_console_prints_the_extra_in_one_line_and_debug_the_traceback(without_extras):
    rc, err = without_extras["console pretrain --help"]
    assert rc == 2 and len(err) == 1 and 'pip install "weince[workflow]"' in err[0]
    assert without_extras["debug pretrain --help"][0] == "ModuleNotFoundError"
    rc, err = without_extras["bench-loss run"]
    assert rc == 2 and err == [
        "weince bench-loss: error: this command needs the 'workflow' extra: tabulate (module "
        "'tabulate') is not installed; install it with: pip install \"weince[workflow]\""]


def test_missing_extra_names_the_text_extra_and_ignores_other_modules():
    line = missing_extra(ModuleNotFoundError("No module named 'transformers'", name="transformers"))
    assert line.endswith('pip install "weince[text]"') and "'text' extra" in line
    assert missing_extra(ModuleNotFoundError("x", name="yaml.cyaml")).endswith('"weince[workflow]"')
    assert missing_extra(ModuleNotFoundError("x", name="not_an_extra")) is None
    assert missing_extra(ValueError("yaml")) is None


def test_the_extras_table_lists_every_package_of_the_extras():
    """``EXTRA_MODULES`` (what the dispatcher recognises) and pyproject.toml's extras agree."""
    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    for extra, modules in EXTRA_MODULES.items():
        declared = {canonicalize_name(Requirement(r).name) for r in extras[extra]}
        assert {canonicalize_name(d) for d in modules.values()} == declared, extra
