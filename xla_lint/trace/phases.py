"""Phases of a traced run from the script's own structure: setup, training, evaluation.

The hook ends a row at every step boundary (:mod:`xla_lint.trace.hook`); this module says in
which phase each row and each event ran, from the linter's model of the script's loops
(:func:`xla_lint.analysis.loops.loop_spans`: every loop's lines and its
:class:`~xla_lint.analysis.loops.LoopKind`), and regroups the rows (:func:`place`):

* an event (compile, host read, step boundary) is in the phase of the innermost classified
  loop holding one of its user frames, innermost frame first (a step function's sync runs in
  the training loop that called it); setup when no frame is inside a loop;
* a loop an optimizer step ran in (the innermost loop of the step's stack) is training,
  whatever its body says statically (a step function called through ``torch_xla.compile``);
* a row that ran an optimizer step is training; a row ended by a sync in the training loop
  without one (``torch_xla.step()`` syncs on entry too, gradient accumulation) joins the
  training row after it;
* training rows are numbered 1, 2, ... (the training steps ``--steps`` counts); setup and
  evaluation rows keep their own rows, numbered by the training step before them (0 before
  training). A run with no training row numbers the rows the hook counted, as before.

Without a map (``--no-static``, files that cannot be parsed) phases are unknown (None) and
the rows the hook did not count join the next row it counted, which is the hook's own
notion of a step.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from .events import Compile, HostRead, Location, Step, Trace

SETUP, TRAINING, EVALUATION = "setup", "training", "evaluation"
PHASES = (SETUP, TRAINING, EVALUATION)

#: Files of the script's program parsed for the map at most (the biggest programs' tails are
#: libraries of their own).
MAX_FILES = 64


@dataclass
class PhaseMap:
    """Per file (absolute path), its loops as :func:`xla_lint.analysis.loops.loop_spans` gives
    them; :meth:`of_frames` answers where a stack ran."""

    spans: dict[str, tuple] = field(default_factory=dict)
    #: ``(path, first line)`` of the loops an optimizer step ran in (the innermost loop of its
    #: stack): training loops, whatever their body says statically (the step function called
    #: through ``torch_xla.compile`` of pytorch/xla's examples reads as an evaluation).
    trained: frozenset = frozenset()

    @classmethod
    def of_files(cls, paths: Iterable[str]) -> PhaseMap:
        """The map of each readable, parseable Python file of ``paths`` (others left out)."""
        import libcst as cst

        from ..analysis.context import FileContext
        from ..analysis.loops import loop_spans

        spans: dict[str, tuple] = {}
        for path in paths:
            path = os.path.abspath(path)
            if path in spans or len(spans) >= MAX_FILES or not path.endswith(".py"):
                continue
            try:
                with open(path, encoding="utf-8") as handle:
                    module = cst.parse_module(handle.read())
                spans[path] = loop_spans(FileContext(module))
            except (OSError, UnicodeDecodeError, cst.ParserSyntaxError, RecursionError):
                continue
        return cls(spans)

    def of_frames(self, frames: Iterable) -> tuple[str | None, tuple | None]:
        """``(phase, loop)`` of a stack (``[path, line]`` pairs or locations, innermost
        first): the kind of the innermost loop holding the first frame that is inside a loop
        of its file, with that loop as ``(path, first line)``; ``(setup, None)`` when frames
        are in mapped files but in no loop; ``(None, None)`` when no frame is in a mapped file,
        or when none is in a loop and the innermost ran in a file not mapped (its loop, if
        any, is not known: not setup)."""
        from ..analysis.loops import innermost_loop

        known = False
        inner_unknown = False  # a user frame of a file not mapped ran inside the known ones
        for frame in frames:
            path: object
            line: object
            if isinstance(frame, Location):
                path, line = frame.path, frame.line
            elif isinstance(frame, dict):
                path, line = frame.get("path"), frame.get("line")
            else:
                path, line = frame[0], frame[1]
            if not isinstance(path, str) or not isinstance(line, int):
                continue
            spans = self.spans.get(os.path.abspath(path))
            if spans is None:
                inner_unknown = inner_unknown or not known
                continue
            known = True
            loop = innermost_loop(spans, line)
            if loop is not None:
                where = (os.path.abspath(path), loop.first)
                return (TRAINING if where in self.trained else str(loop.kind)), where
        return (SETUP, None) if known and not inner_unknown else (None, None)


def event_paths(trace: Trace) -> list[str]:
    """Every file a user frame of ``trace``'s events is in (boundaries, compiles, reads)."""
    paths: list[str] = []
    for s in trace.steps:
        paths += [f[0] for f in s.boundary_frames if f]
        if s.boundary is not None:
            paths.append(s.boundary.path)
    for c in [*trace.compiles, *trace.executions]:
        paths += [f.path for f in c.frames]
    for r in trace.host_reads:
        paths += [f[0] for f in r.frames if f]
        if r.location is not None:
            paths.append(r.location.path)
    return list(dict.fromkeys(p for p in paths if isinstance(p, str)))


