"""The events a traced process writes (one JSON object a line) and the report's JSON schema.

:mod:`xla_lint.trace.hook` writes plain dicts (it may import nothing but the standard
library); this module reads them back into dataclasses for :mod:`xla_lint.trace.report`
and holds the two JSON schemas documented in docs/trace.md: :data:`EVENT_SCHEMA` (one line
of the events file) and :data:`REPORT_SCHEMA` (``xla-lint trace --json``).

Event kinds (``"event"`` field), in the order they usually come:

``start`` (the child began; ``explain``: the run has ``--explain``), ``torch_xla`` (the script imported it: versions, device env),
``spmd`` (``xr.use_spmd()`` called), ``optimizer``, ``loader`` (a DataLoader or
MpDeviceLoader was made: where, batch size, drop_last, input_sharding), ``compile`` and
``execution`` (from torch_xla's PT_XLA_DEBUG report: cause, graph hash, Python frames;
``execution`` only for graphs run mid-step, i.e. by a value read), ``host_read`` (a tensor
copied to the host: kind, place, count in the step, how many made a graph run), ``step``
(one per step boundary, a row: time, compiles, executions, transfers, inputs, the
boundary's user frames, whether an optimizer step ran in it and whether it counts toward
``--steps``, and each batch with the id of the loader that handed it), ``parameters`` (once: every
parameter's sharding), ``stop`` (the trace stopped the script), ``exit``/``error``/``missing``
(how the script ended), ``end`` (final counters), ``launch``
(``torch_xla.launch``/``xmp.spawn`` called: each rank then writes the same kinds to its own
file, ``events.rankN.jsonl``, with ``rank`` in its ``start`` and ``step`` events); the parent
adds ``timeout``, ``child_exit``, ``crash`` (the script died of a signal: which, and the Python
stack faulthandler wrote at the crash) and ``peers_ended`` (a rank failed, the others were ended); with ``--explain``, ``ir_diff`` (the IR lines that changed in
a step that compiled, each with the place its node was made); ``internal`` records a failure of the instrumentation itself
(the script goes on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

LOCATION_SCHEMA: dict = {
    "type": ["object", "null"],
    "required": ["path", "line"],
    "properties": {
        "path": {"type": "string"},
        "line": {"type": "integer"},
        "function": {"type": ["string", "null"]},
    },
}

_INPUT = {
    "type": "object",
    "required": ["shape", "dtype"],
    "properties": {
        "shape": {"type": "array", "items": {"type": "integer"}},
        "dtype": {"type": "string"},
        "sharding": {"type": "string"},
    },
}

#: Keys each event kind must carry (beyond ``event`` and ``t``), with their JSON types.
EVENT_FIELDS: dict[str, dict[str, Any]] = {
    "start": {
        "schema": {"type": "integer"},
        "pid": {"type": "integer"},
        "kind": {"enum": ["path", "module"]},
        "target": {"type": "string"},
        "steps_limit": {"type": "integer"},
    },
    "torch_xla": {"version": {"type": ["string", "null"]}},
    "script": {"path": {"type": "string"}},
    "spmd": {"location": LOCATION_SCHEMA},
    "optimizer": {
        "id": {"type": "integer"},
        "class": {"type": "string"},
        "location": LOCATION_SCHEMA,
    },
    "loader": {"kind": {"enum": ["DataLoader", "MpDeviceLoader"]}, "location": LOCATION_SCHEMA},
    "compile": {
        "step": {"type": "integer"},
        "cause": {"type": "string"},
        "location": LOCATION_SCHEMA,
        "frames": {"type": "array", "items": LOCATION_SCHEMA},
    },
    "execution": {
        "step": {"type": "integer"},
        "cause": {"type": "string"},
        "location": LOCATION_SCHEMA,
    },
    "host_read": {
        "step": {"type": "integer"},
        "kind": {"type": "string"},
        "location": LOCATION_SCHEMA,
        "count": {"type": "integer"},
    },
    "step": {
        "step": {"type": "integer"},
        "duration_s": {"type": "number"},
        "compiles": {"type": "integer"},
        "compile_s": {"type": "number"},
        "executions": {"type": "integer"},
        "transfers": {"type": "integer"},
        "inputs": {"type": ["array", "null"], "items": _INPUT},
    },
    "parameters": {"step": {"type": "integer"}, "parameters": {"type": "array"}},
    "stop": {
        "reason": {"enum": ["steps", "no-boundary", "peer-error"]},
        "steps": {"type": "integer"},
    },
    "launch": {"what": {"type": "string"}, "location": LOCATION_SCHEMA},
    "peers_ended": {"seconds": {"type": "number"}},
    "exit": {"code": {"type": "integer"}, "reason": {"type": "string"}},
    "error": {
        "type": {"type": "string"},
        "message": {"type": "string"},
        "traceback": {"type": "string"},
    },
    "missing": {"what": {"type": "string"}},
    "end": {"steps": {"type": "integer"}},
    "timeout": {"seconds": {"type": "number"}},
    "child_exit": {"code": {"type": ["integer", "null"]}},
    "crash": {  # the parent: the script died of a signal, with its stack at the crash
        "signal": {"type": "integer"},
        "name": {"type": "string"},
        "fatal": {"type": ["string", "null"]},
        "stack": {"type": "array", "items": LOCATION_SCHEMA},
        "location": LOCATION_SCHEMA,
    },
    "internal": {"where": {"type": "string"}, "message": {"type": "string"}},
    "seed": {  # --simulate-hosts: a seed of torch's or torch_xla's generator
        "what": {"type": "string"},
        "location": LOCATION_SCHEMA,
    },
    "graph": {  # --simulate-hosts: every graph a host compiled or ran, boundary ones included
        "step": {"type": "integer"},
        "kind": {"type": "string"},
        "graph_hash": {"type": ["string", "null"]},
        "location": LOCATION_SCHEMA,
    },
    "ir_diff": {
        "step": {"type": "integer"},
        "changed": {"type": "integer"},
        "changes": {
            "type": "array",
            "items": {"type": "object", "required": ["before", "after", "location"]},
        },
    },
}

#: Keys some event kinds may carry (older events files lack them), with their JSON types.
EVENT_OPTIONAL: dict[str, dict[str, Any]] = {
    "step": {
        "counted": {"type": "boolean"},
        "trains": {"type": "boolean"},
        "boundary_frames": {"type": "array", "items": {"type": "array"}},
        "optimizer_frames": {"type": "array", "items": {"type": "array"}},
        "batches": {"type": "array", "items": {"type": "object"}},
    },
    "host_read": {"frames": {"type": "array", "items": {"type": "array"}}},
}

#: JSON schema of one line of the events file.
EVENT_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "xla-lint trace event",
    "type": "object",
    "required": ["event", "t"],
    "properties": {"event": {"enum": sorted(EVENT_FIELDS)}, "t": {"type": "number"}},
    "allOf": [
        {
            "if": {"properties": {"event": {"const": kind}}},
            "then": {
                "required": sorted(fields),
                "properties": {**fields, **EVENT_OPTIONAL.get(kind, {})},
            },
        }
        for kind, fields in EVENT_FIELDS.items()
    ],
}

_REPORT_LOCATION = {
    "type": ["object", "null"],
    "required": ["path", "line"],
    "properties": {
        "path": {"type": "string"},
        "line": {"type": "integer"},
        "function": {"type": ["string", "null"]},
    },
}

#: The script died of a signal (a rank's or a simulated host's process: with its number, pid
#: and steps).
_CRASH: dict = {
    "type": ["object", "null"],
    "required": ["signal", "name", "fatal", "location", "stack"],
    "properties": {
        "signal": {"type": "integer"},
        "name": {"type": "string"},
        "fatal": {"type": ["string", "null"]},
        "location": _REPORT_LOCATION,
        "stack": {"type": "array", "items": _REPORT_LOCATION},
        "rank": {"type": "integer"},
        "host": {"type": "integer"},
        "pid": {"type": ["integer", "null"]},
        "steps_traced": {"type": "integer"},
    },
}

#: The phase a row or event ran in, from the script's loops (null: not known, ``--no-static``).
_PHASE = {"enum": ["setup", "training", "evaluation", None]}

#: A batch of a row, with the DataLoader that handed it (null: not known).
_BATCH = {
    "type": "object",
    "required": ["index", "inputs", "loader"],
    "properties": {
        "index": {"type": ["integer", "null"]},  # 1-based, in the loader's pass
        "inputs": {"type": "array", "items": _INPUT},
        "loader": {
            "type": ["object", "null"],
            "required": ["location", "dataset_size", "batch_size", "drop_last"],
        },
    },
}

#: One rank of a run with one process per device, in the report.
_RANK: dict = {
    "type": "object",
    "required": [
        "rank",
        "events_file",
        "pid",
        "status",
        "steps_traced",
        "compile_count",
        "compile_s",
        "median_step_s",
        "host_reads",
        "steps",
        "compiles",
        "error",
    ],
    "properties": {
        "rank": {"type": "integer"},
        "events_file": {"type": ["string", "null"]},
        "pid": {"type": ["integer", "null"]},
        "thread": {"type": ["string", "null"]},
        "status": {
            "enum": [
                "error",
                "stopped",
                "peer-error",
                "no-boundary",
                "exited",
                "finished",
                "ended",
                "crashed",
            ]
        },
        "steps_traced": {"type": "integer"},
        "compile_count": {"type": "integer"},
        "compile_s": {"type": "number"},
        "median_step_s": {"type": ["number", "null"]},
        "host_reads": {"type": "integer"},
        "steps": {"type": "array", "items": {"type": "object"}},
        "compiles": {"type": "array", "items": {"type": "object"}},
        "error": {"type": ["object", "null"]},
        "crash": _CRASH,
    },
}

#: JSON schema of ``xla-lint trace --json`` (documented in docs/trace.md).
REPORT_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "xla-lint trace report",
    "type": "object",
    "required": [
        "version",
        "command",
        "target",
        "status",
        "exit_code",
        "steps_requested",
        "steps_traced",
        "wall_s",
        "events_file",
        "device",
        "steps",
        "compiles",
        "host_reads",
        "loaders",
        "sharding",
        "findings",
        "static",
        "error",
        "ranks",
        "notes",
    ],
    "properties": {
        "version": {"const": 1},
        "command": {"type": "array", "items": {"type": "string"}},
        "target": {"type": "string"},
        "status": {
            "enum": ["stopped", "finished", "error", "timeout", "no-boundary", "crashed", "exited"]
        },
        "exit_code": {"enum": [0, 1]},
        "script_exit": {"type": ["integer", "null"]},
        "steps_requested": {"type": "integer"},
        "steps_traced": {"type": "integer"},
        "optimizer_steps": {"type": ["integer", "null"]},
        "wall_s": {"type": "number"},
        "events_file": {"type": "string"},
        "device": {
            "type": "object",
            "required": ["pjrt_device", "cpu_devices", "spmd", "torch_xla"],
            "properties": {
                "pjrt_device": {"type": ["string", "null"]},
                "cpu_devices": {"type": ["integer", "null"]},
                "spmd": {"type": "boolean"},
                "torch_xla": {"type": ["string", "null"]},
                "xla_flags_added": {"type": ["string", "null"]},
                "xla_flags": {"type": ["string", "null"]},
                "fast_compile": {"type": "boolean"},
                "launcher": {"enum": [None, "torch_xla.launch", "xmp.spawn", "torchrun"]},
                "processes": {"type": ["integer", "null"]},
                "hosts": {"type": "integer"},
            },
        },
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "step",
                    "row",
                    "phase",
                    "duration_s",
                    "compiles",
                    "compile_s",
                    "executions",
                    "host_reads",
                    "transfer_s",
                    "inputs",
                    "batches",
                ],
                "properties": {
                    # the training step (setup/evaluation rows: the training step before them)
                    "step": {"type": "integer"},
                    "row": {"type": "integer"},  # the row's number in the run, 1, 2, ...
                    "phase": _PHASE,
                    "duration_s": {"type": "number"},
                    "compiles": {"type": "integer"},
                    "compile_s": {"type": "number"},
                    "executions": {"type": "integer"},
                    "host_reads": {"type": "integer"},
                    "setup_host_reads": {"type": "integer"},
                    "transfer_s": {"type": "number"},
                    "warmup": {"type": "boolean"},
                    "final": {"type": "boolean"},
                    "execute_s": {"type": ["number", "null"]},
                    "inputs": {"type": ["array", "null"], "items": _INPUT},
                    "batches": {"type": "array", "items": _BATCH},
                },
            },
        },
        "loaders": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "location",
                    "dataset_size",
                    "batch_size",
                    "drop_last",
                    "partial_last_batch",
                    "batches",
                ],
                "properties": {
                    "location": _REPORT_LOCATION,
                    "dataset_size": {"type": ["integer", "null"]},
                    "batch_size": {"type": ["integer", "null"]},
                    "drop_last": {"type": "boolean"},
                    "partial_last_batch": {"type": "boolean"},
                    "batches": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
            },
        },
        "compiles": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "step",
                    "row",
                    "phase",
                    "after_warmup",
                    "reason",
                    "cause",
                    "graph_hash",
                    "location",
                    "time_s",
                ],
                "properties": {
                    "step": {"type": "integer"},
                    "row": {"type": "integer"},
                    "phase": _PHASE,
                    "after_warmup": {"type": "boolean"},
                    "reason": {
                        "enum": [
                            "warm-up",
                            "new-input-shape",
                            "same-input-shapes",
                            "unknown-inputs",
                            "after-last-step",
                            "host-read",
                            "setup",
                            "unplaced",
                        ]
                    },
                    "cause": {"type": "string"},
                    "graph_hash": {"type": ["string", "null"]},
                    "location": _REPORT_LOCATION,
                    "time_s": {"type": ["number", "null"]},
                    "partial": {"type": "boolean"},
                    "explain": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "host_reads": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "kind",
                    "location",
                    "steps",
                    "rows",
                    "phase",
                    "count",
                    "forced_execution",
                ],
                "properties": {
                    "kind": {"type": "string"},
                    "location": _REPORT_LOCATION,
                    "steps": {"type": "array", "items": {"type": "integer"}},
                    "rows": {"type": "array", "items": {"type": "integer"}},
                    "phase": _PHASE,
                    "count": {"type": "integer"},
                    "forced_execution": {"type": "integer"},
                },
            },
        },
        "sharding": {
            "type": "object",
            "required": ["spmd", "parameters", "inputs"],
            "properties": {
                "spmd": {"type": "boolean"},
                "parameters": {"type": ["object", "null"]},
                "inputs": {"type": ["array", "null"]},
            },
        },
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "code",
                    "name",
                    "title",
                    "message",
                    "fix",
                    "location",
                    "related",
                    "steps",
                    "cost_s",
                ],
                "properties": {
                    "code": {"type": ["string", "null"]},
                    "name": {"type": "string"},
                    "title": {"type": "string"},
                    "message": {"type": "string"},
                    "fix": {"type": "string"},
                    "location": _REPORT_LOCATION,
                    "related": {"type": "array", "items": _REPORT_LOCATION},
                    "steps": {"type": "array", "items": {"type": "integer"}},
                    "cost_s": {"type": "number"},
                    "ranks": {"type": "array", "items": {"type": "integer"}},
                },
            },
        },
        "static": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["code", "name", "message", "path", "line", "status"],
                "properties": {
                    "code": {"type": "string"},
                    "name": {"type": "string"},
                    "message": {"type": "string"},
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "status": {"enum": ["confirmed", "not reached", "not observable"]},
                },
            },
        },
        "error": {"type": ["object", "null"]},
        "crash": _CRASH,
        "ranks": {"type": ["array", "null"], "items": _RANK},
        "hosts": {  # --simulate-hosts only
            "type": "array",
            "items": {
                "type": "object",
                "required": ["host", "status", "steps_traced", "compiles", "graphs"],
                "properties": {
                    "host": {"type": "integer"},
                    "status": {"type": "string"},
                    "steps_traced": {"type": "integer"},
                    "compiles": {"type": "integer"},
                    "graphs": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "array",
                            "items": {"type": ["string", "null"]},
                        },
                    },
                    "events_file": {"type": ["string", "null"]},
                },
            },
        },
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}


@dataclass(frozen=True)
class Location:
    """A place in the user's code: file path, line and function."""

    path: str
    line: int
    function: str | None = None

    @classmethod
    def from_json(cls, data: dict | None) -> Location | None:
        """The location of an event (``None`` stays ``None``)."""
        if not data or data.get("path") is None or data.get("line") is None:
            return None
        return cls(str(data["path"]), int(data["line"]), data.get("function"))

    def to_json(self) -> dict:
        """``{"path", "line", "function"}``."""
        return {"path": self.path, "line": self.line, "function": self.function}


