"""Seeds of torch's generator that differ between processes, and the models built after them.

Shared by XLA027 (``per-host-seed``: SPMD, one process per host, in
:mod:`xla_lint.rules.spmd`) and XLA028 (``per-replica-seed``: one process per device, in
:mod:`xla_lint.rules.multiprocess`). Both flag a seed whose argument differs between the
processes of one program when a model is built after it in the same function: the processes
then start from different parameters. :class:`SeedBeforeModel` finds that; each rule says what
makes a value differ (:attr:`SeedBeforeModel.sources`), which seeds count, and what cancels the
finding. Also here: the statement order the check reads (:func:`blocks_around`,
:func:`statements_after`, :func:`calls_that_run`) and the functions a file hands to
``torch_xla.launch``/``xmp.spawn`` (:func:`launched_functions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import libcst as cst

from ..rule import Rule
from . import apis
from .context import FileContext, find_arg, is_environ_item, literal_string
from .names import Scope, dotted_name
from .values import Site, definition, one_line
from .walk import TRIVIA, children, iter_nodes

# ---- statement order: what ran before, what runs after --------------------------------------


def blocks_around(ctx: FileContext) -> list[tuple[Sequence[cst.BaseStatement], int]]:
    """The statement blocks enclosing the node being visited, within its innermost function (or
    the module), outermost first: each block's statements and the index of the one that holds
    the node. Empty inside a lambda. Shared by XLA021 (what ran before) and XLA027/XLA028 (what
    runs after)."""
    out: list[tuple[Sequence[cst.BaseStatement], int]] = []
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        kind = type(node)
        if kind is cst.Lambda:
            return []  # a lambda's body holds no statements
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            out = []
        elif isinstance(node, (cst.Module, cst.IndentedBlock)):
            child = stack[i + 1]
            index = next((j for j, s in enumerate(node.body) if s is child), None)
            if index is not None:
                out.append((node.body, index))
    return out


def calls_that_run(node: cst.CSTNode) -> list[cst.Call]:
    """The calls under ``node`` (``node`` included) in source order, leaving out the bodies of
    functions, classes and lambdas defined there (defining them calls nothing)."""
    out: list[cst.Call] = []
    stack = [node]
    while stack:
        n = stack.pop()
        kind = type(n)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        if type(n) is cst.Call:
            out.append(n)
        kids = children(n, TRIVIA)
        kids.reverse()
        stack.extend(kids)
    return out


def statements_after(ctx: FileContext) -> list[cst.BaseStatement]:
    """The statements that run after the one holding the node being visited, in source order:
    those after it in its block, then those after the enclosing compound statement, and so on up
    to its function (or the module)."""
    out: list[cst.BaseStatement] = []
    for block, index in reversed(blocks_around(ctx)):
        out.extend(block[index + 1 :])
    return out


def short(ctx: FileContext, node: cst.CSTNode) -> str:
    """``node``'s source on one line, shortened to 60 characters, in backquotes."""
    return f"`{one_line(ctx, node, 60)}`"


# ---- the functions a file hands to torch_xla.launch / xmp.spawn ------------------------------


def launched_functions(ctx: FileContext) -> dict[str, cst.FunctionDef]:
    """This file's functions passed by name to ``torch_xla.launch``/``xmp.spawn`` that do not
    call ``use_spmd()`` themselves, by name: they run in per-device processes, never in SPMD mode
    (``torch_xla/torch_xla.py``, ``launch`` refuses SPMD), and get the process's index as their
    first argument (``_mp_fn(index, *args)``). Computed once per file (``ctx.memo``)."""
    return ctx.memo(launched_functions, lambda: _find_launched_functions(ctx))


