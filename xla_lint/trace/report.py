"""From the events of one traced run to findings, and the report as text or JSON.

A *finding* is a runtime event mapped to the rule that prevents it:

* a host read (``.item()``, ``.cpu()``, ``print(tensor)``, a tensor in ``if``, ...) at the same
  place in at least half of the traced steps (and at least two): **XLA201**;
* a compile after warm-up with a new input shape whose leading dimension is the remainder of
  a ``DataLoader`` without ``drop_last``: **XLA202**;
* optimizer steps without a step boundary, or several optimizer steps in one step: **XLA203**;
* a compile after warm-up with the same input shapes, in the step where an Adam-style
  optimizer's ``sqrt(1 - beta2**step)`` first rounds to exactly 1.0 in the parameters' dtype
  (torch_xla bakes 0 and 1 into the graph as constants): **XLA204**;
* in SPMD, a batch tensor replicated while another tensor of the same batch, with the same
  leading dimension, is split on it: **XLA022**.

Every row and event is placed in its phase (setup, training, evaluation) by the script's own
loops (:mod:`xla_lint.trace.phases`). Warm-up is counted in training steps: the first compile
of each graph in the training steps before the first one that compiled nothing (the first two
when every one compiled); an evaluation loop's whole first pass over its loader is its own
warm-up, whatever the loader (a new input shape after its first is not); a setup compile is
a recompile only when its line compiled in an earlier pass. A compile for a loader's smaller last
batch is never warm-up (unless nothing came before it). Other compiles after warm-up are
reported without a code, with their reason (a new input shape, or identical shapes and a
changed graph), against the loop and loader that ran them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from ..catalogue import BY_CODE
from ..diagnostics import Diagnostic
from ..scalars import recompile_step
from ..shards import shard_bytes
from .events import Compile, HostRead, Location, Step, Trace, device_times
from .hook import is_sync_cause
from .phases import EVALUATION, SETUP, TRAINING, PhaseMap, label, loaders_by_id, merge_rows, place

#: Codes the trace can observe; a static diagnostic of another code is "not observable".
TRACEABLE = ("XLA022", "XLA201", "XLA202", "XLA203", "XLA204")

FIXES = {
    "XLA201": (
        "keep the value on the device and read it every N steps, or read it after the step's graph ran: "
        "`xm.add_step_closure(lambda: print(loss.item()))`"
    ),
    "XLA202": "`DataLoader(..., drop_last=True)`, or pad the last batch to the full batch size",
    "XLA203": (
        "end every step with a boundary: `with torch_xla.step():` around the step, `torch_xla.sync()` "
        "after `optimizer.step()`, or iterate a `pl.MpDeviceLoader`"
    ),
    "XLA204": (
        "`capturable=True` keeps the step counter on the device (no constant, no recompile); or accept "
        "the one compile"
    ),
    "XLA022": (
        "give every batch tensor its own spec: a dict batch with `input_sharding={'x': "
        "xs.ShardingSpec(mesh, ('data', None)), 'y': xs.ShardingSpec(mesh, ('data',))}`, or "
        "`xs.mark_sharding(y, mesh, ('data',))` after loading"
    ),
    None: "make the step's graph the same every step (fixed shapes; no Python values that change per step)",
}

#: The exceptions a static finding predicts: when the script dies of one at the finding's line,
#: the finding is confirmed and named as the cause (XLA013: a removed module raises
#: ImportError at its import, a removed function AttributeError at its use).
PREDICTED_ERRORS = {"XLA013": ("AttributeError", "ImportError", "ModuleNotFoundError")}

ADAM_CLASSES = ("Adam", "AdamW", "NAdam", "RAdam")
_DEVICES = re.compile(r"devices=\[([0-9,]+)\]")


def rule_name(code: str | None) -> str:
    """The rule's kebab-case name, from the rule catalogue ("recompile" for a compile no rule covers)."""
    if code is None:
        return "recompile"
    info = BY_CODE.get(code)
    return info.name if info is not None else code


def adam_constant_step(beta2: float, dtype: str) -> int | None:
    """The first optimizer step at which Adam's ``sqrt(1 - beta2**step)`` rounds to 1.0 in
    ``dtype``: :func:`xla_lint.scalars.recompile_step`, the one computation the rule XLA204
    and the runtime checker's probe use too."""
    return recompile_step(beta2, dtype)


def shards(spec: str | None) -> tuple[int, ...]:
    """How many ways each dimension is split by an HloSharding text (``()``: not split)."""
    if not spec:
        return ()
    match = _DEVICES.search(spec)
    if not match:
        return ()
    dims = tuple(int(x) for x in match.group(1).split(",") if x)
    if "last_tile_dim_replicate" in spec or "last_tile_dims" in spec:
        dims = dims[:-1]
    return dims if any(d > 1 for d in dims) else ()


@dataclass
class Finding:
    """One runtime finding: the rule, where, what happened, the fix, and what it cost."""

    code: str | None
    title: str
    message: str
    location: Location | None
    related: list[Location] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    cost_s: float = 0.0
    ranks: list[int] | None = None  # one process per device: the ranks that showed it
    fix: str | None = None  # the fix, when not the code's usual one (FIXES)

    def to_json(self) -> dict:
        """The finding as in ``--json``."""
        out = {
            "code": self.code,
            "name": rule_name(self.code),
            "title": self.title,
            "message": self.message,
            "fix": self.fix or FIXES.get(self.code, FIXES[None]),
            "location": self.location.to_json() if self.location else None,
            "related": [r.to_json() for r in self.related],
            "steps": self.steps,
            "cost_s": round(self.cost_s, 6),
        }
        if self.ranks is not None:
            out["ranks"] = self.ranks
        return out

    def places(self) -> list[Location]:
        """The location and the related ones."""
        return ([self.location] if self.location else []) + self.related


@dataclass
class Analysis:
    """What the events say: warm-up, each compile's reason, host reads by place, findings."""

    trace: Trace
    warmup: set[int]
    compiles: list[dict]
    host_reads: list[dict]
    findings: list[Finding]
    sharding: dict
    final: Step | None = None  # the row after the last step (:func:`final_step`)
    notes: list[str] = field(default_factory=list)


def _warmup(steps: list[Step]) -> set[int]:
    """The rows of ``steps`` (one phase's, in order) before the first that compiled nothing
    once an optimizer step ran (in that row or before it: a sync before the first
    ``optimizer.step()``, such as an evaluation function's last one, compiles nothing and is
    not a step); the first two from the first that trained when every one compiled. Without
    any optimizer step, the same from the first row."""
    trained = next((i for i, s in enumerate(steps) if s.trains), 0)
    quiet = next((i for i, s in enumerate(steps) if s.compiles == 0 and i >= trained), None)
    if quiet is None:
        return {s.step for s in steps[: trained + 2]}
    return {s.step for s in steps[:quiet]}


def group_of(phase: str | None, loop: tuple | None) -> object:
    """The warm-up group of a row or compile: ``training`` (also a phase not known), an
    evaluation loop (its first pass is its warm-up), or ``setup`` (outside loops, or in a loop
    of setup work such as the epoch loop around training and evaluation: a compile there is
    setup the first time its line compiles, :func:`_compiles`)."""
    if phase in (None, TRAINING):
        return TRAINING
    if loop is not None and phase != SETUP:
        return ("loop", loop)
    return SETUP


def _first_pass(rows: list[Step]) -> list[Step]:
    """The first run of consecutive rows (by number) of one loop: its first pass."""
    out: list[Step] = []
    for r in rows:
        if out and r.step != out[-1].step + 1:
            break
        out.append(r)
    return out


def partial_batch(trace: Trace, step: Step | None) -> tuple[dict, dict | None] | None:
    """``(loader event, batch)`` when the row's batch is the smaller last batch of a
    DataLoader without ``drop_last`` (its leading dimension is ``dataset_size % batch_size``):
    the row's own batches, each with the loader that handed it, else (older events) any
    DataLoader whose remainder is the row's input size (``batch`` None)."""
    if step is None:
        return None
    loaders = loaders_by_id(trace)
    for batch in reversed(step.batches):
        loader = loaders.get(batch.get("loader", -1))
        inputs = batch.get("inputs") or []
        if loader is None or not inputs or not inputs[0].get("shape"):
            continue
        if _remainder(loader, inputs[0]["shape"][0]):
            return loader, batch
    if step.batches and any(b.get("loader") in loaders for b in step.batches):
        return None
    loader = _partial_batch_loader(trace, step)
    return (loader, None) if loader is not None else None


def _remainder(loader: dict, leading: int) -> bool:
    """Whether a batch of ``leading`` samples is the smaller last batch of ``loader``."""
    batch = loader.get("batch_size")
    if loader.get("kind") != "DataLoader" or loader.get("drop_last") or not batch:
        return False
    size = loader.get("dataset_size")
    return leading < batch and (size is None or size % batch == leading)


#: Seconds of slack when a compile sample's start is matched to a host read's span (the
#: sample's start is its wall-clock stamp minus its duration; the span is the hook's clock).
SPAN_SLACK_S = 0.002

#: torch_xla's words for a compile that only the ``CompileTime`` metric counts: no debug block.
UNREPORTED_CAUSE = "a compile during a host read that torch_xla's debug output does not report"


def _tail(trace: Trace) -> Step | None:
    """What the script did after its last boundary, from the ``end`` event's figures (None
    without them); it also carries the execution samples read last."""
    if trace.end is None:
        return None
    number = (trace.steps[-1].step + 1) if trace.steps else 1
    last = trace.steps[-1] if trace.steps else None
    started = last.start + last.duration_s if last is not None and last.start is not None else None
    row = Step.after_last(trace.end, number, started)
    if row is not None and trace.before_end:
        first = trace.before_end[0].start
        row = merge_rows([*trace.before_end, row], number)
        row.final, row.start = True, first if first is not None else row.start
        row.number = last.number if last is not None else 0
    elif row is not None:
        row.number = last.number if last is not None else 0
    return row


def final_step(trace: Trace) -> Step | None:
    """The row after the last step: what the script did after its last boundary (a final
    evaluation, a print of the loss), from the ``end`` event; None when nothing happened
    there (no compile, host read or mid-step graph) or the figures are missing."""
    row = _tail(trace)
    if row is None:
        return None
    number = row.step
    happened = (
        row.compiles
        or row.compile_samples
        or any(c.step == number for c in trace.compiles)
        or any(e.step == number for e in trace.executions)
        or any(r.step == number for r in trace.host_reads)
    )
    return row if happened else None