@dataclass
class Step:
    """One traced step: its time and what happened in it."""

    step: int
    duration_s: float
    compiles: int
    compile_s: float
    compile_times_s: list[float]
    executions: int
    transfers: int
    transfer_s: float
    optimizer_steps: int
    inputs: list[dict] | None
    optimizers: list[dict]
    boundary: Location | None
    #: ``[start, seconds]`` of each ``CompileTime`` sample of the step (start: seconds since
    #: the trace began; None in events of ranks sharing a process, and of older versions).
    compile_samples: list[list[float]] | None = None
    #: ``[start, seconds]`` of each graph execution (``ExecuteTime``/``ExecuteReplicatedTime``)
    #: recorded by the step's end; an execution launched at a boundary may finish in the next.
    execute_samples: list[list[float]] | None = None
    start: float | None = None  # seconds since the trace began
    final: bool = False  # the row after the last step (the ``end`` event's figures)
    boundary_at: float | None = None  # when the sync that ended the step began (since t0)
    #: The hook counted the row toward ``--steps`` (it ran an optimizer step, or the script
    #: has none that steps); False for setup and evaluation syncs and a sync inside a step.
    counted: bool = True
    trains: bool = False  # an optimizer step ran in the row
    #: ``[path, line]`` of the boundary's user frames, innermost first.
    boundary_frames: list[list] = field(default_factory=list)
    #: ``[path, line]`` of the user frames of the row's first optimizer step, innermost first.
    optimizer_frames: list[list] = field(default_factory=list)
    #: The row's batches: ``{"loader": id of its loader event, "index": 1-based, "inputs"}``.
    batches: list[dict] = field(default_factory=list)
    #: Set by the report (:func:`xla_lint.trace.phases.place`): the phase the row ran in
    #: (``setup``, ``training``, ``evaluation``; None: not known), its training step number
    #: (for other rows the number of the training step before it), and the loop it ran in.
    phase: str | None = None
    number: int = 0
    loop: tuple | None = None

    @classmethod
    def from_json(cls, data: dict) -> Step:
        """Read a ``step`` event."""
        return cls(
            int(data["step"]),
            float(data["duration_s"]),
            int(data["compiles"]),
            float(data["compile_s"]),
            [float(x) for x in data.get("compile_times_s", [])],
            int(data["executions"]),
            int(data["transfers"]),
            float(data.get("transfer_s", 0.0)),
            int(data.get("optimizer_steps", 0)),
            data.get("inputs"),
            list(data.get("optimizers") or []),
            Location.from_json(data.get("boundary")),
            _samples(data.get("compile_samples")),
            _samples(data.get("execute_samples")),
            float(data["start"]) if isinstance(data.get("start"), (int, float)) else None,
            boundary_at=float(data["boundary_at"])
            if isinstance(data.get("boundary_at"), (int, float))
            else None,
            counted=bool(data.get("counted", True)),
            trains=bool(data.get("trains", False)),
            boundary_frames=[list(f) for f in data.get("boundary_frames") or []],
            optimizer_frames=[list(f) for f in data.get("optimizer_frames") or []],
            batches=[b for b in data.get("batches") or [] if isinstance(b, dict)],
        )

    @classmethod
    def after_last(cls, end: dict, step: int, started: float | None) -> Step | None:
        """The row after the last step from the ``end`` event (``after_last_step``: what the
        script did after its last boundary), numbered ``step``; None without those figures."""
        figures = end.get("after_last_step")
        if not isinstance(figures, dict):
            return None
        return cls(
            step,
            float(end.get("partial_step_s") or 0.0),
            int(figures.get("compiles", 0)),
            float(figures.get("compile_s", 0.0)),
            [float(x) for x in figures.get("compile_times_s", [])],
            int(figures.get("executions", 0)),
            int(figures.get("transfers", 0)),
            float(figures.get("transfer_s", 0.0)),
            int(end.get("optimizer_steps") or 0),
            None,
            [],
            None,
            _samples(figures.get("compile_samples")),
            _samples(figures.get("execute_samples")),
            started,
            final=True,
        )

    def signature(self) -> tuple | None:
        """The input shapes and dtypes, comparable between steps (``None``: not seen)."""
        if not self.inputs:
            return None
        return tuple((tuple(i["shape"]), i["dtype"]) for i in self.inputs)


