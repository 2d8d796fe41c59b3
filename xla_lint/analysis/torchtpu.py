"""Whose ``torch_tpu`` a file uses: Google's TorchTPU, SOPHGO's package of the same name, or neither.

Two unrelated packages are imported as ``torch_tpu``: Google's TorchTPU (PyPI ``torch-tpu`` 0.2.0,
Cloud TPUs, torch 2.11 to 2.15) and SOPHGO's (``sophgo/torch-tpu``, BM1684X/SG2260 chips, torch
2.1). Both rename PrivateUse1 to ``"tpu"`` and register ``torch.tpu``, so ``import torch_tpu``,
``torch.device("tpu")``, ``.to("tpu")`` and the CUDA-like ``torch.tpu.device_count()`` /
``is_available()`` / ``manual_seed`` say nothing about which one runs. The TorchTPU rules
(:mod:`xla_lint.rules.torchtpu`) ask :func:`flavour` and stay silent unless it answers
``"google"``.

Decisive signals, each resolved through the file's imports (never by raw text), except string
literals:

- Google: imports of ``torch_tpu._internal``, ``torch_tpu._loader``, ``torch_tpu._versioned_so_loader``
  (modules of the 0.2.0 wheel) and of the old Google beta's ``torch_tpu.api``; a ``torch.tpu``
  name of the 0.2.0 public API (``torch_tpu/_internal/public_api.py`` ``_PUBLIC_MODULES``, in
  :func:`torchtpu_api`) that ``torch.cuda`` does not also have (:data:`GOOGLE_TPU_ATTRS`:
  ``torch.tpu.ops``, ``torch.tpu.distributed``, ``torch.tpu.set_eager_mode``...);
  ``init_process_group("tpu")`` / ``"tpu_dist"`` (the process-group backends
  ``torch_tpu/_internal/distributed/torchcomm_tpu.py`` registers), ``DeviceMesh("tpu", ...)``,
  ``init_device_mesh("tpu", ...)``, ``torch.compile(backend="tpu")`` (the Dynamo backend
  ``torch_tpu/_internal/compile/__init__.py`` registers), and a ``TORCH_TPU_*`` string (the
  variables the wheel reads).
- SOPHGO: imports of ``torch_tpu._C``, ``torch_tpu.tpu`` (a real submodule there), ``torch_tpu.utils``,
  ``torch_tpu.accelerator``, ``torch_tpu.dynamo``; the ``torch.tpu`` names of
  ``sophgo/torch-tpu`` ``torch_tpu/tpu/__init__.py`` that Google's has not
  (:data:`SOPHGO_TPU_ATTRS`: ``OpTimer_reset``, ``set_autocast_dtype``, ``amp``, ``memory``...);
  ``init_process_group("sccl")``; ``torch.ops.my_ops``; strings naming its chips (``BM1684X``,
  ``SG2260``).

A file is ``"google"`` with a Google signal and no SOPHGO one, ``"sophgo"`` the other way round,
and None otherwise (neither, or both): :func:`flavour`. The judgement is per file: a helper module
of a TorchTPU program that names nothing decisive is None.

:func:`runs_on_torchtpu` is the TorchTPU rules' counterpart of
:func:`xla_lint.analysis.guards.runs_on_xla`: it drops the branches of dual-backend code that run
only with torch_xla or only on another platform.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Literal

import libcst as cst

from .context import find_arg, literal_string
from .guards import handler_names, in_dead_code, platform_of
from .names import Scope, dotted_name

if TYPE_CHECKING:  # pragma: no cover
    from .context import FileContext

Flavour = Literal["google", "sophgo"]


@functools.cache
def torchtpu_api() -> dict:
    """``xla_lint/data/torchtpu_api.json``, written by ``tools/torchtpu_api.py`` from the
    torch-tpu 0.2.0 wheel: the public names with their lifecycle stages (``names``), the
    public functions' parameters (``signatures``), the deprecated functions of the wheel
    (``deprecated_defs``), its Python modules (``wheel_modules``) and the ``TORCH_TPU_*`` names
    it spells (``environment``)."""
    text = resources.files("xla_lint").joinpath("data/torchtpu_api.json").read_text("utf-8")
    data: dict = json.loads(text)
    return data


# torch.tpu names of the 0.2.0 public API that torch.cuda does not have (checked against torch
# 2.9's torch.cuda; the CUDA-like ones, device_count, is_available, Stream, manual_seed...,
# SOPHGO's torch.tpu has too). get_amp_supported_dtype is left out: torch.amp asks every
# PrivateUse1 device module for it.
GOOGLE_TPU_ATTRS = frozenset(
    {
        "EagerMode",
        "Precision",
        "allow_excess_precision",
        "compiler",
        "distributed",
        "eager_mode",
        "ops",
        "optimizers",
        "pallas",
        "precision",
        "set_eager_mode",
        "topology_aware_mesh",
    }
)
GOOGLE_MODULES = (
    "torch_tpu._internal",
    "torch_tpu._loader",
    "torch_tpu._versioned_so_loader",
    "torch_tpu.api",  # the Google beta before 0.2.0 (rule XLA403)
)
# sophgo/torch-tpu torch_tpu/tpu/__init__.py (``torch.tpu`` there) and its submodules.
SOPHGO_TPU_ATTRS = frozenset(
    {
        "OpTimer_reset",
        "OpTimer_dump",
        "is_OpTimer_enabled",
        "GlobalOpTimer_reset",
        "GlobalOpTimer_dump",
        "set_autocast_dtype",
        "get_autocast_dtype",
        "is_autocast_enabled",
        "set_autocast_enabled",
        "amp",
        "custom_op",
        "bmodel_runtime",
        "memory",
        "jit",
        "memory_stats",
        "mem_get_info",
        "empty_cache",
    }
)
SOPHGO_MODULES = (
    "torch_tpu._C",
    "torch_tpu.tpu",
    "torch_tpu.utils",
    "torch_tpu.accelerator",
    "torch_tpu.dynamo",
)
GOOGLE_BACKENDS = frozenset({"tpu", "tpu_dist"})
SOPHGO_BACKENDS = frozenset({"sccl"})
_SOPHGO_CHIPS = ("BM1684", "SG2260", "bm1684", "sg2260")

_DEVICE_MESH = frozenset(
    {
        "torch.distributed.device_mesh.DeviceMesh",
        "torch.distributed.DeviceMesh",
        "torch.distributed.device_mesh.init_device_mesh",
        "torch.distributed.init_device_mesh",
    }
)
_INIT_PROCESS_GROUP = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
    }
)
_COMPILE = frozenset({"torch.compile"})


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def name_flavour(name: str) -> Flavour | None:
    """``"google"`` or ``"sophgo"`` for a dotted name only one of the two packages has
    (``torch.tpu.set_eager_mode``, ``torch_tpu._C._Timer_OpReset``), else None."""
    if _under(name, GOOGLE_MODULES):
        return "google"
    if _under(name, SOPHGO_MODULES) or name.startswith("torch.ops.my_ops"):
        return "sophgo"
    parts = name.split(".")
    if len(parts) >= 3 and parts[0] == "torch" and parts[1] == "tpu":
        if parts[2] in GOOGLE_TPU_ATTRS:
            return "google"
        if parts[2] in SOPHGO_TPU_ATTRS:
            return "sophgo"
    return None


def _string_flavour(value: str) -> Flavour | None:
    if value.startswith("TORCH_TPU_"):
        return "google"
    if any(chip in value for chip in _SOPHGO_CHIPS):
        return "sophgo"
    return None


_SCOPED = (cst.FunctionDef, cst.ClassDef)
# Not leaves (walk.LEAVES): the shared node list always has them. Names are found through the
# imports (``from torch.tpu import ops``) and attributes; strings as call arguments,
# ``os.environ[...]`` keys and dict keys.
_TYPES = frozenset(
    {cst.FunctionDef, cst.ClassDef, cst.Attribute, cst.Call, cst.Subscript, cst.DictElement}
)


def signals(ctx: FileContext) -> tuple[frozenset[str], frozenset[str]]:
    """(Google signals, SOPHGO signals) of the file: the names or strings that decided, for
    messages and tests. Computed once per file."""
    return ctx.memo("xla_lint.analysis.torchtpu.signals", lambda: _signals(ctx))


def _signals(ctx: FileContext) -> tuple[frozenset[str], frozenset[str]]:
    found: dict[str, set[str]] = {"google": set(), "sophgo": set()}

    def string(node: cst.CSTNode | None) -> None:
        value = literal_string(node) if node is not None else None
        kind = _string_flavour(value) if value else None
        if kind is not None:
            found[kind].add(repr(value))

    for module in ctx.imported_modules:
        kind = name_flavour(module)
        if kind is not None:
            found[kind].add(module)
    flat = ctx.flat
    nodes, ends = flat.nodes, flat.ends
    opened: list[tuple[int, Scope]] = []
    scope = ctx.root_scope
    for i in flat.of_types(_TYPES):
        while opened and opened[-1][0] <= i:
            opened.pop()
            scope = opened[-1][1] if opened else ctx.root_scope
        node = nodes[i]
        kind_of = type(node)
        if kind_of in _SCOPED:
            scope = ctx.scopes.get(node, scope)
            opened.append((ends[i], scope))
        elif kind_of is cst.Attribute:
            for name in ctx.qnames(node, scope):
                kind = name_flavour(name)
                if kind is not None:
                    found[kind].add(name)
        elif kind_of is cst.Subscript:
            assert isinstance(node, cst.Subscript)
            for element in node.slice:
                if isinstance(element.slice, cst.Index):
                    string(element.slice.value)
        elif kind_of is cst.DictElement:
            assert isinstance(node, cst.DictElement)
            string(node.key)
        elif kind_of is cst.Call:
            assert isinstance(node, cst.Call)
            for arg in node.args:
                string(arg.value)
            names = ctx.qnames(node.func, scope)
            if names:
                for kind, value in _call_signals(node, names):
                    found[kind].add(value)
    return frozenset(found["google"]), frozenset(found["sophgo"])


def _call_signals(call: cst.Call, names: frozenset[str]) -> list[tuple[Flavour, str]]:
    out: list[tuple[Flavour, str]] = []
    if not names.isdisjoint(_INIT_PROCESS_GROUP):
        arg = find_arg(call, "backend", 0)
        value = literal_string(arg.value) if arg is not None else None
        if value in GOOGLE_BACKENDS:
            out.append(("google", f"init_process_group({value!r})"))
        elif value in SOPHGO_BACKENDS:
            out.append(("sophgo", f"init_process_group({value!r})"))
    elif not names.isdisjoint(_DEVICE_MESH):
        arg = find_arg(call, "device_type", 0)
        if arg is not None and literal_string(arg.value) == "tpu":
            out.append(("google", "DeviceMesh('tpu')"))
    elif not names.isdisjoint(_COMPILE):
        arg = find_arg(call, "backend")
        if arg is not None and literal_string(arg.value) == "tpu":
            out.append(("google", "torch.compile(backend='tpu')"))
    return out


def flavour(ctx: FileContext) -> Flavour | None:
    """``"google"`` when the file uses Google's TorchTPU (a Google signal and no SOPHGO one),
    ``"sophgo"`` when it uses SOPHGO's ``torch_tpu``, None when nothing decides (or both do)."""
    google, sophgo = signals(ctx)
    if google and not sophgo:
        return "google"
    if sophgo and not google:
        return "sophgo"
    return None


