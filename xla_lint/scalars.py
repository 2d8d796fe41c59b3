"""Scalar arithmetic torch does on the host, in pure Python (no torch, no LibCST).

Shared by the XLA204 rule (xla_lint/rules/recompilation/adam_scalar.py) and the runtime checker's
step-counter probe (xla_lint/runtime/job.py), which must not import LibCST.
"""

from __future__ import annotations

import struct


def round_to(value: float, dtype: str) -> float:
    """``value`` (a Python float) converted to ``dtype`` and read back, as ``tensor.to(dtype)``
    converts a wrapped Python number: to float32 with round-to-nearest-even; bfloat16 and
    float16 are made from that float32 (c10's ``BFloat16``/``Half`` are built from a float),
    each rounding to nearest even again; float64 is the value itself."""
    if dtype == "float64":
        return value
    single = struct.unpack("<f", struct.pack("<f", value))[0]
    if dtype == "float16":
        return struct.unpack("<e", struct.pack("<e", single))[0]
    if dtype == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", single))[0]
        bits = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16) & 0xFFFFFFFF
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return single


def recompile_step(beta2: float, dtype: str = "float32") -> int | None:
    """The optimizer step at which a non-capturable ``torch.optim.Adam``/``AdamW`` changes its
    XLA graph: the first ``step`` (1-based) whose bias correction ``(1 - beta2**step) ** 0.5``,
    computed in float64 as torch 2.9.0 does (``torch/optim/adam.py``, ``_single_tensor_adam``:
    ``step = _get_value(step_t)`` is a Python float), is exactly 1.0 once converted to ``dtype``:
    the parameters' dtype ("float32", "bfloat16", "float16") for the default single-tensor
    path, which torch_xla converts the Python number to before testing for the special scalars
    0 and 1 (``UnwrapNumber``, ``IsSpecialScalar``); "float64" for ``foreach=True`` (measured on
    CPU: the multi-tensor path's scalar list is not rounded) and float64 parameters. 1 means the
    constant is in the graph from the first step (no change); None for a ``beta2`` outside
    [0, 1), which torch rejects. Measured with torch_xla 2.9.0 on CPU: beta2=0.95 gives 325
    (float32), 109 (bfloat16), 709 (float64)."""
    if isinstance(beta2, bool) or not isinstance(beta2, (int, float)) or not 0.0 <= beta2 < 1.0:
        return None
    beta2 = float(beta2)

    def reaches_one(step: int) -> bool:
        return round_to((1 - beta2 ** float(step)) ** 0.5, dtype) == 1.0

    high = 1
    while not reaches_one(high):  # beta2**step shrinks to 0: this ends
        high *= 2
    low = high // 2 + 1 if high > 1 else 1  # reaches_one(high // 2) was False
    while low < high:
        middle = (low + high) // 2
        if reaches_one(middle):
            high = middle
        else:
            low = middle + 1
    return high