def device_times(rows: list[Step]) -> dict[int, float | None]:
    """Seconds the device spent running the graphs each step launched, by step number (None
    for every step when no row has execution samples).

    torch_xla launches a step's graph at its boundary and runs it asynchronously, so its
    ``ExecuteTime`` sample may begin after the step's span has ended: the first sample that
    began after a step's boundary (``boundary_at``) and before the next step's boundary is
    that step's graph. Every other sample belongs to the step whose span holds its start (a
    graph a host read ran mid-step), else to the last step that started before it."""
    samples = sorted(x for row in rows for x in row.execute_samples or [])
    if all(row.execute_samples is None for row in rows):
        return {row.step: None for row in rows}
    owner: dict[int, int] = {}
    for i, row in enumerate(rows):
        if row.boundary_at is None:
            continue
        after = rows[i + 1].boundary_at if i + 1 < len(rows) else None
        for k, (began, _) in enumerate(samples):
            if k not in owner and began >= row.boundary_at and (after is None or began < after):
                owner[k] = row.step
                break
    totals: dict[int, float | None] = {row.step: 0.0 for row in rows}
    for k, (began, seconds) in enumerate(samples):
        step = owner.get(k)
        if step is None:
            holding = [r for r in rows if r.start is not None and r.start <= began]
            if not holding:
                continue
            step = holding[-1].step
        totals[step] = round((totals[step] or 0.0) + seconds, 6)
    return totals


