"""Removed and deprecated torch_xla APIs and environment variables.

Versions and replacements were checked against the installed torch_xla 2.9.0 and the
pytorch/xla git history (release tags ``v2.0.0`` .. ``v2.9.0``); each rule's explanation
names the file and commit.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis import apis
from ..analysis.apis import REMOVED_ATTRS, REMOVED_MODULES
from ..analysis.context import FileContext, find_arg, literal_string, parse_expression
from ..analysis.names import (
    Scope,
    dotted_name,
    lookup,
    names_bound_in_expressions_or_rebound,
    top_level_imports,
)
from ..analysis.walk import calls_in
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid

# -- shared helpers ---------------------------------------------------------------

_SETENV_CALLS = {"os.environ.setdefault", "os.putenv", "os.environ.__setitem__"}


def env_assignments(ctx: FileContext, node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    """Environment variables ``node`` sets in code, as ``(name, node to report)``.

    Forms: ``os.environ["X"] = v`` (an Assign), ``os.environ.setdefault("X", v)``,
    ``os.putenv("X", v)``, ``os.environ.update({"X": v})`` and ``os.environ.update(X=v)``
    (Calls), under any alias of ``os``/``os.environ``. Only literal names are seen.
    """
    if type(node) is cst.Assign:
        for target in node.targets:
            t = target.target
            if (
                type(t) is cst.Subscript
                and len(t.slice) == 1
                and "os.environ" in ctx.qnames(t.value)
            ):
                index = t.slice[0].slice
                if type(index) is cst.Index:
                    key = literal_string(index.value)
                    if key is not None:
                        yield key, t
        return
    if type(node) is not cst.Call:
        return
    names = ctx.qnames(node.func)
    if not names:
        return
    if names & _SETENV_CALLS:
        arg = find_arg(node, None, 0)
        key = literal_string(arg.value) if arg is not None else None
        if key is not None:
            yield key, node
    elif "os.environ.update" in names:
        yield from _update_keys(node)


def _dict_keys(node: cst.Dict) -> Iterator[tuple[str, cst.CSTNode]]:
    """``(key, element)`` for each literal string key of a dict display."""
    for element in node.elements:
        if isinstance(element, cst.DictElement):
            key = literal_string(element.key)
            if key is not None:
                yield key, element


def _update_keys(call: cst.Call) -> Iterator[tuple[str, cst.CSTNode]]:
    """The keys an ``x.update({"K": v}, K2=v)`` call writes: a dict display's literal keys and keywords."""
    first = find_arg(call, None, 0)
    if first is not None and isinstance(first.value, cst.Dict):
        yield from _dict_keys(first.value)
    for arg in call.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg


# Calls that start a child process with the environment passed as `env=` (or, for `os.exec*e`,
# the positional argument at this index).
_CHILD_PROCESS_CALLS = {
    "subprocess.run": None,
    "subprocess.Popen": None,
    "subprocess.call": None,
    "subprocess.check_call": None,
    "subprocess.check_output": None,
    "asyncio.create_subprocess_exec": None,
    "asyncio.create_subprocess_shell": None,
    "os.posix_spawn": 2,
    "os.posix_spawnp": 2,
    "os.execve": 2,
    "os.execvpe": 2,
}


def _environ_copy(ctx: FileContext, node: cst.CSTNode | None, scope: Scope | None = None) -> bool:
    """``os.environ.copy()``, ``dict(os.environ, ...)``, ``copy.copy(os.environ)`` or
    ``{**os.environ, ...}``: a new dict holding the current environment (names read in ``scope``,
    default the node being visited's)."""
    if type(node) is cst.Dict:
        return any(
            type(e) is cst.StarredDictElement and "os.environ" in ctx.qnames(e.value, scope)
            for e in node.elements
        )
    if type(node) is not cst.Call:
        return False
    names = ctx.qnames(node, scope)
    if "os.environ.copy" in names:
        return True
    if names & {"builtins.dict", "copy.copy", "copy.deepcopy"}:
        first = find_arg(node, None, 0)
        return first is not None and "os.environ" in ctx.qnames(first.value, scope)
    return False


def _child_env_arg(
    ctx: FileContext, call: cst.Call, scope: Scope | None = None
) -> cst.BaseExpression | None:
    """The environment ``call`` gives a child process (``subprocess.run(..., env=env)``), else None."""
    names = ctx.qnames(call, scope)
    if not names:
        return None
    for name, position in _CHILD_PROCESS_CALLS.items():
        if name in names:
            arg = find_arg(call, "env", position)
            return arg.value if arg is not None else None
    return None


def _child_env_names(ctx: FileContext) -> dict[int, frozenset[str]]:
    """Per function (by id; the module for module-level code): the names and ``self.``
    attributes holding an environment for a child process: assigned a copy of ``os.environ``
    (:func:`_environ_copy`) or passed as ``env=`` to a process-starting call. Once per file."""

    def compute() -> dict[int, frozenset[str]]:
        found: dict[int, set[str]] = {}
        owners: list[cst.CSTNode] = [ctx.module]
        scopes = [ctx.root_scope]
        # (end of its subtree in flat, pushed a scope, pushed an owner) per open def/class
        opened: list[tuple[int, bool, bool]] = []
        flat = ctx.flat
        nodes, ends = flat.nodes, flat.ends

        def add(target: cst.CSTNode) -> None:
            key = dotted_name(target)
            if key is not None:
                found.setdefault(id(owners[-1]), set()).add(key)

        for i in flat.of_types(_CHILD_ENV_TYPES):
            while opened and opened[-1][0] <= i:
                _, scoped, owned = opened.pop()
                if scoped:
                    scopes.pop()
                if owned:
                    owners.pop()
            node = nodes[i]
            if type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
                scope = ctx.scopes.get(node)
                if scope is not None:
                    scopes.append(scope)
                if type(node) is cst.FunctionDef:
                    owners.append(node)
                opened.append((ends[i], scope is not None, type(node) is cst.FunctionDef))
            elif type(node) is cst.Assign:
                if _environ_copy(ctx, node.value, scopes[-1]):
                    for t in node.targets:
                        add(t.target)
            elif type(node) is cst.Call:
                value = _child_env_arg(ctx, node, scopes[-1])
                if value is not None and "os.environ" not in ctx.qnames(value, scopes[-1]):
                    add(value)  # (`env=os.environ` itself is XLA304's ordinary case)
        return {k: frozenset(v) for k, v in found.items()}

    return ctx.memo(_child_env_names, compute)


# What _child_env_names looks at: the nodes that open a scope or an owner, and the two it reads.
_CHILD_ENV_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Assign, cst.Call})