def pair_compile_times(
    step: Step | None, blocks: list[Compile], reads: list[HostRead]
) -> tuple[list[float | None], list[tuple[HostRead, float]]]:
    """Each compile block's time, and the compiles no block reported, each with the read it
    happened in: ``(times, [(read, seconds), ...])``.

    A ``CompileTime`` sample (``step.compile_samples``: start, seconds) belongs to the host
    read whose span holds its start, else to the step's own flow (its boundary, a value read
    by another path). A block torch_xla wrote for a value read takes the first sample of a
    read at its line; any other block the first sample of the step's own flow; never a
    sample by its position in the step (reading a sharded tensor compiles a gather that has
    a sample and no block: paired by position, it would lend the step's graph its time).
    Samples left in a read are compiles torch_xla did not report. A step without samples
    (ranks sharing a process, whose times are the process's mean: all equal) keeps its
    ``compile_times_s`` in order."""
    if step is None:
        return [None] * len(blocks), []
    if step.compile_samples is None:
        given = step.compile_times_s
        return [given[i] if i < len(given) else None for i in range(len(blocks))], []
    samples = sorted(step.compile_samples)
    owners = [_sample_owner(began, reads, step.boundary_at) for began, _ in samples]
    used = [False] * len(samples)

    def take(test) -> float | None:
        for i, owner in enumerate(owners):
            if not used[i] and test(owner):
                used[i] = True
                return samples[i][1]
        return None

    times: list[float | None] = []
    for block in blocks:
        found = None
        if not is_sync_cause(block.cause) and block.location is not None:
            at = block.location
            mine = [
                i
                for i, o in enumerate(owners)
                if not used[i] and o is not None and o.location == at
            ]
            # a value read inside a torch op at the same line came first (``x[mask]`` reads
            # the number of elements to the host before the line's `.item()`): its block
            # takes the row's own sample that began before that read's
            earlier = [
                i
                for i, o in enumerate(owners)
                if not used[i] and o is None and mine and samples[i][0] < samples[mine[0]][0]
            ]
            if earlier and sum(b.location == at for b in blocks) > 1:
                used[earlier[0]] = True
                found = samples[earlier[0]][1]
            else:
                found = take(lambda o, at=at: o is not None and o.location == at)
        if found is None:
            found = take(lambda o: o is None)
        times.append(found)
    extra = [
        (owner, samples[i][1])
        for i, owner in enumerate(owners)
        if not used[i] and owner is not None
    ]
    return times, extra


def _sample_owner(
    began: float, reads: list[HostRead], boundary_at: float | None
) -> HostRead | None:
    """The host read a ``CompileTime`` sample that began at ``began`` belongs to: the read
    whose span holds it, else one within :data:`SPAN_SLACK_S` of it, but never a read that
    ended before the row's boundary began (``boundary_at``) for a sample that began after:
    the sync right after a read compiles the step's graph (nanoGPT-TPU's eval batch: the
    boundary's 1.9 s compile was the last read's, its block got no time, and the read's own
    sample was a compile "that torch_xla's debug output does not report"); None: the row's
    own flow."""
    spans = [(r, a, b) for r in reads for a, b in r.compile_spans]
    for r, a, b in spans:
        if a <= began <= b:
            return r
    for r, a, b in spans:
        if a - SPAN_SLACK_S <= began <= b + SPAN_SLACK_S and not (
            boundary_at is not None and b < boundary_at <= began
        ):
            return r
    return None


def warmup_rows(trace: Trace) -> dict[object, set[int]]:
    """Per warm-up group (:func:`group_of`), the rows that are its warm-up: for training, the
    training rows before the first that compiled nothing (the first two when every one did):
    warm-up is counted in training steps, not in syncs; for another loop, the same over its
    first pass: all its rows up to the first gap, whatever its loader (an ``MpDeviceLoader``
    syncs before its first batch, a row that compiles nothing; ``correct += ...`` from a
    Python 0 compiles a second graph on the second batch). A new input shape inside the first
    pass is not warm-up (:func:`_compiles`)."""
    groups: dict[object, list[Step]] = {}
    for s in trace.steps:
        groups.setdefault(group_of(s.phase, s.loop), []).append(s)
    out: dict[object, set[int]] = {}
    for key, rows in groups.items():
        if key == SETUP:
            continue
        out[key] = _warmup(rows) if key == TRAINING else {r.step for r in _first_pass(rows)}
    return out


def _passes(steps: list[Step]) -> dict[int, int]:
    """Each row's pass: rows of the same warm-up group (:func:`group_of`) in a run share one;
    the number grows whenever the group changes (setup after each evaluation is a new pass)."""
    out: dict[int, int] = {}
    previous: object = None
    number = 0
    for s in steps:
        key = group_of(s.phase, s.loop)
        if key != previous:
            number += 1
            previous = key
        out[s.step] = number
    return out


def _compiles(
    trace: Trace, warmup: dict[object, set[int]], final: Step | None = None
) -> list[dict]:
    """Every compile with its reason: ``warm-up`` (the first compile of each graph in its
    group's warm-up rows, :func:`warmup_rows`; in an evaluation loop's first pass, not a new
    input shape after its first one), ``setup`` (outside the training and evaluation loops, the
    first time its line compiles or again in the same pass), ``after-last-step``,
    ``host-read`` (a compile only ``CompileTime`` saw), or after warm-up: ``new-input-shape`` /
    ``same-input-shapes`` (compared with the earlier rows of the same group: an evaluation
    loop against its own batches) / ``unknown-inputs`` (also a setup line that compiled a new
    graph in a later pass than its first)."""
    by_step = {s.step: s for s in trace.steps}
    if final is not None:
        by_step[final.step] = final
    out = []
    signatures_before: dict[int, set] = {}
    running: dict[object, set] = {}
    first_row: dict[object, int] = {}
    own_rows: dict[object, list[Step]] = {}  # an evaluation loop's rows of its own
    for s in trace.steps:
        key = group_of(s.phase, s.loop)
        if key not in (TRAINING, SETUP):
            own_rows.setdefault(key, []).append(s)
        first_row.setdefault(key, s.step)
        signatures_before[s.step] = set(running.get(key, set()))
        if s.signature() is not None:
            running.setdefault(key, set()).add(s.signature())
    blocks: dict[int, list[Compile]] = {}
    for c in trace.compiles:
        blocks.setdefault(c.step, []).append(c)
    reads: dict[int, list[HostRead]] = {}
    for r in trace.host_reads:
        reads.setdefault(r.step, []).append(r)
    seen: set[str] = set()
    passes = _passes(trace.steps)
    trains = sorted(n for n, r in trace.raw_rows.items() if r.trains)
    rebuilt = _rebuilt_passes(trace, passes)
    loop_first: dict[object, int] = {}  # a loop without rows of its own: its first row
    loop_seen: dict[object, set] = {}  # ... and the batch shapes it had before this row
    setup_lines: dict[Location, int] = {}  # a setup line that compiled: the pass it first did
    for number in sorted(set(blocks) | {n for n, s in by_step.items() if s.compile_samples}):
        step = by_step.get(number)
        times, extra = pair_compile_times(step, blocks.get(number, []), reads.get(number, []))
        row_seen: dict[object, set] = {}
        for c, time_s in zip(blocks.get(number, []), times, strict=True):
            key = group_of(c.phase, c.loop)
            if (
                key not in (TRAINING, SETUP)
                and step is not None
                and not step.final
                and group_of(step.phase, step.loop) != key
            ):
                # an evaluation loop with no sync of its own ran inside this row: its own pass
                earlier = [r for r in own_rows.get(key, []) if r.step < c.step]
                out.append(
                    _unrowed(
                        trace, c, time_s, step, blocks[number], loop_first, loop_seen, seen, earlier
                    )
                )
                fed = [b for b in _fed_batches(step) if b.get("inputs")]
                row_seen.setdefault(key, set()).update(_batch_signature(b) for b in fed)
                continue
            rows = warmup.get(key)
            if rows is None and key != SETUP:
                # a loop with no boundary of its own: its first row with a compile is its warm-up
                rows = warmup[key] = {c.step}
            new_graph = c.graph_hash is None or c.graph_hash not in seen
            if c.graph_hash is not None:
                seen.add(c.graph_hash)
            partial = (
                partial_batch(trace, step)
                if step is not None and not step.final and first_row.get(key) != c.step
                else None
            )
            before = signatures_before.get(c.step, set())
            new_shape = (
                key not in (TRAINING, SETUP)
                and step is not None
                and step.signature() is not None
                and bool(before)
                and step.signature() not in before
            )  # an evaluation loop's first pass: a shape after its first is not warm-up
            again = False  # a setup line that compiled in an earlier pass: a recompile
            if key == SETUP and c.location is not None:
                first = setup_lines.setdefault(c.location, passes.get(c.step, 0))
                again = new_graph and first != passes.get(c.step, 0)
            raw = trace.raw_rows.get(c.raw_step) if c.raw_step is not None else None
            if step is not None and step.final:
                reason = "after-last-step"
            elif (
                not trace.mapped
                and raw is not None
                and not raw.trains
                and trains
                and raw.step > trains[0]
            ):
                # phases not known (--no-static): a sync outside the training steps (an
                # evaluation, a mesh_reduce) is not a recompile of the step it joined
                reason = "unplaced"
            elif (step is None and not trace.steps) or (
                rows is not None
                and c.step in rows
                and new_graph
                and partial is None
                and not new_shape
            ):
                reason = "warm-up"
            elif (key, passes.get(c.step)) in rebuilt:
                # the first pass of a new model (or new parameters): its last batch is XLA202
                reason = "new-input-shape" if partial is not None else "warm-up"
            elif key == SETUP and not again:
                reason = "setup"
            elif step is None or step.signature() is None:
                reason = "new-input-shape" if partial is not None else "unknown-inputs"
            elif step.signature() in before:
                reason = "same-input-shapes"
            else:
                reason = "new-input-shape"
            entry: dict[str, object] = {
                "step": step.number if step is not None else c.step,
                "row": c.step,
                "phase": c.phase,
                "after_warmup": reason not in ("warm-up", "after-last-step", "setup", "unplaced"),
                "reason": reason,
                "cause": c.cause,
                "graph_hash": c.graph_hash,
                "location": c.location.to_json() if c.location else None,
                "time_s": time_s,
                "partial": c.partial,
            }
            diff = trace.ir_diffs.get(c.step)
            if diff is not None and entry["after_warmup"] and _diff_is_of(trace, diff, c, raw):
                entry["explain"] = diff.get("changes") or []
            out.append(entry)
        for key, sigs in row_seen.items():
            loop_seen.setdefault(key, set()).update(sigs)
        for read, time_s in extra:
            out.append(
                {
                    "step": step.number if step is not None else number,
                    "row": number,
                    "phase": read.phase,
                    "after_warmup": False,
                    "reason": "host-read",
                    "cause": f"{UNREPORTED_CAUSE} (`{read.kind}`; in SPMD, reading a sharded "
                    "tensor compiles the gather of its shards)",
                    "graph_hash": None,
                    "location": read.location.to_json() if read.location else None,
                    "time_s": time_s,
                    "partial": False,
                }
            )
    return out


