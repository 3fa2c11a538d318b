"""Imports flow one way (README, "Architecture"): every module of relax_vk belongs to one layer of
:data:`LAYERS` and imports only its own layer and those below it; nothing but the command line's
entry point imports :mod:`relax_vk.tools`; no two modules import each other, directly or round a
cycle; and the runtime, with what it imports, stays free of TVM and torch.

The imports are read with :mod:`ast` from the source (nothing is imported, TVM is not needed):
module-level imports and the ones inside functions alike (a lazy import of an upper layer is
still an upward import), relative imports resolved against the importing module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "relax_vk"
ROOT = "relax_vk"

#: The layers, lowest first. A module may import modules of its own layer and of the layers
#: below, never above. An entry names a package (all its modules) or a module.
#:
#: * core -- the domain model (scopes, registry, targets, limits, provenance);
#: * storage -- memory reuse planning (no TVM);
#: * serialization -- the ``.rvk`` format and its validation (no TVM): the runtime's input;
#: * runtime -- relax_vk's own runtime (numpy + the native library, never TVM); the compiler stack
#:   below reuses its TVM-free pieces (the OpenCL compiler check, the binary cache, Winograd's
#:   matrices, the tuner's measurements), so it sits under the TVM side;
#: * legalize < schedules < passes < codegen -- the compiler, bottom up: op computes, their GPU
#:   schedules, the Relax passes that pick them, and the code (and ``.rvk`` program) read off the
#:   compiled module;
#: * pipeline -- the RFC's stages composed from the passes;
#: * analysis -- what a build learns without a device (memory plan, CPU reference, fp16 calibration);
#: * compiler -- ``relax_vk.build``; tvm_runtime -- TVM's runtime path (``relax_vk.compile``, ``load_vm``);
#: * models < zoo < frontends -- the front doors and the models they load;
#: * testing -- the differential fuzzer; tools -- the CLI, profile, bisect, reports: the top;
#: * the package root (lazy re-exports of the public API) and ``python -m relax_vk``, above all.
LAYERS: List[Tuple[str, Sequence[str]]] = [
    ("core", ["relax_vk.core"]),
    ("storage", ["relax_vk.storage"]),
    ("serialization", ["relax_vk.serialization"]),
    ("runtime", ["relax_vk.runtime"]),
    ("legalize", ["relax_vk.legalize"]),
    ("schedules", ["relax_vk.schedules"]),
    ("passes", ["relax_vk.passes"]),
    ("codegen", ["relax_vk.codegen"]),
    ("pipeline", ["relax_vk.pipeline"]),
    ("analysis", ["relax_vk.analysis"]),
    ("compiler", ["relax_vk.compiler"]),
    ("tvm_runtime", ["relax_vk.tvm_runtime"]),
    ("models", ["relax_vk.models"]),
    ("zoo", ["relax_vk.zoo"]),
    ("frontends", ["relax_vk.frontends"]),
    ("testing", ["relax_vk.testing"]),
    ("tools", ["relax_vk.tools"]),
    ("entry points", [ROOT, "relax_vk.__main__"]),
]

TOOLS = "relax_vk.tools"
#: the only modules outside tools that may import it
TOOLS_USERS = ("relax_vk.__main__",)
#: packages whose modules, and everything they import at module level, must load without these
TVM_FREE = ("relax_vk.runtime", "relax_vk.serialization", "relax_vk.storage")
HEAVY = ("tvm", "tvm_ffi", "torch")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function (runs when called, not when the module is imported)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}{' (inside a function)' if self.lazy else ''}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _imports(tree: ast.AST) -> Iterator[Tuple[ast.stmt, bool]]:
    """Every import statement of ``tree`` and whether it sits inside a function."""

    def visit(node: ast.AST, lazy: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            yield from visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    yield from visit(tree, False)


def _targets(node: ast.stmt, module: str, is_package: bool, modules: Dict[str, Path]) -> List[str]:
    """The modules an import statement names (``from pkg import name``: ``pkg.name`` when that is a
    module, else ``pkg``), relative imports resolved against ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]


def _module_imports(module: str, source: str, modules: Dict[str, Path]) -> List[Edge]:
    """The imports of relax_vk modules in ``module``'s ``source``."""
    path = modules[module]
    edges = []
    for node, lazy in _imports(ast.parse(source, filename=str(path))):
        for target in _targets(node, module, path.name == "__init__.py", modules):
            edge = Edge(module, target, node.lineno, lazy)
            if (target == ROOT or target.startswith(ROOT + ".")) and edge not in edges:
                edges.append(edge)
    return edges