def _samples(value: object) -> list[list[float]] | None:
    """``[[start, seconds], ...]`` of an event, or None."""
    if not isinstance(value, list):
        return None
    return [[float(a), float(b)] for a, b in value]


@dataclass
class Compile:
    """A graph compiled (or, for ``kind == "execution"``, run mid-step) with torch_xla's report."""

    step: int
    cause: str
    graph_hash: str | None
    location: Location | None
    frames: list[Location]
    partial: bool = False
    kind: str = "compile"
    phase: str | None = None  # set by the report (:func:`xla_lint.trace.phases.place`)
    loop: tuple | None = None
    #: The hook's row it ran in, before :func:`~xla_lint.trace.phases.place` regrouped rows.
    raw_step: int | None = None

    @classmethod
    def from_json(cls, data: dict) -> Compile:
        """Read a ``compile`` or ``execution`` event."""
        frames = [
            f for f in (Location.from_json(x) for x in data.get("frames") or []) if f is not None
        ]
        return cls(
            int(data["step"]),
            str(data.get("cause", "")),
            data.get("graph_hash"),
            Location.from_json(data.get("location")),
            frames,
            bool(data.get("partial", False)),
            str(data["event"]),
        )


@dataclass
class HostRead:
    """Copies of XLA tensors to the host at one place during one step."""

    step: int
    kind: str
    location: Location | None
    count: int
    #: ``"sync"``: the read ran in a step closure ``torch_xla.sync`` ran (``xm.add_step_closure``);
    #: ``"async"``: in one of ``run_async=True``; None: in the script's own flow.
    closure: str | None = None
    #: ``[start, end]`` (seconds since the trace began) of each read during which torch_xla
    #: compiled a graph (reading a sharded tensor compiles its gather).
    compile_spans: list[list[float]] = field(default_factory=list)
    #: ``[path, line]`` of the first read's user frames, innermost first.
    frames: list[list] = field(default_factory=list)
    phase: str | None = None  # set by the report (:func:`xla_lint.trace.phases.place`)
    loop: tuple | None = None

    @classmethod
    def from_json(cls, data: dict) -> HostRead:
        """Read a ``host_read`` event."""
        return cls(
            int(data["step"]),
            str(data["kind"]),
            Location.from_json(data.get("location")),
            int(data["count"]),
            data.get("closure"),
            _samples(data.get("compile_spans")) or [],
            [list(f) for f in data.get("frames") or []],
        )


