"""Which code runs on the target torch_xla version: version guards and ImportError fallbacks.

Rules about removed or deprecated APIs (``Rule.version_guarded``) stay silent in code that
never runs on ``ctx.target_version`` (``(major, minor)``, default ``(2, 9)``), where the old
API is the deliberate fallback for old releases. :func:`runs_on_target` answers for the node
being visited. torch and torch_xla are released together with the same version numbers, so
a test of ``torch.__version__`` counts as a test of ``torch_xla.__version__``.

What is recognised (every name resolved through imports, never by its text alone):

1. Version tests in ``if``/``elif``/``else`` statements and conditional expressions
   (``a if TEST else b``), evaluated three-valued (True / False / unknown on the target):

   - comparisons of the installed version with a literal: ``torch_xla.__version__`` or
     ``torch.__version__`` (also ``torch_xla.version.__version__``,
     ``importlib.metadata.version("torch_xla")``), optionally wrapped in
     ``packaging.version.parse``/``Version``, ``pkg_resources.parse_version``,
     ``distutils`` ``LooseVersion``/``StrictVersion``, ``.base_version``/``.public``/``.release``
     or ``.split("+")[0]``, against a string (``"2.1"``), a tuple (``(2, 1)``) or a parsed
     literal; ``.major``/``.minor`` against an integer. A plain string comparison
     (``torch.__version__ >= "2.1"``) is read as a version comparison. When the literal has
     the target's major.minor, only ``>=`` (True) and ``<`` (False) of an ``X.Y``/``X.Y.0``
     literal are decided (the patch release is unknown);
   - ``V.startswith("1.")`` on the version string;
   - the version split into numbers: ``tuple(map(int, V.split(".")[:2]))`` against a tuple
     (``(2, 1)``, or ``tuple(map(int, "2.1".split(".")))``), compared as Python compares tuples
     (the target's ``[:2]`` is exactly ``(major, minor)``; a longer slice leaves the patch
     unknown), and ``int(V.split(".")[0])``/``[1]`` against an integer;
   - requirement objects and helpers: lightning_utilities ``RequirementCache("torch_xla>=2.1")``
     (specifiers ``>= > <= < == != ==X.Y.*``, joined by commas) and
     ``compare_version("torch_xla", operator.ge, "2.1")``; accelerate/diffusers
     ``is_torch_version(">=", "2.1")`` and ``compare_versions("torch", ">=", "2.1")``;
     transformers ``is_torch_greater_or_equal("2.1")``. (``is_torch_xla_available()`` is
     not a version test: it stays unknown);
   - names bound by a plain assignment to any of the above, in the scope the name resolves to
     (every assignment of the name there must agree; a ``for``/``with``/``except``/augmented
     binding there, or a ``:=``, comprehension, lambda, ``global``/``nonlocal`` or ``del`` of the
     name anywhere in the file, makes it unknown);
   - names imported from another module, whose value the linter cannot see here, read from
     their conventional spelling: ``_XLA_GREATER_EQUAL_2_1``, ``_TORCH_GREATER_EQUAL_2_0``,
     ``_TORCH_XLA_LESS_THAN_2_5``, ``_TORCH_EQUAL_2_9`` (same major.minor),
     ``_TORCH_LESS_EQUAL_2_6``, ``_XLA_GREATER_THAN_2_1_0`` (also ``GE``/``GT``/``LE``/``LT``/``EQ``;
     prefixes ``XLA``, ``TORCH_XLA``, ``TORCH``, ``PT``, ``PYTORCH``). A local name whose
     value is not understood falls back to the same reading of its spelling;
   - ``hasattr(X, "attr")`` and ``getattr(X, "attr", None)`` (also ``... is None`` /
     ``is not None``) where ``X`` resolves to a torch_xla name: False when ``X.attr`` is an
     API removed by the target version (the XLA013 table in
     :mod:`xla_lint.rules.deprecated`), True for any other torch_xla attribute (the other
     branch is an old-version fallback);
   - ``not``, ``and``, ``or`` combine tests three-valued: an unknown part leaves the whole
     unknown unless the known parts decide it.

   A branch whose test is False on the target does not run; the ``elif``/``else`` branches
   after a test that is True do not run.

2. Early exits: the statements after a ``return``, ``raise``, ``continue`` or ``break`` in
   the same block never run (projectt's ``raise ValueError(...)`` followed by a removed
   ``xm.xrt_world_size()``); nor those after an ``if``/``elif``/``else`` chain ending with an
   ``else`` whose every branch leaves. When, on the target, an ``if``/``elif``/``else`` chain
   with at least one decided test always leaves its block (its live branch ends in, or contains at its top
   level, ``return``/``raise``/``continue``/``break``, or a nested ``if`` all of whose live
   branches do), the statements after it in the same block do not run: pytorch-lightning's
   ``if _XLA_GREATER_EQUAL_2_1: return xr.world_size()`` followed by
   ``return xm.xrt_world_size()``.

3. ``try:`` statements with a handler for ``ImportError``, ``ModuleNotFoundError`` or
   ``AttributeError`` (alone or in a tuple): that handler's body is a fallback, and the
   ``try`` body is protected (a removed import there raises the exception, which is caught:
   the program works). Functions and lambdas defined in the ``try`` body run later, outside
   the ``try``, so they are not protected; anything defined in the handler is. Not for
   ``except Exception``, a bare ``except`` or other types.

The analysis is computed once per file, on the first question (:func:`runs_on_target`), as
one walk over the statements; each question then checks the traversal's ancestor stack.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from .apis import REMOVED_ATTRS, REMOVED_MODULES
from .names import (
    LOCAL,
    Scope,
    defining_scope,
    dotted_name,
    lookup,
    names_bound_in_expressions_or_rebound,
)
from .walk import TRIVIA, iter_nodes, walk

if TYPE_CHECKING:  # pragma: no cover
    from .context import FileContext


def runs_on_target(ctx: FileContext, caught: bool = True) -> bool:
    """True when the node being visited (``ctx.stack[-1]``) may run on ``ctx.target_version``.

    False when one of its ancestors (``ctx.stack``) is a branch of a version test that is
    False there (or an ``else`` after one that is True), follows an early exit taken there,
    is the handler of ``except ImportError``/``ModuleNotFoundError``/``AttributeError`` or the
    ``try`` body such a handler protects (see the module docstring). Unknown tests count as
    running. ``caught=False``: a ``try`` body does not count as protected (a deprecated API
    there still runs on the target; only a removed one raises into the handler). The per-file
    analysis is built on the first call (``ctx.memo("guards", ...)``).
    """
    stack = ctx.stack
    if not stack:
        return True
    guards: _Guards = ctx.memo("guards", lambda: _Guards(ctx))
    dead, protected = guards.dead, guards.protected
    crossed_function = False
    for i in range(len(stack) - 1, -1, -1):
        node = stack[i]
        if node in dead:
            return False
        kind = type(node)
        if type(node) is cst.IfExp and i + 1 < len(stack):
            child = stack[i + 1]
            if child is node.body or child is node.orelse:
                truth = guards.ifexp_truth(node, stack, i)
                if truth is not None and truth != (child is node.body):
                    return False
        elif kind is cst.FunctionDef or kind is cst.Lambda:
            crossed_function = True
        elif caught and not crossed_function and node in protected:
            # An import of a removed module or name raises ImportError (ModuleNotFoundError);
            # using a removed attribute raises AttributeError: the handler must catch that one.
            importing = any(type(n) is cst.Import or type(n) is cst.ImportFrom for n in stack[i:])
            if not protected[node].isdisjoint(
                ("ImportError", "ModuleNotFoundError") if importing else ("AttributeError",)
            ):
                return False
    return True


# -- the per-file analysis ----------------------------------------------------------

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError"})
_LEAVES = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_TRY_TYPES = (cst.Try, cst.TryStar)


class _Guards:
    """The nodes of one file whose subtrees do not run on the target (``dead``), the ``try``
    bodies protected by an ImportError/AttributeError handler (``protected``), and the
    evaluator of version tests."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.eval = _Evaluator(ctx)
        self.dead: set[cst.CSTNode] = set()
        # try body -> the errors its ImportError/AttributeError handlers catch
        self.protected: dict[cst.CSTNode, frozenset[str]] = {}
        self._ifexp: dict[cst.IfExp, bool | None] = {}
        self._body(ctx.module.body, ctx.root_scope)

    def ifexp_truth(self, node: cst.IfExp, stack: list[cst.CSTNode], index: int) -> bool | None:
        """The test of the conditional expression ``stack[index]`` on the target (None: unknown)."""
        if node not in self._ifexp:
            scopes = self.ctx.scopes
            scope = self.ctx.root_scope
            for ancestor in stack[:index]:
                found = scopes.get(ancestor)
                if found is not None:
                    scope = found
            self._ifexp[node] = self.eval.truth(node.test, scope)
        return self._ifexp[node]

    # -- statements --------------------------------------------------------
    def _block(self, block: cst.BaseSuite, scope: Scope) -> None:
        if type(block) is cst.IndentedBlock:
            self._body(block.body, scope)

    def _body(self, statements, scope: Scope) -> None:
        for index, stmt in enumerate(statements):
            kind = type(stmt)
            if kind is cst.SimpleStatementLine:
                if any(isinstance(small, _LEAVES) for small in stmt.body):
                    self.dead.update(statements[index + 1 :])  # after `raise`/`return`: never runs
                    return
                continue
            if kind is cst.If:
                self._if(stmt, scope)
                if self._chain_leaves(stmt, scope):  # decided, or every branch (else too) leaves
                    self.dead.update(statements[index + 1 :])
                    return
            elif kind is cst.FunctionDef or kind is cst.ClassDef:
                self._block(stmt.body, self.ctx.scopes.get(stmt, scope))
            elif kind is cst.For or kind is cst.While:
                self._block(stmt.body, scope)
                if stmt.orelse is not None:
                    self._block(stmt.orelse.body, scope)
            elif kind in _TRY_TYPES:
                fallbacks = [h for h in stmt.handlers if _catches_import_error(h, scope)]
                if fallbacks:
                    self.protected[stmt.body] = frozenset().union(*(_caught(h) for h in fallbacks))
                    self.dead.update(fallbacks)
                self._block(stmt.body, scope)
                for handler in stmt.handlers:
                    if handler not in self.dead:
                        self._block(handler.body, scope)
                for extra in (stmt.orelse, stmt.finalbody):
                    if extra is not None:
                        self._block(extra.body, scope)
            elif kind is cst.With:
                self._block(stmt.body, scope)
            elif kind is cst.Match:
                for case in stmt.cases:
                    self._block(case.body, scope)

    def _if(self, node: cst.If, scope: Scope) -> None:
        truth = self.eval.truth(node.test, scope)
        if truth is False:
            self.dead.add(node.body)
        else:
            self._block(node.body, scope)
        orelse = node.orelse
        if orelse is None:
            return
        if truth is True:
            self.dead.add(orelse)
        elif type(orelse) is cst.If:
            self._if(orelse, scope)
        else:
            self._block(orelse.body, scope)

    def _chain_leaves(self, node: cst.If, scope: Scope) -> bool:
        """True when, on the target, the ``if``/``elif``/``else`` chain ``node`` always leaves its block."""
        truth = self.eval.truth(node.test, scope)
        if truth is not False and not self._block_leaves(node.body, scope):
            return False  # the body may run and fall through
        if truth is True:
            return True
        orelse = node.orelse
        if orelse is None:
            return False
        if type(orelse) is cst.If:
            return self._chain_leaves(orelse, scope)
        return self._block_leaves(orelse.body, scope)

    def _block_leaves(self, block: cst.BaseSuite, scope: Scope) -> bool:
        if type(block) is cst.SimpleStatementSuite:
            return any(isinstance(small, _LEAVES) for small in block.body)
        for stmt in block.body:
            if type(stmt) is cst.SimpleStatementLine:
                if any(isinstance(small, _LEAVES) for small in stmt.body):
                    return True
            elif type(stmt) is cst.If and self._chain_leaves(stmt, scope):
                return True
        return False