def _rebuilt_passes(trace: Trace, passes: dict[int, int]) -> set[tuple]:
    """``(loop group, pass)`` of each later pass of an evaluation loop that compiled like a
    first pass: every graph it compiled is new, at the same rows of the pass (counted from its
    first) as the loop's first pass compiled. That is another model's first pass (one rebuilt
    or reloaded from a checkpoint: its graphs are other programs from the first batch on), not
    a graph that changed from batch to batch."""
    start: dict[int, int] = {}
    for s in trace.steps:
        start.setdefault(passes[s.step], s.step)
    seen: set[str] = set()
    by_pass: dict[tuple, list[tuple[int, bool]]] = {}
    for c in sorted(trace.compiles, key=lambda c: c.step):
        key = group_of(c.phase, c.loop)
        new = c.graph_hash is None or c.graph_hash not in seen
        if c.graph_hash is not None:
            seen.add(c.graph_hash)
        number = passes.get(c.step)
        if key in (TRAINING, SETUP) or number is None:
            continue
        by_pass.setdefault((key, number), []).append((c.step - start[number], new))
    first: dict[object, list[tuple[int, bool]]] = {}
    out: set[tuple] = set()
    for (key, number), marks in sorted(by_pass.items(), key=lambda kv: kv[0][1]):
        if key not in first:
            first[key] = marks
        elif all(new for _, new in marks) and sorted(marks) == sorted(first[key]):
            out.add((key, number))
    return out


def _diff_is_of(trace: Trace, diff: dict, c: Compile, raw: Step | None) -> bool:
    """Whether ``--explain``'s IR diff (the optimizers' parameters' graph at a row's boundary
    against the last one taken) is about compile ``c``: ``c`` is that row's step graph, in the
    same row, at its boundary, in training (or a phase not known). Another compile of the row
    (an evaluation, a ``mesh_reduce``) made another graph than the one diffed."""
    if raw is None or diff.get("step") != c.raw_step or c.phase not in (None, TRAINING):
        return False
    # the text diffed against is the last one taken: the row before's, when it ran the same
    # boundary (after an evaluation or a setup sync it is another loop's graph: no diff)
    before = trace.raw_rows.get(raw.step - 1)
    return (
        c.location is not None
        and c.location == raw.boundary
        and before is not None
        and before.boundary == raw.boundary
        and before.trains == raw.trains
    )


def _batch_signature(batch: dict) -> tuple:
    return tuple((tuple(i.get("shape") or ()), i.get("dtype")) for i in batch.get("inputs") or [])


def _fed_batches(step: Step) -> list[dict]:
    """The batches of a row that its own loop did not take: a training row's batches of other
    loaders than its last batch's (an evaluation loop with no sync of its own ran there)."""
    if not step.batches:
        return []
    own = step.batches[-1].get("loader")
    return [b for b in step.batches if b.get("loader") != own]


def _unrowed(
    trace: Trace,
    c: Compile,
    time_s: float | None,
    step: Step,
    blocks: list[Compile],
    loop_first: dict[object, int],
    loop_seen: dict[object, set],
    seen: set[str],
    earlier: list[Step] | None = None,
) -> dict:
    """The entry of a compile of an evaluation loop that ran inside a row of another loop (a
    training row: it ran after the step before it): a loop with no sync of its own, or the
    first batch of a later pass of a loop whose boundary comes after a training step that the
    script's own boundary did not end (``xm.mark_step()`` before ``xm.optimizer_step``: the
    row holds that optimizer step, so it trains). Its first pass (the first row it compiled
    in, unless the loop had rows of its own before: ``earlier``) is its warm-up, except the
    last compile of the pass when the loop's loader handed its smaller last batch there (a
    DataLoader without drop_last: XLA202); a later new graph is compared with the batches the
    loop had before (or, without a loader's batches, with the inputs of its earlier rows)."""
    key = group_of(c.phase, c.loop)
    mine = [b for b in blocks if group_of(b.phase, b.loop) == key]
    index = next(i for i, b in enumerate(mine) if b is c)
    first = loop_first.setdefault(key, c.step) == c.step and not earlier
    new_graph = c.graph_hash is None or c.graph_hash not in seen
    if c.graph_hash is not None:
        seen.add(c.graph_hash)
    fed = [b for b in _fed_batches(step) if b.get("inputs")]
    before = loop_seen.get(key, set())
    own = {r.signature() for r in earlier or []} - {None}
    loaders = loaders_by_id(trace)
    last = fed[-1] if fed else None
    loader = loaders.get(last.get("loader", -1)) if last is not None else None
    shape = (last["inputs"][0].get("shape") or [None])[0] if last is not None else None
    remainder = (
        loader is not None
        and isinstance(shape, int)
        and _remainder(loader, shape)
        and _batch_signature(last) not in before  # type: ignore[arg-type]
    )
    if new_graph and remainder and index == len(mine) - 1 and (index > 0 or not first):
        reason = "new-input-shape"
    elif first and new_graph:
        reason = "warm-up"
    elif fed and all(_batch_signature(b) in before for b in fed):
        reason = "same-input-shapes"
    elif fed:
        reason = "new-input-shape"
    elif own and step.signature() is not None:
        # the row's first inputs are the loop's batch (its model call came first in the row)
        reason = "same-input-shapes" if step.signature() in own else "new-input-shape"
    else:
        reason = "unknown-inputs"
    return {
        # the training step before the row it ran in (or, in a row of setup or evaluation,
        # the step that row follows)
        "step": step.number - 1 if step.phase == TRAINING else step.number,
        "row": c.step,
        "phase": c.phase,
        "after_warmup": reason != "warm-up",
        "reason": reason,
        "cause": c.cause,
        "graph_hash": c.graph_hash,
        "location": c.location.to_json() if c.location else None,
        "time_s": time_s,
        "partial": c.partial,
    }


def _host_reads(trace: Trace) -> list[dict]:
    """Host reads grouped by kind and place, each with the steps it happened in and how many
    of its reads made torch_xla run a graph mid-step (an execution report, cause "user code
    trying to access tensor value", at the same step and line). An execution report at a
    line with no patched read (``torch.equal``, a C++ path) becomes a ``value read``."""
    ran: dict[tuple, int] = {}
    for e in trace.executions:
        if e.location is not None:
            ran[(e.step, e.location)] = ran.get((e.step, e.location), 0) + 1
    reads = [(r.kind, r.location, r.step, r.count, r.closure, r.phase) for r in trace.host_reads]
    read_at = {(r.step, r.location) for r in trace.host_reads}
    phase_at = {(e.step, e.location): e.phase for e in trace.executions}
    reads += [
        ("value read", loc, step, n, None, phase_at.get((step, loc)))
        for (step, loc), n in ran.items()
        if (step, loc) not in read_at
    ]
    grouped: dict[tuple, dict] = {}
    for kind, location, step, count, closure, phase in reads:
        if closure is None and location is not None and in_step_closure_at(location):
            closure = "closure"  # the static model: a function given to xm.add_step_closure
        entry = grouped.setdefault(
            (kind, location, closure, phase),
            {
                "kind": kind,
                "location": location,
                "steps": set(),
                "count": 0,
                "per_step": {},
                "forced_execution": 0,
                "closure": closure,
                "phase": phase,
            },
        )
        entry["steps"].add(step)
        entry["count"] += count
        entry["per_step"][step] = entry["per_step"].get(step, 0) + count
        entry["forced_execution"] += min(count, ran.pop((step, location), 0))
    out = []
    for entry in grouped.values():
        entry["steps"] = sorted(entry["steps"])
        out.append(entry)
    out.sort(key=lambda e: (-len(e["steps"]), -e["count"]))
    return out


def numbered_rows(trace: Trace) -> list[Step]:
    """The rows that are steps: the training rows, or (a run without any) every row the hook
    counted (:func:`xla_lint.trace.phases.place`)."""
    training = [s for s in trace.steps if s.phase == TRAINING]
    if training:
        return training
    return [s for s in trace.steps if s.counted or s.phase is None]


def _per_step_reads(trace: Trace, reads: list[dict]) -> list[Finding]:
    """XLA201: a read at the same place in at least half of the steps (and two), in the
    training loop (evaluation and setup reads are not per training step)."""
    rows = numbered_rows(trace)
    done = len(rows)
    by_step = {s.step: s for s in rows}
    # A step's host-transfer time is one figure (torch_xla's TransferFromDeviceTime over the
    # step): each read place gets its share by read count, not the whole of it (two reads a
    # step each showed the step's total).
    reads_in: dict[int, int] = {}
    for read in trace.host_reads:
        reads_in[read.step] = reads_in.get(read.step, 0) + read.count
    findings = []
    for r in reads:
        if r.get("phase") in (SETUP, EVALUATION) and any(s.phase == TRAINING for s in rows):
            continue
        steps = [s for s in r["steps"] if s in by_step]
        if len(steps) < 2 or 2 * len(steps) < done:
            continue
        if r.get("closure"):
            continue  # read after the step's graph ran: what xm.add_step_closure is for
        per_step = r.get("per_step", {})
        cost = sum(
            by_step[s].transfer_s
            * per_step.get(s, 0)
            / max(reads_in.get(s, 0), per_step.get(s, 0), 1)
            for s in steps
        )
        forced = r["forced_execution"]
        what = r["kind"]
        if forced:
            effect = (
                f"it made torch_xla run a graph before the step boundary {forced} times (an extra graph "
                "per step, and the device waits for the host)"
            )
        else:
            effect = "each read waits for the step's graph to finish: the host stops tracing the next step"
        message = (
            f"`{what}` copied a tensor to the host in {len(steps)} of {done} steps "
            f"({r['count']} reads); {effect}"
        )
        findings.append(
            Finding(
                "XLA201",
                f"{what} on every step",
                message,
                r["location"],
                [],
                [by_step[s].number for s in steps],
                cost,
            )
        )
    return findings