def child_env_assignments(ctx: FileContext, node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    """Environment variables ``node`` writes into an environment meant for a child process, as
    ``(name, node to report)``: ``env["X"] = v``, ``env.update({"X": v})``/``update(X=v)`` or
    ``env.setdefault("X", v)`` on a name :func:`_child_env_names` knows, ``dict(os.environ, X=v)``,
    a ``{**os.environ, "X": v}`` literal, and a dict literal passed as ``env=`` to a
    process-starting call. Only literal names are seen."""
    if type(node) is cst.Assign:
        for target in node.targets:
            t = target.target
            if (
                type(t) is cst.Subscript
                and len(t.slice) == 1
                and type(t.slice[0].slice) is cst.Index
                and _is_child_env(ctx, t.value)
            ):
                key = literal_string(t.slice[0].slice.value)
                if key is not None:
                    yield key, t
        return
    if type(node) is cst.Dict:
        parent, call = ctx.parent(), ctx.parent(2)
        passed = (
            type(parent) is cst.Arg and type(call) is cst.Call and _child_env_arg(ctx, call) is node
        )
        if passed or _environ_copy(ctx, node):
            yield from _dict_keys(node)
        return
    if type(node) is not cst.Call:
        return
    if "builtins.dict" in ctx.qnames(node) and _environ_copy(ctx, node):
        for arg in node.args:
            if arg.keyword is not None:
                yield arg.keyword.value, arg
        return
    func = node.func
    if (
        type(func) is cst.Attribute
        and func.attr.value in ("update", "setdefault")
        and _is_child_env(ctx, func.value)
    ):
        first = find_arg(node, None, 0)
        if func.attr.value == "setdefault":
            key = literal_string(first.value) if first is not None else None
            if key is not None:
                yield key, node
            return
        yield from _update_keys(node)


def _is_child_env(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is a name (or ``self.`` attribute) holding a child-process environment in the
    function being visited (:func:`_child_env_names`)."""
    key = dotted_name(node)
    if key is None:
        return False
    owner = next(ctx.enclosing(cst.FunctionDef), ctx.module)
    return key in _child_env_names(ctx).get(id(owner), frozenset())


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _handler_catches(handler: cst.ExceptHandler | cst.ExceptStarHandler, wanted: set[str]) -> bool:
    if handler.type is None:
        return True  # bare except
    types = (
        handler.type.elements
        if isinstance(handler.type, cst.Tuple)
        else [cst.Element(handler.type)]
    )
    for el in types:
        name = dotted_name(el.value)
        if name is not None and name.split(".")[-1] in wanted:
            return True
    return False


# Handlers that catch everything: around a few statements a shim, around a routine its error
# handling (vision_transformers_torch_xla utils/__init__.py: `xm.xrt_world_size()` in a 30-line
# distributed set-up whose `except Exception:` falls back to one device on every replica).
_BROAD = frozenset({"Exception", "BaseException"})
_SHIM_STATEMENTS = 3


def _short(body: cst.BaseSuite) -> bool:
    """A ``try`` body of at most :data:`_SHIM_STATEMENTS` statements (its own, not nested ones)."""
    return not isinstance(body, cst.IndentedBlock) or len(body.body) <= _SHIM_STATEMENTS


def in_compat_shim(ctx: FileContext, errors: set[str], attribute: str | None = None) -> bool:
    """True when the node being visited is a deliberate compatibility shim.

    That is: it sits in the body of a ``try:`` whose handler catches one of ``errors``
    (``except ImportError:`` around an import of the old path; a handler that catches
    everything, ``except Exception:`` or a bare ``except:``, only around a body of at most
    three statements: around a longer one it is the routine's error handling, and the
    removed name's error sends every run to the fallback), in such a handler (the
    old path as the fallback of the new one), or, for an attribute,
    under ``if hasattr(x, "attribute"):``. Stops at the enclosing function or lambda.
    """
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node, child = stack[i], stack[i + 1]
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(node, (cst.Try, cst.TryStar)) and child is node.body:
            narrow = errors - _BROAD
            if any(_handler_catches(h, narrow) for h in node.handlers if h.type is not None):
                return True
            if _short(node.body) and any(_handler_catches(h, errors) for h in node.handlers):
                return True
        if isinstance(node, cst.ExceptHandler) and _handler_catches(node, errors):
            return True  # the fallback of `try: <new path> except ImportError: <old path>`
        if attribute is not None and isinstance(node, (cst.If, cst.IfExp)) and child is node.body:
            for sub in calls_in(node.test):
                if (
                    isinstance(sub.func, cst.Name)
                    and sub.func.value == "hasattr"
                    and len(sub.args) >= 2
                    and literal_string(sub.args[1].value) == attribute
                ):
                    return True
    return False


def _version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def _fix_name_ok(ctx: FileContext, head: str) -> bool:
    """True when a fix may write ``head.something`` here and add ``import head`` at the top.

    ``head`` (``"torch_xla"``) must be free or bound only by an unconditional module-level
    import above the statement being fixed, and the file must already import some
    ``head`` module unconditionally above it: a file that imports torch_xla inside
    ``try/except ImportError``, under ``if TYPE_CHECKING:`` or inside a function would
    otherwise gain a hard dependency at its top (and fail to import without torch_xla).
    Names bound where :class:`~xla_lint.analysis.names.BindingCollector` does not look
    (:func:`_unsafe_names`) are refused.
    """
    if head in _unsafe_names(ctx):
        return False
    before = _imports_above(ctx)
    if not any(m == head or m.startswith(head + ".") for _, modules in before for m in modules):
        return False
    found = lookup(head, ctx.scope)
    if not found:
        return True
    return found == {head} and any(head in names for names, _ in before)


def _torch_xla_api(ctx: FileContext, func: str) -> tuple[str, tuple[tuple[str, None], ...]] | None:
    """How a fix writes ``torch_xla.<func>`` here, and the import it needs: through a name
    already bound to torch_xla (``tx.sync`` after ``import torch_xla as tx``; nothing to add),
    else ``torch_xla.<func>`` with ``import torch_xla`` added (when :func:`_fix_name_ok`).
    None: no fix can name it safely."""
    alias = _module_alias(ctx, "torch_xla")
    if alias is not None:
        return f"{alias}.{func}", ()
    if _fix_name_ok(ctx, "torch_xla"):
        return f"torch_xla.{func}", (("torch_xla", None),)
    return None


def _module_alias(ctx: FileContext, module: str) -> str | None:
    """A name bound to exactly ``module`` by an unconditional module-level import above the
    statement being fixed, and nowhere else (``xr`` for ``import torch_xla.runtime as xr``)."""
    unsafe = _unsafe_names(ctx)
    for names, _ in _imports_above(ctx):
        for name in names:
            if (
                name not in unsafe
                and ctx.root_scope.bindings.get(name) == {module}
                and lookup(name, ctx.scope) == {module}
            ):
                return name
    return None


def _imports_above(ctx: FileContext) -> list[tuple[frozenset[str], frozenset[str]]]:
    """``(names bound, modules named)`` of each import statement at the module's top level
    (not under ``if``/``try``/``def``) before the top-level statement being visited."""
    imports, before = ctx.memo("top-level-imports", lambda: _import_prefixes(ctx.module))
    current = ctx.stack[1] if len(ctx.stack) > 1 else None
    return imports[: before.get(id(current), len(imports))]


def _import_prefixes(
    module: cst.Module,
) -> tuple[list[tuple[frozenset[str], frozenset[str]]], dict[int, int]]:
    """The module's top-level imports in order, and for each top-level statement (by ``id``) how
    many of them come before it: one pass, so a file with thousands of findings that each ask
    what is imported above them stays linear (it took 7 s of 13 on a 400 KB file)."""
    imports: list[tuple[frozenset[str], frozenset[str]]] = []
    before: dict[int, int] = {}
    for statement, names, modules in top_level_imports(module):
        before[id(statement)] = len(imports)
        if names or modules:
            imports.append((names, modules))
    return imports, before


def _unsafe_names(ctx: FileContext) -> frozenset[str]:
    """:func:`~xla_lint.analysis.names.names_bound_in_expressions_or_rebound` of the file, once per file
    (on the first fix asked): names a fix must not write."""
    return ctx.memo(
        "unsafe-names", lambda: names_bound_in_expressions_or_rebound(ctx.module, ctx.flat)
    )


def _call_with(node: cst.Call, func: str, args: list[cst.Arg]) -> cst.Call:
    """``node`` calling ``func`` (dotted text) with ``args``; the last argument loses a dangling comma
    only when arguments were dropped."""
    if (
        args
        and len(args) < len(node.args)
        and node.args
        and not isinstance(node.args[-1].comma, cst.Comma)
    ):
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(func=parse_expression(func), args=args)


# -- XLA013 -----------------------------------------------------------------------

_ATTRIBUTES = frozenset({cst.Attribute})

# The table of removed modules and attributes lives in xla_lint/analysis/apis.py (guards.py reads it too).
XLA_COMPILE_API = "torch_xla.compile"
_REMOVED_ATTR_NAMES = frozenset(n.rsplit(".", 1)[1] for n in REMOVED_ATTRS)
# f6409de358 "Delete XRT from the main branch (#5240)", first in v2.1.0: no XRT_* variable is read.
XRT_REMOVED_IN = (2, 1)
# 7d41035b89 "remove XLA_USE_BF16 and other variants (#7582)", first in v2.5.0: the FP16 variables
# are no longer read by torch_xla/csrc/dtype.cpp; torch_xla/__init__.py only warns about them.
REMOVED_ENV = {"XLA_USE_FP16": (2, 5), "XLA_DOWNCAST_FP16": (2, 5)}


class RemovedApi(Rule):
    code = "XLA013"
    name = "removed-api"
    summary = "A torch_xla module, function or environment variable removed in the target version."
    message = "`{old}` was removed in torch_xla {version}; {use}"
    severity = Severity.ERROR
    version_guarded = "removed"  # a `try` that catches the ImportError is a guard too
    fixable = True
    explanation = """\
## What it does
Flags names that no longer exist in the torch_xla version linted for (`target-version`,
default 2.9), each only from the release that removed it:

| Name | Removed in | Use instead |
|---|---|---|
| `torch_xla.experimental.xla_sharding` | 2.5 | `torch_xla.distributed.spmd` |
| `torch_xla.experimental.xla_sharded_tensor` | 2.5 | `torch_xla.distributed.spmd` |
| `torch_xla.experimental.pjrt` | 2.5 | `torch_xla.runtime` |
| `torch_xla.distributed.xla_dist` | 2.1 | run the script on every host (`gcloud ... ssh --worker=all`) |
| `xm.xrt_world_size()` | 2.7 | `torch_xla.runtime.world_size()` |
| `xm.get_ordinal()` | 2.7 | `torch_xla.runtime.global_ordinal()` |
| `xm.parse_xla_device()` | 2.7 | (no public replacement) |
| `torch_xla.experimental.compile` | 2.7 | `torch_xla.compile` |
| `xla_builder.jax_func_to_xla_computation` | 2.8 | `xb.call_jax(jax_func, args, kwargs)` |
| `XRT_*` variables (`XRT_TPU_CONFIG`, ...) set in code | 2.1 | `PJRT_DEVICE=TPU` |
| `XLA_USE_FP16`, `XLA_DOWNCAST_FP16` set in code | 2.5 | cast the model (`model.half()`) or autocast |

Imports are reported at the import statement (the import itself fails); functions at the
call or reference. An import or call inside `try:` whose `except` catches `ImportError`
(`ModuleNotFoundError`, `AttributeError` for attributes) is a compatibility shim and is not
reported, nor is a use under `if hasattr(xm, "name"):`. A handler that catches everything
(`Exception`, a bare `except:`) makes a shim only around a `try` body of at most three
statements; around a longer one (a whole distributed set-up) it is the routine's error
handling, and the removed name sends every run to the fallback, so it is reported.
Nor is code that never runs on the target version (`xla_lint/analysis/guards.py`): the old-version
branch of a version test (`if _XLA_GREATER_EQUAL_2_1: ... else: <old API>`,
`version.parse(torch_xla.__version__) < version.parse("2.5")`, `RequirementCache("torch_xla>=2.1")`),
or the statements after `if <new version>: return <new API>`.

In shell scripts (`*.sh`, `*.bash`, a `#!/bin/bash` first line; read as bash would, see
`xla_lint/pipeline/shell.py`): a command that runs a removed module
(`python -m torch_xla.distributed.xla_dist --tpu=NAME -- python train.py`, or `accelerate
launch --tpu --tpu_cluster`, whose `tpu_pod_launcher` imports it), at the command's line,
and an `XRT_*`/`XLA_USE_FP16` variable set for a command that runs Python, at the line that
sets it (`export XRT_TPU_CONFIG=...`). `# noqa: XLA013` in a shell comment suppresses it.

## Why is this bad
Each of these raises at once (`ModuleNotFoundError`, `ImportError`, `AttributeError`), or,
for environment variables, is silently ignored: the job runs without what it asked for.
Checked against torch_xla 2.9.0 and the pytorch/xla history:
- `torch_xla/distributed/xla_dist.py`, the XRT pod launcher (`python -m
  torch_xla.distributed.xla_dist --tpu=NAME -- python train.py`, importable as
  `xla_dist.get_args_parser`/`resolve_and_execute`), was deleted with XRT (f6409de358,
  #5240; last shipped in v2.0.0): absent from v2.1.0 on and from the installed 2.9.0, so
  `python -m torch_xla.distributed.xla_dist ...` fails at once with `No module named
  torch_xla.distributed.xla_dist` (run on CPU). PJRT needs no launcher: the script runs on
  every host (`docs/source/learn/_pjrt.md`). accelerate's `tpu_pod_launcher`
  (`accelerate/commands/launch.py`, `--tpu_cluster`) still imports it.
- `torch_xla/experimental/` has no `xla_sharding.py`, `xla_sharded_tensor.py` or `pjrt.py`
  (removed by commits d028176a0c, #7499, and ed15ea1e7f, #7579, both first in v2.5.0;
  until 2.4 they were `import *` shims over `torch_xla.distributed.spmd.*` and `torch_xla.runtime`).
- `torch_xla/core/xla_model.py` no longer defines `xrt_world_size`, `get_ordinal` or
  `parse_xla_device` (2.5 and 2.6 kept them as deprecated aliases of `runtime.world_size`
  and `runtime.global_ordinal`, "will be removed in release 2.7"; removed by da7fdca2d2, #8939, v2.7.0).
- `torch_xla/core/xla_builder.py` had `jax_func_to_xla_computation` only in 2.7 (53b3ab8140,
  #8789); 1784a081d3 (#9354, v2.8.0) folded it into `call_jax`, which builds, caches and runs
  the computation: `from torch_xla.core.xla_builder import jax_func_to_xla_computation` raises
  `ImportError` on 2.8 and 2.9.0.
- XRT was deleted before 2.1 (f6409de358, #5240): no `XRT_*` string is left in the 2.9.0 Python
  sources or in `_XLAC.so`, so `XRT_TPU_CONFIG` configures nothing.
- `torch_xla/__init__.py` `_check_deprecated_env_var` only warns about `XLA_USE_FP16` and
  `XLA_DOWNCAST_FP16`; since 7d41035b89 (#7582, v2.5.0) `torch_xla/csrc/dtype.cpp` reads only
  the BF16 variables, so the model runs in float32 (see XLA304 for those).

## Example
```python
import torch_xla.core.xla_model as xm
import torch_xla.experimental.xla_sharding as xs

world = xm.xrt_world_size()
```

## Use instead
```python
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs
import torch_xla.runtime

world = torch_xla.runtime.world_size()
```
The fix rewrites an import of a removed module when it has exactly one replacement: to
`torch_xla.distributed.spmd` (or `torch_xla.runtime`) when every name the file takes
from it exists there, else to the module the old one re-exported
(`torch_xla.distributed.spmd.xla_sharding`). `xm.xrt_world_size()` and `xm.get_ordinal()`
become `torch_xla.runtime.world_size()` / `global_ordinal()` (through an existing
`import torch_xla.runtime as xr` when there is one, else adding `import torch_xla.runtime`);
their old `defval` argument has no counterpart, so calls passing it are not fixed.
`torch_xla.experimental.compile` becomes `torch_xla.compile` (2.6's version was
`return torch_xla.compile(func)`).
In an SPMD program, prefer `xr.process_index()`/`xr.process_count()` (see XLA005).

## References
- https://github.com/pytorch/xla/pull/7499, https://github.com/pytorch/xla/pull/7579,
  https://github.com/pytorch/xla/pull/8927, https://github.com/pytorch/xla/pull/5240
- https://docs.pytorch.org/xla/master/learn/pjrt.html (running on TPU pods without `xla_dist`)
- torch_xla 2.9.0 `torch_xla/core/xla_model.py`, `torch_xla/__init__.py`, `torch_xla/runtime.py`
"""
    valid = (
        Valid(
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.runtime as xr\nn = xr.world_size()\n"
        ),
        Valid(
            "try:\n    import torch_xla.distributed.spmd as xs\nexcept ImportError:\n"
            "    import torch_xla.experimental.xla_sharding as xs\n"
        ),
        Valid(
            "try:\n    from torch_xla.experimental.xla_sharding import Mesh\nexcept ImportError:\n"
            "    from torch_xla.distributed.spmd import Mesh\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\n"
            "try:\n    n = xm.xrt_world_size()\nexcept AttributeError:\n    n = 1\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "n = xm.xrt_world_size() if hasattr(xm, 'xrt_world_size') else xr.world_size()\n"
        ),
        Valid(
            "import torch_xla\nclass Trainer:\n    def get_ordinal(self):\n        return 0\n"
            "Trainer().get_ordinal()\n"
        ),
        Valid("import os\nimport torch_xla\nos.environ['PJRT_DEVICE'] = 'TPU'\n"),
        Valid("import torch_xla.experimental.pjrt_backend\n"),
        Valid("import torch_xla\nn = torch_xla.experimental.eager_mode(True)\n"),
        # Version guards (xla_lint/analysis/guards.py): the old-version branch never runs on the target.
        Valid(
            "from lightning_utilities.core.imports import RequirementCache\nimport torch_xla.core.xla_model as xm\n"
            "_XLA_GREATER_EQUAL_2_1 = RequirementCache('torch_xla>=2.1')\ndef world_size():\n"
            "    if _XLA_GREATER_EQUAL_2_1:\n        import torch_xla.runtime as xr\n        return xr.world_size()\n"
            "    return xm.xrt_world_size()\n"
        ),
        Valid(
            "import torch\nfrom packaging import version\n"
            "if version.parse(torch.__version__) < version.parse('2.1'):\n"
            "    import torch_xla.experimental.pjrt as xr\nelse:\n    import torch_xla.runtime as xr\n"
        ),
        Valid(
            "from mylib.imports import _XLA_GREATER_EQUAL_2_1\nimport torch_xla.core.xla_model as xm\n"
            "import torch_xla.runtime as xr\nn = xr.world_size() if _XLA_GREATER_EQUAL_2_1 else xm.xrt_world_size()\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "if hasattr(xr, 'global_ordinal'):\n    r = xr.global_ordinal()\nelse:\n    r = xm.get_ordinal()\n"
        ),
        # neuronx-nemo-megatron megatron_init.py: the version split into a tuple of numbers.
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "if tuple(map(int, torch.__version__.split('.')[:2])) >= tuple(map(int, '2.1'.split('.'))):\n"
            "    n = 1\nelse:\n    n = xm.xrt_world_size()\n"
        ),
        # A broad handler around a short try is a shim too.
        Valid(
            "import torch_xla.core.xla_model as xm\n"
            "try:\n    rank = xm.get_ordinal()\n    n = xm.xrt_world_size()\nexcept Exception:\n"
            "    rank, n = 0, 1\n"
        ),
    )
    invalid = (
        # A broad handler around a whole set-up routine is its error handling, not a shim: the
        # removed name's AttributeError sends every run to the one-device fallback.
        Invalid(
            "import torch.distributed as dist\nimport torch_xla.core.xla_model as xm\n"
            "def init(args):\n    try:\n        dist.init_process_group('xla', init_method='xla://')\n"
            "        args.rank = dist.get_rank()\n        args.distributed = True\n"
            "        print(f'ordinal {xm.get_ordinal()} of {xm.xrt_world_size()}')\n"
            "    except Exception:\n        args.rank, args.distributed = 0, False\n",
            (8, 8),
        ),
        Invalid(
            "import torch_xla.experimental.xla_sharding as xs\nmesh = xs.Mesh(ids, (4, 2))\n"
            "xs.mark_sharding(t, mesh, (0, 1))\n",
            (1,),
            fixed="import torch_xla.distributed.spmd as xs\nmesh = xs.Mesh(ids, (4, 2))\n"
            "xs.mark_sharding(t, mesh, (0, 1))\n",
        ),
        Invalid(
            "from torch_xla.experimental.xla_sharding import Mesh, mark_sharding\n",
            (1,),
            fixed="from torch_xla.distributed.spmd import Mesh, mark_sharding\n",
        ),
        Invalid(
            "from torch_xla.experimental.xla_sharding import MarkShardingFunction\n",
            (1,),
            fixed="from torch_xla.distributed.spmd.xla_sharding import MarkShardingFunction\n",
        ),
        Invalid(
            "from torch_xla.experimental import xla_sharding as xs\nxs.get_1d_mesh('data')\n",
            (1,),
            fixed="from torch_xla.distributed import spmd as xs\nxs.get_1d_mesh('data')\n",
        ),
        Invalid(
            "import torch_xla.experimental.pjrt as pjrt\nn = pjrt.global_device_count()\n",
            (1,),
            fixed="import torch_xla.runtime as pjrt\nn = pjrt.global_device_count()\n",
        ),
        Invalid("import torch_xla.experimental.xla_sharded_tensor\n", (1,)),
        Invalid(
            "import torch_xla.core.xla_model as xm\nn = xm.xrt_world_size()\nr = xm.get_ordinal()\n",
            (2, 3),
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla.runtime\n\n"
            "n = torch_xla.runtime.world_size()\nr = torch_xla.runtime.global_ordinal()\n",
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "if xm.get_ordinal() == 0:\n    pass\n",
            (3,),
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "if xr.global_ordinal() == 0:\n    pass\n",
        ),
        Invalid("from torch_xla.core.xla_model import xrt_world_size as ws\nn = ws()\n", (1,)),
        Invalid(
            "import torch_xla.core.xla_model as xm\nx = xm.get_ordinal()\nimport torch_xla.runtime as xr\n",
            (2,),  # `xr` is bound only below the call: the fix spells the module out
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla.runtime\n\n"
            "x = torch_xla.runtime.global_ordinal()\nimport torch_xla.runtime as xr\n",
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "r = [xm.get_ordinal() for xr in range(2)]\n",
            (3,),  # `xr` is the loop's here
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\nimport torch_xla.runtime\n\n"
            "r = [torch_xla.runtime.global_ordinal() for xr in range(2)]\n",
        ),
        Invalid(
            "import torch_xla.experimental\nstep_fn = torch_xla.experimental.compile(step_fn)\n",
            (2,),
            # `import torch_xla.experimental` binds `torch_xla` itself: nothing to add.
            fixed="import torch_xla.experimental\nstep_fn = torch_xla.compile(step_fn)\n",
        ),
        Invalid(
            "import os\nimport torch_xla\nos.environ['XRT_TPU_CONFIG'] = 'localservice;0;localhost:51011'\n"
            "os.environ.update(XLA_USE_FP16='1')\n",
            (3, 4),
        ),
        # huggingface/accelerate src/accelerate/commands/launch.py, tpu_pod_launcher
        Invalid(
            "import torch_xla\ndef tpu_pod_launcher(args):\n    from torch_xla.distributed import xla_dist\n"
            "    new_args = xla_dist.get_args_parser().parse_args(argv)\n"
            "    xla_dist.resolve_and_execute(new_args)\n",
            (3,),
        ),
        # IsNoobgrammer/Optimized-Attention-Torch-XLA splash.py: a 2.7-only helper
        Invalid(
            "import torch_xla.core.xla_builder as xb\n"
            "from torch_xla.core.xla_builder import jax_func_to_xla_computation\n"
            "c = xb.jax_func_to_xla_computation(f, args, {})\n",
            (2, 3),
        ),
        Invalid(
            "import torch_xla.distributed.xla_dist as xla_dist\n"
            "from torch_xla.distributed.xla_dist import resolve_and_execute\n",
            (1, 2),
        ),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._attr_uses: dict[str, set[str]] | None = None

    def _applies(self, removed_in: tuple[int, int]) -> bool:
        return self.ctx.target_version >= removed_in

    # -- imports ---------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            found = self._removed_module(full)
            if found is None:
                continue
            old, info = found
            if in_compat_shim(self.ctx, _IMPORT_ERRORS):
                continue
            fix = None
            if alias.asname is not None and full == old and isinstance(alias.asname.name, cst.Name):
                new = self._module_rewrite(info, alias.asname.name.value)
                if new is not None:
                    fix = PendingFix(f"import `{new}`", [Replacement(alias.name, new)])
            self.report(alias, self._msg(old, info), fix=fix)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        base = dotted_name(node.module)
        if base is None:
            return
        found = self._removed_module(base)
        if found is not None:
            old, info = found
            if in_compat_shim(self.ctx, _IMPORT_ERRORS):
                return
            fix = None
            if base == old and not isinstance(node.names, cst.ImportStar):
                taken = {dotted_name(a.name) for a in node.names}
                new = info.use if taken <= info.exports else info.exact
                if new is not None:
                    fix = PendingFix(f"import from `{new}`", [Replacement(node.module, new)])
            self.report(node, self._msg(old, info), fix=fix)
            return
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            full = f"{base}.{name}"
            removed = REMOVED_MODULES.get(full) or REMOVED_ATTRS.get(full)
            if removed is None or not self._applies(removed.removed_in):
                continue
            if in_compat_shim(self.ctx, _IMPORT_ERRORS):
                return
            fix = None
            if (
                full in REMOVED_MODULES
                and len(node.names) == 1
                and alias.asname is not None
                and isinstance(alias.asname.name, cst.Name)
            ):
                new = self._module_rewrite(removed, alias.asname.name.value)
                if new is not None:
                    parent, _, last = new.rpartition(".")
                    fix = PendingFix(
                        f"import `{new}`",
                        [Replacement(node.module, parent), Replacement(alias.name, last)],
                    )
            self.report(alias, self._msg(full, removed), fix=fix)

    def _removed_module(self, full: str) -> tuple[str, apis.Removed] | None:
        for old, info in REMOVED_MODULES.items():
            if (full == old or full.startswith(old + ".")) and self._applies(info.removed_in):
                return old, info
        return None

    def _module_rewrite(self, info: apis.Removed, alias: str) -> str | None:
        """The module an ``import old as alias`` can become: the public one when every
        ``alias.<name>`` the file uses exists there, else the exact one, else None."""
        used = self._uses_of(alias)
        if info.use is not None and used <= info.exports:
            return info.use
        return info.exact

    def _uses_of(self, alias: str) -> set[str]:
        if self._attr_uses is None:
            uses: dict[str, set[str]] = {}
            flat = self.ctx.flat
            for i in flat.of_types(_ATTRIBUTES):
                node = flat.nodes[i]
                if type(node) is cst.Attribute and type(node.value) is cst.Name:
                    uses.setdefault(node.value.value, set()).add(node.attr.value)
            self._attr_uses = uses
        return self._attr_uses.get(alias, set())

    @staticmethod
    def _msg(old: str, info: apis.Removed) -> str:
        use = f"use `{info.use}`" if info.use else info.hint or "it has no public replacement"
        return RemovedApi.message.format(old=old, version=_version(info.removed_in), use=use)

    # -- attributes and calls --------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _REMOVED_ATTR_NAMES:
            return
        parent = self.ctx.parent()
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # report the whole chain once, at its outermost attribute that matches
        if isinstance(parent, (cst.Import, cst.ImportFrom, cst.ImportAlias)):
            return
        names = self.ctx.qnames(node)
        for name in names:
            info = REMOVED_ATTRS.get(name)
            if info is None or not self._applies(info.removed_in):
                continue
            if in_compat_shim(
                self.ctx, {"AttributeError", "Exception", "BaseException"}, node.attr.value
            ):
                return
            short = name.replace(apis.XM + ".", "xm.")
            call = parent if isinstance(parent, cst.Call) and parent.func is node else None
            fix = self._call_fix(call, info)
            api = (
                _torch_xla_api(self.ctx, "compile")
                if fix is None and info.use == XLA_COMPILE_API
                else None
            )
            if api is not None:
                fix = PendingFix(f"use `{api[0]}`", [Replacement(node, api[0])], add_imports=api[1])
            self.report(call or node, self._msg(short, info), fix=fix)
            return

    def _call_fix(self, call: cst.Call | None, info: apis.Removed) -> PendingFix | None:
        if call is None or call.args or info.use is None or not info.use.startswith(apis.XR + "."):
            return None
        func = info.use.rsplit(".", 1)[1]
        alias = _module_alias(self.ctx, apis.XR)
        if alias is not None:
            return PendingFix(f"call `{alias}.{func}()`", [Replacement(call, f"{alias}.{func}()")])
        if not _fix_name_ok(self.ctx, "torch_xla"):
            return None
        return PendingFix(
            f"call `{info.use}()`",
            [Replacement(call, f"{info.use}()")],
            add_imports=((apis.XR, None),),
        )

    # -- environment -----------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        self._env(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._env(node)

    def _env(self, node: cst.CSTNode) -> None:
        for key, where in env_assignments(self.ctx, node):
            if key.startswith("XRT_") and self._applies(XRT_REMOVED_IN):
                self.report(
                    where,
                    f"`{key}` configured the XRT runtime, removed in torch_xla "
                    f"{_version(XRT_REMOVED_IN)}; nothing reads it. Select the PJRT device "
                    "with `PJRT_DEVICE=TPU` (or CPU/CUDA)",
                )
            elif key in REMOVED_ENV and self._applies(REMOVED_ENV[key]):
                self.report(
                    where,
                    f"`{key}` has had no effect since torch_xla {_version(REMOVED_ENV[key])} "
                    "(only a deprecation warning): the model stays float32; convert it "
                    "with `model.half()` or use autocast",
                )


# -- XLA301 / XLA302 ----------------------------------------------------------------

XLA_DEVICE = f"{apis.XM}.xla_device"
MARK_STEP = f"{apis.XM}.mark_step"


class DeprecatedXlaDevice(Rule):
    code = "XLA301"
    name = "deprecated-xla-device"
    summary = "xm.xla_device() is deprecated; use torch_xla.device()."
    message = "`xm.xla_device()` is deprecated since torch_xla 2.7; use `torch_xla.device()`"
    severity = Severity.WARNING
    version_guarded = True
    fixable = True
    explanation = """\
## What it does
Flags calls of `torch_xla.core.xla_model.xla_device` (`xm.xla_device()`, or the name
imported from `xla_model`). A project's own function called `xla_device` is not flagged.

## Why is this bad
In torch_xla 2.9.0 `xm.xla_device` is decorated `@deprecated("Use torch_xla.device instead")`
(`torch_xla/core/xla_model.py`): every call emits a `DeprecationWarning`, and the
function only forwards: `del devkind; return torch_xla.device(n)`. The `devkind`
argument is already ignored. Deprecated APIs are removed a few releases later (see
XLA013 for the ones that were).

## Example
```python
import torch_xla.core.xla_model as xm

device = xm.xla_device()
```

## Use instead
```python
import torch_xla

device = torch_xla.device()
```
`torch_xla.device(index=None)` (`torch_xla/torch_xla.py`) takes the same device index,
so the fix keeps `n` (positionally, or as `index=`) and drops `devkind`, which 2.9
ignores; it adds `import torch_xla` when the file lacks it. Calls passing `*args` or
`**kwargs` are not fixed.

## References
- https://docs.pytorch.org/xla/master/learn/api-guide.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`xla_device`), `torch_xla/torch_xla.py` (`device`)
"""
    valid = (
        Valid("import torch_xla\ndevice = torch_xla.device()\n"),
        Valid("import torch_xla\ndef xla_device():\n    return 'xla'\ndevice = xla_device()\n"),
        Valid("import torch_xla\nfrom mylib.devices import xla_device\nd = xla_device()\n"),
    )
    invalid = (
        Invalid(
            "import torch_xla.core.xla_model as xm\ndevice = xm.xla_device()\n",
            (2,),
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla\n\ndevice = torch_xla.device()\n",
        ),
        Invalid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\nd = xm.xla_device(n=1, devkind='TPU')\n",
            (3,),
            fixed="import torch_xla\nimport torch_xla.core.xla_model as xm\nd = torch_xla.device(index=1)\n",
        ),
        Invalid(
            "from torch_xla.core.xla_model import xla_device\nd = xla_device(0)\n",
            (2,),
            fixed="from torch_xla.core.xla_model import xla_device\nimport torch_xla\n\nd = torch_xla.device(0)\n",
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\ndef f(torch_xla):\n    return xm.xla_device()\n",
            (3,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nf = lambda torch_xla: xm.xla_device()\n",
            (2,),
            fixed="import torch_xla.core.xla_model as xm\nf = lambda torch_xla: xm.xla_device()\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, XLA_DEVICE):
            return
        self.report(node, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> PendingFix | None:
        api = _torch_xla_api(self.ctx, "device")
        if any(a.star for a in node.args) or api is None:
            return None
        args = []
        for i, arg in enumerate(node.args):
            if arg.keyword is None:
                if i > 0:
                    return None  # positional devkind
                args.append(arg)
            elif arg.keyword.value == "n":
                args.append(arg.with_changes(keyword=cst.Name("index")))
            elif arg.keyword.value != "devkind":
                return None
        return PendingFix(
            f"call `{api[0]}()`",
            [Replacement(node, _call_with(node, api[0], args))],
            add_imports=api[1],
        )


class DeprecatedMarkStep(Rule):
    code = "XLA302"
    name = "deprecated-mark-step"
    summary = "xm.mark_step() is deprecated; use torch_xla.sync()."
    message = "`xm.mark_step()` is deprecated; use `torch_xla.sync()` (or `with torch_xla.step():`)"
    severity = Severity.WARNING
    version_guarded = True
    fixable = True
    explanation = """\
## What it does
Flags calls of `torch_xla.core.xla_model.mark_step` (`xm.mark_step()` or the imported
name). A project's own `mark_step` is not flagged.

## Why is this bad
In torch_xla 2.9.0 `xm.mark_step` is `@deprecated("Use torch_xla.sync instead")` and its
whole body is `torch_xla.sync(wait, reset_scope)` (`torch_xla/core/xla_model.py`): a
`DeprecationWarning` per step, for the same effect.

## Example
```python
for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    xm.mark_step()
```

## Use instead
```python
for batch in loader:
    with torch_xla.step():
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
```
or `torch_xla.sync()` where `xm.mark_step()` was. `torch_xla.sync(wait=False,
reset_scope=True)` (`torch_xla/torch_xla.py`) has the same parameters in the same order,
so the fix keeps every argument and adds `import torch_xla` when missing. It is not offered
where torch_xla is imported only conditionally (`try/except ImportError`, `if TYPE_CHECKING:`)
or inside a function (a top-level import would make torch_xla a hard dependency), nor where
the name `torch_xla` is rebound (a comprehension, `:=`, `global`, `del`, ...).

## References
- https://docs.pytorch.org/xla/master/learn/api-guide.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`mark_step`), `torch_xla/torch_xla.py` (`sync`, `step`)
"""
    valid = (
        Valid("import torch_xla\ntorch_xla.sync()\n"),
        Valid(
            "import torch_xla\nclass Loop:\n    def mark_step(self):\n        pass\nLoop().mark_step()\n"
        ),
        Valid("import torch_xla\ndef mark_step():\n    pass\nmark_step()\n"),
    )
    invalid = (
        Invalid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n",
            (3,),
            fixed="import torch_xla\nimport torch_xla.core.xla_model as xm\ntorch_xla.sync()\n",
        ),
        Invalid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\n(  xm.mark_step()  )\n",
            (3,),
            fixed="import torch_xla\nimport torch_xla.core.xla_model as xm\n(  torch_xla.sync()  )\n",
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nxm.mark_step(wait=True)\n",
            (2,),
            fixed="import torch_xla.core.xla_model as xm\nimport torch_xla\n\ntorch_xla.sync(wait=True)\n",
        ),
        Invalid(
            "from torch_xla.core import xla_model\nfor b in data:\n    xla_model.mark_step()\n",
            (3,),
            fixed="from torch_xla.core import xla_model\nimport torch_xla\n\nfor b in data:\n"
            "    torch_xla.sync()\n",
        ),
        # `torch_xla` bound by a comprehension, `:=` or a `case` pattern: `torch_xla.sync()` would
        # call that value's method, so there is no fix (fixed == the source).
        *(
            Invalid(src, (line,), fixed=src)
            for src, line in (
                (
                    "import torch_xla.core.xla_model as xm\n[xm.mark_step() for torch_xla in range(2)]\n",
                    2,
                ),
                (
                    "import torch_xla.core.xla_model as xm\n{k: xm.mark_step() for k, torch_xla in d}\n",
                    2,
                ),
                ("import torch_xla.core.xla_model as xm\n(torch_xla := 3)\nxm.mark_step()\n", 3),
                (
                    "import torch_xla.core.xla_model as xm\nmatch v:\n    case [1, {'k': torch_xla}]:\n"
                    "        xm.mark_step()\n",
                    4,
                ),
                (
                    "import torch_xla.core.xla_model as xm\ndef g():\n    global torch_xla\n    torch_xla = 5\n"
                    "xm.mark_step()\n",
                    5,
                ),
                (
                    "import torch_xla\nimport torch_xla.core.xla_model as xm\ndel torch_xla\nxm.mark_step()\n",
                    4,
                ),
                # torch_xla is an optional or lazy import here: an `import torch_xla` added at the top
                # would make the module fail to import without it.
                (
                    "try:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n    xm = None\n"
                    "if xm is not None:\n    xm.mark_step()\n",
                    6,
                ),
                ("def f():\n    import torch_xla.core.xla_model as xm\n    xm.mark_step()\n", 3),
                # `import torch_xla` exists, but only below the call.
                ("import torch_xla.core.xla_model as xm\nxm.mark_step()\nimport torch_xla\n", 2),
            )
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, MARK_STEP):
            return
        fix = None
        api = _torch_xla_api(self.ctx, "sync")
        if api is not None:
            fix = PendingFix(
                f"call `{api[0]}()`",
                [Replacement(node, _call_with(node, api[0], list(node.args)))],
                add_imports=api[1],
            )
        self.report(node, fix=fix)


# -- XLA303 -------------------------------------------------------------------------

LAUNCH_KEYWORDS = ("fn", "args", "start_method")


class PreferLaunch(Rule):
    code = "XLA303"
    name = "prefer-launch"
    summary = "xmp.spawn(fn, args=...) is the old launcher; use torch_xla.launch(fn, args=...)."
    message = "use `torch_xla.launch(fn, args=...)` instead of `xmp.spawn`"
    severity = Severity.WARNING
    version_guarded = True
    fixable = True
    # xmp.spawn is not deprecated in 2.9: torch_xla.launch calls it (torch_xla/torch_xla.py, `launch`).
    default_enabled = False
    explanation = """\
## What it does
Flags `torch_xla.distributed.xla_multiprocessing.spawn(...)` (`xmp.spawn`) in programs
that are not SPMD programs (XLA007 covers launching an SPMD program this way).

Off by default: `xmp.spawn` is not deprecated in torch_xla 2.9.0. `torch_xla.launch`
is a thin wrapper that itself calls `xmp.spawn(fn, args=args, nprocs=nprocs,
start_method=start_method)` (`torch_xla/torch_xla.py`, `launch`), and
`xla_multiprocessing.spawn` carries no `@deprecated` marker and emits no warning
(`torch_xla/distributed/xla_multiprocessing.py`). Turn it on (`--extend-select XLA303`,
or `extend-select = ["XLA303"]` under `[tool.xla-lint]`) to move a code base to the
documented launcher.

## Why is this bad
It is a preference, not a bug: `torch_xla.launch` is the launcher torch_xla documents
since 2.5. In torch_xla 2.9.0 (`torch_xla/torch_xla.py`) it calls `xmp.spawn(fn, args=args, nprocs=nprocs,
start_method=start_method)` and, unlike `xmp.spawn`, also works under `torchrun`: when
`torch.distributed.is_torchelastic_launched()` it calls `fn(LOCAL_RANK, *args)` in the
process torchrun started instead of spawning more. `xmp.spawn`'s `join` and `daemon`
are accepted and ignored (`torch_xla/distributed/xla_multiprocessing.py` calls
`pjrt.spawn(fn, nprocs, start_method, args)`), and `nprocs` may only be 1 or None.

## Example
```python
import torch_xla.distributed.xla_multiprocessing as xmp

if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(flags,))
```

## Use instead
```python
import torch_xla

if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=(flags,))
```
`launch(fn, args=(), start_method='spawn', debug_single_process=False)` accepts `fn`,
`args` and `start_method`; the fix is offered only when the call passes nothing else
(`nprocs=1` becomes `debug_single_process=True` by hand) and its result is not used
(`launch` returns None). Note that `launch` raises `NotImplementedError` in SPMD mode.

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`launch`), `torch_xla/distributed/xla_multiprocessing.py` (`spawn`)
"""
    valid = (
        Valid("import torch_xla\ntorch_xla.launch(_mp_fn, args=())\n"),
        Valid("import torch_xla\nimport torch.multiprocessing as mp\nmp.spawn(fn, nprocs=4)\n"),
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\nimport torch_xla.runtime as xr\n"
            "xr.use_spmd()\nxmp.spawn(_mp_fn)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "if __name__ == '__main__':\n    xmp.spawn(_mp_fn, args=(flags,))\n",
            (3,),
            fixed="import torch_xla.distributed.xla_multiprocessing as xmp\nimport torch_xla\n\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=(flags,))\n",
        ),
        Invalid(
            "import torch_xla\nfrom torch_xla.distributed import xla_multiprocessing as xmp\n"
            "xmp.spawn(_mp_fn, (flags,), start_method='fork')\n",
            (3,),
            fixed="import torch_xla\nfrom torch_xla.distributed import xla_multiprocessing as xmp\n"
            "torch_xla.launch(_mp_fn, (flags,), start_method='fork')\n",
        ),
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "xmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
            (2,),
        ),
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\nresult = xmp.spawn(_mp_fn)\n",
            (2,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, apis.SPAWN):
            return
        self.report(node, fix=self._fix(node), requires=[(Fact.SPMD, False)])

    def _fix(self, node: cst.Call) -> PendingFix | None:
        api = _torch_xla_api(self.ctx, "launch")
        if not isinstance(self.ctx.parent(), cst.Expr) or api is None:
            return None
        positional = 0
        for arg in node.args:
            if arg.star:
                return None
            if arg.keyword is None:
                positional += 1
                if positional > 2:
                    return None  # spawn's third parameter is nprocs, launch's start_method
            elif arg.keyword.value not in LAUNCH_KEYWORDS:
                return None
        return PendingFix(
            f"call `{api[0]}`",
            [Replacement(node, _call_with(node, api[0], list(node.args)))],
            add_imports=api[1],
        )


# -- XLA304 -------------------------------------------------------------------------

DEPRECATED_ENV = {
    "XLA_USE_SPMD": (
        "call `torch_xla.runtime.use_spmd()` instead",
        'torch_xla/runtime.py `use_spmd` warns "XLA_USE_SPMD is being deprecated"',
    ),
    "XLA_USE_BF16": (
        "convert the model with `model.to(torch.bfloat16)` or use "
        "`torch.autocast('xla', dtype=torch.bfloat16)`",
        'torch_xla/csrc/dtype.cpp prints "will be deprecated after the 2.6 release"',
    ),
    "XLA_DOWNCAST_BF16": (
        "convert the model with `model.to(torch.bfloat16)` or use "
        "`torch.autocast('xla', dtype=torch.bfloat16)`",
        'torch_xla/csrc/dtype.cpp prints "will be deprecated after the 2.6 release"',
    ),
    "XLA_USE_32BIT_LONG": (
        "use int32 tensors explicitly",
        'torch_xla/csrc/dtype.cpp prints "will be deprecated after the 2.6 release"',
    ),
}


class DeprecatedEnvVar(Rule):
    code = "XLA304"
    name = "deprecated-env-var"
    summary = "XLA_USE_SPMD / XLA_USE_BF16 / XLA_DOWNCAST_BF16 set in code are deprecated."
    message = "`{key}` is deprecated; {use}"
    severity = Severity.WARNING
    version_guarded = True
    explanation = """\
## What it does
Flags code that sets `XLA_USE_SPMD`, `XLA_USE_BF16`, `XLA_DOWNCAST_BF16` or
`XLA_USE_32BIT_LONG`: `os.environ["X"] = ...`, `os.environ.setdefault("X", ...)`,
`os.putenv("X", ...)`, `os.environ.update({"X": ...})` / `update(X=...)`, and the same
written into an environment for a child process: `env["X"] = ...` (`update`, `setdefault`)
on a name assigned `os.environ.copy()`, `dict(os.environ)` or `{**os.environ}` or passed
as `env=` to `subprocess.run`/`Popen`/`call`/`check_call`/`check_output`,
`asyncio.create_subprocess_*`, `os.execve`/`os.posix_spawn` in the same function;
`dict(os.environ, X=...)`, `{**os.environ, "X": ...}`, and a dict literal passed as
`env=`. The child runs torch_xla with the variable just the same. Reading them
is not flagged, nor is torch_xla's own package (`torch_xla.runtime.use_spmd` itself
sets `XLA_USE_SPMD`). (`XLA_USE_FP16`/`XLA_DOWNCAST_FP16`, which no longer do anything, are XLA013.)

In shell scripts (`*.sh`, `*.bash`, a `#!/bin/bash` first line), the line that sets one of
them for a command that runs Python: `export XLA_USE_BF16=1` before `python train.py`, or
`XLA_USE_BF16=1 python train.py` (`xla_lint/pipeline/shell.py`). A variable that no Python
command of the script receives (a plain `VAR=1` that is never exported, a script that only
exports) is not flagged. `# noqa: XLA304` in the shell comment suppresses it.

## Why is this bad
They still work in torch_xla 2.9.0 but are on their way out:
- `XLA_USE_SPMD`: `torch_xla/runtime.py` `use_spmd()` warns "XLA_USE_SPMD is being
  deprecated. Use torch_xla.runtime.use_spmd() without setting XLA_USE_SPMD env-var."
  Setting it by hand also skips what `use_spmd()` does when tensors already exist on
  the device (it replicates them onto the SPMD virtual device).
- `XLA_USE_BF16`, `XLA_DOWNCAST_BF16`, `XLA_USE_32BIT_LONG`: read once by
  `torch_xla/csrc/dtype.cpp` (2.9.0), which prints "... will be deprecated after the
  2.6 release, please convert your model to bf16 directly". They change every float
  tensor's device type behind PyTorch's back (`tensor.dtype` says float32 while XLA
  computes in bf16), and Pallas kernels refuse `XLA_USE_BF16`
  (`torch_xla/experimental/custom_kernel.py`). `_check_deprecated_env_var` in
  `torch_xla/__init__.py` lists only the FP16 variables; these are not yet in it.

## Example
```python
import os
os.environ["XLA_USE_SPMD"] = "1"
os.environ["XLA_USE_BF16"] = "1"
import torch_xla
```

## Use instead
```python
import torch
import torch_xla.runtime as xr

xr.use_spmd()
model = model.to(torch.bfloat16)            # or:
with torch.autocast("xla", dtype=torch.bfloat16):
    loss = model(x)
```
There is no automatic fix: the replacement depends on what the program does with the
value (`"0"` disables) and on where tensors are created.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_basic.html
- https://docs.pytorch.org/xla/master/perf/amp.html
- torch_xla 2.9.0 `torch_xla/runtime.py`, `torch_xla/__init__.py`; pytorch/xla v2.9.0 `torch_xla/csrc/dtype.cpp`
"""
    valid = (
        Valid("import torch_xla.runtime as xr\nxr.use_spmd()\n"),
        Valid("import os\nimport torch_xla\nif os.environ.get('XLA_USE_BF16') == '1':\n    pass\n"),
        Valid("import os\nimport torch_xla\nos.environ['XLA_FLAGS'] = '--xla_dump_to=/tmp/dump'\n"),
        # Dicts that are not an environment, and a child environment without the deprecated names.
        Valid(
            "import os\nimport subprocess\nimport torch_xla\ndef run(cfg):\n    cfg['XLA_USE_BF16'] = '1'\n"
            "    flags = {'XLA_USE_BF16': '1'}\n    env = os.environ.copy()\n    env['PJRT_DEVICE'] = 'TPU'\n"
            "    if env.get('XLA_USE_BF16') == '1':\n        pass\n    subprocess.run(cmd, env=env)\n"
        ),
    )
    invalid = (
        Invalid("import os\nos.environ['XLA_USE_SPMD'] = '1'\nimport torch_xla\n", (2,)),
        # Written into the environment given to a child process.
        Invalid(
            "import os\nimport subprocess\nimport torch_xla\ndef run():\n    env = os.environ.copy()\n"
            "    env['XLA_USE_BF16'] = '1'\n    env.update(XLA_DOWNCAST_BF16='1')\n"
            "    subprocess.run(['python', 'train.py'], env=env)\n",
            (6, 7),
        ),
        Invalid(
            "import os\nimport subprocess as sp\nimport torch_xla\nenv = dict(os.environ, XLA_USE_BF16='1')\n"
            "child = {**os.environ, 'XLA_USE_SPMD': '1'}\n"
            "sp.Popen(cmd, env={'XLA_DOWNCAST_BF16': '1', 'PATH': '/usr/bin'})\n"
            "extra = {}\nextra['XLA_USE_32BIT_LONG'] = '1'\nsp.check_call(cmd, env=extra)\n",
            (4, 5, 6, 8),
        ),
        Invalid(
            "import os\nimport torch_xla\nos.environ.setdefault('XLA_USE_BF16', '1')\n"
            "os.putenv('XLA_DOWNCAST_BF16', '1')\n",
            (3, 4),
        ),
        Invalid(
            "from os import environ\nimport torch_xla\nenviron.update({'XLA_USE_BF16': '1',\n"
            "                'PJRT_DEVICE': 'TPU'})\n",
            (3,),
        ),
    )

    def visit_Assign(self, node: cst.Assign) -> None:
        self._env(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._env(node)

    def visit_Dict(self, node: cst.Dict) -> None:
        self._env(node)

    def _env(self, node: cst.CSTNode) -> None:
        if self.ctx.module_name == "torch_xla" or self.ctx.module_name.startswith("torch_xla."):
            return  # torch_xla's own implementation (`use_spmd` sets XLA_USE_SPMD itself)
        for key, where in env_assignments(self.ctx, node):
            if key in DEPRECATED_ENV:
                self.report(where, self.message.format(key=key, use=DEPRECATED_ENV[key][0]))
        for key, where in child_env_assignments(self.ctx, node):
            if key in DEPRECATED_ENV:
                self.report(
                    where,
                    f"`{key}`, set for a child process, is deprecated; {DEPRECATED_ENV[key][0]}",
                )