def _graph(patches: Optional[Dict[str, str]] = None, base: Optional[Dict[str, List[Edge]]] = None):
    """``(modules, per-module edges, edges, unknown)``: every module of the package, every import of
    a relax_vk module by another, and the imports of relax_vk names that are no module.
    ``patches``: module -> source to read instead of its file, the rest taken from ``base`` (how
    :func:`test_the_checks_can_fail` adds a bad import)."""
    modules = _modules()
    by_module = dict(base or {})
    for module, path in modules.items():
        if module in (patches or {}):
            by_module[module] = _module_imports(module, patches[module], modules)
        elif module not in by_module:
            by_module[module] = _module_imports(module, path.read_text(encoding="utf-8"), modules)
    every = [e for edges in by_module.values() for e in edges]
    return modules, by_module, [e for e in every if e.target in modules], [e for e in every if e.target not in modules]


MODULES, BY_MODULE, EDGES, UNKNOWN = _graph()


def _layer(module: str) -> Optional[int]:
    """The index in :data:`LAYERS` of the entry naming ``module`` (the longest such entry)."""
    best, best_len = None, -1
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            covers = module == entry or (entry != ROOT and module.startswith(entry + "."))
            if covers and len(entry) > best_len:
                best, best_len = rank, len(entry)
    return best


def _cycles(edges: Sequence[Edge]) -> List[List[Edge]]:
    """One cycle (as its edges, in order) per strongly connected component with more than one
    module, or a module importing itself."""
    out: Dict[str, List[Edge]] = {}
    for e in edges:
        out.setdefault(e.source, []).append(e)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack = set()
    components: List[List[str]] = []

    def connect(v: str):  # Tarjan's algorithm, iteratively (no recursion limit to meet)
        work = [(v, iter(out.get(v, [])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            for e in children:
                w = e.target
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(out.get(w, []))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == node:
                            break
                    components.append(component)

    for v in sorted(out):
        if v not in index:
            connect(v)
    cycles = []
    for component in components:
        members = set(component)
        start = min(component)
        if len(component) == 1 and not any(e.target == start for e in out.get(start, [])):
            continue
        # the shortest way back to ``start`` inside the component (breadth first)
        came: Dict[str, Edge] = {}
        frontier = [start]
        found: Optional[Edge] = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for e in out.get(v, []):
                    if e.target == start:
                        found = e
                        break
                    if e.target in members and e.target not in came and e.target != start:
                        came[e.target] = e
                        nxt.append(e.target)
                if found is not None:
                    break
            frontier = nxt
        path = [found]
        while path[0].source != start:
            path.insert(0, came[path[0].source])
        cycles.append(path)
    return cycles


def _describe(cycle: List[Edge]) -> str:
    return " -> ".join([cycle[0].source] + [f"{e.target} (line {e.line} of {e.source}{', lazy' if e.lazy else ''})" for e in cycle])


def test_the_graph_is_read():
    """The parser sees the package: a few known modules and imports (guards against a test that
    passes because it reads nothing)."""
    for module in ("relax_vk", "relax_vk.compiler", "relax_vk.core.scope", "relax_vk.runtime", "relax_vk.tools.cli"):
        assert module in MODULES, module
    assert any(e.source == "relax_vk.compiler" and e.target == "relax_vk.pipeline" for e in EDGES)
    assert any(e.source == "relax_vk.__main__" and e.target == "relax_vk.tools.cli" for e in EDGES)
    assert any(e.lazy for e in EDGES) and any(not e.lazy for e in EDGES)


def test_every_import_names_a_module_that_exists():
    """An import of a relax_vk module that is not there (a stale path after a move: a lazy one would
    only fail when its function runs)."""
    assert not UNKNOWN, "imports of relax_vk modules that do not exist:\n" + "\n".join(map(str, UNKNOWN))


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if _layer(m) is None)
    assert not missing, f"modules in no layer of LAYERS (add their package where it belongs): {missing}"


def _tools_imported_from_below(edges: Sequence[Edge]) -> List[str]:
    return [str(e) for e in edges if (e.target == TOOLS or e.target.startswith(TOOLS + "."))
            and not (e.source == TOOLS or e.source.startswith(TOOLS + ".")) and e.source not in TOOLS_USERS]  # fmt: skip


def _against_the_layers(edges: Sequence[Edge]) -> List[str]:
    bad = []
    for e in edges:
        source, target = _layer(e.source), _layer(e.target)
        if source is not None and target is not None and target > source:
            bad.append(f"{e}: layer {LAYERS[source][0]!r} imports the higher layer {LAYERS[target][0]!r}")
    return bad


def _module_level_cycles(edges: Sequence[Edge]) -> List[str]:
    return [_describe(c) for c in _cycles([e for e in edges if not e.lazy])]


def _any_cycles(edges: Sequence[Edge]) -> List[str]:
    return [_describe(c) for c in _cycles(edges)]


def test_nothing_below_tools_imports_tools():
    bad = _tools_imported_from_below(EDGES)
    assert not bad, "relax_vk.tools is the top layer; imported from below by:\n" + "\n".join(bad)


def test_imports_follow_the_layer_order():
    bad = _against_the_layers(EDGES)
    assert not bad, "imports against the layer order (lowest first: " + " < ".join(n for n, _ in LAYERS) + "):\n" + "\n".join(bad)


def test_no_import_cycles_at_module_level():
    cycles = _module_level_cycles(EDGES)
    assert not cycles, "module-level import cycles:\n" + "\n".join(cycles)


def test_no_import_cycles_even_through_imports_inside_functions():
    """A lazy import that closes a cycle only hides it from the interpreter (the two modules still
    need each other)."""
    cycles = _any_cycles(EDGES)
    assert not cycles, "import cycles (counting imports inside functions):\n" + "\n".join(cycles)


def test_the_public_api_names_modules_that_exist():
    """``relax_vk/__init__.py`` re-exports lazily, by module path (strings the import graph cannot
    see): each one must name a module of the package."""
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text(encoding="utf-8"))
    tables = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("_API", "_MODULES"):
                tables[node.targets[0].id] = ast.literal_eval(node.value)
    assert set(tables) == {"_API", "_MODULES"}
    missing = {name: path for table in tables.values() for name, path in table.items() if f"{ROOT}.{path}" not in MODULES}
    assert not missing, f"relax_vk's lazy re-exports name modules that do not exist: {missing}"


def _heavy_imports(path: Path, lazy_too: bool) -> List[str]:
    found = []
    for node, lazy in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if lazy and not lazy_too:
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else ([node.module or ""] if not node.level else [])
        found += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] in HEAVY]
    return found