def _closure_notes(trace: Trace, reads: list[dict]) -> list[str]:
    """A note for each read in a synchronous step closure at most steps: torch_xla runs it
    inside ``torch_xla.sync`` once the step's graph is launched (``_run_step_closures`` in
    core/xla_model.py), so the host waits there for the graph before tracing the next step."""
    rows = numbered_rows(trace)
    done = len(rows)
    notes = []
    for r in reads:
        steps = [s for s in r["steps"] if any(x.step == s for x in rows)]
        if r.get("closure") != "sync" or len(steps) < 2 or 2 * len(steps) < done:
            continue
        notes.append(
            f"`{r['kind']}` at {_where(r['location'])} runs in a step closure "
            f"(`xm.add_step_closure`) in {len(steps)} of {done} steps: it is not XLA201 (the "
            "step's graph has run), but torch_xla runs a synchronous closure inside "
            "`torch_xla.sync`, so the host waits there for the graph to finish before it traces "
            "the next step; `run_async=True`, or adding the closure every N steps, lets it run "
            "ahead"
        )
    return notes


@functools.lru_cache(maxsize=128)
def step_closure_spans(path: str) -> tuple[tuple[int, int], ...]:
    """The lines (first, last) of each function or lambda the module at ``path`` gives to
    ``xm.add_step_closure``, as the linter's model knows them
    (:class:`xla_lint.analysis.loops.StepClosures`); ``()`` for a file that cannot be read
    or parsed."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from ..analysis.context import FileContext
    from ..analysis.loops import StepClosures

    try:
        with open(path, encoding="utf-8") as handle:
            module = cst.parse_module(handle.read())
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
        return ()
    closures = StepClosures.of(FileContext(module))
    if not closures.names and not closures.lambdas:
        return ()
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    spans = []
    for node, where in positions.items():
        named = isinstance(node, cst.FunctionDef) and node.name.value in closures.names
        if named or (isinstance(node, cst.Lambda) and id(node) in closures.lambdas):
            spans.append((where.start.line, where.end.line))
    return tuple(sorted(spans))


def in_step_closure_at(location: Location) -> bool:
    """Whether ``location`` is inside a step closure of its module (:func:`step_closure_spans`)."""
    if not location.path.endswith(".py") or not os.path.isfile(location.path):
        return False
    return any(a <= location.line <= b for a, b in step_closure_spans(location.path))


def _partial_batch_loader(trace: Trace, step: Step) -> dict | None:
    """The DataLoader without drop_last whose remainder is this step's batch size."""
    if not step.inputs:
        return None
    leading = step.inputs[0]["shape"][0] if step.inputs[0]["shape"] else None
    for loader in trace.loaders:
        if (
            loader.get("kind") != "DataLoader"
            or loader.get("drop_last")
            or not loader.get("batch_size")
        ):
            continue
        size, batch = loader.get("dataset_size"), loader["batch_size"]
        if leading is not None and leading < batch and (size is None or size % batch == leading):
            return loader
    return None


def _adam_at(trace: Trace, step: Step) -> tuple[dict, int, int] | None:
    """The Adam-style optimizer whose bias correction becomes the constant 1.0 at this step:
    ``(optimizer event, the optimizer's step, the predicted step)``."""
    states = {o.get("id"): o.get("step") for o in step.optimizers}
    for opt in trace.optimizers:
        if opt.get("class") not in ADAM_CLASSES or opt.get("capturable") or not opt.get("betas"):
            continue
        value = states.get(opt.get("id"))
        if not isinstance(value, (int, float)):
            continue
        dtype = "float64" if opt.get("foreach") else (opt.get("dtype") or "float32")
        predicted = adam_constant_step(float(opt["betas"][1]), dtype)
        if predicted is not None and int(value) == predicted:
            return opt, int(value), predicted
    return None


def _recompiles(trace: Trace, compiles: list[dict]) -> list[Finding]:
    """A finding per kind and place of compile after warm-up; a smaller last batch (XLA202)
    is reported at the DataLoader that handed it, with its size and batch size."""
    by_step = {s.step: s for s in trace.steps}
    findings: dict[tuple, Finding] = {}
    for c in compiles:
        if not c["after_warmup"]:
            continue
        step = by_step.get(c["row"])
        trigger = Location.from_json(c["location"])
        time_s = c["time_s"] or 0.0
        code, location, related = None, trigger, []
        name = label(step, c["step"])
        if step is not None and c["phase"] == EVALUATION and step.phase != EVALUATION:
            # an evaluation loop with no sync of its own, inside a training row
            name = f"the evaluation after step {c['step']}" if c["step"] else "the evaluation"
        if c["reason"] == "new-input-shape" and step is not None:
            found = partial_batch(trace, step)
            batch = found[1] if found is not None else None
            inputs = (batch or {}).get("inputs") or step.inputs or []
            shapes = ", ".join(str(tuple(i["shape"])) for i in inputs)
            if found is not None:
                loader = found[0]
                code, location = "XLA202", Location.from_json(loader.get("location")) or trigger
                related = [trigger] if trigger else []
                title = "a new graph for the last, smaller batch"
                index = f"batch {batch['index']}" if batch and batch.get("index") else "a batch"
                size = loader.get("dataset_size")
                message = (
                    f"{name} got {index} of {shapes} from the DataLoader at {_where(location)}"
                    f" ({size if size is not None else 'an unknown number of'} samples, "
                    f"batch_size={loader['batch_size']}, no drop_last): smaller than the batch "
                    "size, so torch_xla traced a new shape and compiled another graph"
                )
            else:
                title = "a new graph for a new input shape"
                message = (
                    f"{name} compiled again after warm-up: its inputs {shapes} have a shape no "
                    "earlier step of the same loop had"
                )
        elif c["reason"] == "same-input-shapes" and step is not None:
            adam = _adam_at(trace, step)
            if adam is not None and step.phase in (None, TRAINING):
                opt, value, _ = adam
                code, location = "XLA204", Location.from_json(opt.get("location")) or trigger
                related = [trigger] if trigger else []
                beta2 = opt["betas"][1]
                dtype = "float64" if opt.get("foreach") else (opt.get("dtype") or "float32")
                title = f"{opt['class']} compiles again at optimizer step {value}"
                message = (
                    f"{name} (optimizer step {value}) compiled a new graph with the same input "
                    f"shapes: `{opt['class']}` divides by sqrt(1 - {beta2}**step), which rounds to exactly "
                    f"1.0 in {dtype} at step {value}, and torch_xla bakes 1.0 into the graph as a constant "
                    "instead of passing it as data"
                )
            else:
                title = "a new graph with the same input shapes"
                # --explain diffs the IR of the optimizers' parameters at training steps only
                training = step.phase in (None, TRAINING) and c["phase"] in (None, TRAINING)
                explained = "explain" in c or bool((trace.start or {}).get("explain"))
                pending = (
                    c["phase"] == EVALUATION and step.phase in (None, TRAINING) and step.trains
                )
                message = (
                    f"{name} compiled again after warm-up with the same input shapes as an earlier "
                    f"{'step' if training else 'batch'} of the same loop: the graph itself changed "
                    + (
                        "(the optimizer step before it ran after the training loop's last "
                        "boundary: its update is still pending and runs in this graph; a "
                        "boundary after the optimizer step keeps it out)"
                        if pending
                        else "(a Python number that became 0 or 1, a branch on a value, a changed op)"
                    )
                    + ("" if explained or not training else "; --explain names the line")
                )
            message += _explained(c.get("explain"))
        elif step is not None and step.phase == SETUP:
            title = "a setup line compiled again"
            message = (
                f"{name} compiled a new graph at {_where(trigger)}, which compiled a different "
                "graph in an earlier pass (a value that changes from pass to pass: a shape, a "
                "Python number)"
            )
        else:
            title = "a compile after warm-up"
            message = f"{name} compiled again after warm-up (the inputs of that step were not seen)"
        key = (code, location, title if code is None else "")
        finding = findings.get(key)
        if finding is None:
            finding = findings[key] = Finding(code, title, message, location, related, [], 0.0)
        if c["step"] not in finding.steps:
            finding.steps.append(c["step"])
        finding.cost_s += time_s
        for r in related:
            if r not in finding.related:
                finding.related.append(r)
    return list(findings.values())


def _explained(changes: list[dict] | None) -> str:
    """``--explain``'s IR diff as a sentence: what changed and where the new nodes were made."""
    if not changes:
        return ""
    counts: dict[tuple, int] = {}
    for change in changes:
        key = (change.get("before"), change.get("after"), change.get("location"))
        counts[key] = counts.get(key, 0) + 1
    parts = []
    for (before, after, where), n in list(counts.items())[:3]:
        if before and after:
            what = f"`{before}` became `{after}`"
        else:
            what = f"`{after or before}` {'appeared' if after else 'went away'}"
        times = f" ({n} nodes)" if n > 1 else ""
        parts.append(f"{what}{times} at {where or 'an unknown place'}")
    return "; the IR changed: " + "; ".join(parts)


def _no_boundary(trace: Trace) -> list[Finding]:
    stop = trace.stop or {}
    end = trace.end or {}
    if stop.get("reason") == "no-boundary" or (
        not trace.steps and (end.get("optimizer_steps") or 0) >= 2
    ):
        count = stop.get("optimizer_steps") or end.get("optimizer_steps") or 0
        message = (
            f"{count} optimizer steps ran without a step boundary (`torch_xla.sync()`, `torch_xla.step()`, "
            "an `MpDeviceLoader`): the lazy graph grew by one training step each time and nothing ran on "
            "the device"
        )
        return [
            Finding(
                "XLA203",
                "no step boundary",
                message,
                Location.from_json(stop.get("location") or end.get("optimizer_location")),
                [],
                [],
                0.0,
            )
        ]
    findings = []
    previous = 0
    for s in trace.steps:
        ran = s.optimizer_steps - previous
        previous = s.optimizer_steps
        if ran >= 2:
            findings.append(
                Finding(
                    "XLA203",
                    "several optimizer steps in one graph",
                    f"{label(s)} ran {ran} optimizer steps before reaching a boundary",
                    s.boundary,
                    [],
                    [s.number],
                    0.0,
                )
            )
    return findings[:1]