def launch_calls(ctx: FileContext) -> list[cst.Call]:
    """The file's calls of ``torch_xla.launch``/``xmp.spawn``, in order, from the shared node
    list (``ctx.flat``; computed once per file)."""

    def find() -> list[cst.Call]:
        nodes = ctx.flat.nodes
        # Names the module binds to a launch function (`from torch_xla import launch as run`).
        aliases = {
            name
            for name, qualified in ctx.root_scope.bindings.items()
            if not qualified.isdisjoint(apis.LAUNCH_APIS)
        }
        found: list[cst.Call] = []
        for i in ctx.flat.of_types(frozenset({cst.Call})):
            call = nodes[i]
            if not isinstance(call, cst.Call):
                continue
            func = call.func
            if not (
                (type(func) is cst.Attribute and func.attr.value in ("launch", "spawn"))
                or (type(func) is cst.Name and func.value in aliases)
            ):
                continue  # most calls: no need to resolve the name
            if ctx.qnames(func) & apis.LAUNCH_APIS:
                found.append(call)
        return found

    return ctx.memo(launch_calls, find)


def _find_launched_functions(ctx: FileContext) -> dict[str, cst.FunctionDef]:
    launched: set[str] = set()
    for call in launch_calls(ctx):
        fn = find_arg(call, "fn", 0)
        if fn is not None and isinstance(fn.value, cst.Name):
            launched.add(fn.value.value)
    if not launched:
        return {}
    flat = ctx.flat
    nodes, ends = flat.nodes, flat.ends
    defs: dict[str, int] = {}  # name -> index of its first definition
    for i in flat.of_types(frozenset({cst.FunctionDef})):
        defs.setdefault(nodes[i].name.value, i)  # type: ignore[attr-defined]
    out: dict[str, cst.FunctionDef] = {}
    for name in sorted(launched):
        index = defs.get(name)
        if index is None:
            continue
        uses_spmd = False
        for node in nodes[index : ends[index]]:
            if type(node) is cst.Call:
                func = node.func
                if (type(func) is cst.Attribute and func.attr.value == "use_spmd") or (
                    type(func) is cst.Name and func.value == "use_spmd"
                ):
                    uses_spmd = True
                    break
        if not uses_spmd:
            out[name] = nodes[index]  # type: ignore[assignment]
    return out


def replica_functions(ctx: FileContext) -> frozenset[int]:
    """``id()`` of the file's function definitions that may run in a replica this file launches:
    a function passed by name to ``torch_xla.launch``/``xmp.spawn``, and every function whose
    name such a function's body mentions, transitively (a call, a value passed on, a lambda's
    call: more than the calls, so that what is left out provably runs in the launching process).
    Empty when the file launches nothing by name. Computed once per file (``ctx.memo``)."""
    return ctx.memo(replica_functions, lambda: _find_replica_functions(ctx))


def _find_replica_functions(ctx: FileContext) -> frozenset[int]:
    todo = [
        fn.value.value
        for call in launch_calls(ctx)
        if (fn := find_arg(call, "fn", 0)) is not None and isinstance(fn.value, cst.Name)
    ]
    if not todo:
        return frozenset()
    flat = ctx.flat
    nodes = flat.nodes
    defs: dict[str, list[int]] = {}
    for i in flat.of_types(frozenset({cst.FunctionDef})):
        defs.setdefault(nodes[i].name.value, []).append(i)  # type: ignore[attr-defined]
    seen: set[str] = set()
    out: set[int] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for index in defs.get(name, ()):
            out.add(id(nodes[index]))
            # iter_nodes, not the shared list: the rule traversal's list may leave Names out
            for node in iter_nodes(nodes[index]):
                if type(node) is cst.Name and node.value in defs and node.value not in seen:
                    todo.append(node.value)
                elif type(node) is cst.FunctionDef:
                    out.add(id(node))  # nested: runs where its parent does
    return frozenset(out)


def in_launched_function(ctx: FileContext) -> bool:
    """True inside a module-level function this file hands to ``torch_xla.launch``/``xmp.spawn``
    (see :func:`launched_functions`): that code runs in multi-process mode, not SPMD."""
    outer = None
    for node in ctx.enclosing(cst.FunctionDef):
        outer = node
    return outer is not None and outer.name.value in launched_functions(ctx)


