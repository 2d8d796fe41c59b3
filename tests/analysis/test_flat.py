"""The module's Flat (its nodes in traversal order, built once per file) is what a walk sees;
the rule traversal and the per-file analyses read it instead of walking the tree again."""

from __future__ import annotations

import libcst as cst
import pytest

from xla_lint.analysis.context import Dispatcher, FileContext
from xla_lint.analysis.loops import LoopFacts
from xla_lint.analysis.meshes import assigned_once
from xla_lint.analysis.walk import LEAVES, TRIVIA, Flat, iter_nodes, silent_types, walk

SOURCE = """\
import os
import torch_xla

X = 1

@decorate(arg=[y for y in range(3)])
def train(model, loader, opt=lambda z: z):
    global X
    env = os.environ.copy()
    while True:
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            opt.step()
        else:
            print((n := 3), "done")
    return env

class Trainer(Base):
    def fit(self, loader):
        mesh = make_mesh()
        with ctx() as mesh2:
            pass
        return [m for m in loader if m], mesh, mesh2
"""


def test_flat_is_the_walk_order_with_each_subtree():
    module = cst.parse_module(SOURCE)
    flat = Flat(module)
    assert flat.nodes == list(iter_nodes(module))
    for i, node in enumerate(flat.nodes):
        assert flat.nodes[i : flat.ends[i]] == list(iter_nodes(node))


def test_flat_without_leaves_and_of_types():
    module = cst.parse_module(SOURCE)
    lean = Flat(module, frozenset({cst.Name, cst.Integer}))
    assert lean.nodes == [n for n in iter_nodes(module) if type(n) not in (cst.Name, cst.Integer)]
    for i, node in enumerate(lean.nodes):
        assert lean.nodes[i : lean.ends[i]] == [
            n for n in iter_nodes(node) if type(n) not in (cst.Name, cst.Integer)
        ]
    wanted = frozenset({cst.Call, cst.For})
    assert [lean.nodes[i] for i in lean.of_types(wanted)] == [
        n for n in lean.nodes if type(n) in wanted
    ]
    with pytest.raises(ValueError):
        lean.of_types(frozenset({cst.Name}))  # left out: asking for it is a bug
    with pytest.raises(ValueError):
        Flat(module, frozenset({cst.Call}))  # only leaves may be left out
    assert not LEAVES & TRIVIA


class _Trace:
    """Records each callback with the traversal's ancestors and scope."""

    def __init__(self, ctx: FileContext | None, events: list) -> None:
        self.ctx, self.events = ctx, events

    def _record(self, what: str, node: cst.CSTNode) -> None:
        if self.ctx is not None:
            ancestors = tuple(id(n) for n in self.ctx.stack)
            self.events.append((what, id(node), ancestors, id(self.ctx.scope.node)))

    def visit_Call(self, node: cst.Call) -> None:
        self._record("visit", node)

    def leave_Call(self, node: cst.Call) -> None:
        self._record("leave", node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._record("visit", node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self._record("leave", node)


class _Reference(cst.CSTVisitor):
    """What the Dispatcher did before it read the Flat: a plain walk keeping the stacks."""

    def __init__(self, ctx: FileContext, trace: _Trace) -> None:
        super().__init__()
        self.ctx, self.trace = ctx, trace

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        ctx.stack.append(node)
        if node in ctx.scopes and node is not ctx.module:
            ctx.scope_stack.append(ctx.scopes[node])
        method = getattr(self.trace, f"visit_{type(node).__name__}", None)
        if method is not None:
            method(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        ctx = self.ctx
        method = getattr(self.trace, f"leave_{type(original_node).__name__}", None)
        if method is not None:
            method(original_node)
        if original_node in ctx.scopes and original_node is not ctx.module:
            ctx.scope_stack.pop()
        ctx.stack.pop()


def test_dispatcher_reads_the_flat_as_a_walk_would_visit():
    module = cst.parse_module(SOURCE)
    listened = frozenset({cst.Call, cst.FunctionDef, cst.Assign})
    skip = silent_types(listened)

    expected: list = []
    reference_ctx = FileContext(module)
    walk(module, _Reference(reference_ctx, _Trace(reference_ctx, expected)), skip)

    for traverse in ("walk", "libcst"):
        got: list = []
        ctx = FileContext(module)
        dispatcher = Dispatcher(ctx, [_Trace(ctx, got)])
        if traverse == "walk":
            walk(module, dispatcher, skip)
        else:
            module.visit(dispatcher)
        # the ancestors left out are the silent ones a walk with `skip` leaves out too
        assert got == expected and len(got) > 20
        assert cst.Name not in {type(n) for n in ctx.flat.nodes}  # nobody listened to names
        assert not ctx.stack and ctx.scope is ctx.root_scope


def test_loop_facts_from_a_flat_without_names():
    """``while True:``: its test (a name) is not in a Flat without names; the body still counts."""
    module = cst.parse_module(SOURCE)
    ctx = FileContext(module)
    ctx.flat_without(frozenset({cst.Name}))
    facts = LoopFacts(ctx)
    loops = [n for n in iter_nodes(module) if type(n) in (cst.For, cst.While)]
    (while_loop, for_loop) = loops
    _, full = facts.loop(while_loop)
    assert full.backward and full.optimizer
    assert facts.inner_loops(while_loop) == [for_loop]
    assert [type(a) for a in facts.assignments(while_loop)] == [cst.Assign]
    reference = LoopFacts(FileContext(module))
    assert facts.loop(while_loop) == reference.loop(while_loop)
    assert facts.functions.keys() == reference.functions.keys() == {"train", "fit"}


def test_assigned_once_per_scope_body():
    module = cst.parse_module(SOURCE)
    ctx = FileContext(module)
    found = {}

    class Ask:
        def visit_Name(self, node: cst.Name) -> None:
            value = assigned_once(ctx, node)
            found[node.value] = None if value is None else module.code_for_node(value)

    walk(module, Dispatcher(ctx, [Ask()]))
    assert found["mesh"] == "make_mesh()"  # once in fit
    assert found["env"] == "os.environ.copy()"
    assert found["X"] == "1"  # train's `global X` is a binding of train's body, not the module's
    assert found["loss"] == "model(x).sum()"
    assert found["mesh2"] is None and found["x"] is None  # `as`, a loop target
    assert found["n"] is None and found["m"] is None  # `:=`, a comprehension target