def _sharding(trace: Trace) -> tuple[dict, list[Finding]]:
    spmd = bool(trace.spmd_called or (trace.parameters or {}).get("spmd"))
    params = (trace.parameters or {}).get("parameters") or []
    summary = None
    if params:
        sharded = [p for p in params if shards(p.get("sharding"))]
        total = sum(p["bytes"] for p in params)
        per_device = sum(_bytes_per_device(p) for p in params)
        summary = {
            "count": len(params),
            "sharded": len(sharded),
            "replicated": len(params) - len(sharded),
            "bytes": total,
            "bytes_per_device": int(per_device),
            "replicated_names": [p["name"] for p in params if not shards(p.get("sharding"))][:10],
            "modules": (trace.parameters or {}).get("modules", []),
        }
    inputs = None
    findings: list[Finding] = []
    for s in trace.steps:
        if not s.inputs:
            continue
        if inputs is None:
            inputs = []
            for i in s.inputs:
                split = shards(i.get("sharding"))
                inputs.append(
                    {
                        "shape": i["shape"],
                        "dtype": i["dtype"],
                        "sharding": i.get("sharding", ""),
                        "split": list(split),
                    }
                )
        if not spmd or findings:
            continue
        batch_dims = {
            i["shape"][0]
            for i in s.inputs
            if i["shape"] and shards(i.get("sharding"))[:1] not in ((), (1,))
        }
        replicated = [
            i
            for i in s.inputs
            if i["shape"] and i["shape"][0] in batch_dims and not shards(i.get("sharding"))
        ]
        if replicated:
            loader = (
                next((x for x in trace.loaders if x.get("kind") == "MpDeviceLoader"), None) or {}
            )
            site = Location.from_json(loader.get("sharding_location")) or Location.from_json(
                loader.get("location")
            )
            related = [x for x in [Location.from_json(loader.get("location"))] if x and x != site]
            which = ", ".join(f"{tuple(i['shape'])} {i['dtype']}" for i in replicated)
            spec = loader.get("input_sharding")
            spec_text = f" ({_spec_text(spec)})" if spec else ""
            findings.append(
                Finding(
                    "XLA022",
                    "batch tensors left replicated",
                    f"in {label(s)} the batch tensor(s) {which} were replicated on every device while another tensor "
                    f"of the same batch is split on its leading dimension: the input_sharding{spec_text} did not apply "
                    "to them (a ShardingSpec applies only to tensors of its own rank)",
                    site,
                    related,
                    [s.number],
                    0.0,
                )
            )
    return {"spmd": spmd, "parameters": summary, "inputs": inputs}, findings


def _bytes_per_device(param: dict) -> float:
    """Bytes of one device's shard of a parameter (``shape``, ``bytes``, ``sharding``), with
    the padding of an uneven split (:func:`xla_lint.shards.shard_bytes`, the runtime
    checker's computation): a (21, 16) float32 weight split 8 ways holds 3 rows per device."""
    tiles = shards(param.get("sharding"))
    shape = param.get("shape")
    if not tiles or not isinstance(shape, list):
        return float(param["bytes"])
    if len(tiles) != len(shape):
        return param["bytes"] / math.prod(tiles)
    elements = math.prod(shape)
    itemsize = param["bytes"] / elements if elements else 0.0
    return float(shard_bytes(shape, tiles, itemsize))


def _spec_text(spec) -> str:
    if isinstance(spec, dict) and "partition_spec" in spec:
        return (
            "ShardingSpec(mesh, "
            + repr(tuple(tuple(p) if isinstance(p, list) else p for p in spec["partition_spec"]))
            + ")"
        )
    return json.dumps(spec)


def analyse(trace: Trace, phases: PhaseMap | None = None) -> Analysis:
    """Warm-up, compiles with their reasons, host reads by place, and the findings (most
    costly first), after each row and event is placed in its phase by ``phases`` (the
    script's loops, :func:`xla_lint.trace.phases.place`; None: phases not known)."""
    trace = place(trace, phases)
    groups = warmup_rows(trace)
    final = final_step(trace)
    compiles = _compiles(trace, groups, final)
    warmup = {row for rows in groups.values() for row in rows}
    reads = _host_reads(trace)
    sharding, sharding_findings = _sharding(trace)
    findings = (
        _no_boundary(trace)
        + _recompiles(trace, compiles)
        + _per_step_reads(trace, reads)
        + sharding_findings
    )
    findings.sort(key=lambda f: -f.cost_s)
    return Analysis(
        trace, warmup, compiles, reads, findings, sharding, final, _closure_notes(trace, reads)
    )


def predicted_error(error: dict | None, diagnostics: list) -> Diagnostic | None:
    """The static diagnostic that predicted the exception the script died of: one of
    :data:`PREDICTED_ERRORS` whose lines hold the exception's innermost user frame and whose
    code predicts that exception's type; None otherwise."""
    location = Location.from_json((error or {}).get("location"))
    if location is None:
        return None
    path = os.path.abspath(location.path)
    for d in diagnostics:
        if (
            error is not None
            and error.get("type") in PREDICTED_ERRORS.get(d.code, ())
            and os.path.abspath(d.path) == path
            and d.line <= location.line <= d.end_line
        ):
            return d
    return None


def cause_finding(error: dict, diagnostic: Diagnostic) -> Finding:
    """The finding of a script that died of the error a static diagnostic predicted."""
    location = Location.from_json(error.get("location"))
    return Finding(
        diagnostic.code,
        f"the script died of it: {error.get('type')}",
        f"the script raised {error.get('type')}: {error.get('message')} at this line, as the "
        f"static finding {diagnostic.code} predicts",
        location,
        fix=diagnostic.message,
    )


def confirm_static(
    diagnostics: list, findings: list[Finding], cause: Diagnostic | None = None
) -> list[dict]:
    """Each static diagnostic with ``status``: ``confirmed`` when a finding of the same code
    has a place in the same file within the diagnostic's lines, or it is ``cause`` (the
    diagnostic that predicted the exception the script died of, :func:`predicted_error`:
    marked ``cause: true``), ``not reached`` for a code the trace observes but did not see
    there, ``not observable`` for the other codes."""
    out = []
    for d in diagnostics:
        path = os.path.abspath(d.path)
        status = "not observable"
        if d is cause:
            status = "confirmed"
        elif d.code in TRACEABLE:
            status = "not reached"
            for f in findings:
                if f.code == d.code and any(
                    os.path.abspath(p.path) == path and d.line <= p.line <= d.end_line
                    for p in f.places()
                ):
                    status = "confirmed"
                    break
        out.append(
            {
                "code": d.code,
                "name": d.name,
                "message": d.message,
                "path": path,
                "line": d.line,
                "status": status,
                **({"cause": True} if d is cause else {}),
            }
        )
    return out


def status_of(trace: Trace, timed_out: bool, interrupted: bool) -> str:
    """How the run ended: stopped (by --steps), finished, error, timeout, no-boundary,
    crashed (died of a signal, the ``crash`` event, or without a word), exited (the script
    called sys.exit)."""
    if timed_out or interrupted:
        return "timeout"
    if trace.error is not None:
        return "error"
    if trace.stop is not None:
        return "no-boundary" if trace.stop.get("reason") == "no-boundary" else "stopped"
    if trace.exit is not None:
        if trace.exit.get("reason") == "sys.exit" and trace.exit.get("code"):
            return "exited"
        return "finished"
    return "crashed"


def rank_status(trace: Trace) -> str:
    """How one rank ended: ``error``, ``stopped`` (--steps), ``peer-error`` (stopped because
    another rank failed), ``no-boundary``, ``exited``, ``finished``, ``ended`` (the run was
    ended around it: --timeout, Ctrl-C, or a failed peer it waited for) or ``crashed`` (its
    process died of a signal, the ``crash`` event, or it ended without a word)."""
    if trace.error is not None:
        return "error"
    if trace.crash is not None:
        return "crashed"
    if trace.stop is not None:
        reason = str(trace.stop.get("reason"))
        return {"no-boundary": "no-boundary", "peer-error": "peer-error"}.get(reason, "stopped")
    if trace.exit is not None:
        if trace.exit.get("reason") == "sys.exit" and trace.exit.get("code"):
            return "exited"
        return "finished"
    if trace.timeout is not None:
        return "ended"
    return "finished" if trace.end is not None else "crashed"


def _ranks_status(main: Trace, ranks: dict[int, Trace], timed_out: bool, interrupted: bool) -> str:
    """The run's status from the launcher's events and every rank's: a rank's fatal signal
    comes before the launcher's exception (the ``BrokenProcessPool`` or ``ChildFailedError``
    it raises because the rank's process died)."""
    if timed_out or interrupted:
        return "timeout"
    statuses = {rank_status(t) for t in ranks.values()}
    if "error" in statuses:
        return "error"
    if any(t.crash is not None for t in ranks.values()):
        return "crashed"
    if main.error is not None:
        return "error"
    if "exited" in statuses:
        return "exited"
    if main.peers_ended is not None or "crashed" in statuses:
        return "crashed"
    if "no-boundary" in statuses:
        return "no-boundary"
    if "stopped" in statuses:
        return "stopped"
    return status_of(main, False, False)


def _merge_findings(analyses: dict[int, Analysis]) -> list[Finding]:
    """The findings of every rank, one per rule and place, with the ranks that showed it (the
    lowest rank's message and steps; the highest cost)."""
    merged: dict[tuple, Finding] = {}
    for rank, analysis in sorted(analyses.items()):
        for f in analysis.findings:
            key = (f.code, f.title, f.location)
            if key not in merged:
                merged[key] = Finding(
                    f.code, f.title, f.message, f.location, f.related, f.steps, f.cost_s, [rank]
                )
            else:
                merged[key].ranks = [*(merged[key].ranks or []), rank]
                merged[key].cost_s = max(merged[key].cost_s, f.cost_s)
    return sorted(merged.values(), key=lambda f: -f.cost_s)


