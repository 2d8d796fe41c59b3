"""LoopFacts: where each call counts, from one walk of the module."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis.context import FileContext
from xla_lint.analysis.loops import LoopFacts
from xla_lint.analysis.walk import iter_nodes

SOURCE = """\
import torch_xla

def train_step(model, x):
    loss = model(x).sum()
    loss.backward()
    for p in params(backward_in_iter().backward()):
        p.grad.zero_()
    return loss

class Trainer:
    def fit(self, loader):
        for epoch in range(3):
            for x in loader:
                train_step(self.model, x)
            else:
                summary.backward()
            log(lambda: other.backward())
        while poll().backward():
            torch_xla.sync()
"""


def _loops(tree: cst.Module) -> dict[str, cst.CSTNode]:
    """The loops of ``tree`` by their first line of code (``for epoch in range(3):``)."""
    out = {}
    for node in iter_nodes(tree, frozenset()):
        if isinstance(node, (cst.For, cst.While)):
            out[tree.code_for_node(node).strip().splitlines()[0]] = node
    return out


def test_function_steps_leave_out_their_loops():
    facts = LoopFacts(FileContext(cst.parse_module(SOURCE)))
    step = facts.functions["train_step"]
    assert step.backward and not step.xla_step  # the loop's iterable is not the function's own code
    assert not facts.functions["fit"].backward  # everything in fit runs inside loops or a lambda


def test_loop_own_and_full_steps():
    tree = cst.parse_module(SOURCE)
    facts = LoopFacts(FileContext(tree))
    loops = _loops(tree)
    outer, inner = loops["for epoch in range(3):"], loops["for x in loader:"]
    poll = loops["while poll().backward():"]
    params_loop = loops["for p in params(backward_in_iter().backward()):"]

    own, full = facts.loop(inner)
    assert own.backward and full.backward  # through train_step, a same-module function
    own, full = facts.loop(outer)
    # the inner loop's body and its else branch run inside the outer loop, but not as its
    # own code; the lambda's body runs elsewhere
    assert full.backward and not own.backward
    assert facts.inner_loops(outer) == [inner]
    own, full = facts.loop(poll)
    assert own.backward and own.xla_step and own.boundary  # a while loop's test is part of its body
    own, full = facts.loop(params_loop)
    assert not full.backward  # a for loop's iterable runs once, before the loop


def test_assignments_in_a_loop_body():
    tree = cst.parse_module(
        "for x in data:\n    a = f(x)\n    b += a\n    c: int = 1\n    d: int\n"
        "    def g():\n        e = 2\nz = 3\n"
    )
    facts = LoopFacts(FileContext(tree))
    (loop,) = _loops(tree).values()
    written = [tree.code_for_node(n).strip() for n in facts.assignments(loop)]
    assert written == ["a = f(x)", "b += a", "c: int = 1", "d: int"]


def test_backward_in_a_while_test_is_a_step_but_not_a_tensor_of_the_body():
    tree = cst.parse_module("import torch_xla\nwhile loss.backward() is None:\n    opt.step()\n")
    facts = LoopFacts(FileContext(tree))
    (loop,) = _loops(tree).values()
    own, full = facts.loop(loop)
    assert own.backward and full.backward and not full.backward_roots


PHASES_SOURCE = """\
import torch_xla

def evaluate(model, loader):
    for x in loader:
        model(x)

for epoch in range(2):
    for x, y in train_loader:
        loss = model(x)
        loss.backward()
        optimizer.step()
    evaluate(model, test_loader)
    while not ready():
        wait()
"""


def test_loop_spans_give_each_loop_its_lines_and_kind():
    from xla_lint.analysis.loops import LoopKind, innermost_loop, loop_spans

    spans = loop_spans(FileContext(cst.parse_module(PHASES_SOURCE)))
    assert [(s.first, s.last, s.kind) for s in spans] == [
        (4, 5, LoopKind.EVALUATION),
        (7, 14, LoopKind.TRAINING),  # its inner loop trains
        (8, 11, LoopKind.TRAINING),
        (13, 14, LoopKind.SETUP),
    ]
    assert innermost_loop(spans, 10).kind is LoopKind.TRAINING
    assert innermost_loop(spans, 12).kind is LoopKind.TRAINING  # the epoch loop's own line
    assert innermost_loop(spans, 14).kind is LoopKind.SETUP
    assert innermost_loop(spans, 5).kind is LoopKind.EVALUATION
    assert innermost_loop(spans, 2) is None
