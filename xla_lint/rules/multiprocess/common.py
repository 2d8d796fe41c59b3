"""What the multi-process rules share: the facts their findings rest on and the examples' imports."""

from __future__ import annotations

from ...analysis.values import (
    Known,
)
from ...program.facts import Fact

MULTIPROCESS = [(Fact.MULTIPROCESS, True), (Fact.SPMD, False)]


_LAUNCH = "import torch_xla\nimport torch_xla.core.xla_model as xm\n"


TRAINER_METHODS = frozenset({"fit", "validate", "test", "predict"})


LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")


def _is_one(value) -> bool:
    """``spawn`` runs one process: ``nprocs == 1`` holds (1, 1.0, True), as ``pjrt.spawn`` tests it."""
    return (
        isinstance(value, Known) and not isinstance(value.value, str) and _equals_one(value.value)
    )


def _equals_one(value: object) -> bool:
    try:
        return bool(value == 1)
    except Exception:  # pragma: no cover - an object whose == raises
        return False
