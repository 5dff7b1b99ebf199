"""The ``weince`` console command: every listed subcommand resolves, and choosing the
statistics command does not import torch."""

import subprocess
import sys

import pytest

from weince.cli import COMMANDS, _available, main


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
    import weince
    from weince.utils.provenance import git_commit

    assert main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"weince {weince.__version__}")
    commit = git_commit()
    if commit != "unknown":   # this test runs from the git checkout
        assert out == f"weince {weince.__version__} (git {commit})"


def test_evt_command_does_not_import_torch():
    code = ("import sys\nfrom weince.cli import main\n"
            "try:\n    main(['evt', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("argv", [
    ["bench-loss", "--sizes", "16", "--reps", "2", "--losses", "infonce", "weince"],
    ["timing", "--set", "sizes=[16]", "--set", "dim=8", "--set", "loss_reps=2", "--set", "warmup=1",
     "--set", "backbone=", "--set", "losses=[infonce,weince]"],
])
def test_benchmark_commands_write_json(argv, tmp_path, capsys):
    """The benchmark commands run through the dispatcher and save JSON with provenance."""
    import json

    out = tmp_path / "out.json"
    assert main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert "provenance" in data
    assert "weince" in capsys.readouterr().out