def handler_names(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> frozenset[str] | None:
    """The exception names ``handler`` catches (each one's last dotted part:
    ``except (ImportError, mod.Error)`` gives ImportError, Error), None for a bare ``except:``."""
    if handler.type is None:
        return None
    values = (
        [e.value for e in handler.type.elements]
        if isinstance(handler.type, cst.Tuple)
        else [handler.type]
    )
    return frozenset(name.split(".")[-1] for name in map(dotted_name, values) if name is not None)


def _caught(handler: cst.ExceptHandler) -> frozenset[str]:
    """Which of ImportError/ModuleNotFoundError/AttributeError ``handler`` names."""
    return (handler_names(handler) or frozenset()) & _IMPORT_ERRORS


def _catches_import_error(handler: cst.ExceptHandler, scope: Scope) -> bool:
    """True for ``except ImportError:`` / ``ModuleNotFoundError`` / ``AttributeError``, alone or
    in a tuple (``except (ImportError, RuntimeError):``), read in ``scope`` (a module's own
    ``ImportError`` class is not the builtin); not for bare ``except`` or ``Exception``."""
    if handler.type is None:
        return False
    values = (
        [e.value for e in handler.type.elements]
        if isinstance(handler.type, cst.Tuple)
        else [handler.type]
    )
    for value in values:
        if type(value) is cst.Name:
            if value.value in _IMPORT_ERRORS and LOCAL not in lookup(value.value, scope):
                return True
        elif (
            type(value) is cst.Attribute
            and value.attr.value in _IMPORT_ERRORS
            and dotted_name(value) == f"builtins.{value.attr.value}"
        ):
            return True
    return False


# -- version values --------------------------------------------------------------------


class _Target:
    """The installed torch/torch_xla version (string or parsed): compares like a version."""


TARGET = _Target()


class _Literal:
    """A version literal: its release numbers, and whether it is a plain release (no ``rc``, ``dev``...)."""

    __slots__ = ("release", "plain")

    def __init__(self, release: tuple[int, ...], plain: bool) -> None:
        self.release = release
        self.plain = plain


class _TargetInt:
    """``.major``/``.minor`` of the target version: an exact integer."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class _TargetStr(str):
    """One part of the target version's ``split(".")`` (``int()`` of it is a :class:`_TargetInt`)."""

    __slots__ = ()


class _Parts:
    """``S.split(".")`` (optionally sliced ``[:n]``, optionally ``map(int, ...)``-ed): the known
    leading items (a str, an int, a :class:`_TargetInt`, or None when unknown) and whether the
    sequence ends there (``complete``); the target version's parts are ``("2", "9")`` followed by
    an unknown tail."""

    __slots__ = ("items", "complete", "target", "tuple")

    def __init__(self, items: tuple, complete: bool, target: bool, is_tuple: bool = False) -> None:
        self.items = items
        self.complete = complete
        self.target = target  # items come from the installed version (int() gives _TargetInt)
        self.tuple = is_tuple  # a tuple of ints (``tuple(map(int, ...))``), comparable


def _to_int(item, target: bool):
    """``int(item)`` for one split part: an int (a :class:`_TargetInt` for the target's parts)."""
    if isinstance(item, str) and item.strip().isdigit():
        return _TargetInt(int(item)) if target or type(item) is _TargetStr else int(item)
    return None


def _tuple_cmp(a: _Parts, b: _Parts) -> int | None:
    """Python's tuple ordering of two partly known tuples: -1, 0, 1, or None when unknown."""
    for x, y in zip(a.items, b.items, strict=False):
        x = x.value if type(x) is _TargetInt else x
        y = y.value if type(y) is _TargetInt else y
        if type(x) is not int or type(y) is not int:
            return None
        if x != y:
            return -1 if x < y else 1
    la, lb = len(a.items), len(b.items)
    if la == lb:
        return 0 if a.complete and b.complete else None
    if la < lb:
        return -1 if a.complete else None
    return 1 if b.complete else None


_VERSION_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)(.*)$")


