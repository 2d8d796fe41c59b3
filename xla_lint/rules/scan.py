"""Compiled loops: ``torch_xla.experimental.scan`` and ``scan_layers``."""

from __future__ import annotations

import libcst as cst

from ..analysis.context import find_arg
from ..analysis.values import definition
from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid

SCAN = "torch_xla.experimental.scan.scan"
SCAN_LAYERS = "torch_xla.experimental.scan_layers.scan_layers"

# dtypes that cannot require gradients (torch: only floating point and complex can).
_NON_FLOAT_DTYPES = frozenset(
    {
        "bool",
        "uint8",
        "int8",
        "int16",
        "short",
        "int32",
        "int",
        "int64",
        "long",
        "uint16",
        "uint32",
        "uint64",
    }
)
# Tensor methods that return a non-float tensor (`mask.bool()`, `ids.long()`, `x.argmax(1)`).
_NON_FLOAT_METHODS = {
    "bool": "bool",
    "byte": "uint8",
    "char": "int8",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "argmax": "int64",
    "argmin": "int64",
    "isnan": "bool",
    "isinf": "bool",
    "isfinite": "bool",
    "logical_not": "bool",
    "logical_and": "bool",
    "logical_or": "bool",
    "eq": "bool",
    "ne": "bool",
    "lt": "bool",
    "le": "bool",
    "gt": "bool",
    "ge": "bool",
}
# Factories whose result is integer without a dtype= when given integers
# (`torch.arange(10)`, `torch.randint(0, 5, (3,))`, `torch.tensor(0)`, `torch.tensor([True])`).
_INTEGER_FACTORIES = frozenset({"torch.arange", "torch.randint", "torch.randperm"})
_DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor"})
_COMPARISONS = (
    cst.LessThan,
    cst.LessThanEqual,
    cst.GreaterThan,
    cst.GreaterThanEqual,
    cst.Equal,
    cst.NotEqual,
)


class ScanNonFloatCarry(Rule):
    code = "XLA030"
    name = "scan-non-float-carry"
    preview = True
    summary = (
        "scan/scan_layers given a bool or integer tensor in the carry: every carry tensor "
        "must require gradients, and only floating point ones can."
    )
    message = (
        "{what} is {dtype} tensor in the carry of `{api}`, which makes every carry tensor "
        "require gradients: it raises `RuntimeError: Only Tensors of floating point and complex "
        "dtype can require gradients`; {fix}"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `scan(fn, init, xs)` and `scan_layers(layers, input_data)` (from
`torch_xla.experimental.scan` / `torch_xla.experimental.scan_layers`) when the carry
(`init`, `input_data`, or an element of a tuple, list or dict given there) is a tensor the
file makes bool or integer: a comparison (`ids > 0`, `a == b`), `~x`, `.bool()`,
`.long()`, `.int()`, `.argmax()`, `.to(torch.bool)`, a factory with `dtype=torch.bool` /
`torch.long` / another integer type, `torch.arange`/`torch.randint` of integers, or
`torch.tensor(...)` of Python ints or bools without a float `dtype=`; directly or through a
name assigned once.

## Why is this bad
torch_xla 2.9.0 `torch_xla/experimental/scan.py` traces `fn` with fake carry tensors made
by `make_fake_tensor(v, requires_grad=True)`: "the `carry` argument used to trace a user
function to get a correct backward pass always requires grad". `torch.empty_like(...,
requires_grad=True)` of a bool or integer tensor raises `RuntimeError: Only Tensors of
floating point and complex dtype can require gradients`, on the first call, with or
without a backward pass. `scan_layers` passes `input_data` as `scan`'s carry
(`torch_xla/experimental/scan_layers.py`; a tuple becomes the layer's positional
arguments through `torch.func.functional_call`), so a layer taking `(hidden, mask)` with a
bool mask fails the same way. The per-iteration inputs `xs` are traced with
`requires_grad=v.requires_grad` and may be bool or integer. Measured on CPU: a bool or an
int64 tensor in the carry of `scan`, and a bool mask in `scan_layers`' input, raise; the
same mask as float32, or a bool mask in `xs`, run forward and backward.

## Example
```python
from torch_xla.experimental.scan_layers import scan_layers

