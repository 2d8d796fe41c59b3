"""Where a run's time goes, stage by stage: a debug aid, on when ``XLA_LINT_TIMINGS`` is set.

With ``XLA_LINT_TIMINGS=1`` in the environment, ``xla-lint`` prints to standard error, after its
report, the seconds each stage took summed over every file (the worker processes' included)
and how many times it ran::

    xla-lint timings (s, summed over files and workers; calls):
      read               0.212    2571
      prefilter          0.004    2571
      ...

The stages (:data:`STAGES`): reading files, the prefilter's byte test, the import scan of files
that are not parsed, the result cache (keys, reads, writes), LibCST's parse, the per-file facts
(the :class:`~xla_lint.analysis.context.FileContext` model, the facts collector, the value flow),
the rules' callbacks, placing findings and building their fixes, the program model, the second
pass over modules XLA programs reach, the join (facts, suppressions, notes) and the report.
``benchmarks/bench.py --stages`` reads this output. Off (the default), a stage costs one
attribute test; the timer is never consulted.

``XLA_LINT_TIMINGS=cpu`` counts each process's CPU seconds (:func:`time.process_time`) instead of
elapsed ones, and the last line is ``cpu``: on a loaded machine elapsed time also counts the
waits for a core, so two runs compare by their CPU seconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

ENV = "XLA_LINT_TIMINGS"

STAGES = (
    "discover",
    "read",
    "prefilter",
    "import scan",
    "cache",
    "parse",
    "facts",
    "rules",
    "fixes",
    "program model",
    "reached modules",
    "join",
    "report",
)

ENABLED = bool(os.environ.get(ENV))
CPU = os.environ.get(ENV, "").strip().lower() == "cpu"

_seconds: dict[str, float] = {}
_calls: dict[str, int] = {}

clock = time.process_time if CPU else time.perf_counter
_started = clock()  # when the package was first imported: the run's wall time in report()


def add(stage: str, seconds: float, calls: int = 1) -> None:
    """Count ``seconds`` (and ``calls`` runs) to ``stage``."""
    _seconds[stage] = _seconds.get(stage, 0.0) + seconds
    _calls[stage] = _calls.get(stage, 0) + calls


@contextmanager
def timed(stage: str) -> Iterator[None]:
    """Time the ``with`` body as one run of ``stage`` (nothing when timings are off)."""
    if not ENABLED:
        yield
        return
    start = clock()
    try:
        yield
    finally:
        add(stage, clock() - start)


def take() -> dict[str, tuple[float, int]]:
    """The totals so far, ``stage -> (seconds, calls)``, and start again from zero (what a worker
    process sends back with each result)."""
    out = {k: (v, _calls.get(k, 0)) for k, v in _seconds.items()}
    _seconds.clear()
    _calls.clear()
    return out


def merge(totals: dict[str, tuple[float, int]]) -> None:
    """Add the totals of :func:`take` (another process's) to this process's."""
    for stage, (seconds, calls) in totals.items():
        add(stage, seconds, calls)


def report(stream: TextIO | None = None) -> None:
    """Print the totals to ``stream`` (standard error), stages in pipeline order."""
    stream = stream or sys.stderr
    print("xla-lint timings (s, summed over files and workers; calls):", file=stream)
    for stage in (*STAGES, *sorted(set(_seconds) - set(STAGES))):
        if stage in _seconds:
            print(f"  {stage:16s} {_seconds[stage]:8.3f} {_calls[stage]:7d}", file=stream)
    print(f"  {'cpu' if CPU else 'wall':16s} {clock() - _started:8.3f}", file=stream)
