"""What the loop rules share: the base class that gives each rule the module's :class:`LoopFacts`."""

from __future__ import annotations

import libcst as cst

from ...analysis.loaders import LOADER, RETURN, WRAPPERS, parse_param
from ...analysis.loops import LoopFacts, _last_name
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
        """True when a loop over ``iterable`` may iterate a torch_xla device loader that this
        module decides (:meth:`device_loader_keys` is None). A device loader syncs before
        handing out each batch (torch_xla 2.9.0 ``torch_xla/distributed/parallel_loader.py``,
        ``PerDeviceLoader.next``)."""
        return self.device_loader_keys(iterable, scope) is None

    def device_loader_keys(self, iterable: cst.CSTNode, scope: Scope) -> frozenset[str] | None:
        """None when a loop over ``iterable`` (read in ``scope``) may iterate a device loader
        this module makes (through names, ``a or b``, ``x if c else y``, ``iter``/``enumerate``/
        ``islice``/..., its own functions' returns: :meth:`LoaderFlow.sources`), or an attribute
        in a module that makes one (the loader may be what is stored there). Otherwise the flow
        keys of what other code decides: the parameters and the returns of functions it may
        iterate (``loop.run_epoch#2:loader``, ``ret:data.get_loader``), for the finding's
        ``unless`` (the program model drops it when one may be a loader); empty: provably no
        loader as far as the program goes."""
        flow = self.facts.flow
        found = flow.sources(iterable, scope)
        if LOADER in found:
            return None
        if flow.makes_loader and _holds_attribute(iterable):
            return None
        return frozenset(k for k in found if k.startswith(RETURN) or parse_param(k) is not None)


def _holds_attribute(node: cst.CSTNode) -> bool:
    """``self.loader``, ``enumerate(self.loader)``, ``self.it or self.loader``: an attribute the
    iterable may be, directly, through a wrapper or an operand."""
    kind = type(node)
    if kind is cst.Attribute:
        return True
    if kind is cst.BooleanOperation:
        assert isinstance(node, cst.BooleanOperation)
        return _holds_attribute(node.left) or _holds_attribute(node.right)
    if kind is cst.IfExp:
        assert isinstance(node, cst.IfExp)
        return _holds_attribute(node.body) or _holds_attribute(node.orelse)
    if kind is cst.Call:
        assert isinstance(node, cst.Call)
        return _last_name(node.func) in WRAPPERS and any(
            _holds_attribute(a.value) for a in node.args if a.keyword is None
        )
    return False


_CALLS = frozenset({cst.Call})