def parse_version(text: str) -> _Literal | None:
    """``"2.1.0rc1"`` -> release ``(2, 1, 0)``, not plain; None when ``text`` is not a version."""
    m = _VERSION_RE.match(text)
    if m is None:
        return None
    suffix = m.group(2).strip()
    return _Literal(
        tuple(int(p) for p in m.group(1).split(".")), not suffix or suffix.startswith("+")
    )


_OPS = {">=", ">", "<=", "<", "==", "!="}
_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}
_CST_OPS = {
    cst.GreaterThanEqual: ">=",
    cst.GreaterThan: ">",
    cst.LessThanEqual: "<=",
    cst.LessThan: "<",
    cst.Equal: "==",
    cst.NotEqual: "!=",
}
_OPERATOR_FUNCS = {
    "operator.ge": ">=",
    "operator.gt": ">",
    "operator.le": "<=",
    "operator.lt": "<",
    "operator.eq": "==",
    "operator.ne": "!=",
}


def compare_target(target: tuple[int, int], op: str, literal: _Literal) -> bool | None:
    """``<target version> op literal``, three-valued: the target's patch release is unknown.

    ``target`` is ``(major, minor)``; a literal of another major.minor is decided by it. With the
    same major.minor only a plain ``X.Y``/``X.Y.0`` literal decides ``>=`` (True) and ``<`` (False).
    """
    release = literal.release + (0, 0)
    head = (release[0], release[1])
    if target != head:
        sign = 1 if target > head else -1
        return {
            ">=": sign > 0,
            ">": sign > 0,
            "<=": sign < 0,
            "<": sign < 0,
            "==": False,
            "!=": True,
        }[op]
    if literal.plain and not any(release[2:]):
        return {">=": True, "<": False}.get(op)
    return None


def _compare_ints(a: int, op: str, b: int) -> bool:
    return {">=": a >= b, ">": a > b, "<=": a <= b, "<": a < b, "==": a == b, "!=": a != b}[op]


_SPEC_RE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9a-zA-Z.+*]*)\s*$")
_REQ_RE = re.compile(r"^\s*(torch[-_.]xla|torch)\s*(?:\[[^\]]*\])?\s*(.*)$", re.IGNORECASE)


def requirement_truth(target: tuple[int, int], text: str) -> bool | None:
    """Whether ``"torch_xla>=2.1,<2.5"`` (a PEP 508 requirement on torch or torch_xla) holds on the target."""
    m = _REQ_RE.match(text)
    if m is None or ";" in m.group(2):
        return None
    specs = m.group(2).strip()
    if not specs:
        return True  # only the package: installed on the target
    result: bool | None = True
    for spec in specs.split(","):
        s = _SPEC_RE.match(spec)
        if s is None:
            return None
        op, version = s.groups()
        if version.endswith(".*") and op in ("==", "!="):
            literal = parse_version(version[:-2])
            if literal is None:
                return None
            prefix = literal.release
            same: bool | None
            if len(prefix) == 1:
                same = target[0] == prefix[0]
            elif len(prefix) == 2:
                same = target == prefix
            else:
                same = None if target == prefix[:2] else False
            one: bool | None = same if op == "==" or same is None else not same
        else:
            literal = parse_version(version)
            if literal is None:
                return None
            one = compare_target(target, op, literal)
        result = _and(result, one)
    return result


_NAME_RE = re.compile(
    r"^_*(?:IS_)?(?:TORCH_XLA|XLA|TORCH|PT|PYTORCH)_"
    r"(GREATER_EQUAL|GREATER_THAN|LESS_EQUAL|LESS_THAN|EQUAL|GE|GT|LE|LT|EQ)_(\d+(?:_\d+)*)$"
)
_NAME_OPS = {
    "GREATER_EQUAL": ">=",
    "GE": ">=",
    "GREATER_THAN": ">",
    "GT": ">",
    "LESS_EQUAL": "<=",
    "LE": "<=",
    "LESS_THAN": "<",
    "LT": "<",
    "EQUAL": "==",
    "EQ": "==",
}