def merge_rows(rows: list[Step], number: int) -> Step:
    """One row of ``rows`` (consecutive, in order), numbered ``number``: their times and
    counts summed, the last one's boundary, inputs and optimizer states."""
    last = rows[-1]
    if len(rows) == 1:
        return replace(last, step=number)

    def joined(name: str) -> list[list[float]] | None:
        values = [getattr(r, name) for r in rows]
        if all(v is None for v in values):
            return None
        return [x for v in values for x in v or []]

    return replace(
        last,
        step=number,
        duration_s=round(sum(r.duration_s for r in rows), 6),
        compiles=sum(r.compiles for r in rows),
        compile_s=round(sum(r.compile_s for r in rows), 6),
        compile_times_s=[t for r in rows for t in r.compile_times_s],
        executions=sum(r.executions for r in rows),
        transfers=sum(r.transfers for r in rows),
        transfer_s=round(sum(r.transfer_s for r in rows), 6),
        inputs=next((r.inputs for r in reversed(rows) if r.inputs), None),
        compile_samples=joined("compile_samples"),
        execute_samples=joined("execute_samples"),
        start=rows[0].start,
        trains=any(r.trains for r in rows),
        counted=any(r.counted for r in rows),
        batches=[b for r in rows for b in r.batches],
    )


def _row_phase(row: Step, phases: PhaseMap | None) -> tuple[str | None, tuple | None]:
    frames: list = list(row.boundary_frames) or ([row.boundary] if row.boundary else [])
    phase, loop = phases.of_frames(frames) if phases is not None else (None, None)
    if row.trains:
        return TRAINING, loop if phase == TRAINING else None
    return phase, loop


