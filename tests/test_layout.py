"""The package's layout: one folder per stage of config -> model run -> analyses -> report -> site, and
imports that point one way (downstream to upstream). A new arrow that breaks the table below fails here,
as does an import cycle, a ninth module at the top, or a stage without its docstring.

Every import counts: at the top of a module, inside a function (the lazy ones) and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "reportgen"

# What each part of reportgen may import from the others (its own modules always). A part is a
# subpackage (model, patterns, ...) or a top-level module (config, report, ...); the package root
# (`reportgen`, only __version__) may be imported by any.
BASE = {"errors", "config", "report", "runs", "stats", "datafiles", "progress"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "progress": set(),
    "report": {"errors"},  # Report.load says a wrong file in one line
    "stats": {"progress"},
    "config": {"errors", "datafiles"},
    "datafiles": {"errors"},
    "runs": {"config"},
    "cache": {"errors", "config", "runs"},
    "model": {"errors", "config", "runs", "datafiles"},
    "live": {"errors"},
    # beside the stages: what differs per kind of model, which each stage asks instead of branching
    "kinds": {"errors", "config", "runs", "report", "cache", "datafiles", "model", "patterns", "progress"},
    "patterns": {"errors", "config", "runs", "report", "stats", "datafiles"},
    "ablation": {"errors", "config", "report", "stats", "datafiles", "cache", "model", "kinds", "progress"},
    # activation patching on prompt pairs (issue 49): the same LM heads as the ablation tasks, records of the report
    "patching": {"errors", "config", "runs", "report", "stats", "datafiles", "cache", "model", "kinds", "progress",
                 "ablation"},
    "findings": {"report"},
    "site": {"errors", "config", "report", "runs", "progress", "findings", "cache"},
    "pipeline": BASE | {"cache", "model", "kinds", "live", "patterns", "ablation", "patching", "findings", "site"},
    "quickview": {"errors", "config", "runs", "model", "kinds", "site"},
    "notebook": {"errors", "quickview", "site"},
    "api": BASE | {"pipeline"},
    "commands": BASE | {"cache", "site", "pipeline", "quickview"},
    "__main__": {"commands"},
}
# Libraries a part must never import: rendering stays in site/, torch in the model and ablation stages.
TORCH = {"torch", "transformers", "ray"}
RENDERING = {"jinja2", "altair", "mkdocs", "markdown", "vl_convert"}
FORBIDDEN: dict[str, set[str]] = {
    "site": TORCH,
    **{part: TORCH | RENDERING for part in ("findings", "patterns", "cache", "kinds", *BASE)},
    **{part: RENDERING for part in ("model", "live", "ablation", "patching")},
}
STAGES = ("model", "kinds", "live", "patterns", "pipeline", "report", "ablation", "findings", "site", "site/charts",
          "cache", "commands", "quickview", "notebook", "api")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """`reportgen.site.charts.vegalite` -> site; `reportgen.config` -> config; `reportgen` -> the root."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "reportgen"


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> tuple[set[str], set[str]]:
    """(reportgen modules, other top-level packages) that `path` imports anywhere in its code."""
    ours, others = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from reportgen.site import pages` imports reportgen.site.pages, not only the package
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                     for alias in node.names]
        else:
            continue
        for name in names:
            (ours if name.split(".")[0] == "reportgen" else others).add(name if name.startswith("reportgen")
                                                                         else name.split(".")[0])
    return ours, others


def test_every_part_is_in_the_table():
    parts = {part_of(module) for module in MODULES} - {"reportgen"}
    assert parts == set(ALLOWED), "a new folder or top-level module needs its row in ALLOWED"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_upstream(module):
    part = part_of(module)
    ours, others = imports_of(MODULES[module])
    wrong = sorted(name for name in ours
                   if part_of(name) not in ALLOWED.get(part, set()) | {part, "reportgen"})
    assert not wrong, f"{module} ({part}/) may not import {wrong}; allowed: {sorted(ALLOWED.get(part, set()))}"
    banned = sorted(others & FORBIDDEN.get(part, set()))
    assert not banned, f"{module} ({part}/) may not import {banned}"


def test_the_table_itself_has_no_cycle():
    """The parts form layers: no part reaches itself through the others."""
    def reach(part: str, seen: set[str]) -> set[str]:
        for other in ALLOWED.get(part, set()) - seen:
            seen.add(other)
            reach(other, seen)
        return seen

    assert not [part for part in ALLOWED if part in reach(part, set())]


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_no_import_cycle_between_modules():
    """Tarjan's strongly connected components over every module's imports (lazy ones too)."""
    graph = {module: {name for name in imports_of(path)[0] if name in MODULES and name != module}
             for module, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            # a package's __init__ importing its own modules is not a cycle of code
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles


def test_the_top_level_holds_at_most_eight_modules():
    top = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_says_what_it_takes_and_gives(stage):
    doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 25, stage


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_the_site_stage_runs_without_torch_or_an_analysis_loaded():
    """Transitively too: importing every module of site/ (and what they import) loads neither torch nor
    the model, pattern or ablation code."""
    site = sorted(module for module in MODULES if part_of(module) == "site")
    code = (f"import importlib, sys\nfor name in {site!r}:\n    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers') or "
            "m.startswith(('reportgen.model', 'reportgen.patterns', 'reportgen.ablation', 'reportgen.pipeline'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert loaded.stdout.strip() == "[]"


def test_the_checks_see_a_bad_arrow(tmp_path):
    """The import reader finds lazy and TYPE_CHECKING imports and `from package import module`."""
    source = tmp_path / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reportgen.model.run import x\n"
                      "def f():\n    from reportgen.site import pages\n    import torch\n", encoding="utf-8")
    ours, others = imports_of(source)
    assert {"reportgen.model.run", "reportgen.site.pages"} <= ours and "torch" in others
    assert "site" not in ALLOWED["model"] and "model" not in ALLOWED["site"]
