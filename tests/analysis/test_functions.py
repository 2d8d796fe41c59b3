"""LocalFunctions: which of the file's own functions a call runs, the calls each body runs in
order, and the arms of the ifs around them."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis.context import FileContext
from xla_lint.analysis.functions import LocalFunctions, exclusive

SOURCE = """\
import torch
from helpers import imported

def clip(model):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

def clip(model):
    second()

@decorate(first())
def step(model, opt, fn=default()):
    clip(model)
    imported()
    opt(x)
    def inner():
        return 1
    inner()
    run(lambda: in_lambda())
    if a:
        then_call()
    elif b:
        elif_call()
    else:
        else_call()

class Trainer:
    def _clip(self):
        pass

    def train(self):
        self._clip()
        self.helper()
        other._clip()
        def nested():
            self._clip()
        nested()
        class_call = 1

class Other:
    def _clip(self):
        pass

    def run(self, _clip):
        _clip()

module_call()
"""


def _functions(source: str = SOURCE):
    module = cst.parse_module(source)
    ctx = FileContext(module)
    return ctx, LocalFunctions.of(ctx)


def _text(ctx, node: cst.CSTNode) -> str:
    return ctx.module.code_for_node(node)


def _named(local: LocalFunctions, name: str, owner: str | None = None):
    found = [
        f
        for f in local.functions
        if f.name == name and (owner is None or (f.owner and f.owner.name.value == owner))
    ]
    return found[-1]


def _callees(ctx, local, name: str, owner: str | None = None) -> dict[str, str | None]:
    function = _named(local, name, owner)
    out = {}
    for call, scope in local.calls_of(function):
        callee = local.callee(call, scope, function)
        label = None
        if callee is not None:
            label = callee.name + (f"@{callee.owner.name.value}" if callee.owner else "")
        out[_text(ctx, call.func)] = label
    return out


def test_a_body_lists_the_calls_it_runs_itself_in_order():
    ctx, local = _functions()
    calls = [_text(ctx, c.func) for c, _ in local.calls_of(_named(local, "step"))]
    # not the decorator's or the default's calls (they run where `step` is defined), not
    # the lambda's body, not what the nested def runs
    assert calls == [
        "clip",
        "imported",
        "opt",
        "inner",
        "run",
        "then_call",
        "elif_call",
        "else_call",
    ]
    assert [_text(ctx, c.func) for c, _ in local.calls_of(None)] == [
        "decorate",
        "first",
        "default",
        "module_call",
    ]


def test_a_name_resolves_to_the_def_it_is_bound_to_here():
    ctx, local = _functions()
    found = _callees(ctx, local, "step")
    # the later `def clip` is the one that runs; an import, a parameter and an unknown name
    # are none of the file's functions; a nested def is
    clip = local.callee(*local.calls_of(_named(local, "step"))[0], _named(local, "step"))
    assert found["clip"] == "clip" and clip is _named(local, "clip")
    assert [_text(ctx, c.func) for c, _ in local.calls_of(clip)] == ["second"]
    assert found["imported"] is None
    assert found["opt"] is None
    assert found["inner"] == "inner"
    assert found["run"] is None


def test_self_calls_resolve_to_the_methods_of_the_class_self_stands_for():
    ctx, local = _functions()
    found = _callees(ctx, local, "train")
    assert found["self._clip"] == "_clip@Trainer"
    assert found["self.helper"] is None  # no such method: not Other's, not a module function
    assert found["other._clip"] is None  # another object's method
    assert found["nested"] == "nested"
    nested = _named(local, "nested")
    assert nested.owner is None and nested.self_class is _named(local, "train").owner
    ((call, scope),) = local.calls_of(nested)
    assert local.callee(call, scope, nested) is _named(local, "_clip", "Trainer")
    # a parameter shadows the method of the same name
    assert _callees(ctx, local, "run", "Other") == {"_clip": None}


def test_the_arms_of_an_if_are_exclusive_and_its_test_is_in_neither():
    source = (
        "def f():\n"
        "    if check():\n"
        "        a()\n"
        "        if c:\n"
        "            b()\n"
        "    elif d:\n"
        "        e()\n"
        "    else:\n"
        "        g()\n"
        "    h()\n"
    )
    ctx, local = _functions(source)
    arms = {_text(ctx, c.func): local.arms(c) for c, _ in local.calls_of(_named(local, "f"))}
    assert arms["check"] == () and arms["h"] == ()
    assert exclusive(arms["a"], arms["e"]) and exclusive(arms["a"], arms["g"])
    assert exclusive(arms["e"], arms["g"]) and exclusive(arms["b"], arms["g"])
    assert not exclusive(arms["a"], arms["b"])
    assert not exclusive(arms["a"], arms["h"]) and not exclusive(arms["check"], arms["g"])
    assert len(arms["b"]) == 2 and len(arms["g"]) == 2  # `else` of the `elif`: two ifs deep


def test_computed_once_per_file():
    ctx, local = _functions()
    assert LocalFunctions.of(ctx) is local


def test_self_calls_find_methods_of_bases_this_file_defines():
    source = (
        "import torch\n"
        "class Base(object):\n"
        "    def _clip(self):\n        pass\n"
        "    def _step(self):\n        pass\n"
        "class Mixin:\n"
        "    def _log(self):\n        pass\n"
        "class Trainer(Base, Mixin, metaclass=Meta):\n"
        "    def _step(self):\n        pass\n"
        "    def fit(self):\n"
        "        self._clip()\n        self._step()\n        self._log()\n        self._none()\n"
        "class Module(torch.nn.Module, Base):\n"
        "    def fit(self):\n        self._clip()\n"
        "class Loop(Loop):\n"
        "    def fit(self):\n        self._clip()\n"
    )
    ctx, local = _functions(source)
    found = _callees(ctx, local, "fit", "Trainer")
    # its own override first, then the bases left to right; `object` and metaclass= are no base
    assert found == {
        "self._clip": "_clip@Base",
        "self._step": "_step@Trainer",
        "self._log": "_log@Mixin",
        "self._none": None,
    }
    # an imported base first may define `_clip` itself: not followed past it
    assert _callees(ctx, local, "fit", "Module") == {"self._clip": None}
    assert _callees(ctx, local, "fit", "Loop") == {"self._clip": None}  # no endless search


def test_returns_lists_a_body_s_own_return_values_in_order():
    ctx, local = _functions(
        "def scalar(t, flag):\n"
        "    if flag:\n        return\n"
        "    def inner():\n        return 'nested'\n"
        "    f = lambda: 3\n"
        "    class C:\n        def m(self):\n            return 'method'\n"
        "    return float(t.cpu().item())\n"
        "def none():\n    pass\n"
    )
    values = local.returns(_named(local, "scalar"))
    assert [None if v is None else _text(ctx, v) for v in values] == [
        None,
        "float(t.cpu().item())",
    ]
    assert local.returns(_named(local, "none")) == []
    assert local.returns(_named(local, "scalar")) is values  # computed once
