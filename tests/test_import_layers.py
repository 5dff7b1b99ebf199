"""Imports run one way . The layers, lowest first:

    0  weince.data, weince.models, weince.losses, weince.evt, weince.utils
    1  weince.train, weince.eval, weince.norms (the analysis), weince.timing
    2  weince.pipeline (what a profile asks for), weince.report (pages from result files),
       weince.bundle (a profile's results as a checkable archive), weince.cost (what it
       costs: FLOPs, GPU-hours, SLURM requests, the forecast)
    3  the command line: the package weince.cli, the dispatcher and one module per
       ``weince <command>``, and ``weince.__main__`` (``python -m weince``, which calls
       the dispatcher), and nothing else (a command module elsewhere fails)

The package face (``weince/__init__.py``) imports nothing at load time; its PEP 562
``__getattr__`` forwards the public loss names to ``weince.losses``, its one import.

A module may import its own layer and lower ones, never a higher one, whether at the top of
the file or inside a function (a lazy import that dodges a cycle counts). Within a layer the
import graph has no cycle, counting the package ``__init__`` that an import runs. Read at
the level of the subpackages (``weince.eval``, ``weince.timing``, ...), no two import each
other, directly or through a chain of others.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

import weince
import weince.losses
import weince.losses as losses
from weince.cli import COMMANDS

ROOT = Path(weince.__file__).resolve().parent
LAYERS = {"data": 0, "models": 0, "losses": 0, "evt": 0, "utils": 0,
          "train": 1, "eval": 1, "norms": 1, "timing": 1,
          "pipeline": 2, "report": 2, "bundle": 2, "cost": 2,
          "cli": 3, "__main__": 3}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer(mod: str) -> int:
    parts = mod.split(".")
    if len(parts) == 1:
        return -1                      # the package itself (only a docstring)
    if parts[1] not in LAYERS:
        raise AssertionError(f"{mod}: subpackage {parts[1]!r} has no layer; add it to "
                             f"LAYERS and to the package docstring")
    return LAYERS[parts[1]]


def imports(path: Path, mod: str) -> set[str]:
    """Every weince module ``path`` imports, anywhere in the file (with the packages whose
    ``__init__`` the import runs)."""
    tree = ast.parse(path.read_text())
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                                + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for n in names:
            if n.startswith("weince."):
                parts = n.split(".")
                found |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
    known = {module_name(p) for p in ROOT.rglob("*.py")}
    # a module's own packages are already being imported when it runs: not an edge
    return {m for m in found if m in known and m != mod and not mod.startswith(m + ".")}


GRAPH = {module_name(p): imports(p, module_name(p)) for p in sorted(ROOT.rglob("*.py"))}


# what the package face may import (inside its ``__getattr__``, on first use of a loss name)
FACE_IMPORTS = {"weince.losses"}


def test_no_module_imports_a_higher_layer():
    bad = [f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
           for m, deps in GRAPH.items() for d in sorted(deps)
           if layer(d) > layer(m) and not (m == "weince" and d in FACE_IMPORTS)]
    assert not bad, "\n".join(bad)


def test_the_package_face_imports_only_the_losses_and_only_on_demand():
    tree = ast.parse((ROOT / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not top, "weince/__init__.py imports at load time; every weince import would pay it"
    assert GRAPH["weince"] == FACE_IMPORTS


def test_torch_free_layers_import_without_torch(modules_loaded):
    """A fresh interpreter: the report, pipeline and bundle layers (and the arm registry)
    leave torch unloaded, and the package face lists the loss names without loading them."""
    code = ("import weince, weince.report, weince.pipeline, weince.bundle, weince.pipeline.arms\n"
            "assert 'WEINCELoss' in dir(weince) and 'WEINCELoss' in weince.__all__")
    assert modules_loaded(code, ["torch"]) == {"torch": False}


def test_a_claim_table_job_loads_no_scipy(modules_loaded):
    """What each claim-table job imports (the report's builder, curves and HTML page) leaves
    scipy unloaded (a fifth of a second in every such job): a claim that needs it imports it
    when its numbers are computed."""
    code = ("from weince.pipeline.profile import Profile\n"
            "from weince.report import build_report\n"
            "from weince.report.curves import claim_curves\n"
            "from weince.report.html import claim_page")
    assert modules_loaded(code, ["scipy"]) == {"scipy": False}


def test_a_small_vision_job_loads_neither_torchvision_nor_dynamo(modules_loaded):
    """What the embedded default's training and evaluation jobs import and run (a smallcnn
    model, the digits set, the batch augmentation) leaves torchvision, and with it
    torch._dynamo (seconds of CPU in every job), unloaded: only the torchvision
    backbones, the JPEG sets and the per-image reference path import it."""
    code = ("import torch, weince.train.simclr, weince.eval.features, weince.eval.scores\n"
            "import weince.eval.knn, weince.eval.linear, weince.norms.run\n"
            "from weince.data.augment import build_augment\n"
            "from weince.data.vision import load_vision\n"
            "from weince.models import build_simclr_model\n"
            "build_simclr_model('smallcnn', image_size=16, channels=1, out_dim=8)\n"
            "x = load_vision('digits', split='train').images[:4]\n"
            "build_augment('digits').two_views(x)")
    assert modules_loaded(code, ["torchvision", "torch._dynamo"]) == {
        "torchvision": False, "torch._dynamo": False}


def test_the_public_loss_names_are_the_losses_objects():
    assert weince.WEINCELoss is weince.losses.WEINCELoss
    # the package face's on-demand names are what this test checks
    from weince import InfoNCELoss, info_nce  # noqa: PLC0415
    from weince import weince as fn  # noqa: PLC0415

    assert (fn, info_nce, InfoNCELoss) == (weince.losses.weince, weince.losses.info_nce,
                                           weince.losses.InfoNCELoss)
    assert callable(fn) and fn.__name__ == "weince"
    assert sorted(weince.losses.__all__) == sorted(weince._LOSS_NAMES)
    assert all(getattr(weince, n) is getattr(weince.losses, n) for n in weince._LOSS_NAMES)
    with pytest.raises(AttributeError, match="NoSuchLoss"):
        _ = weince.NoSuchLoss


def test_the_losses_package_has_no_lazy_loader_and_exports_only_its_names():
    tree = ast.parse(Path(losses.__file__).read_text())
    defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert not defs & {"__getattr__", "__dir__"}, "weince.losses loads lazily again"
    assert type(losses) is types.ModuleType
    assert set(losses.__all__) <= set(vars(losses))
    assert not {"importlib", "sys", "types"} & set(losses.__all__)
    assert not {"importlib", "sys", "types"} & set(vars(losses))


def test_no_import_cycle():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH.get(m, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in GRAPH:
        if m not in state:
            visit(m)


def test_every_subpackage_is_in_the_package_docstring():
    doc = weince.__doc__ or ""
    subs = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists())
    missing = [s for s in subs if f"weince.{s}" not in doc]
    assert not missing, f"the package docstring does not list {missing}"


def _defines(path: Path, names: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} & names


def test_every_command_lives_in_the_cli_package():
    """A module with a command's interface (``add_arguments`` and ``main``) or a command's
    name (``cli``, ``*_cli``) outside ``weince.cli`` is a command hidden in a library
    package; and every module the dispatcher lists is in ``weince.cli``."""
    hidden = [m for p in sorted(ROOT.rglob("*.py"))
              if not (m := module_name(p)).startswith("weince.cli")
              and (_defines(p, {"add_arguments", "main"}) == {"add_arguments", "main"}
                   or m.split(".")[-1] == "cli" or m.endswith("_cli"))]
    assert not hidden, f"command modules outside weince/cli/: {hidden}; move them (git mv) there"
    outside = {name: mod for name, (mod, _) in COMMANDS.items()
               if not mod.startswith("weince.cli.")}
    assert not outside, f"commands whose module is not in weince.cli: {outside}"


def test_no_library_module_imports_the_command_line():
    bad = [f"{m} imports {d}" for m, deps in GRAPH.items()
           if not m.startswith("weince.cli") and m != "weince.__main__"
           for d in sorted(deps) if d == "weince.cli" or d.startswith("weince.cli.")]
    assert not bad, "\n".join(bad)


def package(mod: str) -> str:
    """The subpackage (or top-level module) of ``weince`` that ``mod`` belongs to."""
    return ".".join(mod.split(".")[:2])


PACKAGES: dict[str, set[str]] = {}
for _m, _deps in GRAPH.items():
    if _m != "weince":
        PACKAGES.setdefault(package(_m), set()).update(
            package(d) for d in _deps if package(d) != package(_m))


def package_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, ..., a]``) through each group of packages that reach each other."""
    def paths_from(a: str) -> dict[str, list[str]]:
        paths, todo = {a: [a]}, [a]
        while todo:
            x = todo.pop(0)
            for y in sorted(graph.get(x, ())):
                if y not in paths:
                    paths[y] = paths[x] + [y]
                    todo.append(y)
        return paths

    found, seen = [], set()
    for a in sorted(graph):
        if a in seen:
            continue
        there = paths_from(a)
        back = [b for b in sorted(there) if b != a and a in paths_from(b)]
        if back:
            seen |= {a, *back}
            b = back[0]
            found.append(there[b] + paths_from(b)[a][1:])
    return found


