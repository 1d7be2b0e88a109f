"""The import graph of scalelab, analysis and optim: no cycles, and the layers of
docs/architecture.md hold.

The graph is read from the source with ``ast`` (nothing is imported): an edge for every
``import``/``from ... import`` of a project module, at module level, inside a function
(a lazy import hides a cycle from Python, not from a reader) or under
``if TYPE_CHECKING:`` (an annotation-only import is still a dependency a reader follows:
a circle through one is a circle). ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"scalelab": ROOT / "scalelab", "analysis": ROOT / "analysis", "optim": ROOT / "optim"}
SKIP_DIRS = {"tests", "notebooks", "__pycache__"}

SWEEP_STAGES = ("spec", "plan", "run", "view")
"""scalelab.sweep's stages, in import order: a stage imports only those before it."""


def _modules() -> dict[str, Path]:
    out = {}
    for top, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder)
            if SKIP_DIRS & set(rel.parts[:-1]) or path.name == "setup.py":
                continue
            parts = [top, *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - child.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
            visit(child)

    visit(tree)
    return {m for m in found if m in modules and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    """The checker can fail: a three-module circle and a two-module one are found."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(_cycles(g)) == [["a", "b", "c"], ["d", "e"]]


def test_graph_sees_lazy_imports(graph):
    """Function-level imports are edges (e.g. scalelab.cli.sweep imports the run stage lazily)."""
    assert "scalelab.sweep.run.start" in graph["scalelab.cli.sweep"]


def test_no_import_cycles(graph):
    assert _cycles(graph) == []


def _violations(graph, rule) -> list[str]:
    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps if rule(a, b))


def test_lower_layers_import_no_higher_one(graph):
    """optim imports neither analysis nor scalelab; analysis imports no scalelab."""
    def up(a: str, b: str) -> bool:
        return (a.startswith("optim") and not b.startswith("optim")) or (
            a.startswith("analysis") and b.startswith("scalelab"))

    assert _violations(graph, up) == []


def test_sweep_stages_import_only_earlier_ones(graph):
    def stage(m: str) -> int | None:
        parts = m.split(".")
        if parts[:2] != ["scalelab", "sweep"] or len(parts) < 3:
            return None
        return SWEEP_STAGES.index(parts[2]) if parts[2] in SWEEP_STAGES else None

    def backwards(a: str, b: str) -> bool:
        sa, sb = stage(a), stage(b)
        return sa is not None and sb is not None and sb > sa

    assert _violations(graph, backwards) == []
    # the sweep package imports nothing above it (tuning, the CLI)
    assert _violations(graph, lambda a, b: a.startswith("scalelab.sweep")
                       and b.startswith(("scalelab.tune", "scalelab.cli"))) == []


def test_no_private_module_imported_across_packages(graph):
    """A module whose name starts with '_' is private to its package."""
    def private(a: str, b: str) -> bool:
        leaf = b.rsplit(".", 1)[-1]
        return leaf.startswith("_") and a.rsplit(".", 1)[0] != b.rsplit(".", 1)[0] \
            and not a.startswith(b.rsplit(".", 1)[0] + ".")

    assert _violations(graph, private) == []


TRAIN_FOLDERS = ("parallel", "checkpoint", "records", "console")
"""scalelab.train's folders, in import order: a folder imports only itself and those before
it; the top-level modules (loop, step, schedules, optimizers, ...) sit above every folder,
and no folder imports them."""

TRAIN_MAX_MODULES = 16


def _train_level(m: str) -> int | None:
    """A scalelab.train module's place: its folder's index, or len(TRAIN_FOLDERS) at the top."""
    parts = m.split(".")
    if parts[:2] != ["scalelab", "train"]:
        return None
    if len(parts) >= 3 and parts[2] in TRAIN_FOLDERS:
        return TRAIN_FOLDERS.index(parts[2])
    return len(TRAIN_FOLDERS)


def _train_backwards(a: str, b: str) -> bool:
    la, lb = _train_level(a), _train_level(b)
    return la is not None and lb is not None and lb > la


def test_train_folder_rule_can_fail():
    """The rule sees a folder importing a later folder and a folder importing the top."""
    g = {"scalelab.train.parallel.fsdp": {"scalelab.train.checkpoint.dcp"},
         "scalelab.train.records.norms": {"scalelab.train.loop", "scalelab.train.records.records",
                                          "scalelab.train.checkpoint.manifest"},
         "scalelab.train.loop": {"scalelab.train.console.console"}}
    assert _violations(g, _train_backwards) == [
        "scalelab.train.parallel.fsdp -> scalelab.train.checkpoint.dcp",
        "scalelab.train.records.norms -> scalelab.train.loop"]


def test_train_folders_import_only_earlier_ones(graph):
    assert _violations(graph, _train_backwards) == []


def test_train_folders_are_listed_and_small():
    """Every folder of scalelab/train is in TRAIN_FOLDERS (so it is ordered), with at most
    TRAIN_MAX_MODULES modules."""
    train = PACKAGES["scalelab"] / "train"
    folders = {p.parent.name for p in train.glob("*/__init__.py")}
    assert folders == set(TRAIN_FOLDERS)
    for folder in TRAIN_FOLDERS:
        modules = [p for p in (train / folder).glob("*.py") if p.name != "__init__.py"]
        assert 0 < len(modules) <= TRAIN_MAX_MODULES, (folder, len(modules))


ANALYSIS_BASE = ("errors", "atomic", "progress")
"""analysis's top-level modules, below every folder: they import only each other."""

ANALYSIS_FOLDERS = ("tables", "laws", "solvers", "fit", "isoflop", "recipes", "adaptive", "transfer",
                    "synthetic", "plots", "report")
"""analysis's folders, in import order: a module imports only its own folder, the folders
before it and the base modules (docs/architecture.md draws them)."""

ANALYSIS_MAX_MODULES = 16


def _analysis_level(m: str) -> int | None:
    """An analysis module's place: -1 for the package and its base modules, its folder's index
    in a folder, None outside analysis (and for a module that is in neither: see below)."""
    parts = m.split(".")
    if parts[0] != "analysis":
        return None
    if len(parts) == 1 or parts[1] in ANALYSIS_BASE:
        return -1
    return ANALYSIS_FOLDERS.index(parts[1]) if parts[1] in ANALYSIS_FOLDERS else None


def _analysis_backwards(a: str, b: str) -> bool:
    """``a`` imports a later folder of analysis (a base module importing any folder included)."""
    if a == "analysis":  # the package's lazy re-exports (PEP 562) name every folder
        return False
    la, lb = _analysis_level(a), _analysis_level(b)
    return la is not None and lb is not None and lb > la


def test_analysis_folder_rule_can_fail(tmp_path):
    """The rule sees an upward import (a folder importing a later one, a base module importing
    a folder), also when it is annotation-only under ``if TYPE_CHECKING:``."""
    g = {"analysis.laws.checks": {"analysis.fit.fit", "analysis.laws.laws", "analysis.errors"},
         "analysis.errors": {"analysis.tables.runs"},
         "analysis.plots.plots": {"analysis.report.report", "analysis.fit.fit", "analysis"},
         "analysis.fit.fit": {"analysis.fit.profile", "analysis.solvers.search"}}
    assert _violations(g, _analysis_backwards) == [
        "analysis.errors -> analysis.tables.runs",
        "analysis.laws.checks -> analysis.fit.fit",
        "analysis.plots.plots -> analysis.report.report"]
    source = tmp_path / "checks.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from analysis.fit.fit import FitResult\n")
    found = _imports("analysis.laws.checks", source, _modules())
    assert found == {"analysis.fit.fit"}
    assert _violations({"analysis.laws.checks": found}, _analysis_backwards) == [
        "analysis.laws.checks -> analysis.fit.fit"]


def test_analysis_folders_import_only_earlier_ones(graph):
    assert _violations(graph, _analysis_backwards) == []


def test_analysis_folders_are_listed_and_small():
    """Every module of analysis is a base module or in a folder of ANALYSIS_FOLDERS (so it is
    ordered), and each folder has at most ANALYSIS_MAX_MODULES modules."""
    root = PACKAGES["analysis"]
    folders = {p.parent.name for p in root.glob("*/__init__.py")}
    assert folders == set(ANALYSIS_FOLDERS)
    top = {p.stem for p in root.glob("*.py")} - {"__init__"}
    assert top == set(ANALYSIS_BASE)
    for folder in ANALYSIS_FOLDERS:
        modules = [p for p in (root / folder).glob("*.py") if p.name != "__init__.py"]
        assert 0 < len(modules) <= ANALYSIS_MAX_MODULES, (folder, len(modules))


def test_matplotlib_only_under_analysis_plots():
    """Only analysis.plots imports matplotlib (at module level or lazily), so a fit, a report's
    numbers or scalelab's use of analysis never loads it except to draw."""
    root = PACKAGES["analysis"]
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.parts[0] == "plots":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            found += [f"{rel}: {n}" for n in names if n.split(".")[0] == "matplotlib"]
    assert found == []


def _command_modules() -> set[str]:
    """The CLI's command modules: ``scalelab.cli._VERB_MODULES`` (read from the source)."""
    tree = ast.parse((PACKAGES["scalelab"] / "cli" / "__init__.py").read_text())
    for node in ast.walk(tree):
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == "_VERB_MODULES" for t in targets):
            return {f"scalelab.cli.{name}" for name in ast.literal_eval(node.value)}
    raise AssertionError("scalelab/cli/__init__.py: no _VERB_MODULES")


