"""What an expression holds, as far as its own file tells: ``nprocs=args.num_cores`` is 8.

Rules ask :func:`value_of` about an expression of the node being visited and get a
:class:`Known` value (with where it comes from) or an :class:`Unknown` one that names its
origin: a function parameter, an environment variable, an option the user sets, a call
result... They never follow assignments themselves. Answered from one statement walk of
the file (:class:`FileValues`, built on first use and kept in ``ctx.memo``); a question
costs a dictionary look-up and a scan of the statements before the read in its blocks.

What is followed:

- literals (int, float, complex, str, bytes, bool, None, and tuples/lists/sets/dicts of them),
  unary minus, arithmetic between known numbers, ``int()``/``float()``/``str()``/``bool()``;
- names: the assignment that reaches the read in the same function (the nearest one before
  it in the enclosing blocks; a binding inside an ``if``/loop before it, or a loop that
  rebinds the name, makes the reach ambiguous), else the name's only binding in its scope
  when it is a plain assignment outside any loop (a *module constant* ``NPROCS = 8`` read in
  a function); a name also assigned through ``global``/``nonlocal`` elsewhere, or a
  container changed in place (``d[k] = v``, ``l.append(v)``), is not a constant;
- argparse: ``args = parser.parse_args()`` (or ``parse_known_args()[0]``, ``args, _ =
  parser.parse_known_args()``, a same-file function returning one of those, or a parameter
  named ``args``/``opts``/``options``/``flags`` in a file that defines options) is an
  argparse namespace; ``args.num_cores`` is the default of the option whose destination is
  ``num_cores`` (``dest=``, ``--num-cores``, ``-n`` spellings; ``set_defaults``; a string
  default converted by ``type=int``/``float`` as argparse does; ``store_true`` is False).
  An option without a default, or one assigned in the code (``args.num_cores = ...``), is
  :data:`OPTION`-unknown;
- ``os.environ[...]``, ``os.environ.get(...)``, ``os.getenv(...)``: :data:`ENVIRONMENT`;
- attributes assigned in the file (``self.rank = ...``: :attr:`FileValues.attr_values`) and the
  parameters of functions (:meth:`FileValues.parameter`), which :mod:`xla_lint.analysis.ranks`
  follows to tell replicas apart; what the file's calls of a function pass to one of its
  parameters (:meth:`FileValues.arguments`: ``get_data_loaders(train_batch_size,
  val_batch_size)`` called with ``args.val_batch_size``), asked for explicitly (a parameter's
  value is :data:`PARAMETER`-unknown: other code may call the function).

Nothing here crosses files: an imported value, an attribute of an object and the result of
a call are unknown.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from .context import literal_string
from .names import Scope, defining_scope, dotted_name
from .walk import Flat, iter_nodes

# Kinds of unknown values (Unknown.kind).
PARAMETER = "parameter"  # a parameter of the enclosing function
ENVIRONMENT = "environment"  # os.environ[...], os.getenv(...)
OPTION = "option"  # a command-line option (argparse) without a known default
NAMESPACE = "namespace"  # an argparse namespace (parse_args()), or vars() of one
CALL = "call"  # the result of a call (``node`` is the Call)
COUNTER = "counter"  # a loop counter (``for i in range(...)``, enumerate's index)
CONTAINER = (
    "container"  # a list/tuple/set/dict (literal, comprehension, filled in place): ``parts``
)
ELEMENT = "element"  # an item of something (``x[i]``, a for-loop or unpacking target): ``parts``
SEVERAL = "several"  # one of ``parts`` (a conditional expression, several assignments)
ATTRIBUTE = "attribute"  # an attribute of an object (``self.model``): ``node``
OTHER = "other"  # anything else: imports, definitions, run-time expressions

_ENV_CALLS = frozenset({"os.getenv", "os.environ.get", "os.environ.setdefault"})
_CONVERSIONS = {
    "builtins.int": int,
    "builtins.float": float,
    "builtins.str": str,
    "builtins.bool": bool,
}
_SCALAR_TYPES = frozenset({"int", "float", "str", "bool"})
_NAMESPACE_PARAMS = frozenset({"args", "opts", "options", "flags"})
# In-place changes of a container held by a name (method -> positions of the values it stores):
# the stored values are its parts too, and the name is no constant.
_MUTATORS = {
    "append": (0,),
    "add": (0,),
    "extend": (0,),
    "insert": (1,),
    "update": (0,),
    "setdefault": (1,),
    "appendleft": (0,),
    "extendleft": (0,),
    "pop": (),
    "popitem": (),
    "clear": (),
    "remove": (),
    "discard": (),
    "sort": (),
    "reverse": (),
}
_BINARY = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
    cst.Divide: operator.truediv,
    cst.Modulo: operator.mod,
}
_MAX_DEPTH = 24


@dataclass(frozen=True, eq=False)
class Site:
    """Where an expression is read: the scope it is read in and the statements enclosing the
    read within that scope, outermost first (empty: no position known, e.g. a parameter's default)."""

    scope: Scope
    path: tuple[cst.CSTNode, ...] = ()


@dataclass(frozen=True, eq=False)
class Known:
    """A value the file fixes: ``value`` is a Python object (int, float, str, bool, None, or a
    tuple/list/set/dict of those); ``origin`` says where it comes from, for messages
    ("a literal", "the module constant `NPROCS`", "the argparse default of --num_cores")."""

    value: object
    origin: str
    # An argparse option's default: ``(spelling, type)`` (``("--num_cores", "int")``), so that a
    # finding can be checked against what the program's launches pass (xla_lint/program/launchers.py).
    option: tuple[str, str | None] | None = None


@dataclass(frozen=True, eq=False)
class Unknown:
    """A value the file does not fix. ``kind`` is one of the module's kind constants
    (:data:`PARAMETER`, :data:`ENVIRONMENT`, :data:`OPTION`...), ``origin`` a phrase for messages
    ("the parameter `n` of `main`", "the environment variable `NPROCS`").

    ``node``/``site``: the expression it comes from and where that is read (the Call of a
    :data:`CALL`, the Attribute of an :data:`ATTRIBUTE`); ``parts``: for :data:`CONTAINER`,
    :data:`ELEMENT` and :data:`SEVERAL`, the expressions (with their sites) the value is made
    of or taken from (ask :func:`value_of` about each, or use :func:`parts_of`). ``type``:
    "int", "float", "str" or "bool" when the Python type is known (an annotated parameter, an
    option's ``type=``, a loop counter).
    """

    kind: str
    origin: str
    node: cst.CSTNode | None = field(default=None, repr=False)
    site: Site | None = field(default=None, repr=False)
    parts: tuple[tuple[cst.BaseExpression, Site], ...] = field(default=(), repr=False)
    type: str | None = None
    option: tuple[str, str | None] | None = None  # an argparse option: (spelling, type), as Known


Value = Known | Unknown


def value_of(ctx, node: cst.BaseExpression, site: Site | None = None) -> Value:
    """The value of expression ``node`` read at ``site`` (default: where the traversal is,
    ``node`` being the node visited or one of its descendants). Never raises."""
    table = file_values(ctx)
    if site is None:
        site = table.current_site()
    return table.value(node, site, 0)


def parts_of(ctx, value: Value) -> list[Value]:
    """The values of an :class:`Unknown`'s ``parts`` ([] for a Known value or one without parts)."""
    if isinstance(value, Known):
        return []
    table = file_values(ctx)
    return [table.value(expr, site, 1) for expr, site in value.parts]


def definition(
    ctx, node: cst.BaseExpression, site: Site | None = None
) -> tuple[cst.BaseExpression, Site] | None:
    """For a Name: the one expression it was assigned (``x = <expr>``) that reaches ``site``,
    with the site of that assignment; None when there is no such single assignment."""
    table = file_values(ctx)
    if site is None:
        site = table.current_site()
    return table.definition(node, site)


def arguments(
    ctx, node: cst.BaseExpression, site: Site | None = None
) -> list[tuple[cst.BaseExpression, Site]] | None:
    """For a parameter read at ``site``: what each call of its function in the file passes
    there (:meth:`FileValues.arguments`); None when not every caller is seen."""
    table = file_values(ctx)
    if site is None:
        site = table.current_site()
    return table.arguments(node, site)


def file_values(ctx) -> FileValues:
    """The file's value table, built once per file (``ctx.memo``)."""
    return ctx.memo("xla_lint.analysis.values", lambda: FileValues(ctx))


@dataclass(eq=False)
class _Binding:
    name: str
    kind: str  # assign | unpack | for | param | import | def | other
    value: cst.BaseExpression | None  # assign: the value; unpack/for: the whole value / iterable
    stmt: cst.CSTNode  # the statement binding it (the FunctionDef for a parameter)
    site: Site  # where ``value`` is read
    in_loop: bool = False
    index: int | None = None  # unpack/for: position in a tuple target
    elsewhere: bool = False  # bound from another scope (``global``/``nonlocal``)
    param: cst.Param | None = None
    header: bool = False  # bound by a compound statement's header (for target, with/except name)


@dataclass(eq=False)
class _Option:
    dest: str
    spelling: str  # "--num_cores"
    default: cst.BaseExpression | None  # None: no default= given
    implicit: object  # store_true -> False, store_false -> True, else _MISSING
    type: str | None
    required: bool
    site: Site
    from_set_defaults: bool = False


_MISSING = object()


class FileValues:
    """The bindings, container changes and argparse options of one file, from one statement
    walk (expressions are not walked: a ``:=`` or comprehension variable is not a binding here)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.bindings: dict[tuple[int, str], list[_Binding]] = {}
        self.bound: dict[
            int, set[str]
        ] = {}  # id(statement) -> names bound in it (nested blocks too)
        self.slot: dict[
            int, tuple[Sequence[cst.CSTNode], int]
        ] = {}  # id(statement) -> (its block, index)
        self.stores: dict[tuple[int, str], list[tuple[cst.BaseExpression, Site]]] = {}
        self.attr_stores: set[str] = set()  # "args.num_cores" assigned somewhere
        # "self.rank" -> every value assigned to it in the file, with the site it is read at
        # (None for an augmented assignment or a `del`): xla_lint.analysis.ranks follows them.
        self.attr_values: dict[str, list[tuple[cst.BaseExpression | None, Site]]] = {}
        self.options: dict[str, list[_Option]] = {}
        self.dynamic_options = False  # an add_argument whose name is computed
        self.returns: dict[int, list[tuple[cst.BaseExpression, Site]]] = {}
        self._current_node: cst.CSTNode | None = None
        self._current_site: Site | None = None
        self._by_name: dict[str, list[tuple[cst.Call, Site] | None]] | None = None
        module = ctx.module
        self._body(module.body, ctx.root_scope, (), False)

    @property
    def has_parser(self) -> bool:
        """True when the file defines command-line options (``add_argument``)."""
        return bool(self.options) or self.dynamic_options

    # -- the walk ---------------------------------------------------------------------------
    def _body(
        self, body: Sequence[cst.CSTNode], scope: Scope, path: tuple, in_loop: bool
    ) -> set[str]:
        names: set[str] = set()
        for i, stmt in enumerate(body):
            self.slot[id(stmt)] = (body, i)
            names |= self._statement(stmt, scope, path + (stmt,), in_loop)
        return names

    def _block(self, block, scope: Scope, path: tuple, in_loop: bool) -> set[str]:
        if isinstance(block, cst.IndentedBlock):
            return self._body(block.body, scope, path, in_loop)
        names: set[str] = set()
        if isinstance(
            block, cst.SimpleStatementSuite
        ):  # `if x: a = 1` binds in the compound statement
            owner = path[-1] if path else scope.node
            for small in block.body:
                names |= self._small(small, owner, scope, path, in_loop)
        return names

    def _statement(self, stmt, scope: Scope, path: tuple, in_loop: bool) -> set[str]:
        names: set[str] = set()
        kind = type(stmt)
        site = Site(scope, path)
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                names |= self._small(small, stmt, scope, path, in_loop)
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            self._bind(
                scope, stmt.name.value, _Binding(stmt.name.value, "def", None, stmt, site, in_loop)
            )
            names.add(stmt.name.value)
            inner = self.ctx.scopes.get(stmt)
            if (
                inner is None
            ):  # pragma: no cover - every definition has a scope (names.BindingCollector)
                self.bound[id(stmt)] = names
                return names
            if kind is cst.FunctionDef:
                self.returns.setdefault(id(stmt), [])
                params = stmt.params
                for p in (
                    *params.posonly_params,
                    *params.params,
                    *params.kwonly_params,
                    params.star_arg,
                    params.star_kwarg,
                ):
                    if isinstance(p, cst.Param):
                        name = p.name.value
                        self._bind(
                            inner, name, _Binding(name, "param", None, stmt, Site(inner), param=p)
                        )
            self._block(stmt.body, inner, (), False)
        elif kind is cst.If:
            names |= self._block(stmt.body, scope, path, in_loop)
            orelse = stmt.orelse
            while isinstance(orelse, cst.If):  # elif: its blocks belong to the outer statement
                names |= self._block(orelse.body, scope, path, in_loop)
                orelse = orelse.orelse
            if isinstance(orelse, cst.Else):
                names |= self._block(orelse.body, scope, path, in_loop)
        elif kind is cst.For:
            names |= self._target(
                stmt.target, "for", stmt.iter, stmt, site, scope, in_loop, header=True
            )
            names |= self._block(stmt.body, scope, path, True)
            if stmt.orelse is not None:
                names |= self._block(stmt.orelse.body, scope, path, in_loop)
        elif kind is cst.While:
            names |= self._block(stmt.body, scope, path, True)
            if stmt.orelse is not None:
                names |= self._block(stmt.orelse.body, scope, path, in_loop)
        elif kind is cst.Try or kind is getattr(cst, "TryStar", cst.Try):
            names |= self._block(stmt.body, scope, path, in_loop)
            for handler in stmt.handlers:
                if handler.name is not None:
                    names |= self._target(
                        handler.name.name, "other", None, stmt, site, scope, in_loop, header=True
                    )
                names |= self._block(handler.body, scope, path, in_loop)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    names |= self._block(extra.body, scope, path, in_loop)
        elif kind is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    names |= self._target(
                        item.asname.name, "other", None, stmt, site, scope, in_loop, header=True
                    )
            names |= self._block(stmt.body, scope, path, in_loop)
        elif kind is cst.Match:
            for case in stmt.cases:
                for node in iter_nodes(case.pattern):
                    if isinstance(node, (cst.MatchAs, cst.MatchStar)) and isinstance(
                        node.name, cst.Name
                    ):
                        names |= self._target(
                            node.name, "other", None, stmt, site, scope, in_loop, header=True
                        )
                    elif isinstance(node, cst.MatchMapping) and isinstance(node.rest, cst.Name):
                        names |= self._target(
                            node.rest, "other", None, stmt, site, scope, in_loop, header=True
                        )
                names |= self._block(case.body, scope, path, in_loop)
        self.bound[id(stmt)] = names
        return names

    def _small(self, small, stmt, scope: Scope, path: tuple, in_loop: bool) -> set[str]:
        names: set[str] = set()
        kind = type(small)
        site = Site(scope, path)
        if kind is cst.Assign:
            for t in small.targets:
                names |= self._target(t.target, "assign", small.value, stmt, site, scope, in_loop)
            self._calls(small.value, site)
        elif kind is cst.AnnAssign:
            if small.value is not None:
                names |= self._target(
                    small.target, "assign", small.value, stmt, site, scope, in_loop
                )
                self._calls(small.value, site)
        elif kind is cst.AugAssign:
            names |= self._target(small.target, "other", None, stmt, site, scope, in_loop)
        elif kind is cst.Expr:
            self._calls(small.value, site)
        elif kind is cst.Return:
            if small.value is not None and scope.kind == "function":
                self.returns.setdefault(id(scope.node), []).append((small.value, site))
        elif kind is cst.Import:
            for alias in small.names:
                asname = alias.asname.name if alias.asname is not None else None
                name = (
                    asname.value
                    if isinstance(asname, cst.Name)
                    else (dotted_name(alias.name) or "").split(".")[0]
                )
                if name:
                    names |= self._bind_name(
                        name, _Binding(name, "import", None, stmt, site, in_loop), scope
                    )
        elif kind is cst.ImportFrom and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                asname = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(asname, cst.Name):
                    names |= self._bind_name(
                        asname.value,
                        _Binding(asname.value, "import", None, stmt, site, in_loop),
                        scope,
                    )
        elif kind is cst.Del:
            names |= self._target(small.target, "other", None, stmt, site, scope, in_loop)
        return names

    def _target(
        self,
        target,
        kind: str,
        value,
        stmt,
        site: Site,
        scope: Scope,
        in_loop: bool,
        index: int | None = None,
        header: bool = False,
    ) -> set[str]:
        t = type(target)
        if t is cst.Name:
            b = _Binding(target.value, kind, value, stmt, site, in_loop, index, header=header)
            return self._bind_name(target.value, b, scope)
        if t is cst.Tuple or t is cst.List:
            names: set[str] = set()
            starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
            nested = (
                index is not None
            )  # `for i, (a, b) in ...`: positions of an item, not of the value
            sub = (
                "other"
                if starred or nested or kind == "other"
                else ("for" if kind == "for" else "unpack")
            )
            for i, element in enumerate(target.elements):
                names |= self._target(
                    element.value, sub, value, stmt, site, scope, in_loop, i, header
                )
            return names
        if t is cst.StarredElement:
            return self._target(
                target.value, "other", None, stmt, site, scope, in_loop, None, header
            )
        if t is cst.Attribute:
            text = dotted_name(target)
            if text:
                self.attr_stores.add(text)
                stored = value if kind == "assign" and index is None else None
                self.attr_values.setdefault(text, []).append((stored, site))
        elif t is cst.Subscript and isinstance(
            target.value, cst.Name
        ):  # d[k] = v, d[k] += v, del d[k]
            self._store(target.value.value, value if kind == "assign" else None, site, scope)
        return set()

    def _bind_name(self, name: str, binding: _Binding, scope: Scope) -> set[str]:
        self._bind(scope, name, binding)
        return {name}

    def _bind(self, scope: Scope, name: str, binding: _Binding) -> None:
        """Record ``binding`` in the scope the name belongs to (``global``/``nonlocal`` ones
        go to the module / the enclosing function, marked as bound elsewhere)."""
        target = scope
        if name in scope.globals and scope.kind != "module":
            target = scope.module
            binding.elsewhere = True
        elif name in scope.nonlocals:
            outer = scope.parent
            while outer is not None and (outer.kind == "class" or name not in outer.bindings):
                outer = outer.parent
            if outer is None:
                return
            target = outer
            binding.elsewhere = True
        self.bindings.setdefault((id(target.node), name), []).append(binding)

    def _store(self, name: str, value: cst.BaseExpression | None, site: Site, scope: Scope) -> None:
        """``name``'s container is changed in place, storing ``value`` (None: nothing stored)."""
        owner = defining_scope(name, scope)
        if owner is not None:
            stored = self.stores.setdefault((id(owner.node), name), [])
            if value is not None:
                stored.append((value, site))

    def _calls(self, expr: cst.BaseExpression, site: Site) -> None:
        """Record what a statement-level call tells: container changes, argparse options."""
        if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute:
            return
        method = expr.func.attr.value
        receiver = expr.func.value
        if method in _MUTATORS and type(receiver) is cst.Name:
            positions = _MUTATORS[method]
            self._store(receiver.value, None, site, site.scope)
            if positions:
                for arg in expr.args:
                    if arg.keyword is not None or arg.star:
                        self._store(receiver.value, arg.value, site, site.scope)
            plain = [a for a in expr.args if a.keyword is None and not a.star]
            for p in positions:
                if p < len(plain):
                    self._store(receiver.value, plain[p].value, site, site.scope)
        elif method == "add_argument":
            self._add_argument(expr, site)
        elif method == "set_defaults":
            for arg in expr.args:
                if arg.keyword is not None:
                    dest = arg.keyword.value
                    self.options.setdefault(dest, []).append(
                        _Option(
                            dest,
                            f"--{dest}",
                            arg.value,
                            _MISSING,
                            None,
                            False,
                            site,
                            from_set_defaults=True,
                        )
                    )
                elif arg.star:
                    self.dynamic_options = True

    def _add_argument(self, call: cst.Call, site: Site) -> None:
        strings: list[str] = []
        keywords: dict[str, cst.BaseExpression] = {}
        for arg in call.args:
            if arg.star:
                self.dynamic_options = True
                return
            if arg.keyword is None:
                text = _string(arg.value)
                if text is None:
                    self.dynamic_options = True
                    return
                strings.append(text)
            else:
                keywords[arg.keyword.value] = arg.value
        if not strings:
            return
        dest = _string(keywords["dest"]) if "dest" in keywords else None
        longs = [s for s in strings if s.startswith("--")]
        shorts = [s for s in strings if s.startswith("-") and not s.startswith("--")]
        spelling = (longs or shorts or strings)[0]
        if dest is None:
            if longs:
                dest = longs[0][2:].replace("-", "_")
            elif shorts:
                dest = shorts[0][1:].replace("-", "_")
            else:
                dest = strings[0]
        action = _string(keywords.get("action")) if "action" in keywords else None
        implicit = {"store_true": False, "store_false": True}.get(action or "", _MISSING)
        type_node = keywords.get("type")
        type_name = (
            type_node.value
            if isinstance(type_node, cst.Name) and type_node.value in _SCALAR_TYPES
            else None
        )
        if action in ("store_true", "store_false"):
            type_name = "bool"
        required = keywords.get("required")
        is_required = (isinstance(required, cst.Name) and required.value == "True") or (
            not strings[0].startswith("-") and "nargs" not in keywords and "default" not in keywords
        )
        self.options.setdefault(dest, []).append(
            _Option(dest, spelling, keywords.get("default"), implicit, type_name, is_required, site)
        )

    # -- where the traversal is -------------------------------------------------------------
    def current_site(self) -> Site:
        """The site of the node the traversal is visiting (its scope and enclosing statements)."""
        ctx = self.ctx
        stack = ctx.stack
        top = stack[-1] if stack else None
        if top is self._current_node and self._current_site is not None:
            return self._current_site
        scope = ctx.scope
        path: list[cst.CSTNode] = []
        for node in reversed(stack):
            if node is scope.node:
                break
            if id(node) in self.slot:
                path.append(node)
        path.reverse()
        site = Site(scope, tuple(path))
        self._current_node, self._current_site = top, site
        return site

    # -- names --------------------------------------------------------------------------------
    def _reaching(self, name: str, site: Site) -> tuple[Scope, _Binding | None, list[_Binding]]:
        """The scope that binds ``name`` for a read at ``site``, the one binding that reaches
        the read (None: not known), and all the scope's bindings of the name."""
        owner = defining_scope(name, site.scope)
        if owner is None:
            return site.scope, None, []
        every = self.bindings.get((id(owner.node), name), [])
        if not every:
            return owner, None, every
        if owner is not site.scope or not site.path or any(b.elsewhere for b in every):
            return owner, self._alone(every), every
        path = site.path
        for level in range(len(path) - 1, -1, -1):
            stmt = path[level]
            body, index = self.slot[id(stmt)]
            for j in range(index - 1, -1, -1):
                previous = body[j]
                if name in self.bound.get(id(previous), ()):
                    if type(previous) in (cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef):
                        found = [b for b in every if b.stmt is previous and not b.header]
                        return owner, (found[-1] if found else None), every
                    return (
                        owner,
                        self._alone(every),
                        every,
                    )  # bound inside an if/loop/try before the read
            if level > 0:
                compound = path[level - 1]
                header = [b for b in every if b.stmt is compound and b.header]
                if header:
                    return owner, header[-1], every
                if type(compound) in (cst.For, cst.While) and name in self.bound.get(
                    id(compound), ()
                ):
                    return owner, self._alone(every), every  # rebound later in the loop
        params = [b for b in every if b.kind == "param"]
        if params:
            return owner, params[0], every
        return owner, self._alone(every), every

    def _alone(self, every: list[_Binding]) -> _Binding | None:
        """The scope's only binding of a name, when it stands for every read (not repeated by a loop)."""
        return every[0] if len(every) == 1 and self._single(every[0]) else None

    @staticmethod
    def _single(binding: _Binding) -> bool:
        """A binding that stands alone for its scope: not repeated by a loop."""
        return binding.kind in ("param", "import", "def", "for") or not binding.in_loop

    def definition(
        self, node: cst.BaseExpression, site: Site
    ) -> tuple[cst.BaseExpression, Site] | None:
        """The single ``name = <expr>`` reaching a read of Name ``node`` at ``site``."""
        if type(node) is not cst.Name:
            return None
        _, binding, _ = self._reaching(node.value, site)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return None
        return binding.value, binding.site

    def parameter(self, node: cst.BaseExpression, site: Site) -> tuple[cst.FunctionDef, int] | None:
        """For a Name read at ``site`` that is a parameter of the enclosing function (and no other
        binding reaches the read): that function and the parameter's position (0-based, among
        the positional parameters; -1 for a keyword-only one or ``*args``/``**kwargs``)."""
        if type(node) is not cst.Name:
            return None
        _, binding, _ = self._reaching(node.value, site)
        if binding is None or binding.kind != "param" or type(binding.stmt) is not cst.FunctionDef:
            return None
        params = binding.stmt.params
        positional = [*params.posonly_params, *params.params]
        for i, param in enumerate(positional):
            if param is binding.param:
                return binding.stmt, i
        return binding.stmt, -1

    def arguments(
        self, node: cst.BaseExpression, site: Site
    ) -> list[tuple[cst.BaseExpression, Site]] | None:
        """For a Name read at ``site`` that is a parameter of the enclosing function: what every
        call of that function in the file passes there (the argument, or the parameter's default
        when a call leaves it out), each with the site of the call. None when not every caller is
        seen: the function is a method or a nested one's name is used other than as a call's
        callee (passed on, stored), a call has ``*args``/``**kwargs``, or nothing calls it."""
        found = self.parameter(node, site)
        if found is None:
            return None
        function, position = found
        assert isinstance(node, cst.Name)
        calls = self._calls_by_name().get(function.name.value)
        if not calls or calls[0] is None:
            return None
        params = function.params
        param = next(
            (
                p
                for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                if p.name.value == node.value
            ),
            None,
        )
        if param is None:
            return None
        out: list[tuple[cst.BaseExpression, Site]] = []
        for entry in calls:
            assert entry is not None
            call, call_site = entry
            if defining_scope(function.name.value, call_site.scope) is not self._def_scope(
                function
            ):
                return None  # another function of that name
            value: cst.BaseExpression | None = None
            index = 0
            for arg in call.args:
                if arg.star:
                    return None
                if arg.keyword is not None:
                    if arg.keyword.value == node.value:
                        value = arg.value
                elif index == position:
                    value = arg.value
                    index += 1
                else:
                    index += 1
            if value is not None:
                out.append((value, call_site))
            elif param.default is not None:
                out.append((param.default, Site(call_site.scope)))
            else:
                return None
        return out

    def _def_scope(self, function: cst.FunctionDef) -> Scope | None:
        """The scope a ``def`` binds its name in."""
        inner = self.ctx.scopes.get(function)
        return inner.parent if inner is not None else None

    def _calls_by_name(self) -> dict[str, list[tuple[cst.Call, Site] | None]]:
        """Bare name -> every call ``name(...)`` in the file with its site; ``[None]`` when the
        name is also read other than as a callee or a ``def``'s name (it may be called elsewhere).
        One pass over :attr:`FileContext.flat` (or, when that leaves names out, over a list of
        the module's nodes with them), on first use."""
        if self._by_name is not None:
            return self._by_name
        ctx = self.ctx
        flat = ctx.flat
        if cst.Name in flat.skip:  # the shared list left names out (no rule visits them)
            flat = Flat(ctx.module)
        nodes, ends = flat.nodes, flat.ends
        out: dict[str, list[tuple[cst.Call, Site] | None]] = {}
        reads: dict[str, int] = {}
        callees: set[int] = set()
        defined: set[int] = set()
        stack: list[tuple[int, cst.CSTNode]] = []
        for i, item in enumerate(nodes):
            while stack and stack[-1][0] <= i:
                stack.pop()
            kind = type(item)
            if kind is cst.Call and type(item.func) is cst.Name:
                scope = ctx.root_scope
                path: list[cst.CSTNode] = []
                for _, open_node in reversed(stack):
                    found = ctx.scopes.get(open_node) if open_node is not ctx.module else None
                    if found is not None:
                        scope = found
                        break
                    if id(open_node) in self.slot:
                        path.append(open_node)
                path.reverse()
                callees.add(id(item.func))
                out.setdefault(item.func.value, []).append((item, Site(scope, tuple(path))))
            elif kind is cst.FunctionDef or kind is cst.ClassDef:
                defined.add(id(item.name))
            elif kind is cst.Attribute:
                defined.add(id(item.attr))  # `trainer.run(...)` reads no name `run`
            elif kind is cst.Arg and item.keyword is not None:
                defined.add(id(item.keyword))
            elif kind is cst.Param:
                defined.add(id(item.name))
            elif kind is cst.Name and id(item) not in callees and id(item) not in defined:
                reads[item.value] = reads.get(item.value, 0) + 1
            stack.append((ends[i], item))
        for name in reads:
            if name in out:
                out[name] = [None]
        self._by_name = out
        return out

    def _name(self, node: cst.Name, site: Site, depth: int) -> Value:
        name = node.value
        if name in ("True", "False", "None"):
            return Known({"True": True, "False": False, "None": None}[name], "a literal")
        owner, binding, every = self._reaching(name, site)
        if not every:
            return Unknown(OTHER, f"`{name}`, not defined in this file", node, site)
        if binding is None:
            plain = [(b.value, b.site) for b in every if b.kind == "assign" and b.value is not None]
            if len(plain) == len(every):
                return Unknown(
                    SEVERAL, f"`{name}`, assigned in several places", node, site, tuple(plain)
                )
            return Unknown(OTHER, f"`{name}`, bound in several ways", node, site)
        kind = binding.kind
        if kind == "param":
            assert type(binding.stmt) is cst.FunctionDef  # a parameter's stmt is its function
            function = binding.stmt.name.value
            if name in _NAMESPACE_PARAMS and self.has_parser:
                return Unknown(
                    NAMESPACE,
                    f"the argparse namespace `{name}` (a parameter of `{function}`)",
                    node,
                    site,
                )
            return Unknown(
                PARAMETER,
                f"the parameter `{name}` of `{function}`",
                binding.param,
                site,
                type=_annotation_type(binding.param),
            )
        if kind == "assign":
            assert binding.value is not None  # `x = v` and `x: T = v` (not `x: T`) bind "assign"
            value = self.value(binding.value, binding.site, depth + 1)
            stored = self.stores.get((id(owner.node), name))
            if stored is not None:
                parts = tuple(stored)
                if isinstance(binding.value, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
                    parts = _literal_parts(binding.value, binding.site) + parts
                elif isinstance(value, Unknown) and value.kind == CONTAINER:
                    parts = value.parts + parts
                else:
                    parts = ((binding.value, binding.site),) + parts
                return Unknown(
                    CONTAINER, f"`{name}`, a container filled in place", node, site, parts
                )
            if isinstance(value, Known) and value.origin == "a literal":
                where = "module constant" if owner.kind == "module" else "variable"
                return Known(value.value, f"the {where} `{name}`")
            return value
        if kind == "unpack":
            return self._unpacked(binding, node, site, depth)
        if kind == "for":
            return self._loop_target(binding, node, site)
        if kind == "import":
            return Unknown(OTHER, f"the imported name `{name}`", node, site)
        if kind == "def":
            return Unknown(OTHER, f"`{name}`, a function or class", node, site)
        return Unknown(OTHER, f"`{name}`", node, site)

    def _unpacked(self, binding: _Binding, node: cst.Name, site: Site, depth: int) -> Value:
        value, index = binding.value, binding.index
        assert value is not None  # an "unpack" binding keeps the value assigned
        if (
            isinstance(value, (cst.Tuple, cst.List))
            and index is not None
            and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            and index < len(value.elements)
        ):
            return self.value(value.elements[index].value, binding.site, depth + 1)
        if index == 0 and _method_call(value, "parse_known_args"):
            return Unknown(NAMESPACE, "the argparse namespace of `parse_known_args()`", node, site)
        return Unknown(
            ELEMENT,
            f"an item unpacked from `{_text(self.ctx, value)}`",
            node,
            site,
            ((value, binding.site),),
        )

    def _loop_target(self, binding: _Binding, node: cst.Name, site: Site) -> Value:
        iterable, index = binding.value, binding.index
        assert iterable is not None  # a "for" binding keeps the loop's iterable
        ctx = self.ctx
        if isinstance(iterable, cst.Call):
            names = ctx.qnames(iterable.func, binding.site.scope)
            plain = [a.value for a in iterable.args if a.keyword is None and not a.star]
            if "builtins.range" in names and index is None:
                return Unknown(COUNTER, f"the loop counter `{node.value}`", node, site, type="int")
            if "builtins.enumerate" in names and plain:
                if index == 0:
                    return Unknown(
                        COUNTER, f"the loop counter `{node.value}`", node, site, type="int"
                    )
                if index == 1:
                    return Unknown(
                        ELEMENT,
                        f"an item of `{_text(ctx, plain[0])}`",
                        node,
                        site,
                        ((plain[0], binding.site),),
                    )
            if (
                "builtins.zip" in names
                and index is not None
                and index < len(plain)
                and len(plain) == len(iterable.args)
            ):
                return Unknown(
                    ELEMENT,
                    f"an item of `{_text(ctx, plain[index])}`",
                    node,
                    site,
                    ((plain[index], binding.site),),
                )
        return Unknown(
            ELEMENT, f"an item of `{_text(ctx, iterable)}`", node, site, ((iterable, binding.site),)
        )

    # -- expressions --------------------------------------------------------------------------
    def value(self, node: cst.BaseExpression, site: Site, depth: int) -> Value:
        """:func:`value_of` at ``site``; ``depth`` bounds how far names and parts are followed."""
        if depth > _MAX_DEPTH:
            return Unknown(OTHER, "a value computed at run time", node, site)
        if type(node) is cst.Name:
            return self._name(node, site, depth)
        if (
            type(node) is cst.Integer
            or type(node) is cst.Float
            or type(node) is cst.Imaginary
            or type(node) is cst.SimpleString
            or type(node) is cst.ConcatenatedString
        ):
            literal = _literal(node)
            if literal is not _MISSING:
                return Known(literal, "a literal")
            return Unknown(OTHER, "a string computed at run time", node, site, type="str")
        if type(node) is cst.FormattedString:
            return Unknown(OTHER, "a formatted string", node, site, type="str")
        if type(node) is cst.UnaryOperation:
            inner = self.value(node.expression, site, depth + 1)
            if isinstance(inner, Known):
                operand, op = inner.value, type(node.operator)
                # Known values are literals: only numbers have a sign (others raise TypeError)
                if op is cst.Minus and isinstance(operand, (int, float, complex)):
                    return Known(-operand, inner.origin)
                if op is cst.Plus and isinstance(operand, (int, float, complex)):
                    return Known(+operand, inner.origin)
                if op is cst.Not:
                    return Known(not operand, inner.origin)
            return Unknown(OTHER, "an expression computed at run time", node, site)
        if type(node) is cst.BinaryOperation:
            return self._binary(node, site, depth)
        if type(node) is cst.Tuple or type(node) is cst.List or type(node) is cst.Set:
            return self._sequence(node, site, depth)
        if type(node) is cst.Dict:
            return self._dict(node, site, depth)
        if (
            type(node) is cst.ListComp
            or type(node) is cst.SetComp
            or type(node) is cst.GeneratorExp
        ):
            return Unknown(CONTAINER, "a comprehension", node, site, ((node.elt, site),))
        if type(node) is cst.DictComp:
            return Unknown(CONTAINER, "a comprehension", node, site, ((node.value, site),))
        if type(node) is cst.IfExp:
            body = self.value(node.body, site, depth + 1)
            orelse = self.value(node.orelse, site, depth + 1)
            if (
                isinstance(body, Known)
                and isinstance(orelse, Known)
                and _same(body.value, orelse.value)
            ):
                return body
            return Unknown(
                SEVERAL,
                "a conditional expression",
                node,
                site,
                ((node.body, site), (node.orelse, site)),
            )
        if type(node) is cst.Subscript:
            return self._subscript(node, site, depth)
        if type(node) is cst.Attribute:
            return self._attribute(node, site, depth)
        if type(node) is cst.Call:
            return self._call(node, site, depth)
        if type(node) is cst.NamedExpr:
            return self.value(node.value, site, depth + 1)
        return Unknown(OTHER, "an expression computed at run time", node, site)

    def _binary(self, node: cst.BinaryOperation, site: Site, depth: int) -> Value:
        op = _BINARY.get(type(node.operator))
        left = self.value(node.left, site, depth + 1)
        right = self.value(node.right, site, depth + 1)
        if op is not None and isinstance(left, Known) and isinstance(right, Known):
            a, b = left.value, right.value
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
            strings = type(node.operator) is cst.Add and isinstance(a, str) and isinstance(b, str)
            if numbers or strings:
                try:
                    return Known(
                        op(a, b), left.origin if left.origin != "a literal" else right.origin
                    )
                except (ArithmeticError, ValueError):
                    pass
        return Unknown(OTHER, "an expression computed at run time", node, site)

    def _sequence(self, node: cst.Tuple | cst.List | cst.Set, site: Site, depth: int) -> Value:
        values: list[Value | None] = []
        parts: list[tuple[cst.BaseExpression, Site]] = []
        for element in node.elements:
            parts.append((element.value, site))
            if isinstance(element, cst.StarredElement):
                values.append(None)
                continue
            values.append(self.value(element.value, site, depth + 1))
        known = [v for v in values if isinstance(v, Known)]
        if len(known) == len(values):
            items = [v.value for v in known]
            built = (
                tuple(items)
                if isinstance(node, cst.Tuple)
                else list(items)
                if isinstance(node, cst.List)
                else _maybe_set(items)
            )
            if built is not _MISSING:
                return Known(built, "a literal")
        return Unknown(
            CONTAINER, f"a {type(node).__name__.lower()} display", node, site, tuple(parts)
        )

    def _dict(self, node: cst.Dict, site: Site, depth: int) -> Value:
        out: dict = {}
        parts = []
        known = True
        for element in node.elements:
            parts.append((element.value, site))
            if not isinstance(element, cst.DictElement):
                known = False
                continue
            key = self.value(element.key, site, depth + 1)
            value = self.value(element.value, site, depth + 1)
            if known and isinstance(key, Known) and isinstance(value, Known):
                try:
                    out[key.value] = value.value
                except TypeError:
                    known = False
            else:
                known = False
        if known:
            return Known(out, "a literal")
        return Unknown(CONTAINER, "a dict display", node, site, tuple(parts))

    def _subscript(self, node: cst.Subscript, site: Site, depth: int) -> Value:
        ctx = self.ctx
        if "os.environ" in ctx.qnames(node.value, site.scope):
            key = _single_index(node)
            label = _string(key) if key is not None else None
            return Unknown(
                ENVIRONMENT,
                f"the environment variable `{label}`" if label else "an environment variable",
                node,
                site,
                type="str",
            )
        index = _single_index(node)
        if index is not None and _method_call(node.value, "parse_known_args"):
            literal = _literal(index) if isinstance(index, cst.Integer) else _MISSING
            if literal == 0:
                return Unknown(
                    NAMESPACE, "the argparse namespace of `parse_known_args()`", node, site
                )
        container = self.value(node.value, site, depth + 1)
        if isinstance(container, Known) and index is not None:
            item = self.value(index, site, depth + 1)
            if isinstance(item, Known):
                # the literals that have items: a dict by key, a sequence by int
                whole, at = container.value, item.value
                try:
                    if isinstance(whole, dict):
                        return Known(whole[at], container.origin)
                    if isinstance(whole, (str, bytes, tuple, list)) and isinstance(at, int):
                        return Known(whole[at], container.origin)
                except (LookupError, TypeError):
                    pass
        return Unknown(
            ELEMENT, f"an item of `{_text(ctx, node.value)}`", node, site, ((node.value, site),)
        )

    def _attribute(self, node: cst.Attribute, site: Site, depth: int) -> Value:
        base = self.value(node.value, site, depth + 1)
        attr = node.attr.value
        if isinstance(base, Unknown) and base.kind == NAMESPACE:
            return self._option(node, attr, site, depth)
        if (
            isinstance(base, Unknown) and base.kind == CALL
        ):  # FLAGS = args_parse.parse_common_options(...)
            return Unknown(ATTRIBUTE, f"the attribute `{attr}` of {base.origin}", node, site)
        return Unknown(ATTRIBUTE, f"the attribute `{_text(self.ctx, node)}`", node, site)

    def _option(self, node: cst.Attribute, dest: str, site: Site, depth: int) -> Value:
        text = dotted_name(node)
        if text is not None and text in self.attr_stores:
            return Unknown(OTHER, f"`{text}`, assigned in the code", node, site)
        entries = self.options.get(dest)
        if not entries:
            return Unknown(
                OPTION, f"an option the user sets (`{dest}`, not defined in this file)", node, site
            )
        spelling = next(
            (e.spelling for e in entries if not e.from_set_defaults), entries[0].spelling
        )
        type_name = next((e.type for e in entries if e.type), None)
        chosen: _Option | None = None
        conflict = False
        for entry in entries:
            if entry.from_set_defaults:
                chosen = entry
                continue
            explicit = entry.default is not None or entry.implicit is not _MISSING
            if explicit:
                if (
                    chosen is not None
                    and not chosen.from_set_defaults
                    and not _same_default(self.ctx, chosen, entry)
                ):
                    conflict = True
                chosen = entry
            elif chosen is None or not chosen.from_set_defaults:
                if chosen is not None and (
                    chosen.default is not None or chosen.implicit is not _MISSING
                ):
                    conflict = True
                chosen = entry
        if conflict:
            return Unknown(
                OPTION, f"an option defined several times ({spelling})", node, site, type=type_name
            )
        assert chosen is not None
        if chosen.required and not chosen.from_set_defaults:
            return Unknown(
                OPTION,
                f"an option the user sets ({spelling}, required)",
                node,
                site,
                type=type_name,
                option=(spelling, type_name),
            )
        if chosen.implicit is not _MISSING and chosen.default is None:
            return Known(chosen.implicit, f"the argparse default of {spelling}")
        if chosen.default is None:
            return Unknown(
                OPTION,
                f"an option the user sets ({spelling}, no default)",
                node,
                site,
                type=type_name,
                option=(spelling, type_name),
            )
        default = self.value(chosen.default, chosen.site, depth + 1)
        if isinstance(default, Known):
            value = default.value
            convert = {"int": int, "float": float}.get(chosen.type or "")
            if convert is not None and isinstance(
                value, str
            ):  # argparse applies type= to string defaults
                try:
                    value = convert(value)
                except ValueError:
                    pass
            return Known(
                value, f"the argparse default of {spelling}", option=(spelling, chosen.type)
            )
        return Unknown(
            OPTION,
            f"the argparse default of {spelling}, {default.origin}",
            node,
            site,
            type=type_name,
            option=(spelling, type_name),
        )

    def _call(self, node: cst.Call, site: Site, depth: int) -> Value:
        ctx = self.ctx
        func = node.func
        text = _text(ctx, func)
        if type(func) is cst.Attribute and func.attr.value == "parse_args":
            return Unknown(NAMESPACE, f"the argparse namespace of `{text}()`", node, site)
        names = ctx.qnames(func, site.scope)
        plain = [a.value for a in node.args if a.keyword is None and not a.star]
        if names:
            if names & _ENV_CALLS:
                label = _string(plain[0]) if plain else None
                return Unknown(
                    ENVIRONMENT,
                    f"the environment variable `{label}`" if label else "an environment variable",
                    node,
                    site,
                    type="str",
                )
            convert = next((_CONVERSIONS[n] for n in names if n in _CONVERSIONS), None)
            if convert is not None and len(plain) == 1 and len(node.args) == 1:
                inner = self.value(plain[0], site, depth + 1)
                type_name = convert.__name__
                if isinstance(inner, Known):
                    try:
                        return Known(convert(inner.value), inner.origin)
                    except (TypeError, ValueError):
                        return Unknown(OTHER, f"`{_text(ctx, node)}`, which raises", node, site)
                return Unknown(
                    inner.kind, inner.origin, inner.node, inner.site, inner.parts, type_name
                )
            if "builtins.vars" in names and len(plain) == 1:
                inner = self.value(plain[0], site, depth + 1)
                if isinstance(inner, Unknown) and inner.kind == NAMESPACE:
                    return Unknown(NAMESPACE, f"vars() of {inner.origin}", node, site)
            if "argparse.Namespace" in names:
                return Unknown(NAMESPACE, "an argparse namespace", node, site)
        if type(func) is cst.Name and self._returns_namespace(func, site, depth):
            return Unknown(NAMESPACE, f"the argparse namespace returned by `{text}()`", node, site)
        return Unknown(CALL, f"the result of `{text}()`", node, site)

    def _returns_namespace(self, func: cst.Name, site: Site, depth: int) -> bool:
        """``func`` names a function of this file that returns an argparse namespace."""
        _, binding, _ = self._reaching(func.value, site)
        if (
            binding is None
            or binding.kind != "def"
            or not isinstance(binding.stmt, cst.FunctionDef)
        ):
            return False
        for expr, where in self.returns.get(id(binding.stmt), ()):
            result = self.value(expr, where, depth + 2)
            if isinstance(result, Unknown) and result.kind == NAMESPACE:
                return True
        return False


# -- helpers ------------------------------------------------------------------------------------
def _string(node: cst.CSTNode | None) -> str | None:
    """A plain (or implicitly concatenated) string literal's value, else None."""
    return literal_string(node, concatenated=True)


def _literal(
    node: cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString | cst.ConcatenatedString,
) -> object:
    """The value of a number or string literal, else _MISSING."""
    try:
        value = node.evaluated_value
    except Exception:
        return _MISSING
    return _MISSING if value is None else value


def _maybe_set(items: list) -> object:
    try:
        return set(items)
    except TypeError:
        return _MISSING


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _same_default(ctx, a: _Option, b: _Option) -> bool:
    if a.implicit is not _MISSING or b.implicit is not _MISSING:
        return a.implicit is b.implicit and a.default is None and b.default is None
    if a.default is None or b.default is None:
        return a.default is b.default
    return ctx.module.code_for_node(a.default) == ctx.module.code_for_node(b.default)


def _single_index(node: cst.Subscript) -> cst.BaseExpression | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return node.slice[0].slice.value
    return None


def _method_call(node: cst.CSTNode | None, method: str) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == method
    )


def _literal_parts(node, site: Site) -> tuple[tuple[cst.BaseExpression, Site], ...]:
    return tuple((e.value, site) for e in node.elements)


def _annotation_type(param: cst.Param | None) -> str | None:
    """ "int" for ``n: int`` (also ``Optional[int]``, ``int | None``), else None."""
    if param is None or param.annotation is None:
        return None
    node = param.annotation.annotation
    if isinstance(node, cst.Subscript) and dotted_name(node.value) in (
        "Optional",
        "typing.Optional",
    ):
        index = _single_index(node)
        node = index if index is not None else node
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        sides = [node.left, node.right]
        others = [s for s in sides if not (isinstance(s, cst.Name) and s.value == "None")]
        if len(others) == 1:
            node = others[0]
    if isinstance(node, cst.Name) and node.value in _SCALAR_TYPES:
        return node.value
    return None


def one_line(ctx, node: cst.CSTNode | None, limit: int = 40) -> str:
    """The code of ``node`` on one line, cut to ``limit`` characters (``...`` at the end)."""
    if node is None:
        return ""
    text = " ".join(ctx.module.code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_text = one_line


__all__ = [
    "Known",
    "Unknown",
    "Site",
    "Value",
    "value_of",
    "parts_of",
    "definition",
    "file_values",
    "FileValues",
    "PARAMETER",
    "ENVIRONMENT",
    "OPTION",
    "NAMESPACE",
    "CALL",
    "COUNTER",
    "CONTAINER",
    "ELEMENT",
    "SEVERAL",
    "ATTRIBUTE",
    "OTHER",
]
