"""Runtime sanity checker for torch_xla SPMD / FSDPv2 training (``python -m xla_lint.runtime``).

Importing this package does not import torch: only the submodules that run the job
(``job``, ``model``, ``hosts`` and the worker code in ``runner``) do, and they are
imported after the device environment (``PJRT_DEVICE``, ``CPU_NUM_DEVICES``) is set.

Layout: ``cli`` (click options -> :class:`~xla_lint.runtime.options.RuntimeOptions`),
``preflight`` (options checked before any device work), ``runner`` (one process's flow),
``progress`` (each host's stage and step, to name a host that dies), ``hosts``
(rendezvous, gloo group, simulated hosts and the launcher that watches them),
``job`` (mesh, FSDPv2 model, training loop -> one run record), ``checks`` (one module
per check: run records -> CheckResult), ``report`` (text and JSON).
"""

from __future__ import annotations

RUNTIME_EXTRA_HINT = (
    "the runtime checker needs the runtime extra: pip install 'xla-lint[runtime]' "
    "(from a clone of xla-lint: pip install -e '.[runtime]')"
)

__all__ = ["RUNTIME_EXTRA_HINT"]