def _is_cpu(node: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")`` (any ``"cpu:N"``)."""
    if type(node) is cst.Call and node.args and (dotted_name(node.func) or "").endswith("device"):
        node = node.args[0].value
    text = literal_string(node)
    return text is not None and text.split(":")[0] == "cpu"


# ---- seeds -----------------------------------------------------------------------------------

# Calls that set the XLA RNG state on the default device (torch_xla/core/xla_model.py
# `set_rng_state`; torch_xla/torch_xla.py `manual_seed` calls it). They seed the XLA device's
# generator only, not torch's CPU generator that initialises a module built on the CPU.
RNG_APIS = frozenset({f"{apis.XM}.set_rng_state", "torch_xla.manual_seed"})
# Seeds of torch's host generator, which initialises the parameters of a module built on the CPU
# (torch/random.py `manual_seed`; transformers `set_seed`, Lightning `seed_everything` and
# Accelerate `set_seed` call it), and of the XLA device generator (:data:`RNG_APIS`).
# `random.seed`/`np.random.seed` seed no torch parameter and are left out.
TORCH_SEEDS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        *RNG_APIS,
        "transformers.set_seed",
        "transformers.trainer_utils.set_seed",
        "accelerate.utils.set_seed",
        "lightning.seed_everything",
        "lightning.pytorch.seed_everything",
        "pytorch_lightning.seed_everything",
        "lightning.fabric.seed_everything",
        "lightning_fabric.seed_everything",
        "lightning_fabric.utilities.seed.seed_everything",
        "lightning.fabric.utilities.seed.seed_everything",
        "pytorch_lightning.utilities.seed.seed_everything",
    }
)
# Calls that make a module: torch.nn classes (not losses), Hugging Face loaders (`from_pretrained`
# initialises every weight the checkpoint lacks at random, `from_config` all of them).
_MODEL_LOADERS = frozenset({"from_pretrained", "from_config", "from_pretrained_model"})
_MODEL_BASES = ("torch.nn.Module", "torch.nn.modules.module.Module")
# `X.from_pretrained` that loads no module, and the verbs of functions that make one (`build_model`).
_NOT_MODELS = ("Tokenizer", "Processor", "Config", "Extractor", "Dataset", "Scheduler")
_MAKERS = ("build", "create", "make", "get", "init", "construct", "new", "instantiate", "setup")
_MODEL_BASE_WORDS = ("Module", "PreTrainedModel", "Model")