def name_truth(target: tuple[int, int], name: str) -> bool | None:
    """The value of a conventionally spelled version flag (``_XLA_GREATER_EQUAL_2_1``) on the target.

    ``_TORCH_EQUAL_2_9`` (two numbers) means "a 2.9 release" (pytorch-lightning writes it as
    ``RequirementCache("torch>=2.9.0,<2.10.0")``). Other spellings give None.
    """
    m = _NAME_RE.match(name)
    if m is None:
        return None
    op = _NAME_OPS[m.group(1)]
    release = tuple(int(p) for p in m.group(2).split("_"))
    if op == "==" and len(release) == 2:
        return target == release
    return compare_target(target, op, _Literal(release, True))


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is True and b is True:
        return True
    return None


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is False and b is False:
        return False
    return None


_VERSION_SOURCES = frozenset(
    {
        "torch_xla.__version__",
        "torch.__version__",
        "torch_xla.version.__version__",
        "torch.version.__version__",
    }
)
_VERSION_PACKAGES = frozenset({"torch", "torch_xla", "torch-xla"})
_PARSERS = frozenset(
    {"parse", "Version", "LooseVersion", "StrictVersion", "parse_version", "TorchVersion"}
)
_PARSER_ROOTS = (
    "packaging.",
    "pkg_resources.",
    "distutils.",
    "setuptools.",
    "looseversion.",
    "torch.torch_version.",
)
_VERSION_ATTRS = frozenset({"base_version", "public", "release"})
_UNKNOWN = None
_POISON = object()  # a name bound by something other than a plain assignment