def test_no_command_module_imports_another(graph):
    """A command module (one verb) imports the packages below and the CLI's helper modules
    (``cli.progress``, ``cli.recipe_options``, ``cli.runs_table``, ...), never another verb's
    module: what two verbs share lives in a helper."""
    commands = _command_modules()
    assert {"scalelab.cli.sweep", "scalelab.cli.report", "scalelab.cli.next"} <= commands
    assert _violations(graph, lambda a, b: a in commands and b in commands) == []


def _singular_plural_pairs(names: set[str]) -> list[tuple[str, str]]:
    """Pairs (x, xs) or (y-ending x, ...ies) among ``names``: a folder's two doors that read
    as one (verdict.py beside verdicts.py)."""
    plural = {n + "s": n for n in names} | {n[:-1] + "ies": n for n in names if n.endswith("y")}
    return sorted((plural[n], n) for n in names if n in plural)


def test_singular_plural_rule_can_fail():
    assert _singular_plural_pairs({"verdict", "verdicts", "rows", "cells", "entry", "entries"}) == [
        ("entry", "entries"), ("verdict", "verdicts")]


def test_no_folder_has_a_module_and_its_plural():
    """No two modules of one folder are named as the singular and plural of one word: each
    module is one concept with a name that says which (``verdicts`` holds the whole verdict)."""
    found = []
    for folder in PACKAGES.values():
        for pkg in {p.parent for p in folder.rglob("*.py")}:
            names = {p.stem for p in pkg.glob("*.py")} - {"__init__"}
            found += [f"{pkg.relative_to(ROOT)}: {a} / {b}" for a, b in _singular_plural_pairs(names)]
    assert found == []


