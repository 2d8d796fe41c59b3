"""Positions computed statement by statement equal LibCST's whole-module PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from xla_lint.analysis.positions import statement_positions
from xla_lint.analysis.walk import iter_nodes

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("xla_lint/**/*.py"), *ROOT.glob("examples/**/*.py")])
EDGE_CASES = [
    "#!/usr/bin/env python\n# header comment\n\n\nimport torch_xla\nx = 1; y = 2\n\n\ndef f():\n    return (1,\n            2)\n",
    "x = 1",  # no trailing newline
    "\n\n# only comments before\nif True:\n    pass\nelse:\n    print('a')\n",
]


@pytest.mark.parametrize(
    "source", [p.read_text(encoding="utf-8") for p in SOURCES[:40]] + EDGE_CASES
)
def test_statement_positions_match_libcst(source):
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    chosen = tree.body[::3] + tree.body[-1:]
    partial = statement_positions(tree, chosen)
    checked = 0
    for stmt in chosen:
        for node in iter_nodes(stmt, frozenset()):
            assert partial[node] == full[node]
            checked += 1
    assert checked > 0


# --- locate(): innermost statement placed by CPython's line numbers ---------------------

import ast  # noqa: E402

from xla_lint.analysis import positions  # noqa: E402

NESTED = '''\
import torch_xla


@decorator(1)
# comment between decorators
@other
async def train(loader, *, steps=3):
    """Doc."""
    for step, batch in enumerate(loader):  # loop
        if step == 0:
            x = f(batch); y = g(x)
        elif step == 1:
            # leading comment
            z = h(
                batch,
            )
        elif step == 2: w = k(batch)
        else:
            try:
                q = r(batch)
            except ValueError as exc:
                s = t(exc)
            else:
                u = v()
            finally:
                done()
    try:
        risky()
    except* TypeError:
        grouped()
    while cond():
        async with lock() as l:
            await work(l)
    else:
        after()
    match command:
        case [a, b]:
            handle(a, b)
        case _:
            other()


class Model:
\tdef forward(self, x):
\t\treturn self.net(x)  # tab-indented


(parenthesized
 )(call)
caf\u00e9 = "\u00e9t\u00e9"; nested = [f(x) for x in caf\u00e9]
'''


def _paths(tree: cst.Module) -> dict:
    """Every node of ``tree`` -> its path from the module (module first, node last)."""
    out = {tree: (tree,)}
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in node.children:
            out[child] = out[node] + (child,)
            stack.append(child)
    return out


@pytest.mark.parametrize(
    "source",
    [NESTED, NESTED.replace("\n", "\r\n")] + [p.read_text(encoding="utf-8") for p in SOURCES[:25]],
)
def test_locate_matches_libcst_for_every_node(source, monkeypatch):
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    paths = _paths(tree)
    syntax = ast.parse(source)
    wanted = [
        (node, path[:-1])
        for node, path in paths.items()
        if isinstance(node, (cst.Call, cst.Name, cst.BaseCompoundStatement))
    ]
    found = positions.locate(tree, syntax, wanted)
    for node, _ in wanted:
        assert found[node] == full[node], tree.code_for_node(node)[:60]


def test_locate_places_ordinary_statements_without_generating_the_module(monkeypatch):
    """The fast path is taken: neither fallback (whole module, module-level statement) runs."""

    def refuse(*args, **kwargs):
        raise AssertionError("fallback used")

    monkeypatch.setattr(positions, "module_positions", refuse)
    monkeypatch.setattr(positions, "statement_positions", refuse)
    source = NESTED.replace(
        "(parenthesized\n )(call)\n", ""
    )  # CPython places a parenthesized start differently
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    paths = _paths(tree)
    wanted = [(node, path[:-1]) for node, path in paths.items() if isinstance(node, cst.Call)]
    found = positions.locate(tree, ast.parse(source), wanted)
    assert len(wanted) > 15
    assert all(found[node] == full[node] for node, _ in wanted)


def test_locate_without_a_path_or_cpython_tree_still_places_nodes():
    source = "import torch_xla\n\ndef f():\n    if a:\n        return g(1)\n"
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    call = next(n for n in _paths(tree) if isinstance(n, cst.Call))
    assert (
        positions.locate(tree, ast.parse(source), [(call, ())])[call] == full[call]
    )  # path found by search
    assert (
        positions.locate(tree, None, [(call, (tree,))])[call] == full[call]
    )  # no CPython tree: slow way


@pytest.mark.parametrize(
    "source",
    [
        "foo(bar)\rimport torch_xla\rprint(1)\r",  # lone CR
        "foo(bar)\r\nimport torch_xla\r\nprint(1)\r\n",  # CRLF
        "# head\r\rfoo(bar)\rimport torch_xla\rprint(1)\r",  # a header counted in lone CRs
    ],
)
def test_fallback_counts_every_kind_of_line_end(source):
    """The module-level fallback counts \\r and \\r\\n line ends too (it used to count only \\n,
    which put every statement of a CR file on line 1 and let --fix edit the wrong code)."""
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    call = [n for n in _paths(tree) if isinstance(n, cst.Call)]
    last = max(call, key=lambda n: full[n].start.line)
    assert positions.statement_positions(tree, [tree.body[-1]])[last] == full[last]
    assert (
        positions.locate(tree, None, [(last, ())])[last] == full[last]
    )  # no CPython tree: the fallback
    assert positions.locate(tree, ast.parse(source), [(last, ())])[last] == full[last]


def test_form_feed_before_a_statement_moves_that_line_as_cpython_counts_it():
    """LibCST drops form feeds in front of a line's first token (its positions are then one
    column short per form feed); placed nodes on that line take CPython's columns."""
    source = "import torch_xla\n\x0c\x0cy = f(1); g(2)\nh(3)\n"
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    calls = {
        n.func.value: (n, path[:-1]) for n, path in _paths(tree).items() if isinstance(n, cst.Call)
    }
    found = positions.locate(tree, ast.parse(source), list(calls.values()))
    syntax = {
        n.func.id: (n.lineno, n.col_offset, n.end_col_offset)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call)
    }
    for name, (node, _) in calls.items():
        r = found[node]
        assert (r.start.line, r.start.column, r.end.column) == syntax[name]
    assert found[calls["f"][0]].start.column == full[calls["f"][0]].start.column + 2
    assert found[calls["h"][0]] == full[calls["h"][0]]


def test_locate_is_linear_in_the_number_of_reported_statements():
    """Each block's statements are indexed once (matching them one by one from the top was quadratic)."""
    source = "import torch_xla\n" + "".join(f"print({i})\n" for i in range(3000))
    tree = cst.parse_module(source)
    calls = [(stmt.body[0].value, (tree, stmt, stmt.body[0])) for stmt in tree.body[1:]]
    calls_made = built = 0
    real = positions._block_index

    def counting(block):
        nonlocal calls_made, built
        calls_made += 1
        built += id(block) not in positions._INDEXES
        return real(block)

    positions._block_index, saved = counting, positions._block_index
    try:
        found = positions.locate(tree, ast.parse(source), calls)
    finally:
        positions._block_index = saved
    assert len(found) > 3000 and calls_made == 3000 and built == 1
    assert len(positions._INDEXES) == 0  # nothing kept once locate() returns