class _Evaluator:
    """Evaluates test expressions of one file on the target version, three-valued."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        major, minor = ctx.target_version[:2]
        self.target: tuple[int, int] = (major, minor)
        self._truth: dict[cst.CSTNode, bool | None] = {}
        self._assigns: dict[
            int, dict[str, list]
        ] = {}  # id(scope) -> name -> [(value, scope) | _POISON]
        self._names: dict[tuple[int, str], object] = {}

    def truth(self, expr: cst.BaseExpression, scope: Scope) -> bool | None:
        """True/False when ``expr`` is decided on the target version, else None (memoised per node)."""
        if expr in self._truth:
            return self._truth[expr]
        self._truth[expr] = None  # a cycle through names reads as unknown
        value = self._value(expr, scope, 0)
        result = value if type(value) is bool else None
        self._truth[expr] = result
        return result

    # -- expressions ---------------------------------------------------------
    def _value(self, expr: cst.CSTNode, scope: Scope, depth: int):
        """``expr``'s value: a bool, :data:`TARGET`, a :class:`_Literal`, a :class:`_TargetInt`,
        an int or str literal, or None (unknown)."""
        if depth > 30:
            return _UNKNOWN
        depth += 1
        if type(expr) is cst.UnaryOperation:
            if type(expr.operator) is cst.Not:
                inner = self._value(expr.expression, scope, depth)
                return _not(inner) if type(inner) is bool else _UNKNOWN
            return _UNKNOWN
        if type(expr) is cst.BooleanOperation:
            left = self._bool(expr.left, scope, depth)
            right = self._bool(expr.right, scope, depth)
            return _and(left, right) if type(expr.operator) is cst.And else _or(left, right)
        if type(expr) is cst.Comparison:
            return self._comparison(expr, scope, depth)
        if type(expr) is cst.Name or type(expr) is cst.Attribute:
            return self._reference(expr, scope, depth)
        if type(expr) is cst.Call:
            return self._call(expr, scope, depth)
        if type(expr) is cst.SimpleString:
            try:
                value = expr.evaluated_value
            except Exception:  # pragma: no cover - malformed literal the parser accepted
                return _UNKNOWN
            return value if isinstance(value, str) else _UNKNOWN
        if type(expr) is cst.Integer:
            try:
                return int(expr.value.replace("_", ""), 0)
            except ValueError:  # pragma: no cover
                return _UNKNOWN
        if type(expr) is cst.Tuple:
            numbers = []
            for element in expr.elements:
                if type(element) is not cst.Element or type(element.value) is not cst.Integer:
                    return _UNKNOWN
                numbers.append(int(element.value.value))
            return _Literal(tuple(numbers), True) if numbers else _UNKNOWN
        if type(expr) is cst.Subscript:
            parts = self._value(expr.value, scope, depth)
            if type(parts) is _Parts and len(expr.slice) == 1:
                return self._subscript_parts(parts, expr.slice[0].slice)
            # V.split("+")[0]: the version without its local part
            if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
                index = expr.slice[0].slice.value
                inner = expr.value
                if (
                    type(index) is cst.Integer
                    and index.value == "0"
                    and type(inner) is cst.Call
                    and type(inner.func) is cst.Attribute
                    and inner.func.attr.value == "split"
                    and self._value(inner.func.value, scope, depth) is TARGET
                ):
                    return TARGET
            return _UNKNOWN
        return _UNKNOWN

    @staticmethod
    def _subscript_parts(parts: _Parts, sl: cst.BaseSlice):
        """``parts[i]`` (an item) or ``parts[:n]`` (a shorter :class:`_Parts`)."""
        if type(sl) is cst.Index:
            if type(sl.value) is not cst.Integer:
                return _UNKNOWN
            i = int(sl.value.value)
            return parts.items[i] if i < len(parts.items) else _UNKNOWN
        if type(sl) is cst.Slice and sl.lower is None and sl.step is None:
            if type(sl.upper) is not cst.Integer:
                return _UNKNOWN
            n = int(sl.upper.value)
            if n <= len(parts.items):
                return _Parts(parts.items[:n], True, parts.target, parts.tuple)
            return parts
        return _UNKNOWN

    def _bool(self, expr: cst.CSTNode, scope: Scope, depth: int) -> bool | None:
        value = self._value(expr, scope, depth)
        return value if type(value) is bool else None

    def _comparison(self, expr: cst.Comparison, scope: Scope, depth: int):
        result: bool | None = True
        left_node = expr.left
        left = self._value(left_node, scope, depth)
        for target in expr.comparisons:
            right_node = target.comparator
            op_type = type(target.operator)
            if op_type is cst.Is or op_type is cst.IsNot:
                one = self._is_none(left_node, right_node, scope, depth)
                if one is not None and op_type is cst.IsNot:
                    one = not one
                right = _UNKNOWN
            else:
                right = self._value(right_node, scope, depth)
                op = _CST_OPS.get(op_type)
                one = self._compare(left, op, right) if op is not None else None
            result = _and(result, one)
            if result is False:
                return False
            left_node, left = right_node, right
        return result

    def _is_none(
        self, left: cst.CSTNode, right: cst.CSTNode, scope: Scope, depth: int
    ) -> bool | None:
        """``getattr(X, "a", None) is None``: True when the attribute is missing on the target."""
        if type(right) is cst.Name and right.value == "None" and type(left) is cst.Call:
            exists = self._attribute_test(left, scope, getattr_only=True)
            return None if exists is None else not exists
        return None

    def _compare(self, left, op: str, right) -> bool | None:
        if (type(left) is _Parts and left.tuple) or (type(right) is _Parts and right.tuple):
            ta, tb = _as_tuple(left), _as_tuple(right)
            if ta is None or tb is None:
                return None
            c = _tuple_cmp(ta, tb)
            return None if c is None else _compare_ints(c, op, 0)
        if left is TARGET or right is TARGET:
            if left is TARGET and right is TARGET:
                return None
            if right is TARGET:
                left, right, op = right, left, _FLIP[op]
            literal = parse_version(right) if isinstance(right, str) else right
            return compare_target(self.target, op, literal) if type(literal) is _Literal else None
        if type(left) is _TargetInt or type(right) is _TargetInt:
            a = left.value if type(left) is _TargetInt else left
            b = right.value if type(right) is _TargetInt else right
            if type(a) is int and type(b) is int:
                return _compare_ints(a, op, b)
        return None

    def _reference(self, expr: cst.Name | cst.Attribute, scope: Scope, depth: int):
        names = self.ctx.qnames(expr, scope)
        if names & _VERSION_SOURCES:
            return TARGET
        if type(expr) is cst.Attribute:
            attr = expr.attr.value
            if attr in _VERSION_ATTRS or attr in ("major", "minor"):
                base = self._value(expr.value, scope, depth)
                if base is TARGET:
                    if attr == "major":
                        return _TargetInt(self.target[0])
                    if attr == "minor":
                        return _TargetInt(self.target[1])
                    return TARGET
            if names:
                return self._imported(names)
            return _UNKNOWN
        if type(expr) is cst.Name:
            return self._name(expr.value, scope, depth, names)
        return _UNKNOWN  # pragma: no cover - expr is a Name or an Attribute

    def _imported(self, names: frozenset[str]):
        """A name from another module: read from its spelling (all spellings must agree)."""
        values = {name_truth(self.target, n.rsplit(".", 1)[-1]) for n in names}
        return values.pop() if len(values) == 1 else _UNKNOWN

    def _name(self, name: str, scope: Scope, depth: int, qnames: frozenset[str]):
        owner = defining_scope(name, scope)
        if owner is None:
            return _UNKNOWN
        key = (id(owner), name)
        if key in self._names:
            return self._names[key]
        self._names[key] = _UNKNOWN  # cycles read as unknown
        bindings = owner.bindings.get(name, set())
        values = []
        if bindings - {LOCAL}:
            values.append(self._imported(frozenset(qnames)) if qnames else _UNKNOWN)
        if LOCAL in bindings:
            assigned = self._assignments(owner).get(name, [_POISON])
            for item in assigned:
                values.append(_UNKNOWN if item is _POISON else self._value(item[0], item[1], depth))
        result = _UNKNOWN
        if values and all(v is not _UNKNOWN for v in values):
            first = values[0]
            if all(_same(first, v) for v in values[1:]) and name not in self._unsafe_names():
                result = first
        if result is _UNKNOWN and name_truth(self.target, name) is not None:
            result = name_truth(self.target, name)
        self._names[key] = result
        return result

    def _call(self, call: cst.Call, scope: Scope, depth: int):
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "startswith":
            if len(call.args) == 1 and self._value(func.value, scope, depth) is TARGET:
                prefix = self._value(call.args[0].value, scope, depth)
                return self._startswith(prefix) if isinstance(prefix, str) else _UNKNOWN
            return _UNKNOWN
        if type(func) is cst.Attribute and func.attr.value == "split":
            if len(call.args) == 1 and self._value(call.args[0].value, scope, depth) == ".":
                base = self._value(func.value, scope, depth)
                if base is TARGET:
                    return _Parts(
                        (_TargetStr(self.target[0]), _TargetStr(self.target[1])), False, True
                    )
                if isinstance(base, str):
                    return _Parts(tuple(base.split(".")), True, False)
            return _UNKNOWN
        if type(func) is cst.Name and not call.args:
            helper = self._version_helper(func.value, scope)
            if helper is not None:  # def requires_override(): return torch.__version__...
                return self._value(helper[0], helper[1], depth)
        names = self.ctx.qnames(func, scope)
        if not names:
            return _UNKNOWN
        if names & {"builtins.map", "builtins.tuple", "builtins.int"}:
            return self._builtin(call, names, scope, depth)
        if "builtins.hasattr" in names or "builtins.getattr" in names:
            return self._attribute_test(call, scope)
        lasts = {n.rsplit(".", 1)[-1] for n in names}
        args = [a for a in call.args if a.keyword is None and not a.star]
        if lasts & _PARSERS and any(n.startswith(_PARSER_ROOTS) for n in names) and len(args) >= 1:
            value = self._value(args[0].value, scope, depth)
            if value is TARGET:
                return TARGET
            if isinstance(value, str):
                return parse_version(value) or _UNKNOWN
            return _UNKNOWN
        if "version" in lasts and any(
            n.startswith(("importlib.metadata.", "importlib_metadata.")) for n in names
        ):
            return TARGET if args and self._string(args[0]) in _VERSION_PACKAGES else _UNKNOWN
        if "RequirementCache" in lasts and any(n.startswith("lightning_utilities.") for n in names):
            text = self._string(args[0]) if args else None
            return requirement_truth(self.target, text) if text is not None else _UNKNOWN
        if lasts & {"compare_version", "_compare_version"} and len(args) >= 3:
            package = self._string(args[0])
            op = next(
                (
                    _OPERATOR_FUNCS[n]
                    for n in self.ctx.qnames(args[1].value, scope)
                    if n in _OPERATOR_FUNCS
                ),
                None,
            )
            version = self._string(args[2])
            if package in _VERSION_PACKAGES and op is not None and version is not None:
                literal = parse_version(version)
                return compare_target(self.target, op, literal) if literal is not None else _UNKNOWN
            return _UNKNOWN
        if "is_torch_version" in lasts and len(args) >= 2:
            return self._op_version(self._string(args[0]), args[1], scope, depth)
        if "compare_versions" in lasts and len(args) >= 3:
            first = args[0].value
            library = self._string(args[0])
            if library in _VERSION_PACKAGES or self._value(first, scope, depth) is TARGET:
                return self._op_version(self._string(args[1]), args[2], scope, depth)
            return _UNKNOWN
        if "is_torch_greater_or_equal" in lasts and args:
            return self._op_version(">=", args[0], scope, depth)
        return _UNKNOWN

    def _version_helper(self, name: str, scope: Scope) -> tuple[cst.BaseExpression, Scope] | None:
        """For ``name()`` called with no arguments, where ``name`` is a module-level function of
        this file (not rebound) whose body is one ``return EXPR`` (after a docstring): ``EXPR``
        and the function's scope, so ``if requires_init_pg_override():`` is read as the version
        test the helper returns (neuronx-distributed ``parallel_layers/utils.py``)."""
        module = scope.module
        if defining_scope(name, scope) is not module or len(module.bindings.get(name, ())) != 1:
            return None
        found = None
        for stmt in self.ctx.module.body:
            if type(stmt) is cst.FunctionDef and stmt.name.value == name:
                if found is not None:
                    return None  # defined twice
                found = stmt
        if found is None or found.decorators or type(found.body) is not cst.IndentedBlock:
            return None
        body = list(found.body.body)
        if body and _is_docstring(body[0]) and len(body) > 1:
            body = body[1:]
        if len(body) != 1 or type(body[0]) is not cst.SimpleStatementLine:
            return None
        small = body[0].body
        if len(small) != 1 or type(small[0]) is not cst.Return or small[0].value is None:
            return None
        inner = self.ctx.scopes.get(found)
        return (small[0].value, inner) if inner is not None else None

    def _builtin(self, call: cst.Call, names: frozenset[str], scope: Scope, depth: int):
        """``map(int, parts)``, ``tuple(<mapped parts>)`` and ``int(<one part>)``."""
        args = call.args
        if any(a.keyword is not None or a.star for a in args):
            return _UNKNOWN
        if "builtins.map" in names and len(args) == 2:
            if "builtins.int" not in self.ctx.qnames(args[0].value, scope):
                return _UNKNOWN
            parts = self._value(args[1].value, scope, depth)
            if type(parts) is not _Parts or not all(isinstance(i, str) for i in parts.items):
                return _UNKNOWN
            items = tuple(_to_int(item, parts.target) for item in parts.items)
            return _Parts(items, parts.complete, parts.target)
        if "builtins.tuple" in names and len(args) == 1:
            parts = self._value(args[0].value, scope, depth)
            if type(parts) is not _Parts or any(isinstance(i, str) for i in parts.items):
                return _UNKNOWN  # a tuple of strings does not compare with a tuple of ints
            return _Parts(parts.items, parts.complete, parts.target, is_tuple=True)
        if "builtins.int" in names and len(args) == 1:
            value = self._value(args[0].value, scope, depth)
            if type(value) is _TargetInt:
                return value
            return _to_int(value, False) if isinstance(value, str) else _UNKNOWN
        return _UNKNOWN

    def _op_version(self, op: str | None, arg: cst.Arg, scope: Scope, depth: int):
        if op not in _OPS:
            return _UNKNOWN
        value = self._value(arg.value, scope, depth)
        literal = parse_version(value) if isinstance(value, str) else value
        return compare_target(self.target, op, literal) if type(literal) is _Literal else _UNKNOWN

    def _startswith(self, prefix: str) -> bool | None:
        """``"<major>.<minor>.<patch>".startswith(prefix)`` with the patch unknown."""
        known = f"{self.target[0]}.{self.target[1]}."
        if known.startswith(prefix):
            return True
        if prefix.startswith(known):
            return None
        return False

    def _attribute_test(
        self, call: cst.Call, scope: Scope, getattr_only: bool = False
    ) -> bool | None:
        """``hasattr(X, "a")`` / ``getattr(X, "a", None)`` for a torch_xla ``X``: False when
        ``X.a`` was removed by the target version, True for other torch_xla attributes."""
        names = self.ctx.qnames(call.func, scope)
        is_getattr = "builtins.getattr" in names
        if getattr_only and not is_getattr:
            return None
        args = call.args
        if len(args) != (3 if is_getattr else 2) or any(
            a.keyword is not None or a.star for a in args
        ):
            return None
        if is_getattr and not (type(args[2].value) is cst.Name and args[2].value.value == "None"):
            return None
        attr = self._string(args[1])
        if attr is None:
            return None
        owners = [
            n
            for n in self.ctx.qnames(args[0].value, scope)
            if n == "torch_xla" or n.startswith("torch_xla.")
        ]
        if not owners:
            return None
        for owner in owners:
            info = REMOVED_ATTRS.get(f"{owner}.{attr}") or REMOVED_MODULES.get(f"{owner}.{attr}")
            if info is not None:
                return self.target < info.removed_in
        return True

    @staticmethod
    def _string(arg: cst.Arg) -> str | None:
        value = arg.value
        if type(value) is cst.SimpleString:
            try:
                text = value.evaluated_value
            except Exception:  # pragma: no cover
                return None
            return text if isinstance(text, str) else None
        return None

    # -- bindings --------------------------------------------------------------
    def _assignments(self, scope: Scope) -> dict[str, list]:
        """Every binding of a plain name in ``scope``'s own body (not nested functions or
        classes): ``(value, scope)`` for ``NAME = value``, :data:`_POISON` for other bindings."""
        found = self._assigns.get(id(scope))
        if found is not None:
            return found
        found = {}
        node = scope.node
        if node is not None:
            body: Sequence[cst.BaseStatement] = ()
            if type(node) is cst.Module:
                body = node.body
            elif type(node.body) is cst.IndentedBlock:
                body = node.body.body
            _collect(body, scope, found)
        self._assigns[id(scope)] = found
        return found

    def _unsafe_names(self) -> frozenset[str]:
        """Names bound inside expressions (``:=``, comprehensions, lambdas), declared
        ``global``/``nonlocal`` or deleted anywhere in the file: their assignments do not tell
        their value. One walk of the file, only once a name's assignments all agree."""
        return self.ctx.memo(
            "unsafe-names",
            lambda: names_bound_in_expressions_or_rebound(self.ctx.module, self.ctx.flat),
        )