def _steps_json(analysis: Analysis) -> list[dict]:
    """The ``steps`` of the report for one trace, and the row after the last step (``final``)
    when the script did something there. ``compiles`` counts every compile of the step, the
    ones only the ``CompileTime`` metric saw included; ``execute_s`` is the device time of
    the graphs the step launched (``ExecuteTime``), beside ``duration_s``, the host's span
    between boundaries."""
    trace = analysis.trace
    listed: dict[int, int] = {}
    for c in analysis.compiles:
        listed[c["row"]] = listed.get(c["row"], 0) + 1
    rows = [*trace.steps, *([analysis.final] if analysis.final is not None else [])]
    reads_per_step: dict[int, int] = {}
    outside: dict[int, int] = {}
    phase_of = {s.step: s.phase for s in rows if not s.final}
    for r in trace.host_reads:
        # a read outside every loop (setup) in the span a training or evaluation boundary
        # ends is not that row's: the row's count leaves it out (``setup_host_reads``)
        if r.phase == SETUP and phase_of.get(r.step) in (TRAINING, EVALUATION):
            outside[r.step] = outside.get(r.step, 0) + r.count
        else:
            reads_per_step[r.step] = reads_per_step.get(r.step, 0) + r.count
    tail = _tail(trace)
    device = device_times([*trace.steps, *([tail] if tail is not None else [])])
    loaders = loaders_by_id(trace)
    return [
        {
            "step": s.number,
            "row": s.step,
            "phase": s.phase,
            "duration_s": s.duration_s,
            "execute_s": device.get(s.step),
            "compiles": max(s.compiles, listed.get(s.step, 0)),
            "compile_s": s.compile_s,
            "executions": s.executions,
            "host_reads": reads_per_step.get(s.step, 0),
            "setup_host_reads": outside.get(s.step, 0),
            "transfer_s": s.transfer_s,
            # a row that compiled is warm-up when none of its compiles is after warm-up (an
            # evaluation without a sync of its own, in a training row, can compile a new shape)
            "warmup": s.step in analysis.warmup
            and not any(c["after_warmup"] for c in analysis.compiles if c["row"] == s.step),
            "final": s.final,
            "inputs": s.inputs,
            "batches": [_batch_json(b, loaders) for b in s.batches],
        }
        for s in rows
    ]


def _batch_json(batch: dict, loaders: dict[int, dict]) -> dict:
    """A batch of a row with the DataLoader that handed it (its line, dataset size, batch size
    and drop_last; None when the loader is not known)."""
    loader = loaders.get(batch.get("loader"))  # type: ignore[arg-type]
    return {
        "index": batch.get("index"),
        "inputs": batch.get("inputs") or [],
        "loader": None
        if loader is None
        else {
            "location": loader.get("location"),
            "dataset_size": loader.get("dataset_size"),
            "batch_size": loader.get("batch_size"),
            "drop_last": loader.get("drop_last"),
        },
    }


def loaders_json(trace: Trace) -> list[dict]:
    """Each DataLoader with the batches each handed the traced thread, by leading size
    (``{"4": 2, "2": 1}``: two batches of 4 samples, one of 2), and whether its last batch is
    smaller than the others (``partial_last_batch``: ``dataset_size % batch_size``, no
    ``drop_last``)."""
    out = []
    sizes: dict[int, dict[str, int]] = {}
    for s in trace.steps:
        for b in s.batches:
            inputs = b.get("inputs") or []
            if isinstance(b.get("loader"), int) and inputs and inputs[0].get("shape"):
                lead = str(inputs[0]["shape"][0])
                counts = sizes.setdefault(b["loader"], {})
                counts[lead] = counts.get(lead, 0) + 1
    for ident, loader in loaders_by_id(trace).items():
        size, batch = loader.get("dataset_size"), loader.get("batch_size")
        out.append(
            {
                "location": loader.get("location"),
                "dataset_size": size,
                "batch_size": batch,
                "drop_last": bool(loader.get("drop_last")),
                "partial_last_batch": bool(
                    batch and size and size % batch and not loader.get("drop_last")
                ),
                "batches": sizes.get(ident, {}),
            }
        )
    return out


def _error_json(trace: Trace) -> dict | None:
    if trace.error is None:
        return None
    return {k: trace.error.get(k) for k in ("type", "message", "traceback", "location")}


def _crash_json(trace: Trace) -> dict | None:
    """The signal the script died of and its Python stack at the crash (the runner's
    ``crash`` event; a rank's with its ``rank``, ``pid`` and ``steps_traced``), or None."""
    if trace.crash is None:
        return None
    out = {k: trace.crash.get(k) for k in ("signal", "name", "fatal", "location")} | {
        "stack": list(trace.crash.get("stack") or [])
    }
    if trace.crash.get("rank") is not None:
        out |= {
            "rank": trace.crash["rank"],
            "pid": trace.crash.get("pid"),
            "steps_traced": len(trace.steps),
        }
    return out


def _crashed_rank(ranks: dict[int, Trace]) -> int | None:
    """The rank that died of a fatal signal, for the headline: the one whose thread got the
    signal, else (a signal sent to the whole process, ``os.kill``) one that was running its
    own code then (its innermost frame is its first user frame), else the lowest that
    crashed; None when none has a ``crash`` event. Ranks sharing a process all die of it."""
    crashed = {r: t.crash for r, t in sorted(ranks.items()) if t.crash is not None}
    for pick in (
        lambda c: c.get("current_thread"),
        lambda c: c.get("location") and (c.get("stack") or [None])[0] == c.get("location"),
        lambda c: True,
    ):
        found = next((r for r, c in crashed.items() if pick(c)), None)
        if found is not None:
            return found
    return None


def _rank_json(rank: int, trace: Trace, analysis: Analysis, path: str | None) -> dict:
    """One rank in the report: its status, steps and compiles, as the top-level ones."""
    start = trace.start or {}
    steps = _steps_json(analysis)
    after = [
        s["duration_s"]
        for s in steps
        if not s["warmup"] and not s["final"] and s["phase"] in (None, TRAINING)
    ]
    return {
        "rank": rank,
        "events_file": path,
        "pid": start.get("pid"),
        "thread": start.get("thread"),
        "status": rank_status(trace),
        "steps_traced": len(numbered_rows(analysis.trace)),
        "compile_count": len(analysis.compiles),
        "compile_s": round(sum(s["compile_s"] for s in steps), 6),  # the final row too
        "median_step_s": round(statistics.median(after), 6) if after else None,
        "host_reads": sum(r.count for r in trace.host_reads),
        "steps": steps,
        "compiles": analysis.compiles,
        "error": _error_json(trace),
        "crash": _crash_json(trace),
    }


def build_report(
    trace: Trace,
    *,
    command: list[str],
    target: str,
    steps_requested: int,
    wall_s: float,
    events_file: str,
    device: dict,
    timed_out: bool = False,
    interrupted: bool = False,
    static: list | None = None,
    static_error: str | None = None,
    ranks: dict[int, Trace] | None = None,
    rank_files: dict[int, str] | None = None,
    phases: PhaseMap | None = None,
) -> dict:
    """The report as a JSON-able dict (:data:`~xla_lint.trace.events.REPORT_SCHEMA`).

    With ``ranks`` (one process per device: each rank's trace, by rank), the steps, compiles,
    host reads and sharding are rank 0's (the lowest rank's), the findings those of every rank
    (with the ranks that showed each), and ``ranks`` lists each rank's status, steps and
    compiles; ``trace`` is then the launcher's (the script's own process). ``phases``: the
    script's loops (:class:`~xla_lint.trace.phases.PhaseMap`), which place every row and
    event in setup, training or evaluation."""
    ranks = ranks or {}
    primary = ranks[min(ranks)] if ranks else trace
    analysis = analyse(primary, phases)
    analyses = {r: analysis if t is primary else analyse(t, phases) for r, t in ranks.items()}
    if ranks:
        status = _ranks_status(trace, ranks, timed_out, interrupted)
        findings = _merge_findings(analyses)
    else:
        status = status_of(trace, timed_out, interrupted)
        findings = analysis.findings
    notes: list[str] = []
    bad_lines = trace.bad_lines + sum(t.bad_lines for t in ranks.values())
    if bad_lines:
        notes.append(f"{bad_lines} line(s) of the events file could not be read")
    if static_error:
        notes.append(f"static lint failed: {static_error}")
    if status == "timeout":
        where = (trace.timeout or {}).get("location") or next(
            (t.timeout.get("location") for t in ranks.values() if t.timeout), None
        )
        at = f" while at {_where(Location.from_json(where))}" if where else ""
        what = (
            "interrupted"
            if interrupted
            else f"stopped by --timeout after {(trace.timeout or {}).get('seconds')} s"
        )
        notes.append(f"the run was {what}{at}; the report holds what happened until then")
    code = (trace.child_exit or {}).get("code")
    crash = _crash_json(trace) if status == "crashed" and not ranks else None
    crashed_rank = _crashed_rank(ranks) if status == "crashed" else None
    if crashed_rank is not None:
        crash = _crash_json(ranks[crashed_rank])
    if status == "crashed" and isinstance(code, int) and code < 0:
        if crash is None:  # else the headline names the signal
            notes.append(f"the script's process was killed by signal {-code}")
    elif status == "crashed" and code not in (None, 0) and not ranks:
        notes.append(f"the script's process exited with status {code} without an exception")
    notes += _rank_notes(trace, ranks)
    notes += analysis.notes
    if any(c["partial"] for a in (analysis, *analyses.values()) for c in a.compiles):
        notes.append("a graph was still compiling when the script ended")
    for other in [*trace.other, *(o for t in ranks.values() for o in t.other)]:
        if other.get("event") == "internal":
            notes.append(
                f"trace instrumentation error in {other.get('where')}: {other.get('message')}"
            )
    error = next(
        ({**(_error_json(t) or {}), "rank": r} for r, t in sorted(ranks.items()) if t.error),
        None,
    ) or _error_json(trace)
    cause = predicted_error(error, static) if static else None
    if cause is not None and error is not None:
        error = {**error, "cause": {"code": cause.code, "name": cause.name, "line": cause.line}}
        findings = [cause_finding(error, cause), *findings]
    script_exit = (trace.exit or {}).get("code")
    if script_exit is None and trace.error is not None:
        script_exit = 1
    torch_xla = (primary.torch_xla or trace.torch_xla or {}).get("version")
    if (
        trace.start is not None
        and trace.torch_xla is None
        and not ranks
        and status not in ("error", "timeout")
    ):
        notes.append("the script never imported torch_xla: nothing to trace")
    stop, end = primary.stop or {}, primary.end or {}
    notes = [relative_paths(n) for n in notes]
    static_json = confirm_static(static, findings, cause) if static is not None else None
    for d in static_json or []:
        d["message"] = relative_paths(d["message"])
    findings_json = []
    for f in findings:
        entry = f.to_json()
        for key in ("title", "message", "fix"):
            entry[key] = relative_paths(entry[key])
        findings_json.append(entry)
    report = {
        "version": 1,
        "command": list(command),
        "target": target,
        "status": status,
        "exit_code": 1 if findings or status in ("error", "timeout", "crashed", "exited") else 0,
        "script_exit": script_exit,
        "steps_requested": steps_requested,
        "steps_traced": len(numbered_rows(analysis.trace)),
        "optimizer_steps": stop.get("optimizer_steps", end.get("optimizer_steps")),
        "wall_s": round(wall_s, 3),
        "events_file": events_file,
        "device": {
            **device,
            "spmd": analysis.sharding["spmd"],
            "torch_xla": torch_xla,
            "launcher": _launcher(trace, ranks),
            "processes": len({(t.start or {}).get("pid") for t in ranks.values()}) or None,
        },
        "steps": _steps_json(analysis),
        "compiles": analysis.compiles,
        "host_reads": _reads_json(analysis),
        "loaders": loaders_json(analysis.trace),
        "sharding": analysis.sharding,
        "findings": findings_json,
        "static": static_json,
        "error": error,
        "crash": crash,
        "ranks": [
            _rank_json(r, t, analyses[r], (rank_files or {}).get(r))
            for r, t in sorted(ranks.items())
        ]
        or None,
        "notes": notes,
    }
    for key in ("steps", "compiles", "host_reads", "loaders", "findings", "static", "error"):
        report[key] = relative_locations(report[key])
    report["crash"] = relative_locations(report["crash"])
    report["ranks"] = relative_locations(report["ranks"])
    return report