def place(trace: Trace, phases: PhaseMap | None) -> Trace:
    """``trace`` with its rows regrouped and placed (see the module docstring): each row's
    ``phase``, ``number`` and ``loop``, each compile's, execution's and host read's ``phase``
    (and an evaluation compile's ``loop``), every event's ``step`` the row it is now in
    (rows renumbered 1, 2, ... in order; the row after the last step is the next number).
    Rows the hook did not count that no counted row follows go to ``before_end``, which the
    row after the last step adds up. The events themselves are not changed. A loop an
    optimizer step ran in is training (:attr:`PhaseMap.trained`)."""
    if phases is not None:
        trained = {phases.of_frames(r.optimizer_frames)[1] for r in trace.steps}
        trained.discard(None)
        if trained:
            phases = replace(phases, trained=phases.trained | frozenset(trained))
    first_trains = next((r.step for r in trace.steps if r.trains), None)
    groups: list[list[Step]] = []
    pending: list[Step] = []
    for raw in trace.steps:
        row = replace(raw)
        row.phase, row.loop = _row_phase(row, phases)
        if (
            phases is not None
            and row.phase == TRAINING
            and first_trains is not None
            and row.step < first_trains
        ):
            # the hook counts every boundary once 8 passed without an optimizer step (an
            # optimizer that never steps); one stepped later, so a training-loop sync before
            # it (an evaluation function's trailing sync, the boundary before the first
            # `optimizer.step()`) is the first step's, not a step of its own
            row.counted = False
        if row.phase in (None, TRAINING) and not row.counted:
            pending.append(row)  # joins the training step after it
            continue
        if row.phase in (None, TRAINING):
            groups.append([*pending, row])
        else:
            if pending and groups and groups[-1][-1].phase in (None, TRAINING):
                # the training loop's last sync (an MpDeviceLoader syncs when it runs out)
                # ends the last step's tail, not a step of its own
                groups[-1].extend(pending)
            elif pending:
                groups.append(pending)
            groups.append([row])
        pending = []
    trailing: list[Step] = []
    if pending and trace.end is not None and all(r.phase is None for r in pending):
        trailing = pending  # the hook's partial step: the row after the last step
    elif pending:
        groups.append(pending)
    numbered = (
        TRAINING
        if any(g[-1].phase == TRAINING for g in groups)
        else None  # no training row: every row the hook counted is a step
    )
    rows: list[Step] = []
    moved: dict[int, int] = {}
    count = 0
    for index, group in enumerate(groups, 1):
        row = merge_rows(group, index)
        row.phase, row.loop = group[-1].phase, group[-1].loop
        if any(r.phase == TRAINING for r in group):
            row.phase = TRAINING
        if (numbered == TRAINING and row.phase == TRAINING) or (
            numbered is None and (row.counted or row.phase is None)
        ):
            count += 1
        row.number = count
        rows.append(row)
        for r in group:
            moved[r.step] = index
    after = len(groups) + 1
    for r in trailing:
        moved[r.step] = after
    last_raw = trace.steps[-1].step if trace.steps else 0
    moved.setdefault(last_raw + 1, after)

    def where(step: int) -> int:
        return moved.get(step, after if step > last_raw else step)

    by_number = {r.step: r for r in rows}

    def placed(event: Compile | HostRead, frames: list) -> None:
        if isinstance(event, Compile):
            event.raw_step = event.step
        event.step = where(event.step)
        phase, loop = phases.of_frames(frames) if phases is not None else (None, None)
        row = by_number.get(event.step)
        if phase is None and row is not None:
            phase, loop = row.phase, row.loop
        event.phase, event.loop = phase, loop

    compiles = [replace(c) for c in trace.compiles]
    executions = [replace(c) for c in trace.executions]
    for c in [*compiles, *executions]:
        placed(c, c.frames)
    reads = [replace(r) for r in trace.host_reads]
    for read in reads:
        at: list = [read.location] if read.location else []
        placed(read, read.frames or at)
    out = replace(
        trace,
        steps=rows,
        compiles=compiles,
        executions=executions,
        host_reads=reads,
        ir_diffs={where(k): v for k, v in trace.ir_diffs.items()},
    )
    out.before_end = trailing
    out.numbered = count
    out.placed_rows = {r.step: where(r.step) for r in trace.steps}
    out.raw_rows = {r.step: r for r in trace.steps}
    out.mapped = phases is not None
    return out


def label(row: Step | None, number: int | None = None) -> str:
    """How a row is named in messages: ``step 3``, ``the evaluation after step 3``,
    ``setup`` (before the first training step), ``setup after step 3``."""
    if row is None:
        return f"step {number}" if number is not None else "a step"
    if row.final:
        return "after the last step"
    if row.phase in (None, TRAINING) or not row.phase:
        return f"step {row.number}"
    what = "the evaluation" if row.phase == EVALUATION else "setup"
    return f"{what} after step {row.number}" if row.number else what


def loaders_by_id(trace: Trace) -> dict[int, dict]:
    """The ``loader`` events by the id the hook gave them (an MpDeviceLoader's under the
    DataLoader it wraps, too, when that one has no event of its own)."""
    out: dict[int, dict] = {}
    for loader in trace.loaders:
        if isinstance(loader.get("id"), int) and loader.get("kind") == "DataLoader":
            out[loader["id"]] = loader
    return out


__all__ = [
    "EVALUATION",
    "PHASES",
    "SETUP",
    "TRAINING",
    "PhaseMap",
    "event_paths",
    "label",
    "loaders_by_id",
    "merge_rows",
    "place",
]
