"""What the loop rules share: the base class that gives each rule the module's :class:`LoopFacts`."""

from __future__ import annotations

import libcst as cst

from ...analysis.loops import WRAPPERS, LoopFacts, _last_name
from ...analysis.names import Scope
from ...rule import Rule

TENSOR_FACTORIES = frozenset(
    {f"torch.{n}" for n in ("randn", "rand", "zeros", "ones", "empty", "arange", "randint", "full")}
)


def chain_root(node: cst.CSTNode) -> str | None:
    """``data`` for ``data.detach().float()[0]``: the name a method chain starts from."""
    while True:
        if type(node) is cst.Call:
            node = node.func
        elif type(node) is cst.Attribute or type(node) is cst.Subscript:
            node = node.value
        else:
            return node.value if type(node) is cst.Name else None


def is_literal_loop(node: cst.For | cst.While) -> bool:
    """``for dynamic in [True, False]:``: a loop over a literal list/tuple/set runs a fixed
    handful of configurations, not training steps."""
    return type(node) is cst.For and type(node.iter) in (cst.List, cst.Tuple, cst.Set)


HOST_METHODS = {
    "item": False,
    "tolist": False,
    "cpu": True,
    "numpy": True,
}  # name -> may take arguments


class LoopRule(Rule):
    """A rule that reads the module's loop structure (:class:`LoopFacts`, shared by all of them)."""

    @property
    def facts(self) -> LoopFacts:
        return self.ctx.memo(LoopFacts, lambda: LoopFacts(self.ctx))

    def iterates_device_loader(self, iterable: cst.CSTNode, scope: Scope) -> bool:
        """True when a loop over ``iterable`` (read at the node being visited) iterates a
        torch_xla device loader, or may: a parameter of the enclosing function or an attribute,
        in a module that builds one (the loader may be what is passed in). A device loader
        syncs before handing out each batch (torch_xla 2.9.0
        ``torch_xla/distributed/parallel_loader.py``, ``PerDeviceLoader.next``)."""
        facts = self.facts
        if facts.is_device_loader(iterable, scope):
            return True
        if isinstance(iterable, cst.Call) and _last_name(iterable.func) in WRAPPERS:
            return any(
                self.iterates_device_loader(a.value, scope)
                for a in iterable.args
                if a.keyword is None
            )
        if not facts.has_device_loader:
            return False
        if isinstance(iterable, cst.Attribute):
            return True
        if isinstance(iterable, cst.Name):
            for func in self.ctx.enclosing(cst.FunctionDef):
                p = func.params
                params = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
                return iterable.value in params
        return False


_CALLS = frozenset({cst.Call})