def _as_tuple(value) -> _Parts | None:
    """A comparable tuple: mapped parts, or a tuple literal (``(2, 1)``, read as a :class:`_Literal`)."""
    if type(value) is _Parts:
        return value if value.tuple else None
    if type(value) is _Literal:
        return _Parts(value.release, True, False, is_tuple=True)
    return None


def _same(a, b) -> bool:
    if a is b:
        return True
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    return False


def _collect(statements, scope: Scope, out: dict[str, list]) -> None:
    for stmt in statements:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                _collect_small(small, scope, out)
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            out.setdefault(stmt.name.value, []).append(_POISON)
        elif kind is cst.If:
            node = stmt
            while type(node) is cst.If:
                _collect_suite(node.body, scope, out)
                node = node.orelse
            if node is not None:
                _collect_suite(node.body, scope, out)
        elif kind is cst.For or kind is cst.While:
            if kind is cst.For:
                _poison_target(stmt.target, out)
            _collect_suite(stmt.body, scope, out)
            if stmt.orelse is not None:
                _collect_suite(stmt.orelse.body, scope, out)
        elif kind in _TRY_TYPES:
            _collect_suite(stmt.body, scope, out)
            for handler in stmt.handlers:
                if handler.name is not None:
                    _poison_target(handler.name.name, out)
                _collect_suite(handler.body, scope, out)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    _collect_suite(extra.body, scope, out)
        elif kind is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    _poison_target(item.asname.name, out)
            _collect_suite(stmt.body, scope, out)
        elif kind is cst.Match:
            for case in stmt.cases:
                for node in _iter_names(case.pattern):
                    out.setdefault(node, []).append(_POISON)
                _collect_suite(case.body, scope, out)