class SeedBeforeModel(Rule):
    """A rule that flags a seed whose argument differs between the processes of a program when a
    model is built after it in the same function (abstract: it has no ``code``).

    A subclass sets :attr:`sources` (calls, by qualified name, that differ between processes, and
    how the message names them), :attr:`variables` (environment variables that do),
    :attr:`seeds` (the seed calls that count), :attr:`requires` (the program facts of its
    findings) and its ``message`` (fields ``{source}`` and ``{model}``); it may override
    :meth:`skip`, :meth:`other_source`, :meth:`call_source` and :meth:`synchronised`.
    """

    sources: ClassVar[Mapping[str, str]] = {}
    variables: ClassVar[frozenset[str]] = frozenset()
    seeds: ClassVar[frozenset[str]] = TORCH_SEEDS
    requires: ClassVar[tuple[tuple[str, bool], ...]] = ()

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, self.seeds):
            arg = find_arg(node, "seed", 0) or find_arg(node, "new_seed", 0)
            arguments = [arg.value] if arg is not None else []
        elif self._seeding_function(node) is not None:
            arguments = [a.value for a in node.args]
        else:
            return
        source = next((s for s in (self.source(a, None, 0) for a in arguments) if s), None)
        source = source or self.call_source(node)
        if source is None or self.skip():
            return
        model = self._model_built_after()
        if model is not None and not self.synchronised():
            self.report(
                node, self.message.format(source=source, model=model), requires=self.requires
            )

    # -- hooks ------------------------------------------------------------------------------
    def skip(self) -> bool:
        """True where the rule does not apply to the seed being visited."""
        return False

    def other_source(self, node: cst.CSTNode, site: Site | None) -> str | None:
        """How a Name or Attribute ``node`` of a seed's argument differs between processes beyond
        :attr:`sources` and :attr:`variables` (a launched function's index parameter), or None."""
        return None

    def call_source(self, call: cst.Call) -> str | None:
        """How the seed ``call`` itself makes the seed differ between processes, whatever its
        argument (Accelerate's ``set_seed(..., device_specific=True)``), or None."""
        return None

    def synchronised(self) -> bool:
        """True when the program makes the processes' parameters equal after the seed being
        visited (a broadcast, a wrapper that broadcasts), so the seed does no harm."""
        return False

    # -- what the seed depends on ---------------------------------------------------------
    def source(self, expr: cst.BaseExpression, site: Site | None, depth: int) -> str | None:
        """How ``expr`` differs between processes (``"`xr.process_index()`"``), or None: a call
        of :attr:`sources` or environment variable of :attr:`variables` in it, what
        :meth:`other_source` finds, or a local name assigned from one (three assignments deep)."""
        ctx = self.ctx
        labels: set[int] = set()  # names that read no variable: `x.index`, `f(index=...)`
        for n in iter_nodes(expr):
            kind = type(n)
            if kind is cst.Arg and n.keyword is not None:
                labels.add(id(n.keyword))
            elif kind is cst.Call:
                for name in ctx.qnames(n.func):
                    if name in self.sources:
                        return self.sources[name]
                if ctx.is_call_to(n, "os.environ.get", "os.getenv"):
                    key = find_arg(n, None, 0)
                    if key is not None and literal_string(key.value) in self.variables:
                        return f"the environment variable `{literal_string(key.value)}`"
            elif kind is cst.Subscript:
                for var in self.variables:
                    if is_environ_item(ctx, n, var):
                        return f"the environment variable `{var}`"
            elif kind is cst.Attribute:
                labels.add(id(n.attr))
                other = self.other_source(n, site)
                if other is not None:
                    return other
            elif kind is cst.Name:
                other = None if id(n) in labels else self.other_source(n, site)
                if other is not None:
                    return other
                if depth < 3:
                    found = definition(ctx, n, site)
                    if found is not None:
                        value, where = found
                        source = self.source(value, where, depth + 1)
                        if source is not None:
                            return source
        return None

    def _seeding_function(self, call: cst.Call) -> cst.FunctionDef | None:
        """The module-level function of this file ``call`` calls when it passes one of its
        parameters to a seed of :attr:`seeds` (``def set_seed(s): torch.manual_seed(s)``), else None."""
        func = call.func
        if type(func) is not cst.Name or self.ctx.qnames(func):
            return None
        seeders = self.ctx.memo((_find_seeders, self.seeds), lambda: _find_seeders(self))
        return seeders.get(func.value)

    # -- what is built after it -----------------------------------------------------------
    def _model_built_after(self) -> str | None:
        """The first model construction among the statements that run after the seed (shortened
        source), or None; None too when a seed that is the same in every process comes first."""
        for stmt in statements_after(self.ctx):
            for n in calls_that_run(stmt):
                if self.ctx.is_call_to(n, self.seeds):
                    arg = find_arg(n, "seed", 0)
                    if (
                        arg is not None
                        and self.source(arg.value, None, 0) is None
                        and self.call_source(n) is None
                    ):
                        return None
                    continue
                if self._builds_model(n, 0):
                    return short(self.ctx, n)
        return None

    def _builds_model(self, call: cst.Call, depth: int, scope: Scope | None = None) -> bool:
        ctx = self.ctx
        func = call.func
        device = find_arg(call, "device")
        if device is not None and not _is_cpu(device.value):
            # `nn.Linear(4, 4, device=torch_xla.device())` draws its initial values from the XLA
            # device's generator, which torch.manual_seed does not seed (measured, torch_xla
            # 2.9.0: seeds 1 and 2 gave the same weights); only host-built modules count.
            return False
        names = ctx.qnames(func, scope)
        if isinstance(func, cst.Attribute) and func.attr.value in _MODEL_LOADERS:
            loader = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
            return not any(word in loader for word in _NOT_MODELS)
        for name in names:
            last = name.rsplit(".", 1)[-1]
            if (
                name.startswith("torch.nn.")
                and last[:1].isupper()
                and not last.endswith("Loss")
                and not name.startswith(
                    ("torch.nn.functional.", "torch.nn.utils.", "torch.nn.init.")
                )
            ):
                return True
        last = (
            func.value
            if type(func) is cst.Name
            else func.attr.value
            if type(func) is cst.Attribute
            else ""
        )
        if (
            "Model" in last
            and last[:1].isupper()
            or "model" in last.lower()
            and last.lower().lstrip("_").startswith(_MAKERS)
            and "config" not in last
        ):
            return True  # `GPTModel(cfg)`, `build_model()`; not `self.model(x)`, `load_model(path)`
        if names or type(func) is not cst.Name:
            return False
        local = ctx.memo(_local_definitions, lambda: _local_definitions(ctx))
        node = local.get(last)
        if type(node) is cst.ClassDef:
            return self._is_module_class(node, local, 0)
        if type(node) is cst.FunctionDef and depth < 2:
            inner = ctx.scopes.get(node)
            return any(self._builds_model(n, depth + 1, inner) for n in calls_that_run(node.body))
        return False

    def _is_module_class(
        self, node: cst.ClassDef, local: dict[str, cst.CSTNode], depth: int
    ) -> bool:
        """A class of this file deriving from ``nn.Module`` (a model class of a library, or of
        this file, counts by its name: ``PreTrainedModel``, ``LightningModule``)."""
        for base in node.bases:
            names = self.ctx.qnames(base.value, self.ctx.root_scope)
            if names & set(_MODEL_BASES) or any(
                n.rsplit(".", 1)[-1].endswith(_MODEL_BASE_WORDS) for n in names
            ):
                return True
            if type(base.value) is cst.Name and not names and depth < 5:
                parent = local.get(base.value.value)
                if type(parent) is cst.ClassDef and self._is_module_class(parent, local, depth + 1):
                    return True
        return False


def _find_seeders(rule: SeedBeforeModel) -> dict[str, cst.FunctionDef]:
    """The module-level functions of ``rule``'s file that pass one of their parameters to a seed
    of ``rule.seeds``, by name."""
    ctx = rule.ctx
    out: dict[str, cst.FunctionDef] = {}
    for stmt in ctx.module.body:
        if type(stmt) is not cst.FunctionDef:
            continue
        params = {p.name.value for p in stmt.params.params}
        scope = ctx.scopes.get(stmt)
        for n in iter_nodes(stmt.body):
            if (
                type(n) is cst.Call
                and ctx.qnames(n.func, scope) & rule.seeds
                and any(
                    type(m) is cst.Name and m.value in params
                    for a in n.args
                    for m in iter_nodes(a.value)
                )
            ):
                out.setdefault(stmt.name.value, stmt)
                break
    return out


def _local_definitions(ctx: FileContext) -> dict[str, cst.CSTNode]:
    """The module-level functions and classes of the file, by name (the first of each name)."""
    out: dict[str, cst.CSTNode] = {}
    for stmt in ctx.module.body:
        if type(stmt) is cst.FunctionDef or type(stmt) is cst.ClassDef:
            out.setdefault(stmt.name.value, stmt)
    return out
