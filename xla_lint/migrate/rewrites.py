"""The rewrites ``--fix`` writes: each takes the node of a site and gives a fix, or None.

A rewrite is written only where it is sure to keep the code's meaning (mechanical) or to change
only when the work runs (behaviour-change, ``--unsafe-fixes``): a call whose arguments it cannot
carry over, a result that is used, a statement sharing its line, or a block a deletion would
leave empty (``pass`` is written there) is handled as said, else left alone. Every fixed file
must parse (:func:`xla_lint.pipeline.fixes.apply_fixes` drops a fix that breaks it).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.context import FileContext, find_arg, literal_string
from ..rule import PendingFix, Replacement

Rewrite = Callable[[FileContext, cst.CSTNode], PendingFix | None]

TORCH = (("torch", None),)
DIST = (("torch.distributed", None),)


def _string_value(node: cst.BaseExpression) -> str | None:
    return literal_string(node)


def quote(like: cst.BaseExpression, value: str) -> str:
    """``value`` as a string literal quoted like ``like`` (a SimpleString)."""
    quote = '"'
    if isinstance(like, cst.SimpleString) and like.value.lstrip("rRbBuU").startswith("'"):
        quote = "'"
    return f"{quote}{value}{quote}"


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def _has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def device(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch_xla.device()`` / ``xm.xla_device()`` -> ``torch.device("tpu")``: only without
    arguments (an index other than 0 is a decision: each process owns one device)."""
    if not isinstance(call, cst.Call) or call.args:
        return None
    return PendingFix(
        'use torch.device("tpu")', [Replacement(call, 'torch.device("tpu")')], add_imports=TORCH
    )


def device_index_zero(call: cst.Call) -> bool:
    """``torch_xla.device(0)`` / ``xla_device(n=0)``: the index every TorchTPU process has."""
    args = [a for a in call.args if not a.star]
    if len(args) != 1 or len(call.args) != 1:
        return False
    value = args[0].value
    return isinstance(value, cst.Integer) and value.value == "0"


def _replace_string(arg: cst.Arg, new: str) -> Replacement:
    return Replacement(arg.value, quote(arg.value, new))


