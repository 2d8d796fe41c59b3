"""Devices and where code runs, as several rule families ask: which expressions are XLA devices,
which calls put data on one (:class:`DeviceUse`), the enclosing function of a node, per-host
APIs and variables, and whether a test expects the error (``pytest.raises``).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import libcst as cst

from . import apis
from .context import find_arg, literal_string
from .seeds import RNG_APIS

# Calls that return an XLA device (torch_xla/torch_xla.py `device`, torch_xla/core/xla_model.py
# `xla_device`, deprecated in 2.9 but still present).
DEVICE_APIS = frozenset({"torch_xla.device", f"{apis.XM}.xla_device", f"{apis.XR}.xla_device"})


EXPECTED_ERROR_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def expects_error(ctx) -> bool:
    """True inside ``with self.assertRaises(...):`` / ``with pytest.raises(...):``: a test that
    provokes the error on purpose (rules that report "this raises" stay quiet there)."""
    for node in ctx.enclosing(cst.With):
        for item in node.items:
            call = item.item
            if not isinstance(call, cst.Call):
                continue
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value in EXPECTED_ERROR_CONTEXTS
            ):
                return True
            if ctx.is_call_to(call, "pytest.raises"):
                return True
    return False


def function_key(ctx) -> cst.CSTNode:
    """The innermost enclosing function definition of the node being visited, else the module."""
    return next(ctx.enclosing(cst.FunctionDef), ctx.module)


def is_xla_device(
    ctx, node: cst.BaseExpression | None, device_names: AbstractSet[str] = frozenset()
) -> bool:
    """True for an expression that is an XLA device.

    ``'xla'``/``'xla:N'`` literals, ``torch.device('xla')``, ``torch_xla.device()``,
    ``xm.xla_device()``, and names in ``device_names`` (names the caller saw assigned one).
    """
    if node is None:
        return False
    value = literal_string(node)
    if value is not None:
        return value == "xla" or value.startswith("xla:")
    if isinstance(node, cst.Call):
        if ctx.is_call_to(node, DEVICE_APIS):
            return True
        if ctx.is_call_to(node, "torch.device"):
            first = find_arg(node, "type", 0)
            return first is not None and is_xla_device(ctx, first.value)
        return False
    return isinstance(node, cst.Name) and node.value in device_names


class DeviceUse:
    """Tracks, in source order, names bound to XLA devices and calls that put data on the device.

    ``placement(node)`` answers for a call: ``x.to(dev)``, ``x.to(device=dev)``, any call
    with ``device=dev`` (``torch.zeros(..., device=dev)``), ``xm.set_rng_state(...)`` and
    ``torch_xla.manual_seed(...)``. Device names are kept per function (see :func:`function_key`).
    """

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.names: dict[cst.CSTNode, set[str]] = {}

    def device_names(self) -> set[str]:
        key = function_key(self.ctx)
        found = set(self.names.get(key, set()))
        if key is not self.ctx.module:
            found |= self.names.get(self.ctx.module, set())
        return found

    def on_assign(self, node: cst.Assign) -> None:
        """Record ``dev = torch_xla.device()`` (and drop a name rebound to something else)."""
        names = self.names.setdefault(function_key(self.ctx), set())
        is_device = is_xla_device(self.ctx, node.value, self.device_names())
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if is_device:
                    names.add(target.target.value)
                else:
                    names.discard(target.target.value)

    def placement(self, node: cst.Call) -> bool:
        ctx = self.ctx
        devices = self.device_names()
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to":
            arg = find_arg(node, "device", 0)
            if arg is not None and is_xla_device(ctx, arg.value, devices):
                return True
        kw = find_arg(node, "device")
        if (
            kw is not None
            and is_xla_device(ctx, kw.value, devices)
            and not ctx.is_call_to(node, "torch.device")
        ):
            return True
        return ctx.is_call_to(node, RNG_APIS)


# What tells SPMD hosts apart: one process per host, so the process index (torch_xla/runtime.py
# `process_index`, `host_index`), the rank of a process group over those processes, and the rank a
# launcher exports. `xr.global_ordinal()` is not one: it is 0 on every SPMD host (XLA005).
PER_HOST_APIS = {
    f"{apis.XR}.process_index": "`xr.process_index()`",
    f"{apis.XR}.host_index": "`xr.host_index()`",
    "torch.distributed.get_rank": "`dist.get_rank()`",
}


PER_HOST_VARIABLES = frozenset(
    {"RANK", "NODE_RANK", "GROUP_RANK", "TPU_WORKER_ID", "CLOUD_TPU_TASK_ID"}
)