@dataclass
class Trace:
    """Every event of one run, by kind (``other``: kinds this version does not know)."""

    start: dict | None = None
    torch_xla: dict | None = None
    spmd: Location | None = None
    spmd_called: bool = False
    optimizers: list[dict] = field(default_factory=list)
    loaders: list[dict] = field(default_factory=list)
    compiles: list[Compile] = field(default_factory=list)
    executions: list[Compile] = field(default_factory=list)
    host_reads: list[HostRead] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    parameters: dict | None = None
    stop: dict | None = None
    exit: dict | None = None
    error: dict | None = None
    missing: dict | None = None
    end: dict | None = None
    timeout: dict | None = None
    child_exit: dict | None = None
    crash: dict | None = None
    script: dict | None = None
    launch: dict | None = None
    peers_ended: dict | None = None
    ir_diffs: dict[int, dict] = field(default_factory=dict)  # step -> ir_diff event (--explain)
    #: Set by :func:`xla_lint.trace.phases.place`: rows the hook did not count after its last
    #: counted one (the row after the last step adds them up), and how many rows are steps.
    before_end: list[Step] = field(default_factory=list)
    numbered: int | None = None
    #: Set by :func:`~xla_lint.trace.phases.place`: the hook's row (``step`` of its events) ->
    #: the placed row it joined (the row after the last step: one past the last row).
    placed_rows: dict[int, int] = field(default_factory=dict)
    #: The hook's rows before :func:`~xla_lint.trace.phases.place` regrouped them, by number.
    raw_rows: dict[int, Step] = field(default_factory=dict)
    #: Whether the rows were placed by the script's loops (False: ``--no-static``, no map).
    mapped: bool = False
    other: list[dict] = field(default_factory=list)
    bad_lines: int = 0

    def add(self, data: dict) -> None:
        """File one event under its kind."""
        kind = data.get("event")
        if kind == "step":
            self.steps.append(Step.from_json(data))
        elif kind == "compile":
            self.compiles.append(Compile.from_json(data))
        elif kind == "execution":
            self.executions.append(Compile.from_json(data))
        elif kind == "host_read":
            self.host_reads.append(HostRead.from_json(data))
        elif kind == "optimizer":
            self.optimizers.append(data)
        elif kind == "loader":
            self.loaders.append(data)
        elif kind == "ir_diff":
            self.ir_diffs[int(data["step"])] = data
        elif kind == "spmd":
            self.spmd_called = True
            self.spmd = self.spmd or Location.from_json(data.get("location"))
        elif kind in (
            "start",
            "torch_xla",
            "parameters",
            "stop",
            "exit",
            "error",
            "missing",
            "end",
            "timeout",
            "child_exit",
            "crash",
            "script",
            "launch",
            "peers_ended",
        ):
            if getattr(self, kind) is None:
                setattr(self, kind, data)
        else:
            self.other.append(data)


def read_events(path: str) -> Trace:
    """Read an events file; lines that are not JSON objects (a write cut by a kill) are counted
    in ``bad_lines`` and skipped."""
    trace = Trace()
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    data = json.loads(line)
                    if not isinstance(data, dict):
                        raise ValueError("not an object")
                    trace.add(data)
                except (ValueError, KeyError, TypeError):
                    trace.bad_lines += 1
    except FileNotFoundError:
        pass
    return trace
