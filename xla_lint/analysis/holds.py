"""What an expression may hold: XLA tensors, or only plain Python data.

Rules about saving state ask it of the object saved (XLA003 torch-save-sharded, XLA024
spmd-checkpoint-planner, XLA015 replica-divergent-sync for ``xm.save``): saving a dict of
numbers, a namespace or a scheduler's state gathers and syncs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .context import find_arg, literal_string
from .values import (
    ATTRIBUTE,
    CALL,
    CONTAINER,
    COUNTER,
    ELEMENT,
    ENVIRONMENT,
    NAMESPACE,
    OPTION,
    PARAMETER,
    SEVERAL,
    Known,
    Site,
    Unknown,
    value_of,
)
from .walk import iter_nodes

if TYPE_CHECKING:  # pragma: no cover
    from .context import FileContext

# Words of names that stand for objects holding no XLA tensor: argparse namespaces and
# configuration (`args`, `self.args`, `opts`, `training_args`, `model.config`, `cfg`,
# `hparams`), tokenizers, and objects whose `state_dict()` is plain Python data: LR
# schedulers (torch/optim/lr_scheduler.py `state_dict`: the `__dict__` without the
# optimizer), GradScalers (torch/amp/grad_scaler.py `state_dict`: `get_scale()`, a float),
# samplers and data loaders (positions and seeds).
_PLAIN_WORDS = frozenset(
    {
        "args",
        "argv",
        "opts",
        "options",
        "flags",
        "hparams",
        "hyperparameters",
        "config",
        "configs",
        "cfg",
        "conf",
        "configuration",
        "tokenizer",
        "tokenizers",
        "scaler",
        "scalers",
        "sampler",
        "samplers",
        "loader",
        "loaders",
        "dataloader",
        "dataloaders",
    }
)
# Calls whose result holds no XLA tensor: conversions to Python values, and the host RNG
# states checkpoints store (`random.getstate()`, `np.random.get_state()`, `torch.get_rng_state()`
# and `torch.cuda.get_rng_state_all()`: CPU ByteTensors; `xm.get_rng_state()`: an int,
# torch_xla 2.9.0 torch_xla/core/xla_model.py).
_PLAIN_CALLS = frozenset(
    {
        "builtins.int",
        "builtins.float",
        "builtins.str",
        "builtins.bool",
        "builtins.len",
        "builtins.repr",
        "builtins.range",
        "builtins.hash",
        "builtins.id",
        "builtins.vars",
        "random.getstate",
        "numpy.random.get_state",
        "os.getpid",
        "time.time",
    }
)
_RNG_STATE = frozenset({"get_rng_state", "get_rng_state_all"})
# Calls that hold what their arguments hold.
_WRAPPERS = frozenset(
    {
        "builtins.dict",
        "builtins.list",
        "builtins.tuple",
        "builtins.set",
        "builtins.sorted",
        "copy.copy",
        "copy.deepcopy",
        "collections.OrderedDict",
    }
)
# Methods whose result is plain Python data whatever the receiver.
_PLAIN_METHODS = frozenset(
    {"item", "tolist", "numpy", "keys", "__len__", "format", "to_dict", "to_json_string"}
)


def may_hold_tensors(
    ctx: FileContext, node: cst.BaseExpression, site: Site | None = None, depth: int = 0
) -> bool:
    """False when ``node`` (read at ``site``, default: the call visited) provably holds no
    XLA tensor: see the explanation's "Not flagged" list."""
    if depth > 6:
        return True
    if plain_name(node):
        return False
    return _value_may_hold(ctx, value_of(ctx, node, site), depth)


def _value_may_hold(ctx: FileContext, value: Known | Unknown, depth: int) -> bool:
    if isinstance(value, Known):
        return False  # literals: numbers, strings, None and containers of them
    kind = value.kind
    if kind in (NAMESPACE, OPTION, ENVIRONMENT, COUNTER) or value.type is not None:
        return False
    if kind in (CONTAINER, ELEMENT, SEVERAL):
        return any(may_hold_tensors(ctx, expr, where, depth + 1) for expr, where in value.parts)
    if kind in (ATTRIBUTE, PARAMETER) and value.node is not None:
        return not plain_name(value.node.name if isinstance(value.node, cst.Param) else value.node)
    if kind == CALL and isinstance(value.node, cst.Call) and value.site is not None:
        return _call_may_hold(ctx, value.node, value.site, depth)
    return True


def _call_may_hold(ctx: FileContext, call: cst.Call, site: Site, depth: int) -> bool:
    names = ctx.qnames(call.func, site.scope)
    if names & _PLAIN_CALLS or any(n.rsplit(".", 1)[-1] in _RNG_STATE for n in names):
        return False
    if names & _WRAPPERS:
        return any(may_hold_tensors(ctx, a.value, site, depth + 1) for a in call.args)
    func = call.func
    if not names and isinstance(func, cst.Attribute):  # a method of a value: `model.state_dict()`
        if func.attr.value in _PLAIN_METHODS:
            return False
        if isinstance(func.value, cst.Name) and _moved_to_cpu(ctx, func.value.value):
            return False
        return may_hold_tensors(ctx, func.value, site, depth + 1)
    return True


def _moved_to_cpu(ctx: FileContext, name: str) -> bool:
    """True when, earlier in the enclosing function, ``name.to("cpu")`` or ``name.cpu()`` was
    called (a module moved to the host: its state dict holds CPU tensors, nothing to gather)."""
    function = next(iter(ctx.enclosing(cst.FunctionDef)), None)
    current = ctx.stack[-1] if ctx.stack else None
    if function is None:
        return False
    for node in iter_nodes(function.body):
        if node is current:
            return False
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
            continue
        target = node.func.value
        if type(target) is not cst.Name or target.value != name:
            continue
        method = node.func.attr.value
        first = find_arg(node, None, 0)
        if method == "cpu" or (
            method == "to" and first is not None and literal_string(first.value) == "cpu"
        ):
            return True
    return False


def plain_name(node: cst.CSTNode) -> bool:
    """A Name or attribute whose own name says it holds no tensor (``args``, ``self.args``,
    ``model.config``, ``lr_scheduler``, ``schedulers``...)."""
    if isinstance(node, cst.Attribute):
        name = node.attr.value
    elif isinstance(node, cst.Name):
        name = node.value
    else:
        return False
    return any(w in _PLAIN_WORDS or w.startswith("sched") for w in name_words(name))


def name_words(name: str) -> list[str]:
    """``testDataset_v2`` -> ``["test", "dataset", "v2"]``."""
    out = []
    for chunk in name.split("_"):
        word = ""
        for ch in chunk:
            if ch.isupper() and word and not word[-1].isupper():
                out.append(word.lower())
                word = ""
            word += ch
        if word:
            out.append(word.lower())
    return out
