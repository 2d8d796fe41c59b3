"""The package's layers: every import points down the layer order, and no module reaches itself.

The order, bottom to top, is :data:`LAYERS` (the README's "Development" section and each folder's
``__init__.py`` say what each holds). Every import counts, at module level or inside a function
(a lazy import is still a dependency); only ``if TYPE_CHECKING:`` imports are left out, since they
never run (annotations of the rule API name :class:`~xla_lint.analysis.context.FileContext`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "xla_lint"

# Bottom to top. A module's layer is the first entry that is the module or a package above it.
LAYERS: list[tuple[str, ...]] = [
    (
        "xla_lint",
        "xla_lint.diagnostics",
        "xla_lint.catalogue",
        "xla_lint.scalars",
        "xla_lint.shards",
    ),
    ("xla_lint.sources",),
    ("xla_lint.config",),
    ("xla_lint.program",),
    ("xla_lint.results", "xla_lint.rule"),
    ("xla_lint.analysis",),
    ("xla_lint.rules",),
    ("xla_lint.linter",),
    ("xla_lint.pipeline",),
    ("xla_lint.migrate",),
    ("xla_lint.reporters", "xla_lint.docs"),
    ("xla_lint.runtime",),
    ("xla_lint.trace", "xla_lint.server"),
    ("xla_lint.cli", "xla_lint.__main__"),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}

# Registries: a package whose ``__init__`` imports its own plug-in modules inside a function (the
# reporters by format, the runtime checks by name) while each plug-in imports the package's
# records. The package is complete before any plug-in is imported, so no import runs in a circle;
# test_registries_import_their_modules_lazily holds them to that.
REGISTRIES = ("xla_lint.reporters", "xla_lint.runtime.checks")


def layer_of(module: str) -> int:
    best = None
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                best is None or len(name) > len(best[1])
            ):
                best = (index, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str) -> dict[str, int]:
    """The xla_lint modules ``module`` imports (module -> line), TYPE_CHECKING blocks left out."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "xla_lint":
                    found.setdefault(_existing(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "xla_lint":
                return
            for alias in node.names:  # `from . import apis` imports the submodule
                sub = f"{target}.{alias.name}"
                found.setdefault(sub if sub in MODULES else _existing(target), node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.pop(module, None)
    return found


def _existing(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


GRAPH = {m: imports_of(m) for m in sorted(MODULES)}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    here = layer_of(module)
    upward = [
        f"{module} imports {target} (line {line}): layer {layer_of(target)} is above {here}"
        for target, line in GRAPH[module].items()
        if layer_of(target) > here
    ]
    assert not upward


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> modules it imports): Tarjan's strongly
    connected components of more than one module; a registry's imports of its own plug-ins
    are left out (see :data:`REGISTRIES`)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in graph or (v in REGISTRIES and w.startswith(v + ".")):
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_import_circles():
    assert not circles(GRAPH)


def test_the_checks_fail_on_an_upward_import_and_on_a_circle():
    # An upward import is seen as one (a sources module importing the pipeline) ...
    assert layer_of("xla_lint.pipeline.run") > layer_of("xla_lint.sources.text")
    assert "xla_lint.sources.text" in GRAPH["xla_lint.pipeline.run"]
    # ... and a circle, also through a third module, while a registry's own plug-ins are not one.
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert circles(graph) == [["a", "b", "c"]]
    registry = {"xla_lint.reporters": {"xla_lint.reporters.text": 1}}
    registry["xla_lint.reporters.text"] = {"xla_lint.reporters": 1}
    assert circles(registry) == []
    registry["xla_lint.reporters.text"]["xla_lint.cli"] = 1  # a plug-in in a circle of its own
    registry["xla_lint.cli"] = {"xla_lint.reporters.text": 1}
    assert circles(registry) == [["xla_lint.cli", "xla_lint.reporters.text"]]


@pytest.mark.parametrize("package", REGISTRIES)
def test_registries_import_their_modules_lazily(package):
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    top_level = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None
    ]
    assert not top_level, "a registry imports its plug-ins inside the function that lists them"
