"""Every command a reviewer or a site is told to type: each command of every ``bash`` block of
docs/reviewing.md, and the README's site and reviewer commands, parsed here as its program
parses it (``weince``'s parser for each command, Snakemake's own argument parser), so that
a command that fails as printed (a flag that does not exist, a target that ``--config``
swallows) fails the suite in seconds. tests/workflow/test_docs_commands_run.py runs them
(Snakemake's as dry runs)."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path

import pytest
from snakemake.cli import get_argument_parser

from weince.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reviewing.md"
# the README's commands for sites and reviewers, as inline code
README_COMMAND = re.compile(r"`((?:weince (?:verify|merge|bundle) [^`]+|snakemake [^`]*--config "
                            r"site=)[^`]*)`")


def block_commands(text: str) -> list[str]:
    """The commands of every ``bash`` block of a Markdown page, as printed: continuation
    lines joined, comments dropped, ``a && b`` as two commands (``cd DIR`` one of them)."""
    out = []
    for block in re.findall(r"^\s*```bash\n(.*?)^\s*```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            out += [" ".join(c.split()) for c in line.split("&&") if c.strip()]
    return out


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) of every command this module checks."""
    out = [("docs/reviewing.md", c) for c in block_commands(PAGE.read_text())]
    readme = (ROOT / "README.md").read_text()
    out += [("README.md", m.group(1)) for m in README_COMMAND.finditer(readme)]
    return out


def weince_args(argv: list[str]) -> argparse.Namespace:
    """``weince argv`` parsed by the command's own parser (argparse's error, not an exit)."""
    name = argv[0]
    assert name in COMMANDS, f"weince has no command {name!r}"
    parser = argparse.ArgumentParser(prog=f"weince {name}", exit_on_error=False)
    importlib.import_module(COMMANDS[name][0]).add_arguments(parser)
    return parser.parse_args(argv[1:])


def snakemake_args(argv: list[str]) -> argparse.Namespace:
    parser = get_argument_parser()
    parser.exit_on_error = False
    return parser.parse_args(argv)


COMMANDS_FOUND = documented_commands()


def test_the_pages_have_commands():
    where = {w for w, _ in COMMANDS_FOUND}
    assert where == {"docs/reviewing.md", "README.md"}
    assert any(c.startswith("snakemake ") and "site=" in c for _, c in COMMANDS_FOUND)
    assert any(c.startswith("weince merge ") for _, c in COMMANDS_FOUND)


def test_block_commands_joins_lines_and_splits_chains():
    text = "```bash\nweince verify a.tar.gz --extract X && cd X\nsnakemake --cores 2 \\\n" \
           "  all   # a comment\n```\n"
    assert block_commands(text) == ["weince verify a.tar.gz --extract X", "cd X",
                                    "snakemake --cores 2 all"]


@pytest.mark.parametrize("where,command", COMMANDS_FOUND,
                         ids=[f"{w}:{c[:60]}" for w, c in COMMANDS_FOUND])
def test_every_documented_command_parses_as_printed(where, command):
    argv = shlex.split(command)
    if argv[0] == "cd":
        return
    assert argv[0] in ("weince", "snakemake"), f"{where}: unknown program in {command!r}"
    if argv[0] == "weince":
        weince_args(argv[1:])
        return
    args = snakemake_args(argv[1:])
    bad = [c for c in (args.config or []) if "=" not in c]
    assert not bad, (f"{where}: `{command}`: --config reads {bad} as config entries (a "
                     f"target after --config is swallowed: put it before the options)")
    files = [f for f in (args.configfile or []) if not str(f).endswith((".yaml", ".yml"))]
    assert not files, f"{where}: `{command}`: --configfile reads {files} as config files"
    named = [w for w in argv if w.endswith((".md", ".html"))]
    assert all(t in args.targets for t in named), \
        f"{where}: `{command}`: targets {named} are not all read as targets ({args.targets})"


def test_the_old_site_command_is_caught():
    """The command docs/reviewing.md printed, which Snakemake refuses."""
    args = snakemake_args(shlex.split("--cores 2 --configfile config/smoke.yaml --config "
                                      "site=lab-a reports/smoke/table_c3.md"))
    assert "reports/smoke/table_c3.md" in args.config and not args.targets