RECIPE_NAMES_OWNER = "analysis/recipes/names.py"
RECIPE_NAME_LITERALS = ("ensemble (N,K->inf)", "ensemble (K->inf)", "regularized, mean of seeds")
"""Recipe names spelled once, in ``analysis.recipes.names``: as string literals they appear in
no other module of analysis or scalelab (docstrings included: a name is cited by its
constant)."""


def _literal_uses(text: str, literals: tuple[str, ...]) -> list[str]:
    """The ``literals`` that occur inside a string constant of the Python source ``text``."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out += [lit for lit in literals if lit in node.value]
    return out


def test_recipe_name_rule_can_fail():
    assert _literal_uses('fits["ensemble (N,K->inf)"] = x\nname = "no recipe"\n',
                         RECIPE_NAME_LITERALS) == ["ensemble (N,K->inf)"]


def test_recipe_names_are_defined_once():
    owner = ROOT / RECIPE_NAMES_OWNER
    assert set(_literal_uses(owner.read_text(), RECIPE_NAME_LITERALS)) == set(RECIPE_NAME_LITERALS)
    found = []
    for top in ("analysis", "scalelab"):
        for path in sorted(PACKAGES[top].rglob("*.py")):
            if path == owner:
                continue
            found += [f"{path.relative_to(ROOT)}: {lit!r}"
                      for lit in _literal_uses(path.read_text(), RECIPE_NAME_LITERALS)]
    assert found == []