def relative_locations(value: Any) -> Any:
    """``value`` (a report's JSON part) with the path of every location in it (a dict with
    ``path`` and ``line``) relative to the current folder when the file is below it, as the
    text report writes them; other paths stay absolute. Returns new dicts and lists."""
    if isinstance(value, list):
        return [relative_locations(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: relative_locations(v) for k, v in value.items()}
    if isinstance(out.get("path"), str) and "line" in out:
        out["path"] = _short(out["path"])
    return out


def _reads_json(analysis: Analysis) -> list[dict]:
    """The host reads of the report: ``steps`` the step numbers they happened in (setup and
    evaluation rows: the training step before them), ``rows`` the rows, ``phase``."""
    rows = [*analysis.trace.steps, *([analysis.final] if analysis.final is not None else [])]
    numbers = {s.step: s.number for s in rows}
    return [
        {
            **r,
            "location": r["location"].to_json() if r["location"] else None,
            "steps": sorted({numbers.get(x, x) for x in r["steps"]}),
            "rows": r["steps"],
        }
        for r in analysis.host_reads
    ]


def _launcher(trace: Trace, ranks: dict[int, Trace]) -> str | None:
    """``torch_xla.launch``, ``xmp.spawn`` or ``torchrun`` when the ranks ran apart."""
    if not ranks:
        return None
    if trace.launch is not None:
        return str(trace.launch.get("what"))
    return next((str((t.start or {}).get("launcher")) for t in ranks.values()), None)


def _rank_notes(trace: Trace, ranks: dict[int, Trace]) -> list[str]:
    """What to know about the ranks: threads sharing a process, who failed, who was ended."""
    notes = []
    shared = sorted(r for r, t in ranks.items() if (t.start or {}).get("shared"))
    if shared:
        notes.append(
            f"ranks {_span(shared)} ran as threads of one process (torch_xla gives each device "
            "a thread when one process holds several, as on CPU): each rank's compiles are its "
            "own, their times are the process's compile times during its steps"
        )
    failed = sorted(r for r, t in ranks.items() if t.error is not None)
    stopped = sorted(r for r, t in ranks.items() if rank_status(t) == "peer-error")
    if failed and stopped:
        notes.append(
            f"rank {_span(failed)} failed; rank {_span(stopped)} stopped at its next step boundary"
        )
    if trace.peers_ended is not None:
        ended = sorted(r for r, t in ranks.items() if rank_status(t) in ("ended", "crashed"))
        notes.append(
            f"a rank failed and rank {_span(ended) or '?'} did not reach a step boundary within "
            f"{trace.peers_ended.get('seconds'):.0f} s (waiting in a collective?): every process "
            "was ended"
        )
    missing = sorted(
        r
        for r, t in ranks.items()
        if rank_status(t) == "crashed" and t.crash is None and trace.peers_ended is None
    )
    crashed = _crashed_rank(ranks)
    if crashed is not None:
        pid = (ranks[crashed].start or {}).get("pid")
        also = sorted(
            r
            for r, t in ranks.items()
            if r != crashed and t.crash is not None and (t.start or {}).get("pid") == pid
        )
        if also:
            notes.append(
                f"rank {_span(also)} died with rank {crashed}: their process (pid {pid}) "
                "ran them as threads"
            )
    if missing:
        notes.append(f"rank {_span(missing)} ended without a word (killed, or os._exit)")
    if shared and (missing or failed) and len(shared) > 1:
        notes.append(
            "on CPU torch_xla runs the ranks as threads of one process, and XLA's CPU client "
            "cannot run a collective between them (its rendezvous aborts): if the script "
            "all-reduces (`xm.optimizer_step`, `xm.all_reduce`), trace one rank with "
            "`--cpu-devices 1` (docs/trace.md, Limits)"
        )
    return notes


def _span(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    parts: list[str] = []
    for r in ranks:
        if parts and parts[-1].split("-")[-1] == str(r - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{r}"
        else:
            parts.append(str(r))
    return ", ".join(parts)


# --- text ------------------------------------------------------------------------------------


def _short(path: str) -> str:
    """``path`` relative to the current folder when it is below it, else as it is, with its
    ``..`` resolved (a helper the script put on ``sys.path`` as ``here/../common``)."""
    if os.path.isabs(path):
        path = os.path.normpath(path)
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


_ABSOLUTE = re.compile(r"(?<![\w.])(/[^\s:'\"`,;()\[\]]+)")


def relative_paths(text: str) -> str:
    """``text`` with each absolute path below the current folder written relative to it, as
    the report's locations are (``/work/proj/lib/x.py:5`` -> ``lib/x.py:5``); other paths
    (the standard library's, torch's) stay as they are."""
    if "/" not in text:
        return text
    return _ABSOLUTE.sub(lambda m: _short(m.group(1)), text)


def _where(location: Location | dict | None) -> str:
    if isinstance(location, dict):
        location = Location.from_json(location)
    if location is None:
        return "(no user frame)"
    return f"{_short(location.path)}:{location.line}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _shape(i: dict) -> str:
    return str(tuple(i["shape"]))


_STATUS_TEXT = {
    "stopped": "stopped after {n} steps as asked (--steps {req})",
    "finished": "the script finished by itself after {n} steps",
    "exited": "the script exited with status {code} after {n} steps",
    "error": "the script raised an exception after {n} steps",
    "timeout": "the run did not finish: {n} steps traced",
    "no-boundary": "stopped after {opt} optimizer steps: no step boundary was reached",
    "crashed": "the script died after {n} steps without a word (killed, or os._exit)",
}


def render_text(report: dict, extra: list[str] | None = None) -> str:
    """The readable report: header, findings (most costly first), steps, compiles, host reads,
    sharding, static diagnostics, notes. ``extra``: lines shown after the host reads (the
    ``Hosts`` section of ``--simulate-hosts``)."""
    out: list[str] = []
    device = report["device"]
    where = device.get("pjrt_device") or "the machine's device"
    if device.get("cpu_devices"):
        n = device["cpu_devices"]
        where = f"{where} with {n} device{'s' if n != 1 else ''}"
    mode = "SPMD" if device.get("spmd") else "single process"
    ranks = report.get("ranks") or []
    if ranks:
        processes = device.get("processes") or 1
        mode = (
            f"one process per device: {len(ranks)} rank{'s' if len(ranks) > 1 else ''} in {processes} "
            f"process{'es' if processes > 1 else ''}, {device.get('launcher')}"
        )
    if device.get("hosts"):
        mode = f"{device['hosts']} simulated hosts, {mode} each; host 0 shown"
    version = device.get("torch_xla")
    out.append(
        f"xla-lint trace: {_short(report['target'])} ({mode}, {where}, "
        f"{'torch_xla ' + version if version else 'torch_xla not imported'})"
    )
    text = _STATUS_TEXT[report["status"]].format(
        n=report["steps_traced"],
        req=report["steps_requested"],
        code=report.get("script_exit"),
        opt=report.get("optimizer_steps"),
    )
    if (
        report["status"] == "finished"
        and not report["steps_traced"]
        and report.get("optimizer_steps")
    ):
        # no boundary at all: "after 0 steps" would read as "nothing trained"
        text = (
            f"the script finished by itself after {report['optimizer_steps']} optimizer steps "
            "and no step boundary"
        )
    crash = report.get("crash") if report["status"] == "crashed" else None
    if crash:
        at = f" at {_where(crash['location'])}" if crash.get("location") else ""
        who, steps = "the script", report["steps_traced"]
        for kind in ("rank", "host"):  # a rank's or a simulated host's process
            if crash.get(kind) is not None:
                who = f"{kind} {crash[kind]} (pid {crash.get('pid')})"
                steps = crash.get("steps_traced", steps)
        text = f"{who} died of signal {crash['signal']} ({crash['name']}) after {steps} steps{at}"
    text = text.replace(" 1 steps", " 1 step").replace(" 1 optimizer steps", " 1 optimizer step")
    out.append(f"{text}; {report['wall_s']:.1f} s wall; events: {report['events_file']}")
    if crash:
        out += _render_crash(crash)
    error = report.get("error")
    if error:
        out.append(
            f"error: {error['type']}: {error['message']}"
            + (f" at {_where(error['location'])}" if error.get("location") else "")
            + (f" (rank {error['rank']})" if error.get("rank") is not None else "")
            + (
                f": the error {error['cause']['code']} {error['cause']['name']} predicts"
                if error.get("cause")
                else ""
            )
        )
    out.append(times_line(device))
    out.append("")
    findings = report["findings"]
    if findings:
        out.append(f"Findings ({len(findings)}, most costly first)")
        for f in findings:
            code = f["code"] or "----"
            cost = f"  [{_ms(f['cost_s'])}]" if f["cost_s"] else ""
            on = f"  (rank {_span(f['ranks'])})" if f.get("ranks") is not None and ranks else ""
            out.append(f"  {code} {f['name']}: {f['title']}  {_where(f['location'])}{cost}{on}")
            out.append(f"    {f['message']}")
            if f["related"]:
                out.append("    see also: " + ", ".join(_where(r) for r in f["related"]))
            out.append(f"    fix: {f['fix']}")
    else:
        out.append("Findings: none")
    out.append("")
    if report["steps"]:
        out.append(f"Steps (rank {ranks[0]['rank']})" if ranks else "Steps")
        out.append("  step  host span     device  compiles                   host reads  inputs")
        for s in _collapsed(report["steps"]):
            compiles = f"{s['compiles']} ({_ms(s['compile_s'])})" if s["compiles"] else "0"
            inputs = " ".join(_shape(i) for i in (s["inputs"] or [])) or "-"
            warm = " (warm-up)" if s.get("warmup") and s["compiles"] else ""
            if s.get("rows", 1) > 1:
                inputs = f"({s['rows']} boundaries) {inputs}"
            device_s = s.get("execute_s")
            name = (
                "end" if s.get("final") else _PHASE_LABEL.get(s.get("phase") or "", str(s["step"]))
            )
            out.append(
                f"  {name:>5} {_ms(s['duration_s']):>9} "
                f"{_ms(device_s) if device_s is not None else '-':>10}  {compiles + warm:<26} "
                f"{s['host_reads']:>10}  {inputs}"
            )
        if any(s.get("final") for s in report["steps"]):
            out.append("  (end: after the last step's boundary, until the script ended)")
        setup_reads = sum(s.get("setup_host_reads") or 0 for s in report["steps"])
        if setup_reads:
            out.append(
                f"  ({setup_reads} host read{'s' if setup_reads != 1 else ''} outside every loop: "
                "setup, in no row's count; see Host reads)"
            )
        if any(s.get("phase") in _PHASE_LABEL for s in report["steps"]):
            out.append(
                "  (setup, eval: rows of the script's setup and evaluation loops, by its own "
                "structure; steps are training steps)"
            )
        durations = [
            s["duration_s"]
            for s in report["steps"]
            if not s.get("warmup") and not s.get("final") and s.get("phase") in (None, TRAINING)
        ]
        if durations:
            out.append(f"  median step after warm-up: {_ms(statistics.median(durations))}")
        out.append("")
    if report["compiles"]:
        out.append(f"Compiles (rank {ranks[0]['rank']})" if ranks else "Compiles")
        for c in report["compiles"]:
            time_s = f" in {_ms(c['time_s'])}" if c.get("time_s") else ""
            reason = {
                "warm-up": "warm-up",
                "new-input-shape": "AFTER WARM-UP: new input shape",
                "same-input-shapes": "AFTER WARM-UP: same input shapes, the graph changed",
                "unknown-inputs": "after warm-up",
                "after-last-step": "after the last step",
                "host-read": "during a host read",
                "setup": "setup",
                "unplaced": "outside the training steps (phases not known: --no-static)",
            }[c["reason"]]
            when = f"step {c['step']:>3}"
            if c.get("phase") in _PHASE_LABEL:
                when = (
                    f"{_PHASE_LABEL[c['phase']]} after step {c['step']}"
                    if c["step"]
                    else (_PHASE_LABEL[c["phase"]])
                )
            out.append(
                f"  {when}{time_s}: {reason}; triggered at {_where(c['location'])} ({c['cause']})"
            )
            if c.get("explain"):
                out.append(f"    IR{_explained(c['explain'])[len('; the IR') :]}")
        out.append("")
    if report["host_reads"]:
        out.append("Host reads (device to host copies)")
        for r in report["host_reads"]:
            forced = f", {r['forced_execution']} ran a graph" if r["forced_execution"] else ""
            out.append(
                f"  {r['kind']:<16} {_where(r['location'])}: {r['count']} in {len(r['steps'])} step(s){forced}"
            )
        out.append("")
    if ranks:
        out += _render_ranks(ranks)
    out += extra or []
    sharding = report["sharding"]
    if sharding["spmd"]:
        out.append("Sharding (SPMD)")
        params = sharding.get("parameters")
        if params:
            out.append(
                f"  parameters: {params['count']} tensors, {params['sharded']} sharded, {params['replicated']} "
                f"replicated; {_bytes(params['bytes'])} in all, {_bytes(params['bytes_per_device'])} per device"
            )
            if params["replicated"] and params["replicated_names"]:
                out.append("  replicated: " + ", ".join(params["replicated_names"]))
        for i in sharding.get("inputs") or []:
            split = "x".join(str(d) for d in i["split"]) if i["split"] else "REPLICATED"
            out.append(f"  input {_shape(i)} {i['dtype']}: {split} {i['sharding'] or ''}".rstrip())
        out.append("")
    static = report.get("static")
    if static is not None:
        if static:
            out.append("Static diagnostics of the script's program (xla-lint --preview)")
            for d in static:
                out.append(
                    f"  {d['status']:<14} {d['code']} {_short(d['path'])}:{d['line']}: {d['message']}"
                )
        else:
            out.append("Static diagnostics: none")
        out.append("")
    for note in report["notes"]:
        out.append(f"note: {note}")
    return "\n".join(out).rstrip() + "\n"


_PHASE_LABEL = {SETUP: "setup", EVALUATION: "eval"}


def _collapsed(steps: list[dict]) -> list[dict]:
    """The report's rows for the text table: consecutive rows of one setup or evaluation
    phase after the same training step shown as one (times and counts summed, ``rows``: how
    many), the inputs of the first."""
    out: list[dict] = []
    for s in steps:
        last = out[-1] if out else None
        if (
            last is not None
            and s.get("phase") in _PHASE_LABEL
            and last.get("phase") == s.get("phase")
            and last["step"] == s["step"]
            and not s.get("final")
            and not last.get("final")
        ):
            for key in ("duration_s", "compile_s", "transfer_s"):
                last[key] = round((last.get(key) or 0.0) + (s.get(key) or 0.0), 6)
            if s.get("execute_s") is not None:
                last["execute_s"] = round((last.get("execute_s") or 0.0) + s["execute_s"], 6)
            for key in ("compiles", "executions", "host_reads"):
                last[key] = (last.get(key) or 0) + (s.get(key) or 0)
            last["warmup"] = last.get("warmup") or s.get("warmup")
            last["rows"] = last.get("rows", 1) + 1
            continue
        out.append(dict(s))
    return out


def times_line(device: dict) -> str:
    """The header line that says what the times are: CPU times are not TPU times, and the
    ``XLA_FLAGS`` the run used (``device.xla_flags``; ``--fast-compile`` adds LLVM -O0)."""
    flags = device.get("xla_flags")
    if device.get("xla_flags_added"):
        used = f"XLA_FLAGS={flags} (--fast-compile: LLVM -O0, faster compiles, slower steps)"
    elif flags:
        used = f"XLA_FLAGS={flags} (from the environment)"
    else:
        used = "no XLA_FLAGS (the flags of a bare run)"
    where = str(device.get("pjrt_device") or "")
    if where.upper().startswith("CPU"):
        return (
            f"times: on CPU, not TPU times (compare steps with each other); {used}; "
            "host span = time between boundaries, device = graph execution (ExecuteTime)"
        )
    return f"times: on {where or 'the machine'}; {used}"


def _render_crash(crash: dict) -> list[str]:
    """The Python stack at the crash, innermost first, the script's line marked ``>``."""
    if not crash.get("stack"):
        name = crash.get("name")
        if name == "SIGKILL":
            why = "SIGKILL cannot be caught (the out-of-memory killer, or kill -9)"
        elif name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"):
            why = "faulthandler wrote none for the trace (did the script enable its own?)"
        else:
            why = "faulthandler writes one for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT only"
        return [f"crash: no Python stack: {why}"]
    out = [
        f"crash: Fatal Python error: {crash.get('fatal')}; the Python stack at the crash "
        "(most recent call first):"
    ]
    for frame in crash["stack"]:
        mark = ">" if frame == crash.get("location") else " "
        out.append(f"  {mark} {_where(frame)} in {frame.get('function') or '?'}")
    return out


def _render_ranks(ranks: list[dict]) -> list[str]:
    """The ``Ranks`` section: per rank its status, steps, compiles (with where they were
    triggered) and median step."""
    out = [
        "Ranks",
        "  rank  status      steps  compiles          median step  host reads  compiled at",
    ]
    for r in ranks:
        compiles = f"{r['compile_count']} ({_ms(r['compile_s'])})" if r["compile_count"] else "0"
        median = _ms(r["median_step_s"]) if r["median_step_s"] is not None else "-"
        places: dict[str, list[int]] = {}
        for c in r["compiles"]:
            places.setdefault(_where(c["location"]), []).append(c["step"])
        at = ", ".join(
            f"{where} (step{'s' if len(set(steps)) > 1 else ''} {_span(sorted(set(steps)))})"
            for where, steps in places.items()
        )
        out.append(
            f"  {r['rank']:>4}  {r['status']:<10} {r['steps_traced']:>6}  {compiles:<17} "
            f"{median:>11}  {r['host_reads']:>10}  {at or '-'}"
        )
        if r["error"]:
            e = r["error"]
            out.append(
                f"        {e['type']}: {e['message']}"
                + (f" at {_where(e['location'])}" if e.get("location") else "")
            )
    files = [r["events_file"] for r in ranks if r["events_file"]]
    if files:
        more = f" ... {os.path.basename(files[-1])}" if len(files) > 1 else ""
        out.append(f"  events: {files[0]}{more} (a file per rank)")
    out.append("")
    return out


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
