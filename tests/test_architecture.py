"""The import contract: layers point inward, parts are independent, no private seams, no cycles.

Layers, innermost first (``docs/architecture.md``)::

    errors -> core, _io -> datasets, metrics -> ldp -> parts -> outer -> cli

* a module may import only from its own subpackage, from an inner layer, or from the package
  root (``privpub``, whose ``__init__`` is itself a facade over the core);
* the subpackages of one layer are independent of each other (the five parts; audit, spark,
  client, service and experiments);
* across subpackages, only public names of public modules (no ``_module`` and no ``_name``);
* the module graph has no cycles.

Every import counts: at module level, inside functions and under ``TYPE_CHECKING``. Inner layers
that need an outer implementation ask the core's registry (``privpub.core.register_*``).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "privpub"

LAYERS: list[set[str]] = [
    {"errors"},
    {"core", "_io", "py.typed"},
    {"datasets", "metrics"},
    {"ldp"},
    {"histogram", "ldp_synth", "spatial", "decision", "stream"},
    {"audit", "spark", "client", "service", "experiments"},
    {"cli"},
    {"__main__"},
]
LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. privpub.ldp._olh
    target: str  # imported module, e.g. privpub.core._plugins
    names: tuple[str, ...]
    line: int


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py")) if "migrations" not in p.parts}


def _is_module(name: str, modules: dict[str, Path]) -> bool:
    return name in modules


def _imports(modules: dict[str, Path]) -> list[Import]:
    out = []
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [Import(mod, a.name, (), node.lineno) for a in node.names if a.name.split(".")[0] == "privpub"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "privpub":
                    continue
                plain = []
                for a in node.names:  # `from privpub.x import y` where y is a submodule
                    if _is_module(f"{target}.{a.name}", modules):
                        out.append(Import(mod, f"{target}.{a.name}", (), node.lineno))
                    else:
                        plain.append(a.name)
                if plain or not node.names:
                    out.append(Import(mod, target, tuple(plain), node.lineno))
    return out


def _sub(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = _modules()
IMPORTS = _imports(MODULES)


def test_every_subpackage_has_a_layer() -> None:
    subs = {_sub(m) for m in MODULES} - {""}
    assert subs <= set(LAYER_OF), f"give these a layer in LAYERS: {sorted(subs - set(LAYER_OF))}"


def test_dependencies_point_inward_and_parts_are_independent() -> None:
    bad = []
    for imp in IMPORTS:
        s, t = _sub(imp.source), _sub(imp.target)
        if s == t or t == "" or s == "":  # the package root: test_the_package_root_is_a_facade_over_the_core
            continue
        ls, lt = LAYER_OF[s], LAYER_OF[t]
        if lt > ls:
            bad.append(f"{imp.source}:{imp.line} imports the outer {imp.target}")
        elif lt == ls:
            bad.append(f"{imp.source}:{imp.line} imports {imp.target} of the same layer")
    assert not bad, "\n".join(bad)


def test_the_package_root_is_a_facade_over_the_core() -> None:
    bad = [f"{i.target}" for i in IMPORTS if i.source == "privpub" and LAYER_OF[_sub(i.target)] > LAYER_OF["core"]]
    assert not bad, bad


def test_no_private_names_across_subpackages() -> None:
    bad = []
    for imp in IMPORTS:
        s, t = _sub(imp.source), _sub(imp.target)
        if s == t or t == "":
            continue
        private_module = any(p.startswith("_") for p in imp.target.split(".")[2:])
        private_names = [n for n in imp.names if n.startswith("_")]
        if private_module or private_names:
            bad.append(f"{imp.source}:{imp.line} imports {imp.target} {private_names or ''}")
    assert not bad, "\n".join(bad)


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in graph and imp.target != imp.source:
            # a package's own submodules importing the package facade is the normal init pattern
            if imp.source.startswith(imp.target + "."):
                continue
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_no_import_cycles() -> None:
    cycles = _cycles()
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_contract_can_fail() -> None:
    """Negative control: the checks flag an inward-pointing violation written on purpose."""
    fake = Import("privpub.core._x", "privpub.service._app", ("_private",), 1)
    s, t = _sub(fake.source), _sub(fake.target)
    assert LAYER_OF[t] > LAYER_OF[s]
    assert any(p.startswith("_") for p in fake.target.split(".")[2:])


@pytest.mark.parametrize("name", sorted(m for m in MODULES if not m.rsplit(".", 1)[-1].startswith("_")
                                        and m.count(".") == 2))
def test_public_modules_resolve(name: str) -> None:
    """Public submodules that outer layers import (e.g. privpub.spatial.protocol) are importable."""
    assert importlib.util.find_spec(name) is not None


def test_the_picture_in_docs_architecture_matches_the_layers() -> None:
    """docs/architecture.md's diagram shows every subpackage, outer layers above inner ones."""
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    pictures = re.findall(r"^```text\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    assert len(pictures) == 1, "docs/architecture.md should have one picture (a ```text block)"
    lines = pictures[0].splitlines()
    row: dict[str, int] = {}
    for name in LAYER_OF:
        if "." in name:  # py.typed: a file, not a module
            continue
        found = [i for i, line in enumerate(lines) if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", line)]
        assert found, f"the picture in docs/architecture.md does not show {name}"
        row[name] = found[0]
    wrong = [f"{a} (layer {LAYER_OF[a]}) is drawn below {b} (layer {LAYER_OF[b]})"
             for a in row for b in row if LAYER_OF[a] > LAYER_OF[b] and row[a] >= row[b]]
    assert not wrong, "\n".join(wrong)