def device_string(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch.device("xla")`` (or ``"xla:0"``) -> ``torch.device("tpu")``."""
    if not isinstance(call, cst.Call):
        return None
    arg = find_arg(call, "type", 0)
    if arg is None or len(call.args) != 1:
        return None
    value = _string_value(arg.value)
    if value not in ("xla", "xla:0"):
        return None
    return PendingFix('use the "tpu" device', [_replace_string(arg, "tpu")])


def is_xla_device_string(call: cst.Call) -> bool:
    """``torch.device("xla")``/``("xla:N")``: a torch_xla device named by its string."""
    arg = find_arg(call, "type", 0)
    value = _string_value(arg.value) if arg is not None else None
    return value is not None and (value == "xla" or value.startswith("xla:"))


def autocast(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch.autocast("xla", ...)`` / ``device_type="xla"`` -> ``"tpu"``."""
    if not isinstance(call, cst.Call):
        return None
    arg = find_arg(call, "device_type", 0)
    if arg is None or _string_value(arg.value) != "xla":
        return None
    return PendingFix('autocast on "tpu"', [_replace_string(arg, "tpu")])


def is_xla_autocast(call: cst.Call) -> bool:
    arg = find_arg(call, "device_type", 0)
    return arg is not None and _string_value(arg.value) == "xla"


def xla_autocast(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch_xla.amp.autocast(device, **kw)`` -> ``torch.autocast("tpu", **kw)``: the device
    argument (first positional or ``device=``) becomes ``"tpu"``; ``enabled``, ``dtype`` and
    ``cache_enabled`` keep their names in ``torch.autocast``."""
    if not isinstance(call, cst.Call) or _has_star(call):
        return None
    args = list(call.args)
    first = find_arg(call, "device", 0)
    if first is None or any(
        a.keyword is not None
        and a.keyword.value not in ("device", "enabled", "dtype", "cache_enabled")
        for a in args
    ):
        return None
    if len(_positional(call)) > 1:
        return None
    rest = [a for a in args if a is not first]
    new_first = cst.Arg(cst.SimpleString('"tpu"'))
    new = call.with_changes(
        func=cst.Attribute(cst.Name("torch"), cst.Name("autocast")),
        args=[new_first.with_changes(comma=first.comma) if rest else new_first, *rest],
    )
    return PendingFix('use torch.autocast("tpu")', [Replacement(call, new)], add_imports=TORCH)


def process_group(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``init_process_group("xla", init_method="xla://")`` -> ``init_process_group("tpu")``."""
    if not isinstance(call, cst.Call):
        return None
    backend = find_arg(call, "backend", 0)
    if backend is None or _string_value(backend.value) != "xla":
        return None
    replacements = [_replace_string(backend, "tpu")]
    method = find_arg(call, "init_method", 1)
    if method is not None:
        if method.keyword is None or _string_value(method.value) != "xla://":
            return None
        # the whole call rebuilt without init_method (its comma handled by LibCST)
        args = [a for a in call.args if a is not method]
        args = [
            a.with_changes(value=cst.SimpleString(quote(a.value, "tpu"))) if a is backend else a
            for a in args
        ]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return PendingFix(
            'use the "tpu" backend (default init_method env://)',
            [Replacement(call, call.with_changes(args=args))],
        )
    return PendingFix('use the "tpu" backend', replacements)


def is_xla_process_group(call: cst.Call) -> bool:
    backend = find_arg(call, "backend", 0)
    return backend is not None and _string_value(backend.value) == "xla"


def compile_backend(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch.compile(..., backend="openxla")`` -> ``backend="tpu"``."""
    if not isinstance(call, cst.Call):
        return None
    backend = find_arg(call, "backend")
    if backend is None or _string_value(backend.value) != "openxla":
        return None
    return PendingFix('compile with backend "tpu"', [_replace_string(backend, "tpu")])


def is_openxla_compile(call: cst.Call) -> bool:
    backend = find_arg(call, "backend")
    value = _string_value(backend.value) if backend is not None else None
    return value is not None and value.startswith("openxla")


def wait_device_ops(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``xm.wait_device_ops()`` -> ``torch.accelerator.synchronize()`` (no arguments only)."""
    if not isinstance(call, cst.Call) or call.args:
        return None
    return PendingFix(
        "use torch.accelerator.synchronize()",
        [Replacement(call, "torch.accelerator.synchronize()")],
        add_imports=TORCH,
    )


def manual_seed(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``torch_xla.manual_seed(s)`` / ``xm.set_rng_state(s)`` -> ``torch.tpu.manual_seed(s)``
    (the seed alone: a ``device`` argument has no place there)."""
    if not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].star:
        return None
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "seed":
        return None
    new = call.with_changes(
        func=cst.Attribute(
            cst.Attribute(cst.Name("torch"), cst.Name("tpu")), cst.Name("manual_seed")
        ),
        args=[arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)],
    )
    return PendingFix("use torch.tpu.manual_seed", [Replacement(call, new)], add_imports=TORCH)


_PRECISION = {"default": "medium", "high": "high", "highest": "highest"}


def mat_mul_precision(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``set_mat_mul_precision("default")`` -> ``torch.set_float32_matmul_precision("medium")``
    (TorchTPU maps medium/high/highest to its DEFAULT/HIGH/HIGHEST precision)."""
    if not isinstance(call, cst.Call) or len(call.args) != 1:
        return None
    value = _string_value(call.args[0].value)
    if value not in _PRECISION:
        return None
    text = f"torch.set_float32_matmul_precision({quote(call.args[0].value, _PRECISION[value])})"
    return PendingFix(
        "use torch.set_float32_matmul_precision", [Replacement(call, text)], add_imports=TORCH
    )


def _dist_call(ctx: FileContext, call: cst.CSTNode, function: str) -> PendingFix | None:
    """``torch.distributed.<function>()`` for a call without arguments, through the module's
    own alias of ``torch.distributed`` when it has one (``import torch.distributed as dist``),
    else with ``import torch.distributed`` added."""
    if not isinstance(call, cst.Call) or call.args:
        return None
    alias = next(
        (
            name
            for name, qualified in sorted(ctx.root_scope.bindings.items())
            if qualified == {"torch.distributed"}
            and ctx.qnames(cst.Name(name)) == {"torch.distributed"}  # not shadowed here
        ),
        None,
    )
    head = alias or "torch.distributed"
    return PendingFix(
        f"use {head}.{function}()",
        [Replacement(call, f"{head}.{function}()")],
        add_imports=() if alias else DIST,
    )


def rank(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``xr.global_ordinal()`` -> ``torch.distributed.get_rank()``."""
    return _dist_call(ctx, call, "get_rank")


def world_size(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``xr.world_size()`` -> ``torch.distributed.get_world_size()``."""
    return _dist_call(ctx, call, "get_world_size")


def optimizer(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``syncfree.AdamW(...)`` -> ``torch.optim.AdamW(...)`` (same arguments)."""
    if not isinstance(call, cst.Call):
        return None
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
    if name is None and isinstance(call.func, cst.Name):
        name = next(
            (
                q.rsplit(".", 1)[1]
                for q in ctx.qnames(call.func)
                if q.startswith("torch_xla.amp.syncfree.")
            ),
            None,
        )
    if name not in ("Adam", "AdamW", "SGD"):
        return None
    return PendingFix(
        f"use torch.optim.{name}",
        [Replacement(call.func, f"torch.optim.{name}")],
        add_imports=TORCH,
    )


def _statement(
    ctx: FileContext, call: cst.CSTNode
) -> tuple[cst.SimpleStatementLine, cst.CSTNode] | None:
    """The statement line a call stands alone in (``xm.mark_step()`` as an expression
    statement, one statement on its line) and the block holding it, else None."""
    expr, line, block = ctx.parent(1), ctx.parent(2), ctx.parent(3)
    if not (
        isinstance(expr, cst.Expr)
        and expr.value is call
        and isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
    ):
        return None
    if block is None:
        return None
    return line, block


def _delete(line: cst.SimpleStatementLine, block: cst.CSTNode, what: str) -> PendingFix:
    body = getattr(block, "body", ())
    if isinstance(block, cst.IndentedBlock) and len(body) == 1:
        return PendingFix(f"replace {what} with pass", [Replacement(line.body[0], "pass")])
    return PendingFix(f"delete {what}", [Replacement(line, "")])


def delete_statement(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """Delete a call that stands alone as a statement (``xm.mark_step()``, ``xr.use_spmd()``);
    the only statement of a block becomes ``pass``."""
    found = _statement(ctx, call)
    if found is None:
        return None
    return _delete(found[0], found[1], "the call")


def step_closure(ctx: FileContext, call: cst.CSTNode) -> PendingFix | None:
    """``xm.add_step_closure(fn, args)`` -> ``fn(*args)``; ``(a, b)`` literal arguments are
    written out, no arguments give ``fn()``; ``run_async`` is refused."""
    if not isinstance(call, cst.Call) or _has_star(call) or _statement(ctx, call) is None:
        return None
    fn = find_arg(call, "closure", 0)
    args = find_arg(call, "args", 1)
    if fn is None or any(
        a.keyword is not None and a.keyword.value not in ("closure", "args") for a in call.args
    ):
        return None
    module = ctx.module
    head = module.code_for_node(fn.value)
    if not isinstance(fn.value, (cst.Name, cst.Attribute)):
        head = f"({head})"
    if args is None:
        inner = ""
    elif isinstance(args.value, cst.Tuple):
        inner = ", ".join(module.code_for_node(e.value) for e in args.value.elements)
        if any(isinstance(e, cst.StarredElement) for e in args.value.elements):
            inner = ", ".join(module.code_for_node(e) for e in args.value.elements).replace(
                ",,", ","
            )
    else:
        inner = f"*{module.code_for_node(args.value)}"
    return PendingFix("call the closure now", [Replacement(call, f"{head}({inner})")])


def unwrap_with(ctx: FileContext, node: cst.CSTNode) -> PendingFix | None:
    """``with torch_xla.step():`` -> its body, one level less indented (one item, no ``as``,
    a body without multi-line strings or continuation lines, whose indentation would change)."""
    if not isinstance(node, cst.With) or len(node.items) != 1 or node.items[0].asname:
        return None
    if not isinstance(node.body, cst.IndentedBlock) or node.asynchronous is not None:
        return None
    module = ctx.module
    pieces = [module.code_for_node(s) for s in node.body.body]
    code = "".join(pieces).strip("\n")
    if '"""' in code or "'''" in code or "\\\n" in code:
        return None
    # the edit starts at ``with``, at the block's indentation; the lines after the first get
    # that indentation when the edit is placed (:func:`xla_lint.migrate.sites.indent_unwrapped`)
    return PendingFix(UNWRAP, [Replacement(node, code)])


UNWRAP = "unwrap the with (eager: no step graph)"


REWRITES: dict[str, Rewrite] = {
    "device": device,
    "device_string": device_string,
    "autocast": autocast,
    "xla_autocast": xla_autocast,
    "process_group": process_group,
    "compile_backend": compile_backend,
    "wait_device_ops": wait_device_ops,
    "manual_seed": manual_seed,
    "mat_mul_precision": mat_mul_precision,
    "rank": rank,
    "world_size": world_size,
    "optimizer": optimizer,
    "delete_statement": delete_statement,
    "step_closure": step_closure,
    "unwrap_with": unwrap_with,
}
