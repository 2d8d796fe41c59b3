"""The cheap text test that decides whether a file can concern any rule (run before any parse)."""

from __future__ import annotations

import re

# A file none of whose text matches cannot concern any rule: every rule is about a
# torch_xla API or an XLA_* environment variable, and reports only in files that name one.
# ``init_process_group``: a file calling ``init_process_group("xla")`` makes its program
# multi-process (a program fact) even when it does not name torch_xla itself. ``torch_tpu``,
# ``torch.tpu``, ``TORCH_TPU_``: the TorchTPU rules (XLA4xx) read files that use TorchTPU.
PREFILTER = re.compile(r"torch_xla|XLA_|init_process_group|torch_tpu|torch\.tpu|TORCH_TPU_")


# The same test on the raw bytes, before decoding: every encoding Python accepts for
# source (the coding cookie must be readable as ASCII) spells these words in ASCII.
PREFILTER_BYTES = (
    b"torch_xla",
    b"XLA_",
    b"init_process_group",
    b"torch_tpu",
    b"torch.tpu",
    b"TORCH_TPU_",
)


def needs_parse(data: bytes) -> bool:
    """True when the bytes name torch_xla, an ``XLA_`` variable, ``init_process_group`` or
    TorchTPU (``torch_tpu``, ``torch.tpu``, a ``TORCH_TPU_`` variable)."""
    return any(word in data for word in PREFILTER_BYTES)
