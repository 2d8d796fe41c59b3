"""Meshes and partition specs whose shape a file fixes: the literal mesh a name or call holds
(:func:`mesh_of`), literal ints and tuples, and the mesh and spec arguments of a sharding call.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import apis
from .context import find_arg, literal_string
from .names import LOCAL, Scope, bound_names
from .walk import Flat


@dataclass(frozen=True)
class LiteralMesh:
    """What the literal arguments of one ``Mesh(device_ids, mesh_shape, axis_names)`` call say.

    ``shape``: the mesh shape when every dimension is an int literal, else None.
    ``axis_names``: the axis names when ``axis_names`` is a tuple/list of string literals,
    ``()`` when it is not given (``Mesh.axis_names`` is then None), else None (unknown).
    ``device_count``: N for ``np.arange(N)``, ``range(N)``, ``np.array(range(N))``,
    ``list(range(N))`` with an int literal N, else None.
    """

    call: cst.Call
    shape: tuple[int, ...] | None
    axis_names: tuple[str, ...] | None
    shape_length: int | None
    names_length: int | None
    device_count: int | None
    names_given: bool


def literal_elements(node: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """Elements of a tuple or list display without starred items, else None."""
    if isinstance(node, (cst.Tuple, cst.List)) and not any(
        isinstance(e, cst.StarredElement) for e in node.elements
    ):
        return [e.value for e in node.elements]
    return None


def literal_int(node: cst.BaseExpression | None) -> int | None:
    """The value of an int literal, else None."""
    if isinstance(node, cst.Integer):
        try:
            return int(node.evaluated_value)
        except (TypeError, ValueError):  # pragma: no cover
            return None
    return None


def _literal_device_count(ctx, node: cst.BaseExpression | None) -> int | None:
    if not isinstance(node, cst.Call):
        return None
    names = ctx.qnames(node.func)
    if names & {"numpy.arange", "builtins.range"}:
        args = [a for a in node.args if a.keyword is None]
        if len(args) != 1 or len(node.args) != 1:
            return None
        return literal_int(args[0].value)
    if (
        names & {"numpy.array", "numpy.asarray", "builtins.list", "builtins.tuple"}
        and len(node.args) == 1
    ):
        return _literal_device_count(ctx, node.args[0].value)
    return None


def literal_mesh(ctx, call: cst.BaseExpression | None) -> LiteralMesh | None:
    """What a ``Mesh(...)`` call (torch_xla's, any alias) states literally; None for anything else."""
    if type(call) is not cst.Call or not ctx.is_call_to(call, apis.MESH):
        return None
    if any(a.star for a in call.args):
        return None
    ids = find_arg(call, "device_ids", 0)
    shape_arg = find_arg(call, "mesh_shape", 1)
    names_arg = find_arg(call, "axis_names", 2)
    shape_elems = literal_elements(shape_arg.value) if shape_arg is not None else None
    shape: tuple[int, ...] | None = None
    if shape_elems is not None:
        ints = [literal_int(e) for e in shape_elems]
        known_ints = [i for i in ints if i is not None]
        shape = tuple(known_ints) if len(known_ints) == len(ints) else None
    names: tuple[str, ...] | None = None
    names_length = None
    if names_arg is None:
        names = ()
    else:
        elems = literal_elements(names_arg.value)
        if elems is not None:
            names_length = len(elems)
            strings = [literal_string(e) for e in elems]
            known_strings = [s for s in strings if s is not None]
            names = tuple(known_strings) if len(known_strings) == len(strings) else None
    return LiteralMesh(
        call,
        shape,
        names,
        len(shape_elems) if shape_elems is not None else None,
        names_length,
        _literal_device_count(ctx, ids.value) if ids is not None else None,
        names_arg is not None,
    )


# What _only_values looks at: the nodes that open a scope body, and every other binding.
_BINDERS = frozenset(
    {
        cst.FunctionDef,
        cst.ClassDef,
        cst.Lambda,
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.CompFor,
        cst.NamedExpr,
        cst.AsName,
        cst.Global,
        cst.Nonlocal,
    }
)


def _only_values(flat: Flat) -> dict[int, dict[str, cst.BaseExpression]]:
    """Per scope body under ``flat``'s root (the root, each function, class and lambda, by
    ``id``): the names it binds exactly once, by ``name = value`` (or ``name: T = value``), and
    nowhere else in that body (no loop target, ``:=``, ``as``, ``global``, nested ``def`` or
    ``class`` of the name, other assignment), with the value. A nested function, class or
    lambda is a body of its own; its name is a binding of the body around it. One pass."""
    nodes, ends = flat.nodes, flat.ends
    root = id(nodes[0])
    values: dict[int, dict[str, list[cst.BaseExpression]]] = {root: {}}
    others: dict[int, set[str]] = {root: set()}  # names bound some other way
    owners: list[tuple[int, int]] = [(len(nodes), root)]  # (end of its subtree, id) per body
    for i in flat.of_types(_BINDERS):
        if i == 0:
            continue  # the root's own definition is no binding in its body
        while owners[-1][0] <= i:
            owners.pop()
        node = nodes[i]
        owner = owners[-1][1]
        found, other = values[owner], others[owner]
        if type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
            other.add(node.name.value)
        if type(node) is cst.FunctionDef or type(node) is cst.ClassDef or type(node) is cst.Lambda:
            values[id(node)], others[id(node)] = {}, set()
            owners.append((ends[i], id(node)))
        elif type(node) is cst.Assign:
            for t in node.targets:
                if type(t.target) is cst.Name:
                    found.setdefault(t.target.value, []).append(node.value)
                else:
                    other |= bound_names(t.target)
        elif type(node) is cst.AnnAssign:
            if node.value is not None:
                for name in bound_names(node.target):
                    found.setdefault(name, []).append(node.value)
            else:
                other |= bound_names(node.target)
        elif (
            type(node) is cst.AugAssign
            or type(node) is cst.For
            or type(node) is cst.CompFor
            or type(node) is cst.NamedExpr
        ):
            other |= bound_names(node.target)
        elif type(node) is cst.AsName:
            other |= bound_names(node.name)
        elif type(node) is cst.Global or type(node) is cst.Nonlocal:
            other.update(n.name.value for n in node.names)
    return {
        owner: {
            name: assigned[0]
            for name, assigned in found.items()
            if len(assigned) == 1 and name not in others[owner]
        }
        for owner, found in values.items()
    }


def assigned_once(ctx, name: cst.BaseExpression) -> cst.BaseExpression | None:
    """The value a bare name was assigned, when its module or function binds it exactly once
    (``mesh = xs.Mesh(...)``) and nowhere else (no parameter, import, loop, ``global``); else None."""
    if not isinstance(name, cst.Name):
        return None
    scope: Scope | None = ctx.scope
    start = scope
    while scope is not None:
        if scope.kind == "class" and scope is not start:
            scope = scope.parent
            continue
        if name.value in scope.bindings:
            break
        scope = scope.parent
    if scope is None or scope.bindings.get(name.value) != {LOCAL} or scope.kind == "class":
        return None
    if name.value in scope.globals or name.value in scope.nonlocals:
        return None
    node = scope.node
    if node is None:
        return None
    if isinstance(node, cst.FunctionDef):
        params = node.params
        every = (
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            *(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)),
        )
        if any(p.name.value == name.value for p in every):
            return None
    bodies = ctx.memo(_only_values, lambda: _only_values(ctx.flat))
    if id(node) not in bodies:  # a scope of another module (a docstring example's globals)
        bodies = ctx.memo((_only_values, id(node)), lambda: _only_values(Flat(node)))
    return bodies[id(node)].get(name.value)