def _collect_suite(suite: cst.BaseSuite, scope: Scope, out: dict[str, list]) -> None:
    if type(suite) is cst.IndentedBlock:
        _collect(suite.body, scope, out)
    else:
        for small in suite.body:
            _collect_small(small, scope, out)


def _collect_small(small: cst.CSTNode, scope: Scope, out: dict[str, list]) -> None:
    if type(small) is cst.Assign:
        for target in small.targets:
            if type(target.target) is cst.Name:
                out.setdefault(target.target.value, []).append((small.value, scope))
            else:
                _poison_target(target.target, out)
    elif type(small) is cst.AnnAssign:
        if type(small.target) is cst.Name:
            out.setdefault(small.target.value, []).append(
                (small.value, scope) if small.value is not None else _POISON
            )
    elif type(small) is cst.AugAssign:
        _poison_target(small.target, out)


def _poison_target(target: cst.CSTNode, out: dict[str, list]) -> None:
    for name in _iter_names(target):
        out.setdefault(name, []).append(_POISON)


def _iter_names(node: cst.CSTNode):
    for sub in iter_nodes(node):
        if type(sub) is cst.Name:
            yield sub.value


# -- platform branches ---------------------------------------------------------------------

# Words in an availability check that name a platform other than XLA/TPU: code under
# `if is_torch_neuroncore_available():` or `elif is_sagemaker_dp_enabled():` is not what an
# XLA program runs (Trainium's `init_process_group("xla")`, SageMaker's DDP).
OTHER_PLATFORMS = (
    "neuron",
    "sagemaker",
    "cuda",
    "gpu",
    "npu",
    "mlu",
    "hpu",
    "xpu",
    "ipex",
    "mps",
    "musa",
    "habana",
    "rocm",
    "deepspeed",
    "megatron",
)
_AVAILABILITY = re.compile(
    r"^_?(?:is|has)_(\w+?)_(?:available|enabled|initialized)$|^_?([A-Za-z0-9_]+?)_(?:AVAILABLE|ENABLED)$"
)


# A flag or predicate named for running on XLA: `is_xla()`, `use_tpu`, `args.on_tpu`, `USE_XLA`.
_ON_XLA = re.compile(
    r"^_?(?:is|use|using|on|run_on|running_on|has)_(?:torch_)?(?:xla|tpu)$", re.IGNORECASE
)
# Device strings compared in a test (`cfg.device == "xla"`, `device.type != "cuda"`).
_DEVICE_STRINGS = {"xla": "xla", "tpu": "xla", "cuda": "other", "gpu": "other", "mps": "other"}


def platform_of(test: cst.BaseExpression) -> str | None:
    """``"xla"`` or ``"other"`` when ``test`` is an availability check of a platform
    (``is_torch_xla_available()``, ``_XLA_AVAILABLE``, ``torch.cuda.is_available()``,
    ``is_sagemaker_mp_enabled()``), a flag or predicate named for XLA (``is_xla()``,
    ``args.use_tpu``), or a device string compared for equality (``cfg.device == "xla"``,
    ``device.type == "cuda"``), else None."""
    if type(test) is cst.Comparison:
        return _device_comparison(test, "==")
    if type(test) is cst.Call:
        test = test.func
    name = dotted_name(test)
    if name is None:
        return None
    parts = name.split(".")
    if _ON_XLA.match(parts[-1]):
        return "xla"
    if parts[-1] == "is_available" and len(parts) >= 2:
        word = parts[-2]
    else:
        m = _AVAILABILITY.match(parts[-1])
        if m is None:
            return None
        word = m.group(1) or m.group(2)
    word = word.lower()
    if "xla" in word or "tpu" in word:
        return "xla"
    if any(p in word for p in OTHER_PLATFORMS):
        return "other"
    return None


def _device_comparison(test: cst.Comparison, operator: str) -> str | None:
    """The platform of ``x == "xla"`` (``"xla"``) or ``x == "cuda"`` (``"other"``) when
    ``operator`` is ``"=="``; of ``x != ...`` when it is ``"!="``; else None. One comparison
    only, against a plain string literal on either side."""
    if len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    kind = {cst.Equal: "==", cst.NotEqual: "!="}.get(type(target.operator))
    if kind != operator:
        return None
    for side in (test.left, target.comparator):
        if type(side) is cst.SimpleString:
            value = side.evaluated_value
            return _DEVICE_STRINGS.get(value.lower()) if isinstance(value, str) else None
    return None


def _branch_platforms(test: cst.BaseExpression) -> tuple[bool, bool]:
    """(the body runs only without XLA, the ``else`` runs only without XLA) for an ``if``
    test: a check of another platform guards its body, a check of XLA its ``else``; ``not``
    swaps them; in ``a and b`` any operand that guards the body guards it."""
    negated = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, negated = test.expression, not negated
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And and not negated:
        operands = []
        node: cst.BaseExpression = test
        while type(node) is cst.BooleanOperation and type(node.operator) is cst.And:
            operands.append(node.right)
            node = node.left
        operands.append(node)
        return any(_branch_platforms(o)[0] for o in operands), False
    kind = platform_of(test)
    if kind is None and type(test) is cst.Comparison:  # `device != "xla"`: `not (== )`
        kind = _device_comparison(test, "!=")
        negated = kind is not None and not negated
    body, orelse = kind == "other", kind == "xla"
    return (orelse, body) if negated else (body, orelse)


def constant_truth(test: cst.BaseExpression) -> bool | None:
    """The truth of a test whose value is fixed in the source: ``False``, ``None``, ``0``,
    ``True``, ``1``, and ``and``/``or``/``not`` of those (``debug and False`` is False); None
    when it depends on anything else."""
    if type(test) is cst.Name:
        return {"True": True, "False": False, "None": False}.get(test.value)
    if type(test) is cst.Integer:
        return int(test.value, 0) != 0
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = constant_truth(test.expression)
        return None if inner is None else not inner
    if type(test) is cst.BooleanOperation:
        left, right = constant_truth(test.left), constant_truth(test.right)
        if type(test.operator) is cst.And:
            return (
                False
                if False in (left, right)
                else (True if left is True and right is True else None)
            )
        return (
            True if True in (left, right) else (False if left is False and right is False else None)
        )
    return None