def _parents(module: str) -> List[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_the_runtime_side_loads_without_tvm_or_torch():
    """The runtime, the format and storage planning, and everything they import at module level
    (parent packages included), import neither TVM nor torch; the runtime not even inside a
    function."""
    module_level: Dict[str, List[str]] = {}
    for e in EDGES:
        if not e.lazy:
            module_level.setdefault(e.source, []).append(e.target)
    seen = set()
    todo = [m for m in MODULES if any(m == p or m.startswith(p + ".") for p in TVM_FREE)]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += module_level.get(m, []) + _parents(m)
    bad = {}
    for m in sorted(seen):
        heavy = _heavy_imports(MODULES[m], lazy_too=m == "relax_vk.runtime" or m.startswith("relax_vk.runtime."))
        if heavy:
            bad[m] = heavy
    assert not bad, f"modules the runtime side loads import TVM or torch: {bad}"


@pytest.mark.parametrize(
    "module, added, check",
    [
        # a lazy import of the tools from a pass
        ("relax_vk.passes.layout.static_shapes", "def _added():\n    from ...tools import cli\n", _tools_imported_from_below),
        # the core reaching up to the passes, inside a function
        ("relax_vk.core.scope", "def _added():\n    from ..passes import layout\n", _against_the_layers),
        # two modules of one layer importing each other at module level
        ("relax_vk.storage.lifetimes", "from .program import storage_problem\n", _module_level_cycles),
        # ... or one of them inside a function
        ("relax_vk.storage.offsets", "def _added():\n    from .program import assign_storage\n", _any_cycles),
    ],
)
def test_the_checks_can_fail(module, added, check):
    """Each check finds a bad import added to a module of the tree (whatever else it finds there)."""
    patched = MODULES[module].read_text(encoding="utf-8") + "\n\n" + added
    _, _, edges, unknown = _graph({module: patched}, BY_MODULE)
    assert len(unknown) == len(UNKNOWN)  # (the added import names a real module)
    found = set(check(edges)) - set(check(EDGES))
    assert found and all(module in f for f in found), found
