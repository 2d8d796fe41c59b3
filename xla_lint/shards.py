"""The size of one device's shard of a split tensor: the one computation the runtime checker
(:mod:`xla_lint.runtime.spec`) and the trace's report (:mod:`xla_lint.trace.report`) share.

XLA cuts a dimension of size ``n`` split ``k`` ways into pieces of ``ceil(n / k)`` and pads the
last one (``HloSharding`` tiling; torch_xla 2.9's ``ShardingUtil::GetShardShape`` in
torch_xla/csrc/xla_sharding_util.cpp rounds up the same way), so a device holds
``ceil(n / k)`` rows even when fewer are real: 21 rows on 8 devices are 3 per device, 24 in
all, not 21 / 8. Standard library only (the linter's bottom layer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def shard_shape(shape: Sequence[int], tiles: Sequence[int]) -> tuple[int, ...]:
    """The shape of one device's shard of a tensor of global ``shape`` whose dimension ``d``
    is cut into ``tiles[d]`` pieces (ceil division: XLA pads the last piece). ``tiles`` of
    another length than ``shape`` (a sharding text this code does not read) leaves the shape
    whole. Raises nothing; a tile count below 1 counts as 1."""
    if len(tiles) != len(shape):
        return tuple(shape)
    return tuple(-(-int(n) // max(1, int(t))) for n, t in zip(shape, tiles, strict=True))


def shard_bytes(shape: Sequence[int], tiles: Sequence[int], itemsize: float) -> int:
    """Bytes of one device's shard (:func:`shard_shape`, padding included) of a tensor of
    ``shape`` with ``itemsize`` bytes per element."""
    return int(math.prod(shard_shape(shape, tiles)) * itemsize)
