"""Replicas and ranks: what identity a value carries, and which tests hold on some replicas only.

A one-process-per-device program (``xmp.spawn``, ``torch_xla.launch``, ``torchrun``) runs the same
code on every replica; what tells them apart is a value of one of these kinds
(:class:`Identity`), read from one of these sources:

- torch_xla (``torch_xla/runtime.py``, ``torch_xla/core/xla_model.py``, 2.9.0):
  ``xr.global_ordinal()``/``xm.get_ordinal()`` (global ordinal), ``xr.local_ordinal()``/
  ``xm.get_local_ordinal()`` (local ordinal), ``xr.process_index()`` (process index),
  ``xr.world_size()``/``xm.xrt_world_size()`` (world size), ``xr.local_process_count()`` (local
  world size), ``xr.process_count()`` (process count), ``xm.is_master_ordinal()`` (a master
  flag: local ordinal 0, or global with ``local=False``);
- ``torch.distributed``: ``dist.get_rank()`` and ``dist.get_world_size()``; with
  ``init_process_group("xla", init_method="xla://")`` they are the replica's global ordinal and the
  world size (``torch_xla/_internal/rendezvous.py`` ``pjrt_rendezvous_handler`` returns
  ``xr.global_ordinal()``, ``xr.world_size()``);
- the launch: the first parameter of a function given to ``xmp.spawn``/``torch_xla.launch``
  (``_mp_fn(index)``: ``torch_xla/_internal/pjrt.py`` ``_SpawnFn`` passes ``global_ordinal()``;
  under torchrun ``torch_xla.launch`` passes ``LOCAL_RANK``);
- the environment, which holds a rank only when the launcher exports it (:data:`ENV_IDENTITIES`):
  ``os.environ["LOCAL_RANK"]``, ``os.environ.get("RANK", 0)``, ``int(os.getenv("WORLD_SIZE", 1))``,
  ``xu.getenv_as("LOCAL_RANK", int, 0)`` (``torch_xla/utils/utils.py``).
  torchrun exports ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE`` (and
  ``GROUP_RANK``, ``GROUP_WORLD_SIZE``: the node's) (torch/distributed/elastic/agent/server/local_elastic_agent.py
  ``_start_workers``). ``xmp.spawn`` and ``torch_xla.launch`` export none of them: torch_xla 2.9.0
  sets only ``PJRT_LOCAL_PROCESS_RANK``/``PJRT_LOCAL_PROCESS_COUNT`` and the ``TPU_*`` topology
  (``_internal/pjrt.py`` ``initialize_multiprocess``, ``_internal/tpu.py`` ``configure_topology``)
  and reads ``LOCAL_RANK``/``RANK`` only under torchrun (``torch_xla.py`` ``launch``,
  ``_internal/rendezvous.py``) or on Neuron with a default (``_internal/neuron.py``);
- a command-line option named for a rank (``args.local_rank``, ``--local_rank``), which
  ``python -m torch.distributed.launch`` passes and nothing else sets.

Values are followed through names (:func:`xla_lint.analysis.values.definition`: the one
assignment that reaches the read), ``int()``/``str()`` conversions and attributes assigned in the
file (``self.rank = dist.get_rank()``, ``args.local_rank = int(os.environ.get("LOCAL_RANK", -1))``:
every assignment of that attribute in the file must agree).

:func:`replica_guard` says which test holds on some replicas only: ``xm.is_master_ordinal()``, a
comparison of an ordinal or process index (``rank == 0``, ``dist.get_rank() != 0``,
``args.local_rank in (-1, 0)``) and names saved from either (``is_master = rank == 0``). World
sizes and process counts are the same on every replica: comparing them is no replica guard. A
guard on the environment or an option (:attr:`Identity.from_launcher`) holds on some replicas
only when the launcher sets the variable (torchrun): under ``xmp.spawn`` every replica reads
the same default, and the guard holds everywhere (XLA031 reports the read).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import apis
from .context import FileContext, find_arg, literal_string
from .seeds import launched_functions
from .values import NAMESPACE, Site, Unknown, file_values, value_of
from .walk import iter_nodes

# Kinds of identity (Identity.kind).
GLOBAL_ORDINAL = "global ordinal"
LOCAL_ORDINAL = "local ordinal"
PROCESS_INDEX = "process index"
WORLD_SIZE = "world size"
LOCAL_WORLD_SIZE = "local world size"
PROCESS_COUNT = "process count"
MASTER = "master flag"  # a bool, True on the master replica(s) only

# Kinds that differ between the replicas of one program.
PER_REPLICA = frozenset({GLOBAL_ORDINAL, LOCAL_ORDINAL, PROCESS_INDEX, MASTER})

# Sources (Identity.source).
TORCH_XLA = "torch_xla"
DISTRIBUTED = "torch.distributed"
LAUNCH = "launch"  # the first parameter of a launched function
ENVIRONMENT = "environment"
OPTION = "option"

RANK_APIS: dict[str, tuple[str, str]] = {
    f"{apis.XR}.global_ordinal": (GLOBAL_ORDINAL, TORCH_XLA),
    f"{apis.XM}.get_ordinal": (GLOBAL_ORDINAL, TORCH_XLA),
    f"{apis.XR}.local_ordinal": (LOCAL_ORDINAL, TORCH_XLA),
    f"{apis.XM}.get_local_ordinal": (LOCAL_ORDINAL, TORCH_XLA),
    f"{apis.XR}.process_index": (PROCESS_INDEX, TORCH_XLA),
    f"{apis.XR}.world_size": (WORLD_SIZE, TORCH_XLA),
    f"{apis.XM}.xrt_world_size": (WORLD_SIZE, TORCH_XLA),
    f"{apis.XR}.local_process_count": (LOCAL_WORLD_SIZE, TORCH_XLA),
    f"{apis.XR}.process_count": (PROCESS_COUNT, TORCH_XLA),
    f"{apis.XM}.is_master_ordinal": (MASTER, TORCH_XLA),
    "torch.distributed.get_rank": (GLOBAL_ORDINAL, DISTRIBUTED),
    "torch.distributed.get_world_size": (WORLD_SIZE, DISTRIBUTED),
}

# The variables torchrun exports to each worker that carry a rank or a size, and what they hold.
ENV_IDENTITIES: dict[str, str] = {
    "RANK": GLOBAL_ORDINAL,
    "LOCAL_RANK": LOCAL_ORDINAL,
    "WORLD_SIZE": WORLD_SIZE,
    "LOCAL_WORLD_SIZE": LOCAL_WORLD_SIZE,
}
# (torchrun's GROUP_RANK and GROUP_WORLD_SIZE are the node's rank and the node count: the same for
# every replica of a host, so they tell hosts apart, not replicas.)

# What torch_xla 2.9.0 offers for each kind, for messages.
TORCH_XLA_API: dict[str, str] = {
    GLOBAL_ORDINAL: "xr.global_ordinal()",
    LOCAL_ORDINAL: "xr.local_ordinal()",
    PROCESS_INDEX: "xr.process_index()",
    WORLD_SIZE: "xr.world_size()",
    LOCAL_WORLD_SIZE: "xr.local_process_count()",
    PROCESS_COUNT: "xr.process_count()",
}

# Options that hold a rank when `python -m torch.distributed.launch` passes them.
_RANK_OPTIONS = {"local_rank": LOCAL_ORDINAL}

_ENV_READS = frozenset({"os.getenv", "os.environ.get"})
_GETENV_AS = "torch_xla.utils.utils.getenv_as"  # torch_xla's own reader, with a default
_CONVERSIONS = frozenset({"builtins.int", "builtins.str", "builtins.float"})
_MAX_DEPTH = 8


@dataclass(frozen=True, eq=False)
class Identity:
    """What tells one replica from another in a value: ``kind`` (:data:`GLOBAL_ORDINAL`...),
    ``source`` (:data:`TORCH_XLA`, :data:`DISTRIBUTED`, :data:`LAUNCH`, :data:`ENVIRONMENT`,
    :data:`OPTION`), ``node`` the expression that reads it (the call, the ``os.environ``
    subscript, the option's attribute, the parameter's name), ``variable`` the environment
    variable or option name, ``default`` the expression an environment read falls back to
    (None: no default, the read raises or gives None when the variable is unset)."""

    kind: str
    source: str
    node: cst.CSTNode
    variable: str | None = None
    default: cst.BaseExpression | None = None

    @property
    def per_replica(self) -> bool:
        """The value differs between replicas (an ordinal, a process index, a master flag)."""
        return self.kind in PER_REPLICA

    @property
    def from_launcher(self) -> bool:
        """The value is right only when the launcher sets it (an environment variable, an option)."""
        return self.source in (ENVIRONMENT, OPTION)


def env_read(ctx: FileContext, node: cst.CSTNode, scope=None) -> Identity | None:
    """``node`` itself reads one of :data:`ENV_IDENTITIES` (``os.environ["RANK"]``,
    ``os.environ.get("LOCAL_RANK", 0)``, ``os.getenv("WORLD_SIZE", "1")``), else None."""
    if type(node) is cst.Subscript:
        if "os.environ" not in ctx.qnames(node.value, scope):
            return None
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        name = literal_string(node.slice[0].slice.value)
        kind = ENV_IDENTITIES.get(name or "")
        return Identity(kind, ENVIRONMENT, node, name) if kind is not None and name else None
    names = ctx.qnames(node.func, scope) if type(node) is cst.Call else frozenset()
    if type(node) is cst.Call and not names.isdisjoint(_ENV_READS | {_GETENV_AS}):
        helper = _GETENV_AS in names  # xu.getenv_as(name, type, defval=None)
        key = find_arg(node, "name" if helper else "key", 0)
        name = literal_string(key.value) if key is not None else None
        kind = ENV_IDENTITIES.get(name or "")
        if kind is None or not name:
            return None
        default = find_arg(node, "defval", 2) if helper else find_arg(node, "default", 1)
        value = default.value if default is not None else None
        if isinstance(value, cst.Name) and value.value == "None":
            value = None
        return Identity(kind, ENVIRONMENT, node, name, value)
    return None


def identity_of(
    ctx: FileContext, node: cst.BaseExpression, site: Site | None = None, depth: int = 0
) -> Identity | None:
    """The identity ``node`` (read at ``site``, default: where the traversal is) carries, or None
    when it carries none that the file shows. Never raises."""
    table = file_values(ctx)
    if site is None:
        site = table.current_site()
    return _identity(ctx, node, site, depth)


def _memoised(kind: str, compute):
    """Wrap ``compute(ctx, node, site, depth)`` so that each (node, site, depth) of a file is
    judged once: a value stored in many attributes, each assigned from others (``self.a =
    self.b`` in several places), was otherwise followed once per path, exponentially in the depth
    (minutes on one real trainer). The results are the same, since depth only grows along a path;
    the memo holds the node and site, so their ids stay theirs."""

    def memoised(ctx: FileContext, node: cst.BaseExpression, site: Site, depth: int):
        if depth > _MAX_DEPTH:
            return None
        memo = ctx.memo(_MEMO, dict)
        key = (kind, id(node), id(site), depth)
        held = memo.get(key)
        if held is None:
            held = memo[key] = (node, site, compute(ctx, node, site, depth))
        return held[2]

    return memoised


_MEMO = "xla_lint.analysis.ranks.judged"


def _identity_of(
    ctx: FileContext, node: cst.BaseExpression, site: Site, depth: int
) -> Identity | None:
    if isinstance(node, cst.Call):
        names = ctx.qnames(node.func, site.scope)
        if names:
            for name in names:
                api = RANK_APIS.get(name)
                if api is not None:
                    return Identity(api[0], api[1], node)
            if not names.isdisjoint(_CONVERSIONS) and len(node.args) == 1 and not node.args[0].star:
                return _identity(ctx, node.args[0].value, site, depth + 1)
        return env_read(ctx, node, site.scope)
    if isinstance(node, cst.Subscript):
        return env_read(ctx, node, site.scope)
    if isinstance(node, cst.Name):
        table = file_values(ctx)
        found = table.definition(node, site)
        if found is not None:
            return _identity(ctx, found[0], found[1], depth + 1)
        parameter = table.parameter(node, site)
        if parameter is not None and parameter[1] == 0:
            function = parameter[0]
            if launched_functions(ctx).get(function.name.value) is function:
                return Identity(GLOBAL_ORDINAL, LAUNCH, node, node.value)
        return None
    if isinstance(node, cst.Attribute):
        return _attribute(ctx, node, site, depth)
    return None


def _attribute(ctx: FileContext, node: cst.Attribute, site: Site, depth: int) -> Identity | None:
    """``self.rank`` / ``args.local_rank``: what every assignment of it in the file agrees on,
    else a rank option of an argparse namespace."""
    table = file_values(ctx)
    text = _dotted(node)
    stored = table.attr_values.get(text) if text is not None else None
    if stored:
        first: Identity | None = None
        for value, where in stored:
            found = _identity(ctx, value, where, depth + 1) if value is not None else None
            if found is None or (first is not None and found.kind != first.kind):
                return None
            first = first or found
        return first
    option = _RANK_OPTIONS.get(node.attr.value)
    if option is not None:
        base = value_of(ctx, node.value, site)
        if isinstance(base, Unknown) and base.kind == NAMESPACE:
            return Identity(option, OPTION, node, node.attr.value)
    return None


def _dotted(node: cst.Attribute) -> str | None:
    parts: list[str] = []
    current: cst.BaseExpression = node
    while type(current) is cst.Attribute:
        parts.append(current.attr.value)
        current = current.value
    if type(current) is not cst.Name:
        return None
    parts.append(current.value)
    return ".".join(reversed(parts))


def replica_guard(
    ctx: FileContext, test: cst.BaseExpression, site: Site | None = None
) -> Identity | None:
    """The identity that makes ``test`` hold on some replicas only, or None: a master flag
    (``xm.is_master_ordinal()``, anywhere in the test), a comparison of a per-replica value
    (``rank == 0``, ``dist.get_rank() != 0``, ``args.local_rank in (-1, 0)``), or a name saved from
    one (``is_root = xm.is_master_ordinal()`` ... ``if is_root:``). Check
    :attr:`Identity.from_launcher`: such a guard splits the replicas only when the launcher sets
    the variable."""
    table = file_values(ctx)
    if site is None:
        site = table.current_site()
    return _guard(ctx, test, site, 0)


def _guard_of(
    ctx: FileContext, test: cst.BaseExpression, site: Site, depth: int
) -> Identity | None:
    table = file_values(ctx)
    for node in iter_nodes(test):
        kind = type(node)
        if kind is cst.Call:
            found = RANK_APIS.get(next(iter(ctx.qnames(node.func, site.scope) & _MASTER), ""))
            if found is not None:
                return Identity(found[0], found[1], node)
        elif kind is cst.Comparison:
            if _presence_test(node):
                continue  # `os.environ.get("RANK") is not None`: set on every replica or none
            for side in (node.left, *(c.comparator for c in node.comparisons)):
                identity = _identity(ctx, side, site, depth + 1)
                if identity is not None and identity.per_replica and identity.kind != MASTER:
                    return identity
        elif kind is cst.Name:
            found_def = table.definition(node, site)
            if found_def is not None:
                identity = _guard(ctx, found_def[0], found_def[1], depth + 1)
                if identity is not None:
                    return identity
        elif kind is cst.Attribute:
            text = _dotted(node)
            stored = table.attr_values.get(text) if text is not None else None
            if stored and all(value is not None for value, _ in stored):
                guards = (_guard(ctx, v, w, depth + 1) for v, w in stored if v is not None)
                first_guard = next(guards, None)
                if first_guard is not None and all(g is not None for g in guards):
                    return first_guard
    return None


def _presence_test(node: cst.Comparison) -> bool:
    """``x is None`` / ``x is not None``: whether a rank is known, not which one."""
    return all(
        isinstance(c.operator, (cst.Is, cst.IsNot))
        and type(c.comparator) is cst.Name
        and c.comparator.value == "None"
        for c in node.comparisons
    )


def torch_xla_tried_first(ctx: FileContext, kind: str) -> bool:
    """The node being visited runs only when torch_xla failed to give ``kind``: it is in an
    ``except`` handler of a ``try`` whose body gets ``kind`` from torch_xla
    (``try: rank = xr.global_ordinal()`` / ``except Exception: rank = int(os.environ.get("RANK",
    0))``), or it follows, in its function, a ``try`` whose body returns that value
    (``try: return int(xr.global_ordinal())`` / ``except Exception: pass``), alone or under an
    ``if`` that tests only the torch_xla module (``if xr is not None:``).

    The torch_xla call must exist in 2.9.0: ``xm.get_ordinal``/``xm.xrt_world_size`` are gone
    (:data:`xla_lint.analysis.apis.REMOVED_ATTRS`), so they raise ``AttributeError`` and the
    fallback runs. The others answer in every process ``xmp.spawn`` starts (``torch_xla/runtime.py``
    ``global_ordinal``, ``local_ordinal``, ``world_size``...), so the fallback never runs there."""
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        owner, child = stack[i], stack[i + 1]
        if isinstance(owner, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if type(owner) is cst.Try and any(h is child for h in owner.handlers):
            if _body_gets(ctx, owner.body, kind, returns=False):
                return True
        elif isinstance(owner, (cst.IndentedBlock, cst.Module)):
            for statement in owner.body:
                if statement is child:
                    break
                if _returns_from_torch_xla(ctx, statement, kind):
                    return True
    return False


def _returns_from_torch_xla(ctx: FileContext, statement: cst.CSTNode, kind: str) -> bool:
    """``statement`` is a ``try`` whose body returns ``kind`` from torch_xla, or an ``if`` on the
    torch_xla module alone (``if xr is not None:``) whose body holds one."""
    if type(statement) is cst.Try:
        return _body_gets(ctx, statement.body, kind, returns=True)
    if (
        type(statement) is cst.If
        and statement.orelse is None
        and _tests_module(ctx, statement.test)
    ):
        return any(
            _returns_from_torch_xla(ctx, inner, kind)
            for inner in getattr(statement.body, "body", ())
        )
    return False


def _tests_module(ctx: FileContext, test: cst.BaseExpression) -> bool:
    """Every name ``test`` reads is ``None`` or a torch_xla module (``xr is not None``, ``xr``)."""
    names = [node for node in iter_nodes(test) if type(node) is cst.Name]
    for node in names:
        if node.value == "None":
            continue
        spelled = ctx.qnames(node)
        if not spelled or not all(n == "torch_xla" or n.startswith("torch_xla.") for n in spelled):
            return False
    return bool(names)


def _body_gets(ctx: FileContext, body: cst.BaseSuite, kind: str, returns: bool) -> bool:
    """A statement at the top of ``body`` (the last one when ``returns``: a ``return``) reads
    ``kind`` from a torch_xla call that 2.9.0 has."""
    statements = list(getattr(body, "body", ()))
    if returns:
        statements = statements[-1:]
    for statement in statements:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if returns and type(small) is not cst.Return:
                continue
            value = getattr(small, "value", None)
            if not isinstance(value, cst.BaseExpression):
                continue
            for node in iter_nodes(value):
                if type(node) is not cst.Call:
                    continue
                names = ctx.qnames(node.func)
                for name in names:
                    api = RANK_APIS.get(name)
                    if (
                        api is not None
                        and api == (kind, TORCH_XLA)
                        and names.isdisjoint(apis.REMOVED_ATTRS)
                    ):
                        return True
    return False


_identity = _memoised("identity", _identity_of)
_guard = _memoised("guard", _guard_of)


_MASTER = frozenset(name for name, (kind, _) in RANK_APIS.items() if kind == MASTER)


def is_replica_test(ctx: FileContext, test: cst.BaseExpression, site: Site | None = None) -> bool:
    """True when ``test`` holds on some replicas only whatever the launcher: a
    :func:`replica_guard` that does not rest on the environment or an option."""
    found = replica_guard(ctx, test, site)
    return found is not None and not found.from_launcher


__all__ = [
    "Identity",
    "identity_of",
    "env_read",
    "replica_guard",
    "is_replica_test",
    "torch_xla_tried_first",
    "RANK_APIS",
    "ENV_IDENTITIES",
    "TORCH_XLA_API",
    "PER_REPLICA",
    "GLOBAL_ORDINAL",
    "LOCAL_ORDINAL",
    "PROCESS_INDEX",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "PROCESS_COUNT",
    "MASTER",
    "TORCH_XLA",
    "DISTRIBUTED",
    "LAUNCH",
    "ENVIRONMENT",
    "OPTION",
]
