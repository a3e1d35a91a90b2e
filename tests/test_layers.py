"""The layers point down: no module imports a layer above its own, and no package imports itself in a circle.

Reads the source with :mod:`ast` (nothing is imported), so every import counts: module level, inside a
function (a lazy import is still a dependency) and under ``TYPE_CHECKING``. docs/architecture.md draws the same
layers and says what flows between them.

FIBServe, lowest first: ``sandbox``/``trace`` (foundations: process isolation, the FlashInfer Trace data model)
-> ``datasets`` (the bundled trace sets, where trace sets come from when none are named, and the catalog
that looks names up in them: data written in the trace format, so above ``trace``) -> ``build``,
``analysis`` -> ``bench``, ``static_analysis`` -> ``tools``, ``api`` (the wire contract) -> ``serve`` ->
``client``, ``cli``. Inside ``bench`` the rooms point down too: its base modules (config, failures, report,
dtypes, device, candidate) -> ``data`` -> ``worker`` -> ``correctness`` -> ``timing`` -> the evaluation
(``session``, ``evaluator``). mini-ptx-agent sits above all of it as a client: it may use fibserve's data model,
bundled data, static analysis, wire contract and HTTP client, never the evaluator, the tools or the server's
internals; fibserve never imports mini_ptx_agent. Importing ``fibserve.client`` loads none of the server,
evaluator or builders (checked by importing it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "fibserve": ROOT / "packages" / "fibserve" / "src" / "fibserve",
    "mini_ptx_agent": ROOT / "packages" / "mini-ptx-agent" / "src" / "mini_ptx_agent",
}

FIBSERVE_LAYERS: list[set[str]] = [
    {"sandbox", "trace", "ray_driver"},
    {"datasets"},
    {"build", "analysis"},
    {"bench", "static_analysis"},
    {"tools", "api"},
    {"serve"},
    {"client", "cli", "__main__"},
]
"""fibserve's subpackages and top-level modules by layer, lowest first (``fibserve/__init__`` is no layer: it
only re-exports ``check`` lazily). ``ray_driver`` (joining a Ray cluster, for ``serve --ray`` and
``ptxbench experiment run --ray``) imports no other part of fibserve."""

AGENT_LAYERS: list[set[str]] = [
    {
        "task",
        "feedback_options",
        "architecture",
        "extraction",
        "trajectory",
        "prompts",
        "models",
        "demo",
        "output",
    },
    {"environment", "feedback", "history", "task_file"},
    {"agent"},
    {"runs"},
    {"quickstart", "experiments"},
    {"reports", "data", "harbor", "inspect"},
    {"cli", "inspect_cli", "__main__"},
]
"""mini_ptx_agent's modules and subpackages by layer, lowest first. ``experiments``, ``reports``, ``data``,
``harbor`` and ``inspect`` are the places later issues fill (an experiment runs many trajectories through
``runs``; reports, data pipelines, Harbor and the inspector read what experiments wrote)."""

AGENT_MAY_IMPORT = {
    "trace", "datasets", "sandbox", "build", "analysis", "static_analysis", "api", "client", "ray_driver",
}  # fmt: skip
"""The parts of fibserve mini_ptx_agent may import: the data model, the bundled data and its catalog (the
demo's reference kernels; `ptxbench run` looks a definition up in the catalog before a run starts), the static
analysis's model (what the agent reads of an answer), the HTTP client and, for the
embedded service it starts, the sandbox's environment allowlist; and, for ``experiment run --ray``, how to
join a Ray cluster. The evaluator, the tools and the server run
in FIBServe's own process, never in the agent's."""

BENCH_ROOMS: list[set[str]] = [
    {"dtypes", "config", "failures", "report", "device", "candidate"},
    {"data"},
    {"worker"},
    {"correctness"},
    {"timing"},
    {"session", "evaluator"},
]
"""``fibserve.bench``'s modules and rooms by layer, lowest first (``bench/__init__`` only re-exports lazily)."""

CLIENT_MUST_NOT_LOAD = (
    "fibserve.serve", "fibserve.bench.evaluator", "fibserve.bench.session", "fibserve.bench.worker",
    "fibserve.build.builder", "fibserve.build.cuda", "fibserve.tools.runner", "torch", "fastapi", "uvicorn",
)  # fmt: skip
"""What ``import fibserve.client`` (and so the agent's use of it) must not load."""

KNOWN_UPWARD: set[tuple[str, str]] = set()
"""Upward edges tolerated for now, ``(importer, imported)`` (none: issue 15 removed the last ones)."""

KNOWN_CYCLES: list[list[str]] = []
"""Import circles tolerated for now (none: issue 15 removed the last ones; a new one is fixed, not listed)."""


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported`` at ``line`` (both are dotted module names)."""

    importer: str
    imported: str
    line: int


def module_names() -> dict[str, Path]:
    """Every module of both packages: dotted name -> file (a package is its ``__init__.py``)."""
    modules = {}
    for top, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((top, *parts))] = path
    return modules


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that ``name`` names: itself, else its longest prefix that is a module; None when
    it is not ours (the standard library, a third-party package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(importer: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """The modules of ours that ``importer`` imports, one edge per import statement and name."""
    edges = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, importer, path.name == "__init__.py")
            # `from pkg import name` imports the submodule pkg.name when there is one, else pkg itself
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            target = _target(name, modules)
            if target is not None and target != importer:
                edges.append(Edge(importer, target, node.lineno))
    return edges


def import_graph() -> list[Edge]:
    """Every import edge between our modules."""
    modules = module_names()
    return [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]


def layer(module: str) -> tuple[str, int] | None:
    """``(package, layer index)`` of a module; None for ``fibserve/__init__``.

    Raises:
        LookupError: the module's first component below the package is in no layer table (a new package
            must say where it sits).
    """
    top, _, rest = module.partition(".")
    if not rest:
        return None
    head = rest.split(".")[0]
    table = FIBSERVE_LAYERS if top == "fibserve" else AGENT_LAYERS
    for index, members in enumerate(table):
        if head in members:
            return top, index
    raise LookupError(
        f"{top}.{head} is in no layer of tests/test_layers.py: add it to the layer it belongs to"
    )


def upward(edge: Edge) -> str | None:
    """Why ``edge`` points up (a message naming both ends and the line), or None when it is allowed."""
    source, target = layer(edge.importer), layer(edge.imported)
    if source is None or target is None:
        return None
    where = f"{edge.importer} (line {edge.line}) imports {edge.imported}"
    if source[0] == "fibserve" and target[0] == "mini_ptx_agent":
        return f"{where}: fibserve never imports mini_ptx_agent"
    if source[0] == "mini_ptx_agent" and target[0] == "fibserve":
        head = edge.imported.split(".")[1]
        if head not in AGENT_MAY_IMPORT:
            return f"{where}: mini_ptx_agent may import only fibserve's {', '.join(sorted(AGENT_MAY_IMPORT))}"
        return None
    if target[1] > source[1]:
        return f"{where}: layer {target[1]} is above layer {source[1]}"
    return None


def bench_room(module: str) -> int | None:
    """The layer of a ``fibserve.bench`` module in :data:`BENCH_ROOMS` (None outside bench or for its ``__init__``).

    Raises:
        LookupError: a bench module or room in no layer of the table.
    """
    parts = module.split(".")
    if parts[:2] != ["fibserve", "bench"] or len(parts) < 3:
        return None
    for index, members in enumerate(BENCH_ROOMS):
        if parts[2] in members:
            return index
    raise LookupError(
        f"fibserve.bench.{parts[2]} is in no room of tests/test_layers.py: add it to BENCH_ROOMS"
    )


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_layer_above_it() -> None:
    problems = [
        why
        for edge in import_graph()
        if (edge.importer, edge.imported) not in KNOWN_UPWARD and (why := upward(edge))
    ]
    assert problems == []


def test_the_rooms_of_bench_point_down() -> None:
    problems = [
        f"{edge.importer} (line {edge.line}) imports {edge.imported}"
        for edge in import_graph()
        if (low := bench_room(edge.imported)) is not None
        and (high := bench_room(edge.importer)) is not None
        and low > high
    ]
    assert problems == []


def test_importing_the_client_loads_no_server_evaluator_or_builder() -> None:
    import subprocess
    import sys

    code = "import sys, fibserve.client; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    found = [m for m in loaded.stdout.split() if m.startswith(CLIENT_MUST_NOT_LOAD)]
    assert found == []


def test_no_package_imports_itself_in_a_circle() -> None:
    assert [cycle for cycle in cycles(import_graph()) if cycle not in KNOWN_CYCLES] == []


def test_the_known_exceptions_are_still_there() -> None:
    """A known exception that was fixed must leave its table, so the table never hides a new one."""
    edges = import_graph()
    assert sorted(KNOWN_UPWARD - {(e.importer, e.imported) for e in edges if upward(e)}) == []
    assert [cycle for cycle in KNOWN_CYCLES if cycle not in cycles(edges)] == []


def test_every_module_has_a_layer() -> None:
    for module in module_names():
        layer(module)
        bench_room(module)


def test_an_upward_edge_fails() -> None:
    """The checks can fail: a made-up import of the server from the data model, and a made-up circle."""
    assert upward(Edge("fibserve.trace.definition", "fibserve.serve.app", 1)) is not None
    assert upward(Edge("fibserve.build.cuda", "mini_ptx_agent.agent", 1)) is not None
    assert upward(Edge("mini_ptx_agent.agent", "fibserve.bench.evaluator", 1)) is not None
    assert upward(Edge("fibserve.serve.app", "fibserve.trace.definition", 1)) is None
    assert cycles([Edge("a", "b", 1), Edge("b", "c", 1), Edge("c", "a", 1), Edge("c", "d", 1)]) == [
        ["a", "b", "c"]
    ]
    with pytest.raises(LookupError, match=r"fibserve\.newpart"):
        layer("fibserve.newpart.module")
    worker, timing = bench_room("fibserve.bench.worker.slots"), bench_room("fibserve.bench.timing.checks")
    assert worker is not None and timing is not None and worker < timing  # slots importing checks would fail