def in_dead_code(ctx: FileContext) -> bool:
    """True when the node being visited can never run: the body of ``if False:`` /
    ``if debug and False:`` / ``while 0:``, or the ``else`` of ``if True:``. Findings and
    program facts there are not about any program."""
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        if type(node) is not cst.If and type(node) is not cst.IfExp and type(node) is not cst.While:
            continue
        truth = constant_truth(node.test)
        if truth is None:
            continue
        child = stack[i + 1]
        if (child is node.body and truth is False) or (child is node.orelse and truth is True):
            return True
    return False


def runs_on_xla(ctx: FileContext) -> bool:
    """False when the node being visited is in a branch that runs only on another platform:
    the body of ``if is_sagemaker_dp_enabled():`` / ``if torch.cuda.is_available():`` (also as
    one operand of ``and``), the ``else`` of ``if is_torch_xla_available():``, what follows
    ``if is_xla(): ...; return``, the handler of a ``try`` that imports torch_xla when it catches
    the failed import (``except ImportError:``, ``except Exception:``, bare ``except:``), and a private function or method the file refers to only
    from such code (:func:`_non_xla_callees`). Findings and program facts there are not about
    an XLA program."""
    if not _stack_runs_on_xla(ctx.stack, _exits(ctx)):
        return False
    callees = None
    for node in ctx.stack:
        if type(node) is cst.FunctionDef and _private(node.name.value):
            if callees is None:
                callees = ctx.memo(
                    "xla_lint.analysis.guards.non_xla_callees", lambda: _non_xla_callees(ctx)
                )
            if node.name.value in callees:
                return False
    return True


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _non_xla_callees(ctx: FileContext) -> frozenset[str]:
    """The private functions and methods (``_save``) this file refers to only from code that
    runs without XLA, at least once: ``if is_torch_xla_available(): self._save_tpu(d) else:
    self._save(d)`` makes ``_save`` another platform's code. A reference anywhere else (a call
    in XLA code, a callback, ``getattr``) keeps the name out."""
    sites: dict[str, bool] = {}  # name -> every reference so far is in non-XLA code
    exits = _exits(ctx)

    class Refs:  # for walk(): on_visit/on_leave with the stack of open nodes
        def __init__(self) -> None:
            self.stack: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            name = None
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
                if node.value.value in ("self", "cls"):
                    name = node.attr.value
            elif isinstance(node, cst.Name) and self.stack:
                parent = self.stack[-1]
                if not (
                    (isinstance(parent, cst.Attribute) and parent.attr is node)
                    or (isinstance(parent, cst.FunctionDef) and parent.name is node)
                ):
                    name = node.value
            if name is not None and _private(name):
                here = not _stack_runs_on_xla([*self.stack, node], exits)
                sites[name] = sites.get(name, True) and here
            self.stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.stack.pop()

    walk(ctx.module, Refs(), TRIVIA)  # not module.visit: no recursion, no node rebuilding
    return frozenset(name for name, only_other in sites.items() if only_other)


def _exits(ctx: FileContext) -> dict:
    """The file's memo for :func:`_after_xla_exit` (block id -> its first XLA exit)."""
    return ctx.memo("xla_lint.analysis.guards.exits", dict)


def _stack_runs_on_xla(stack: Sequence[cst.CSTNode], exits: dict) -> bool:
    """:func:`runs_on_xla` for the node at the end of ``stack`` (the module first), from its
    enclosing branches alone; ``exits``: :func:`_exits`."""
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        child = stack[i + 1]
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            if _after_xla_exit(exits, node, node.body, child):
                return False
            continue
        if isinstance(node, _TRY_TYPES):
            if type(child) is not cst.IndentedBlock and _without_torch_xla(node, child):
                return False
            continue
        if not isinstance(node, (cst.If, cst.IfExp)):
            continue
        body_other, else_no_xla = _branch_platforms(node.test)
        if child is node.body and body_other:
            return False
        if child is node.orelse and else_no_xla:
            return False
    return True


# What a handler catches when the import of torch_xla in its `try` fails.
_IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _without_torch_xla(node: cst.Try | cst.TryStar, child: cst.CSTNode) -> bool:
    """True when ``child`` is a handler of ``node`` that runs where torch_xla is not installed:
    the ``try`` body imports torch_xla (a statement of its own block), and the handler is bare or
    catches ``ImportError``/``ModuleNotFoundError``/``Exception``/``BaseException`` (``try: import
    torch_xla.core.xla_model as xm ... except ImportError: print(...)``)."""
    handler = next((h for h in node.handlers if h is child), None)
    if handler is None:
        return False
    names = handler_names(handler)
    if names is not None and names.isdisjoint(_IMPORT_FAILURES):
        return False
    for stmt in node.body.body:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Import and any(
                _names_torch_xla(dotted_name(a.name)) for a in small.names
            ):
                return True
            if (
                type(small) is cst.ImportFrom
                and not small.relative
                and small.module is not None
                and _names_torch_xla(dotted_name(small.module))
            ):
                return True
    return False


def _names_torch_xla(name: str | None) -> bool:
    return name is not None and (name == "torch_xla" or name.startswith("torch_xla."))


def _after_xla_exit(
    exits: dict, block: cst.CSTNode, statements: Sequence[cst.CSTNode], child: cst.CSTNode
) -> bool:
    """True when ``child`` follows, in ``statements`` (the body of ``block``), an ``if`` without
    ``else`` whose body runs only on XLA and always leaves (``if is_xla(): ...; return``): what
    comes after it runs only without XLA. ``exits``: the file's memo of each block's first XLA
    exit and statement indices, so a long block is read once, not once per node asked about
    (10,000 findings in one block took seconds per thousand)."""
    entry = exits.get(id(block))
    if entry is None or entry[0] is not block:
        first = None
        for i, stmt in enumerate(statements):
            if (
                type(stmt) is cst.If
                and stmt.orelse is None
                and _branch_platforms(stmt.test)[1]
                and _always_leaves(stmt.body)
            ):
                first = i
                break
        entry = (block, first, {id(stmt): i for i, stmt in enumerate(statements)})
        exits[id(block)] = entry
    _, first, index = entry
    if first is None:
        return False
    at = index.get(id(child))
    return at is None or first < at


def _always_leaves(block: cst.BaseSuite) -> bool:
    """True when the last statement of ``block`` is a ``return``, ``raise``, ``continue`` or
    ``break`` (or a call of ``sys.exit``/``exit``/``os._exit``)."""
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1]
    if type(last) in (cst.Return, cst.Raise, cst.Continue, cst.Break):
        return True
    if type(last) is cst.Expr and type(last.value) is cst.Call:
        return dotted_name(last.value.func) in ("sys.exit", "exit", "os._exit", "quit")
    return False


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    """A statement that is only a string literal."""
    return (
        type(stmt) is cst.SimpleStatementLine
        and len(stmt.body) == 1
        and type(stmt.body[0]) is cst.Expr
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