def test_package_cycle_finder_finds_direct_and_chained_cycles():
    assert package_cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert package_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert package_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert package_cycles({"a": {"b", "c"}, "b": set(), "c": {"d"}, "d": {"a"}}) == [
        ["a", "c", "d", "a"]]


def test_no_two_packages_import_each_other():
    """No subpackage imports one that imports it back, directly (``weince.pipeline`` <->
    ``weince.report``) or through others (``report -> norms -> report``); the message
    names one module import of each step."""
    msgs = []
    for cyc in package_cycles(PACKAGES):
        steps = []
        for a, b in zip(cyc, cyc[1:]):
            via = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if package(m) == a
                         for d in deps if package(d) == b)
            steps.append(f"  {a} -> {b}: {via[0]}"
                         + (f" (+{len(via) - 1} more)" if len(via) > 1 else ""))
        msgs.append("package cycle " + " -> ".join(cyc) + "\n" + "\n".join(steps))
    assert not msgs, "\n".join(msgs)


def _private_imports(path: Path, mod: str) -> list[str]:
    """``from weince.<pkg>... import _name`` (or from a private module ``_x``) where
    ``<pkg>`` is not the importing module's own subpackage."""
    own = package(mod)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("weince.") \
                and not node.level and package(node.module) != own:
            private = [a.name for a in node.names if a.name.startswith("_")
                       and not a.name.startswith("__")]
            if any(p.startswith("_") and not p.startswith("__")
                   for p in node.module.split(".")) or private:
                found.append(f"{mod} imports {private or [a.name for a in node.names]} from "
                             f"{node.module}")
    return found


def test_no_private_name_crosses_a_package():
    """A name another subpackage needs is public in its home (``weince.data.vision.
    subset_indices``, ``weince.eval.linear.features_of``), not reached for with ``_``."""
    bad = [line for p in sorted(ROOT.rglob("*.py"))
           for line in _private_imports(p, module_name(p))]
    assert not bad, "\n".join(bad)