def mesh_of(ctx, node: cst.BaseExpression | None) -> LiteralMesh | None:
    """The literal mesh an argument stands for: a ``Mesh(...)`` call, or a name assigned once from one."""
    if node is None:
        return None
    if isinstance(node, cst.Call):
        return literal_mesh(ctx, node)
    return literal_mesh(ctx, assigned_once(ctx, node))


# Calls taking a partition spec: qualified name -> (keyword, position) of the spec and of the mesh.
SPEC_APIS: dict[str, tuple[tuple[str, int | None], tuple[str, int | None]]] = {
    apis.MARK_SHARDING: (("partition_spec", 2), ("mesh", 1)),
    apis.MARK_SHARDING_WITH_GRADIENTS: (("partition_spec", 2), ("mesh", 1)),
    apis.SHARDING_SPEC: (("partition_spec", 1), ("mesh", 0)),
    f"{apis.XS}.enable_manual_sharding": (("partition_spec", 1), ("mesh", None)),
    f"{apis.XS}.disable_manual_sharding": (("partition_spec", 1), ("mesh", None)),
}


def spec_call(ctx, node: cst.Call) -> tuple[cst.Arg | None, cst.Arg | None] | None:
    """For a call taking a partition spec: its (spec, mesh) arguments; None for other calls."""
    names = ctx.qnames(node.func)
    if not names:
        return None
    for api, ((spec_kw, spec_pos), (mesh_kw, mesh_pos)) in SPEC_APIS.items():
        if api in names:
            return find_arg(node, spec_kw, spec_pos), find_arg(node, mesh_kw, mesh_pos)
    return None
