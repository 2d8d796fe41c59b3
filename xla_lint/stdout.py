"""Standard output and error that a reader closing early does not break (``xla-lint . | head``).

When the reader of a pipe exits, the next write to it fails with ``EPIPE``. Python ignores the
``SIGPIPE`` signal, so the write raises :class:`BrokenPipeError` wherever it happens: in the
middle of a report, or at exit when the interpreter flushes the stream (``Exception ignored
... BrokenPipeError`` and exit 120). :func:`guard` puts the process's standard streams on a
file whose writes, from the first ``EPIPE`` on, go to ``/dev/null`` (the descriptor itself is
pointed there, so whatever else writes to it is quiet too). The run goes on to its end and
exits with the status it would have had: 1 when it found diagnostics, as the exit status of a
linter carries its findings (``set -o pipefail; xla-lint . | head`` still fails on findings).
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any


class _QuietFile(io.FileIO):
    """A file on an inherited descriptor (left open at close) whose writes never raise
    :class:`BrokenPipeError`: the descriptor is pointed at ``/dev/null`` instead."""

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.fileno())
            finally:
                os.close(null)
            return memoryview(data).nbytes


def guard() -> None:
    """Put ``sys.stdout`` and ``sys.stderr`` on :class:`_QuietFile` when they are the process's
    own streams on a descriptor (a test's captured streams are left alone); POSIX only."""
    if os.name != "posix":
        return
    for name, original in (("stdout", sys.__stdout__), ("stderr", sys.__stderr__)):
        stream = getattr(sys, name)
        if stream is None or stream is not original or not isinstance(stream, io.TextIOWrapper):
            continue
        try:
            fd = stream.fileno()
            stream.flush()
        except (OSError, ValueError):
            continue
        setattr(
            sys,
            name,
            io.TextIOWrapper(
                io.BufferedWriter(_QuietFile(fd, "wb", closefd=False)),
                encoding=stream.encoding,
                errors=stream.errors,
                line_buffering=stream.line_buffering,
                write_through=stream.write_through,
            ),
        )
