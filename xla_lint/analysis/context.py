"""The per-file context rules ask their questions of, and the one traversal that runs them.

:class:`FileContext` answers "what does this name stand for?" (through
:mod:`xla_lint.analysis.names` and :mod:`xla_lint.analysis.apis`), "am I under ``if xr.is_spmd():``?" and
collects reports. :class:`Dispatcher` walks the module once and calls every selected
rule's ``visit_<Node>``/``leave_<Node>`` method, keeping the scope and ancestor stacks.
:class:`FactsCollector` is the built-in visitor that records the file's program facts.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TypeGuard, TypeVar, cast

import libcst as cst

from ..program.facts import Condition, Fact, FileFacts, import_prefixes, is_library_call
from ..rule import Report
from . import apis
from .guards import in_dead_code, runs_on_target, runs_on_xla
from .names import BindingCollector, Scope, dotted_name, qualified_names
from .walk import LEAVES, Flat, iter_nodes, silent_types

_Node = TypeVar("_Node", bound=cst.CSTNode)


class FileContext:
    """Everything a rule may ask about the file being linted.

    ``module_name`` is the file's dotted name (for relative imports), ``target_version``
    the torch_xla version linted for, as ``(major, minor)``; ``globals_scope`` (docstring
    examples) is the scope unbound names are looked up in.
    """

    def __init__(
        self,
        module: cst.Module,
        module_name: str = "",
        is_package: bool = False,
        target_version: tuple[int, int] = (2, 9),
        globals_scope: Scope | None = None,
        notebook: bool = False,
        in_xla_program: bool = False,
    ) -> None:
        self.module = module
        self.notebook = (
            notebook  # a Jupyter notebook's code cell (run in a kernel, not as a script)
        )
        self.module_name = module_name
        self.is_package = is_package  # the file is a package's __init__.py
        self.target_version = target_version
        collector = BindingCollector(module_name, is_package)
        self.root_scope = collector.collect(module)
        if globals_scope is not None:
            # A docstring example: names it does not bind come from the enclosing module.
            self.root_scope.parent = globals_scope
        self.scopes = collector.scopes
        self.imported_modules = collector.imported_modules
        self.relative_anchors = collector.relative_anchors
        self.imports_torch_xla = any(
            m == "torch_xla" or m.startswith("torch_xla.") for m in self.imported_modules
        ) or (
            globals_scope is not None
            and any(
                q == "torch_xla" or q.startswith("torch_xla.")
                for qs in globals_scope.bindings.values()
                for q in qs
            )
        )
        # Code that runs in an XLA program: the file imports torch_xla, or a program that does
        # imports it (a data.py building the loader a torch_xla loop trains on).
        self.in_xla_program = self.imports_torch_xla or in_xla_program
        self.scope_stack: list[Scope] = [self.root_scope]
        self._qnames_cache: dict[tuple[int, int], frozenset[str]] = {}
        self._last_qnames: tuple[cst.CSTNode | None, Scope | None, frozenset[str]] = (
            None,
            None,
            _NO_NAMES,
        )
        self._memo: dict[object, object] = {}
        self._flat: Flat | None = None
        self.stack: list[cst.CSTNode] = []
        # The ancestors of these types, kept apart while the traversal runs (enclosing() reads them).
        self.typed_stacks: dict[type, list[cst.CSTNode]] = {
            cst.FunctionDef: [],
            cst.With: [],
            cst.If: [],
        }
        self.reports: list[Report] = []

    def memo(self, key, factory):
        """A per-file analysis computed once and shared by every rule that asks for ``key``.

        ``factory()`` builds it on first use (e.g. the loop structure the three loop rules read).
        """
        if key not in self._memo:
            self._memo[key] = factory()
        return self._memo[key]

    @property
    def flat(self) -> Flat:
        """The module's nodes in traversal order with their subtrees' extents
        (:class:`xla_lint.analysis.walk.Flat`), built once (by the :class:`Dispatcher`, or on first
        use) and shared by the rule traversal and the per-file analyses that need a pass over
        the whole module."""
        return self.flat_without(frozenset())

    def flat_without(self, leaves: frozenset[type]) -> Flat:
        """:attr:`flat`, built without the nodes of ``leaves`` (:data:`~xla_lint.analysis.walk.LEAVES`
        types) when it is not built yet."""
        flat = self._flat
        if flat is None:
            flat = self._flat = Flat(self.module, leaves)
        return flat

    # -- names -----------------------------------------------------------
    @property
    def scope(self) -> Scope:
        return self.scope_stack[-1]

    def qnames(self, node: cst.CSTNode, scope: Scope | None = None) -> frozenset[str]:
        """Qualified names ``node`` (a Name/Attribute, or a Call's callee) may stand for,
        in their public spelling (see :func:`xla_lint.analysis.apis.canonical`) and as written;
        read in ``scope`` (default: the scope of the node being visited)."""
        if type(node) is cst.Call:
            node = node.func
        if scope is None:
            scope = self.scope_stack[-1]
        last = self._last_qnames  # the rules ask in turn about the node being visited
        if last[0] is node and last[1] is scope:
            return last[2]
        if type(node) is not cst.Name and type(node) is not cst.Attribute:
            return _NO_NAMES
        key = (id(node), id(scope))  # every rule asks about the same calls: answer once
        cached = self._qnames_cache.get(key)
        if cached is None:
            raw = qualified_names(node, scope)
            cached = frozenset(raw | {apis.canonical(n) for n in raw}) if raw else _NO_NAMES
            self._qnames_cache[key] = cached
        self._last_qnames = (node, scope, cached)
        return cached

    def is_call_to(self, node: cst.CSTNode, *names: str | Iterable[str]) -> TypeGuard[cst.Call]:
        """True when ``node`` is a call of one of ``names`` (dotted, public spelling)."""
        if type(node) is not cst.Call:
            return False
        found = self.qnames(node.func)
        if not found:
            return False
        for n in names:
            if isinstance(n, str):
                if n in found:
                    return True
            elif not found.isdisjoint(n):
                return True
        return False

    def is_torch_xla_name(self, node: cst.CSTNode) -> bool:
        return any(n.startswith("torch_xla") for n in self.qnames(node))

    # -- tree ------------------------------------------------------------
    def parent(self, depth: int = 1) -> cst.CSTNode | None:
        """The ancestor ``depth`` levels above the node being visited."""
        index = len(self.stack) - 1 - depth
        return self.stack[index] if index >= 0 else None

    def enclosing(self, *types: type[_Node]) -> Iterator[_Node]:
        """Ancestors of the current node of the given types, innermost first."""
        if len(types) == 1 and types[0] in self.typed_stacks:
            # the stack of a type holds the nodes of that type (Dispatcher.on_visit); no
            # generator: rules ask for the innermost function on every call
            typed = cast("list[_Node]", self.typed_stacks[types[0]])
            if typed and self.stack and typed[-1] is self.stack[-1]:
                return islice(reversed(typed), 1, None)  # not the current node itself
            return reversed(typed)
        return self._enclosing(types)

    def _enclosing(self, types: tuple[type[_Node], ...]) -> Iterator[_Node]:
        for ancestor in reversed(self.stack[:-1]):
            if isinstance(ancestor, types):
                yield ancestor

    def spmd_branch(self) -> bool | None:
        """True under ``if xr.is_spmd():``, False under its ``else`` or ``if not xr.is_spmd():``, else None.

        The conditional expression counts too: ``a if xr.is_spmd() else b``.
        """
        for i in range(len(self.stack) - 2, -1, -1):
            node = self.stack[i]
            if not isinstance(node, (cst.If, cst.IfExp)):
                continue
            test = node.test
            negated = False
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, negated = test.expression, True
            if not self.is_call_to(test, apis.IS_SPMD):
                continue
            child = self.stack[i + 1]
            in_body = child is node.body
            if not in_body and child is not node.orelse:
                continue  # in the test itself
            return in_body != negated
        return None

    # -- where the code runs (Rule.report asks these) ---------------------------
    def runs_on_target(self, caught: bool = True) -> bool:
        """Whether the node being visited runs on the target torch_xla version
        (:func:`xla_lint.analysis.guards.runs_on_target`)."""
        return runs_on_target(self, caught=caught)

    def runs_on_xla(self) -> bool:
        """Whether the node being visited can run on XLA (:func:`xla_lint.analysis.guards.runs_on_xla`)."""
        return runs_on_xla(self)

    def in_dead_code(self) -> bool:
        """Whether the node being visited never runs (:func:`xla_lint.analysis.guards.in_dead_code`)."""
        return in_dead_code(self)


def literal_string(node: cst.CSTNode | None, concatenated: bool = False) -> str | None:
    """The value of a plain string literal (no f-string; with ``concatenated``, also
    ``"a" "b"``), else None."""
    if isinstance(node, cst.SimpleString) or (
        concatenated and isinstance(node, cst.ConcatenatedString)
    ):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed literal the parser accepted
            return None
        return value if isinstance(value, str) else None
    return None


def find_arg(
    call: cst.Call, keyword: str | None = None, position: int | None = None
) -> cst.Arg | None:
    """The argument passed as ``keyword=`` or at ``position`` (0-based, plain positionals only)."""
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if position < len(positional) and not any(
            a.star for a in call.args[: call.args.index(positional[position])]
        ):
            return positional[position]
    return None


class FactsCollector:
    """Records :class:`~xla_lint.program.facts.FileFacts` during the shared traversal."""

    def __init__(self, ctx: FileContext, module_name: str) -> None:
        self.ctx = ctx
        self.facts = FileFacts(
            module=module_name,
            imports=frozenset(import_prefixes(ctx.imported_modules, ctx.relative_anchors)),
            imports_torch_xla=ctx.imports_torch_xla,
            entry=not ctx.is_package and not module_name.endswith("_pb2") and is_entry_module(ctx),
            requires_torch_xla=_imports_torch_xla_unconditionally(ctx.module),
            defines_tests=_defines_tests(ctx.module),
        )
        # torch_xla's own modules implement the APIs (runtime.use_spmd sets XLA_USE_SPMD, the
        # sharding module builds meshes): linted together with user code, they must not make
        # every program that imports them an SPMD / sharding / multi-process program.
        self.library = module_name == "torch_xla" or module_name.startswith("torch_xla.")
        # A call that starts the torch_xla runtime has run at module level (torch_xla's own
        # `jax_import_guard()` does it before it imports JAX): a torchax import after it is safe.
        self.runtime_started = False
        self._in_body: dict[int, Condition] = {}  # id(an If) -> the conditions in its body

    def _set(self, fact: Fact) -> None:
        """Record ``fact`` (a :func:`xla_lint.program.model.own_facts` name) where the traversal is:
        at module level (``""``) or in the innermost enclosing function, by name."""
        if not runs_on_xla(self.ctx) or in_dead_code(
            self.ctx
        ):  # Trainium's init_process_group("xla")
            return
        f = self.facts
        if fact == Fact.SPMD:
            f.enables_spmd = True
        elif fact == Fact.SHARDS:
            f.shards = True
        elif fact == Fact.GLOBAL_MESH:
            f.sets_global_mesh = True
        elif fact == Fact.MULTIPROCESS:
            f.multiprocess = True
        elif fact == Fact.SPAWN:
            f.spawns = True
        elif fact == Fact.XLA_LAUNCH:
            f.xla_launches = True
        elif fact == Fact.UNBUFFERED:
            f.unbuffered = True
        elif fact == Fact.TORCHAX:
            f.imports_torchax = True
        f.fact_functions.setdefault(fact, set()).add(self._site())
        f.fact_conditions.setdefault(fact, []).append(self._conditions())

    def _conditions(self) -> Condition:
        """The equality tests guarding the traversal's place: each enclosing ``if SUBJECT ==
        LITERAL:`` (either side first; an ``elif`` is an ``if`` in its chain) whose body holds it, as
        ``(subject source text, repr of the literal)``; ``else`` branches and other tests add none."""
        if not self.ctx.typed_stacks[cst.If]:
            return ()  # no `if` around it
        return self._conditions_below(len(self.ctx.stack) - 1)

    def _conditions_below(self, top: int) -> Condition:
        """:meth:`_conditions` of the traversal's ancestor ``stack[top]``: from the ``if``
        statements below it on the stack; once per ``if`` body (every call in a body asks)."""
        stack = self.ctx.stack
        for i in range(top - 1, -1, -1):
            node = stack[i]
            if type(node) is cst.If and stack[i + 1] is node.body:
                found = self._in_body.get(id(node))
                if found is None:
                    pairs = set(self._conditions_below(i))
                    pair = self._equality(node.test)
                    if pair is not None:
                        pairs.add(pair)
                    found = self._in_body[id(node)] = tuple(sorted(pairs))
                return found
        return ()

    def _equality(self, test: cst.BaseExpression) -> tuple[str, str] | None:
        """``("config.tpu_cores", "'spmd'")`` for ``config.tpu_cores == "spmd"``, else None."""
        if (
            type(test) is not cst.Comparison
            or len(test.comparisons) != 1
            or type(test.comparisons[0].operator) is not cst.Equal
        ):
            return None
        left, right = test.left, test.comparisons[0].comparator
        for subject, literal in ((left, right), (right, left)):
            value = _literal_repr(literal)
            if value is not None and _literal_repr(subject) is None:
                return " ".join(self.ctx.module.code_for_node(subject).split()), value
        return None

    def leave_Module(self, node: cst.Module) -> None:
        """Keep the conditions only of the facts and names some site sets or calls under one."""
        f = self.facts
        for table in (f.fact_conditions, f.call_conditions):
            for key in [k for k, sites in table.items() if not any(sites)]:
                del table[key]

    def _site(self) -> str:
        """Where a fact is set, for the program model: ``""`` at module level; else the name a
        caller uses to run the innermost function (a class for its ``__init__``/``__call__``:
        ``Trainer(...)``), prefixed by ``?`` when an ``if`` inside that function guards it
        (``if config.fsdp_v2: xs.set_global_mesh(...)``: an option the program may not set)."""
        stack = self.ctx.stack
        for i in range(len(stack) - 1, -1, -1):
            node = stack[i]
            if type(node) is cst.FunctionDef:
                name = node.name.value
                if name in ("__init__", "__new__", "__call__", "__post_init__"):
                    owner = next((n for n in reversed(stack[:i]) if type(n) is cst.ClassDef), None)
                    if owner is not None:
                        name = owner.name.value
                guarded = any(type(n) in (cst.If, cst.IfExp) for n in stack[i + 1 :])
                return ("?" if guarded else "") + name
        return ""

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        refs = self.facts.references
        called = []
        if type(func) is cst.Name:
            called.append(func.value)
        elif type(func) is cst.Attribute:
            called.append(func.attr.value)
        for arg in node.args:  # callbacks: torch_xla.launch(_mp_fn), app.run(main)
            value = arg.value
            if type(value) is cst.Name:
                called.append(value.value)
            elif type(value) is cst.Attribute:
                called.append(value.attr.value)
        if called:
            refs.update(called)
            condition = self._conditions()
            for name in called:
                self.facts.call_conditions.setdefault(name, []).append(condition)
        if self.library:
            return
        names = self.ctx.qnames(func)
        if not names:
            return
        if not names.isdisjoint(RUNTIME_STARTERS) and self._module_level():
            self.runtime_started = True
        if apis.USE_SPMD in names:
            self._set(Fact.SPMD)
        if not names.isdisjoint(apis.SHARDING_APIS):
            self._set(Fact.SHARDS)
        if apis.SET_GLOBAL_MESH in names:
            self._set(Fact.GLOBAL_MESH)
        if not names.isdisjoint(apis.LAUNCH_APIS):
            self._set(Fact.MULTIPROCESS)
            # xmp.spawn always spawns; torch_xla.launch only when torchrun did not start the process
            self._set(Fact.SPAWN if apis.SPAWN in names else Fact.XLA_LAUNCH)
        if apis.INIT_PROCESS_GROUP in names:
            backend = find_arg(node, "backend", 0)
            if backend is not None and literal_string(backend.value) == "xla":
                self._set(Fact.MULTIPROCESS)
        if (
            node.args
            and any(n.endswith(".reconfigure") for n in names)
            and any(n.startswith(("sys.stdout", "sys.stderr")) for n in names)
        ):
            line = find_arg(node, "line_buffering")
            write = find_arg(node, "write_through")
            if any(a is not None and _is_true(a.value) for a in (line, write)):
                self._set(Fact.UNBUFFERED)
        if names & {"os.environ.setdefault", "os.putenv", "os.environ.__setitem__"}:
            key = find_arg(node, None, 0)
            setting = find_arg(node, None, 1)
            if (
                key is not None
                and literal_string(key.value) == "XLA_USE_SPMD"
                and _turns_spmd_on(setting)
            ):
                self._set(Fact.SPMD)

    def visit_Import(self, node: cst.Import) -> None:
        if any((dotted_name(a.name) or "").split(".")[0] == "torchax" for a in node.names):
            self._imports_torchax()

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if (
            not node.relative
            and node.module is not None
            and (dotted_name(node.module) or "").split(".")[0] == "torchax"
        ):
            self._imports_torchax()

    def _imports_torchax(self) -> None:
        """Fact ``torchax`` for a module-level import that runs (not under ``if TYPE_CHECKING:``)
        before the file starts the torch_xla runtime; not in torch_xla's or torchax's own modules."""
        name = self.facts.module
        if (
            self.library
            or name == "torchax"
            or name.startswith("torchax.")
            or self.runtime_started
            or not self._module_level()
        ):
            return
        if any(
            type(n) is cst.If and (dotted_name(n.test) or "").endswith("TYPE_CHECKING")
            for n in self.ctx.stack
        ):
            return
        self._set(Fact.TORCHAX)

    def _module_level(self) -> bool:
        """True when the traversal is not inside a function, class or lambda."""
        return not any(
            type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda) for n in self.ctx.stack
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.library:
            return
        for target in node.targets:
            if is_environ_item(self.ctx, target.target, "XLA_USE_SPMD"):
                if _turns_spmd_on(node):
                    self._set(Fact.SPMD)
            elif (
                isinstance(target.target, cst.Name)
                and target.target.value == "print"
                and self.ctx.is_call_to(node.value, "functools.partial")
            ):
                flush = find_arg(
                    node.value, "flush"
                )  # print = functools.partial(print, flush=True)
                if flush is not None and _is_true(flush.value):
                    self._set(Fact.UNBUFFERED)


# Calls that create torch_xla's PJRT client: torch_xla/_internal/jax_workarounds.py `jax_import_guard`
# (torch_xla 2.9.0 calls it before every import of JAX or torchax: "we need to grab the TPU before
# JAX locks it"), the client call it makes, and the device getters (torch_xla/torch_xla.py `device`).
RUNTIME_STARTERS = frozenset(
    {
        "torch_xla._internal.jax_workarounds.jax_import_guard",
        "torch_xla._XLAC._init_computation_client",
        "torch_xla.device",
        f"{apis.XM}.xla_device",
    }
)


def _defines_tests(module: cst.Module) -> bool:
    """True when the module body defines a test pytest or unittest collects: a function named
    ``test...``, a class named ``Test...`` or deriving from a ``...TestCase`` (the same test as
    :data:`xla_lint.program.facts.TEST_DEFINITION` on a file's lines)."""
    for statement in module.body:
        if type(statement) is cst.FunctionDef and statement.name.value.startswith("test"):
            return True
        if type(statement) is cst.ClassDef and (
            statement.name.value.startswith("Test")
            or any((dotted_name(base.value) or "").endswith("TestCase") for base in statement.bases)
        ):
            return True
    return False


def _imports_torch_xla_unconditionally(module: cst.Module) -> bool:
    """True when a statement of the module body itself (not under ``if``/``try``, not in a
    function) imports torch_xla."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                if any(
                    (dotted_name(a.name) or "").split(".")[0] == "torch_xla" for a in small.names
                ):
                    return True
            elif (
                isinstance(small, cst.ImportFrom)
                and not small.relative
                and small.module is not None
            ):
                if (dotted_name(small.module) or "").split(".")[0] == "torch_xla":
                    return True
    return False


def _turns_spmd_on(value: cst.CSTNode | None) -> bool:
    """Whether the value written to ``XLA_USE_SPMD`` (an Arg or an Assign's value) turns SPMD
    on: a literal by torch_xla's own rule (``"0"``, ``"True"`` do not); anything else may."""
    expr = getattr(value, "value", None)
    text = literal_string(expr) if expr is not None else None
    if text is None:
        return True
    from ..program.launchers import spmd_flag_on

    return spmd_flag_on(text)


def _literal_repr(node: cst.BaseExpression) -> str | None:
    """``repr`` of a string, bytes or number literal (``1.0`` as ``1``: they compare equal), else None."""
    if not isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        return None
    try:
        value = node.evaluated_value
    except Exception:  # pragma: no cover - malformed literal the parser accepted
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return None if value is None else repr(value)


def _is_true(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_library_call(call: cst.Call) -> bool:
    return is_library_call(dotted_name(call.func) or "")


_BUILTINS = frozenset(dir(builtins))


def _is_builtin_call(call: cst.Call) -> bool:
    return type(call.func) is cst.Name and call.func.value in _BUILTINS


def is_main_guard(test: cst.BaseExpression) -> bool:
    """True for ``__name__ == "__main__"`` (either side first)."""
    if (
        not isinstance(test, cst.Comparison)
        or len(test.comparisons) != 1
        or not isinstance(test.comparisons[0].operator, cst.Equal)
    ):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(a, cst.Name) and a.value == "__name__" for a in sides) and any(
        literal_string(b) == "__main__" for b in sides
    )


def is_entry_module(ctx: FileContext) -> bool:
    """True when the module runs as a program: it has ``if __name__ == "__main__":`` or does
    work at import time, at module level (also inside module-level ``if``/``try``, except under
    ``if TYPE_CHECKING:``): a call statement that is not a library idiom (logging, warnings,
    registration, ``sys.path`` edits), a loop or ``with`` whose body makes such a call, or an
    assignment from ``parse_args()`` or from a torch_xla call outside ``torch_xla.runtime``
    (``model = FSDPv2(model)``). Definitions, imports, constants, docstrings, a loop that fills
    a registry and ``DEVICES = xr.global_runtime_device_count()`` are not work (library
    modules do them). See :mod:`xla_lint.program.model`."""

    def work(statements) -> bool:
        for stmt in statements:
            kind = type(stmt)
            if kind is cst.If:
                if is_main_guard(stmt.test):
                    return True
                if (dotted_name(stmt.test) or "").endswith("TYPE_CHECKING"):
                    continue
                branch = stmt
                while branch is not None:
                    if isinstance(branch, cst.If):
                        if work(branch.body.body):
                            return True
                        branch = branch.orelse
                    else:
                        if work(branch.body.body):
                            return True
                        branch = None
            elif kind is cst.Try:
                blocks = [stmt.body, *(h.body for h in stmt.handlers)]
                blocks += [b.body for b in (stmt.orelse, stmt.finalbody) if b is not None]
                if any(work(b.body) for b in blocks):
                    return True
            elif kind in (cst.For, cst.While, cst.With):
                # A training loop calls things; a loop filling a registry only assigns (or calls builtins).
                if any(
                    type(n) is cst.Call and not _is_library_call(n) and not _is_builtin_call(n)
                    for n in iter_nodes(stmt)
                ):
                    return True
            elif kind is cst.SimpleStatementLine:
                for small in stmt.body:
                    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                        if not _is_library_call(small.value):
                            return True
                    elif isinstance(small, (cst.Assign, cst.AnnAssign)) and isinstance(
                        small.value, cst.Call
                    ):
                        func = small.value.func
                        if isinstance(func, cst.Attribute) and func.attr.value in (
                            "parse_args",
                            "parse_known_args",
                        ):
                            return True
                        names = ctx.qnames(func)
                        # `model = FSDPv2(model)`, `device = torch_xla.device()`: a script's work;
                        # `DEVICES = xr.global_runtime_device_count()`: a library's cached query.
                        if any(n.startswith("torch_xla.") for n in names) and not any(
                            n.startswith(apis.XR + ".") for n in names
                        ):
                            return True
        return False

    return work(ctx.module.body)


def is_environ_item(ctx: FileContext, node: cst.CSTNode, key: str) -> bool:
    """True for ``os.environ["KEY"]`` (any alias of ``os.environ``)."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    if "os.environ" not in ctx.qnames(node.value):
        return False
    index = node.slice[0].slice
    return isinstance(index, cst.Index) and literal_string(index.value) == key


_NO_NAMES: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=256)
def parse_expression(code: str) -> cst.BaseExpression:
    """LibCST's parse of the expression ``code``, once per process: fixes write the same few
    expressions (``torch_xla.sync``, ``True``) thousands of times in a large file, and nodes
    are immutable, so one parse serves them all. Raises ``libcst.ParserSyntaxError``."""
    return cst.parse_expression(code)


@functools.cache
def _callbacks(visitor_type: type) -> tuple[tuple[str, type], ...]:
    """``(method name, node type)`` of every ``visit_<Node>``/``leave_<Node>`` method of ``visitor_type``."""
    out = []
    for attr in dir(visitor_type):
        if attr.startswith("visit_") or attr.startswith("leave_"):
            node_type = getattr(cst, attr[6:], None)
            if isinstance(node_type, type) and issubclass(node_type, cst.CSTNode):
                out.append((attr, node_type))
    return tuple(out)


class Dispatcher(cst.CSTVisitor):
    """One traversal of a module that calls every visitor's ``visit_``/``leave_`` methods.

    Walked from the module (``walk(module, dispatcher, silent_types(...))``, or LibCST's
    ``module.visit``), it reads the module's :attr:`FileContext.flat` instead of the tree: the
    same nodes in the same order (those of :func:`~xla_lint.analysis.walk.silent_types` of its callbacks'
    types left out, as ``walk`` leaves them out), and the list is what the per-file analyses
    read too, so the module is traversed once.
    """

    def __init__(self, ctx: FileContext, visitors: Iterable[object]) -> None:
        super().__init__()
        self.ctx = ctx
        self._visit: dict[type, list[Callable]] = {}
        self._leave: dict[type, list[Callable]] = {}
        for v in visitors:
            visitor_type: type = type(v)  # mypy takes type[object] for not Hashable (cache key)
            for attr, node_type in _callbacks(visitor_type):
                table = self._visit if attr.startswith("visit_") else self._leave
                table.setdefault(node_type, []).append(getattr(v, attr))
        # The types of the nodes that have a scope (modules, functions, classes): only they are
        # looked up in ctx.scopes (LibCST nodes hash in Python).
        self._scoped = frozenset(type(n) for n in ctx.scopes)

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        if node is ctx.module and not ctx.stack:
            self._enter(node)
            self._replay()
            return False  # its children have been visited
        self._enter(node)
        return True

    def _enter(self, node: cst.CSTNode) -> None:
        ctx = self.ctx
        ctx.stack.append(node)
        kind = type(node)
        typed = ctx.typed_stacks.get(kind)
        if typed is not None:
            typed.append(node)
        if kind in self._scoped and node is not ctx.module:
            scope = ctx.scopes.get(node)
            if scope is not None:
                ctx.scope_stack.append(scope)
        callbacks = self._visit.get(kind)
        if callbacks:
            for callback in callbacks:
                callback(node)

    def _replay(self) -> None:
        """Visit and leave the module's nodes below it, in the order of :func:`~xla_lint.analysis.walk.walk`."""
        ctx = self.ctx
        skip = silent_types(frozenset(self._visit) | frozenset(self._leave))
        flat = ctx.flat_without(skip & LEAVES)  # no rule looks at those names and literals
        nodes, ends = flat.nodes, flat.ends
        enter, leave, stack = self._enter, self.on_leave, ctx.stack
        opened: list[int] = []  # where the subtree of each visited node still open ends
        for i in range(1, len(nodes)):
            node = nodes[i]
            if type(node) in skip:  # nothing below it is listened to either
                continue
            while opened and opened[-1] <= i:
                opened.pop()
                leave(stack[-1])
            enter(node)
            opened.append(ends[i])
        while opened:
            opened.pop()
            leave(stack[-1])

    def on_leave(self, original_node: cst.CSTNode) -> None:
        ctx = self.ctx
        kind = type(original_node)
        callbacks = self._leave.get(kind)
        if callbacks:
            for callback in callbacks:
                callback(original_node)
        if kind in self._scoped and original_node is not ctx.module and original_node in ctx.scopes:
            ctx.scope_stack.pop()
        typed = ctx.typed_stacks.get(kind)
        if typed is not None:
            typed.pop()
        ctx.stack.pop()