mask = input_ids != pad_id                   # torch.bool
hidden, mask = scan_layers(decoder_layers, (hidden, mask))
```

## Use instead
```python
mask = (input_ids != pad_id).to(hidden.dtype)   # float; compare inside the layer: mask > 0.5
hidden, mask = scan_layers(decoder_layers, (hidden, mask))
```
With `scan`, a tensor that changes per iteration can go in `xs` instead, stacked along the
first dimension.

## References
- torch_xla 2.9.0 `torch_xla/experimental/scan.py` (`scan`, `make_fake_tensor`),
  `torch_xla/experimental/scan_layers.py` (`scan_layers`)
- https://docs.pytorch.org/xla/master/features/scan.html
"""
    valid = (
        Valid(
            "import torch\nfrom torch_xla.experimental.scan import scan\n"
            "mask = (ids != 0).to(torch.float32)\nh, ys = scan(step, (h0, mask), xs)\n"
        ),
        # Bool or integer tensors per iteration (xs) are fine; so is a float factory.
        Valid(
            "import torch\nfrom torch_xla.experimental.scan import scan\n"
            "masks = torch.ones(8, 2, 4, dtype=torch.bool)\n"
            "init = torch.zeros(2, 4, dtype=torch.bfloat16)\n"
            "h, ys = scan(step, init, (xs, masks))\n"
            "steps = torch.arange(8.0)\nh, ys = scan(step, (init, torch.tensor(0.0)), steps)\n"
        ),
        # A name assigned elsewhere, a parameter, a model's output: unknown dtype, not flagged.
        Valid(
            "from torch_xla.experimental.scan_layers import scan_layers\n"
            "def forward(self, hidden, mask):\n    return scan_layers(self.layers, (hidden, mask))\n"
        ),
        # Another library's scan.
        Valid("import jax\nc, ys = jax.lax.scan(f, (h, x > 0), xs)\n"),
    )
    invalid = (
        Invalid(
            "from torch_xla.experimental.scan_layers import scan_layers\n"
            "mask = input_ids != pad_id\nhidden, mask = scan_layers(layers, (hidden, mask))\n",
            (3,),
        ),
        Invalid(
            "import torch\nimport torch_xla.experimental.scan as xscan\n"
            "count = torch.tensor(0, device='xla')\n"
            "(h, n), ys = xscan.scan(step, (h0, count), xs)\n"
            "(h, m), ys = xscan.scan(step, {'h': h0, 'm': ids.long()}, xs)\n"
            "init = (torch.zeros(3), torch.zeros((), dtype=torch.long))\n"
            "h, ys = xscan.scan(step, init, xs)\n",
            (4, 5, 7),
        ),
        Invalid(
            "import torch\nfrom torch_xla.experimental import scan_layers as sl\n"
            "keep = torch.ones(2, 4, dtype=torch.bool, device='xla')\n"
            "out = sl.scan_layers(layers, input_data=(h, keep.to(torch.bool)))\n",
            (4,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        if SCAN in names:
            api, carry = "scan", find_arg(node, "init", 1)
        elif SCAN_LAYERS in names:
            api, carry = "scan_layers", find_arg(node, "input_data", 1)
        else:
            return
        if carry is None:
            return
        value = carry.value
        if type(value) is cst.Name:  # init = (h0, count); scan(step, init, xs)
            found = definition(self.ctx, value)
            if found is not None and isinstance(found[0], (cst.Tuple, cst.List, cst.Dict)):
                value = found[0]
        for leaf in _leaves(value):
            dtype = self._non_float(leaf, 0)
            if dtype is not None:
                text = " ".join(self.ctx.module.code_for_node(leaf).split())
                fix = (
                    "cast it to the compute dtype (`.to(hidden.dtype)`) and compare inside"
                    if api == "scan_layers"
                    else "cast it to a float dtype, or pass it in `xs` if it changes per iteration"
                )
                self.report(
                    node,
                    self.message.format(
                        what=f"`{text if len(text) <= 40 else text[:37] + '...'}`",
                        dtype=("an " if dtype[0] in "iu" else "a ") + dtype,
                        api=api,
                        fix=fix,
                    ),
                )
                return

    def _non_float(self, expr: cst.BaseExpression, depth: int) -> str | None:
        """The dtype (``"bool"``, ``"int64"``...) of a tensor ``expr`` makes that is not
        floating point, when the file shows it; else None."""
        ctx = self.ctx
        if isinstance(expr, cst.Name):
            found = definition(ctx, expr)
            return self._non_float(found[0], depth + 1) if found and depth < 3 else None
        if isinstance(expr, cst.Comparison):
            if all(isinstance(c.operator, _COMPARISONS) for c in expr.comparisons):
                return "bool"
            return None
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return "bool" if self._non_float(expr.expression, depth + 1) == "bool" else None
        if not isinstance(expr, cst.Call):
            return None
        call = expr
        dtype = find_arg(call, "dtype")
        if dtype is not None:
            return _dtype_name(dtype.value)
        func = call.func
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in ("to", "type") and call.args:
                first = call.args[0]
                if first.keyword is None:
                    return _dtype_name(first.value)
            if method in _NON_FLOAT_METHODS and not ctx.qnames(func):
                return _NON_FLOAT_METHODS[method]
        names = ctx.qnames(func)
        if names & _INTEGER_FACTORIES:
            return (
                "int64" if all(_is_int(a.value) for a in call.args if a.keyword is None) else None
            )
        if names & _DATA_FACTORIES and call.args:
            return _literal_dtype(call.args[0].value)
        if any(n in names for n in ("torch.logical_not", "torch.isnan", "torch.isin")):
            return "bool"
        return None


def _leaves(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tensors of a carry written as a tuple, list or dict display (nested), or itself."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [leaf for e in expr.elements for leaf in _leaves(e.value)]
    if isinstance(expr, cst.Dict):
        return [
            leaf
            for e in expr.elements
            if isinstance(e, cst.DictElement)
            for leaf in _leaves(e.value)
        ]
    return [expr]


def _dtype_name(node: cst.BaseExpression) -> str | None:
    """``"bool"`` for ``torch.bool``, ``"int64"`` for ``torch.long``...; None for float,
    complex or anything not written as ``torch.<dtype>``."""
    if (
        type(node) is cst.Attribute
        and type(node.value) is cst.Name
        and node.value.value == "torch"
        and node.attr.value in _NON_FLOAT_DTYPES
    ):
        return node.attr.value
    return None


def _is_int(node: cst.BaseExpression) -> bool:
    if type(node) is cst.Integer:
        return True
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        return _is_int(node.expression)
    return False


def _literal_dtype(node: cst.BaseExpression) -> str | None:
    """The dtype ``torch.tensor`` infers from Python data: ``"bool"`` for ``True``/``False``,
    ``"int64"`` for ints, nested lists of one of them; None for floats or anything else."""
    if type(node) is cst.Name and node.value in ("True", "False"):
        return "bool"
    if _is_int(node):
        return "int64"
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        kinds = {_literal_dtype(e.value) for e in node.elements}
        return kinds.pop() if len(kinds) == 1 else None
    return None