def is_torchtpu_program(ctx: FileContext) -> bool:
    """True when the file uses Google's TorchTPU (:func:`flavour` is ``"google"``): the question
    every TorchTPU rule asks first."""
    return flavour(ctx) == "google"


def _names_xla(test: cst.BaseExpression) -> bool | None:
    """True for a check of torch_xla itself (``is_torch_xla_available()``, ``_XLA_AVAILABLE``,
    ``HAS_TORCH_XLA``), False for one of TorchTPU (``is_torch_tpu_available()``,
    ``torch.accelerator.current_accelerator().type == "tpu"``), None for anything else."""
    if type(test) is cst.Call:
        test = test.func
    name = dotted_name(test)
    if name is None:
        return None
    last = name.split(".")[-1].lower()
    if "xla" in last:
        return True
    if "tpu" in last:
        return False
    return None


def runs_on_torchtpu(ctx: FileContext) -> bool:
    """False when the node being visited never runs in a TorchTPU program: dead code
    (:func:`~xla_lint.analysis.guards.in_dead_code`), the body of a check of torch_xla or of
    another platform (``if is_torch_xla_available():``, ``if torch.cuda.is_available():``), the
    ``else`` of a check of TorchTPU (``if is_torch_tpu_available(): ... else:``); ``not`` swaps
    the branches. Unknown tests count as running."""
    if in_dead_code(ctx):
        return False
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        if type(node) is not cst.If and type(node) is not cst.IfExp:
            continue
        child = stack[i + 1]
        in_body = child is node.body
        if not in_body and child is not node.orelse:
            continue  # the test itself
        test = node.test
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, in_body = test.expression, not in_body
        xla = _names_xla(test)
        if xla is True and in_body:
            return False
        if xla is False and not in_body:
            return False
        if xla is None and in_body and platform_of(test) == "other":
            return False
    return True


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def caught(ctx: FileContext, exceptions: frozenset[str]) -> bool:
    """True when the node being visited is in the body of a ``try`` (in the same function) one
    of whose handlers catches one of ``exceptions`` (by name, ``except (A, B):`` too), or
    ``Exception`` / ``BaseException`` / a bare ``except:``."""
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        if type(node) is cst.FunctionDef or type(node) is cst.Lambda:
            return False
        if type(node) is cst.Try and stack[i + 1] is node.body:
            for handler in node.handlers:
                names = handler_names(handler)
                if names is None or not names.isdisjoint(
                    exceptions | {"Exception", "BaseException"}
                ):
                    return True
    return False


def in_import_fallback(ctx: FileContext) -> bool:
    """True when the node being visited is an optional import or its fallback: in a ``try``
    body whose handler catches ``ImportError`` / ``ModuleNotFoundError`` (or anything), or in
    such a handler (``try: import torch_tpu`` / ``except ImportError: import torch_xla``), or
    under ``if TYPE_CHECKING:`` (never runs)."""
    if caught(ctx, _IMPORT_ERRORS):
        return True
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        if type(node) is cst.ExceptHandler:
            names = handler_names(node)
            if names is None or not names.isdisjoint(_IMPORT_ERRORS | {"Exception"}):
                return True
        elif type(node) is cst.If and stack[i + 1] is node.body:
            name = dotted_name(node.test)
            if name is not None and name.split(".")[-1] == "TYPE_CHECKING":
                return True
    return False
