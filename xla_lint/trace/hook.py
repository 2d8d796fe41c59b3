"""The instrumentation that runs inside the traced script's process.

The parent (:mod:`xla_lint.trace.runner`) starts ``python -c BOOTSTRAP KIND TARGET ARGS...``;
the bootstrap loads this file by path and calls :func:`main`, which runs the script with
:mod:`runpy` exactly as ``python SCRIPT`` or ``python -m MODULE`` would (``__name__ ==
"__main__"``, ``__file__``, ``sys.argv``, ``sys.path[0]``). At import time this module uses
the standard library only; torch and torch_xla are patched lazily, right after the script
imports ``torch_xla`` (an import hook on ``sys.meta_path``), so a script that never imports
it runs untouched.

What is patched, and why (torch_xla 2.9.0):

* ``torch_xla.sync`` (also as ``torch_xla.torch_xla.sync``): every step boundary goes
  through it: ``xm.mark_step`` calls ``torch_xla.sync`` (core/xla_model.py), the
  ``MpDeviceLoader`` syncs in ``PerDeviceLoader.next`` (distributed/parallel_loader.py) and
  ``torch_xla.step()`` / ``torch_xla.compile`` call the module-level ``sync`` on entry and
  exit (torch_xla.py). After the real sync it polls cheap counters (``UncachedCompile``,
  ``ExecuteReplicated``/``ExecuteComputation``, metrics ``CompileTime`` and
  ``TransferFromDeviceTime``) and reads what torch_xla appended to ``PT_XLA_DEBUG_FILE``
  (``DebugUtil::analyze_graph_execution_python_frame`` in csrc/debug_util.cpp: one block per
  compilation and execution, with a cause guess and the Python frames).
* ``torch.Tensor`` methods that copy an XLA tensor to the host (``item``, ``tolist``,
  ``cpu``, ``numpy``, ``to("cpu")``, ``__bool__``, ``__int__``, ``__float__``,
  ``__index__``, ``__format__``, ``__repr__``, ``__array__``): the first frame outside
  torch/torch_xla/the standard library is recorded (torch_xla's execution report for the
  same line says whether the read made a graph run). Other tensors take one attribute test.
* ``torch.optim.Optimizer``: construction site and a global step hook (a step is the span
  between boundaries that holds an ``optimizer.step()``); ``DataLoader``/``MpDeviceLoader``/
  ``ShardingSpec`` construction sites and the batches the main thread receives; the outermost
  ``nn.Module`` calls of the first step (global module hooks, removed after it) to find the
  model, its parameters' shardings and its inputs.
* ``torch_xla.launch`` and ``xmp.spawn``: recorded (a ``launch`` event); the per-device
  function runs in other processes (see *One process per device* below).

Every wrapper is made by :func:`_wrap` (:func:`_patch`), which holds the guards once: when a
call only runs the original (dynamo tracing it, a call inside a host read, no tracer, a call
from torch's or torch_xla's compilers) and when it records, before or after the original or
around it (the openxla bridge's ``extract_internal`` wraps each compiled graph's function
with it). Not made by it: ``_SpawnFn.__call__`` (it makes a rank's tracer and runs the call
in it: there is no tracer to guard yet), ``ShardingSpec.__post_init__`` (it tags the spec with
its user line for the ``MpDeviceLoader`` made from it, with or without a tracer), the
simulated host's ``process_index``/``process_count`` (replaced, the originals never run), and
torch's hooks (the optimizer step and module hooks are not wrappers).

One process per device. Every Python process the script starts inherits
``PYTHONPATH`` with a folder whose ``sitecustomize.py`` (written by the runner) loads this file
by path and calls :func:`worker_main` (``site`` imports ``sitecustomize`` at every interpreter
start, before ``__main__``; the traced process itself adds the folder only after it started).
A worker becomes a *rank* when it runs torch_xla's per-device function
(``torch_xla._internal.pjrt._SpawnFn.__call__``, reached from ``xmp.spawn`` and
``torch_xla.launch`` in a ``ProcessPoolExecutor`` process, one thread per addressable device:
on CPU one process holds every device) or when it is a ``torchrun`` worker (``RANK`` and
``TORCHELASTIC_RUN_ID`` set, not a multiprocessing child). Each rank has its own
:class:`Tracer` and events file (:func:`rank_events_path`); ranks that share a process tell
their blocks of torch_xla's debug file apart by a marker frame (``xla_lint_rank_N``) the
per-device function is called through. Every rank stops at the same step boundary; a rank that
raises creates the abort file, and the others stop at their next boundary.

Events are appended to the JSONL file named by ``XLA_LINT_TRACE_EVENTS`` as they happen (one
JSON object a line; :mod:`xla_lint.trace.events` documents each kind). After ``--steps``
steps the patched sync raises :class:`TraceStop` (a ``SystemExit``); a script that swallows
it is ended with ``os._exit`` at a later boundary or after a grace period.
"""

from __future__ import annotations

import atexit
import faulthandler
import functools
import json
import os
import runpy
import signal
import sys
import sysconfig
import threading
import time
import traceback
from typing import Any

EVENTS_ENV = "XLA_LINT_TRACE_EVENTS"
STEPS_ENV = "XLA_LINT_TRACE_STEPS"
STACKS_ENV = "XLA_LINT_TRACE_STACKS"
#: Where faulthandler writes the Python stacks when the process dies of a fatal signal
#: (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT); each other process of the run writes its own
#: (:func:`worker_file`).
FATAL_ENV = "XLA_LINT_TRACE_FATAL"
EXPLAIN_ENV = "XLA_LINT_TRACE_EXPLAIN"
#: The folder holding the ``sitecustomize.py`` that hooks every Python process the script starts.
SITE_ENV = "XLA_LINT_TRACE_SITE"
#: The path of this file, for that ``sitecustomize.py``.
HOOK_ENV = "XLA_LINT_TRACE_HOOK"
#: A file created when a rank raises: the other ranks stop at their next boundary.
ABORT_ENV = "XLA_LINT_TRACE_ABORT"
#: Set in the launcher (``xmp.spawn``) so its worker processes patch torch_xla when importing it.
SPAWN_ENV = "XLA_LINT_TRACE_SPAWN"
#: ``--simulate-hosts``: ``"I/N"``, this process is host I of a simulated pod of N hosts.
HOST_ENV = "XLA_LINT_TRACE_HOST"
#: The function name of the frame each rank's per-device function is called through.
RANK_MARKER = "xla_lint_rank_"
#: IR lines differing between two steps that an ``ir_diff`` event lists at most.
MAX_IR_CHANGES = 8
DEBUG_FILE_ENV = "PT_XLA_DEBUG_FILE"
SCHEMA_VERSION = 1
#: Boundaries the script may still reach after the stop (it swallowed TraceStop) before os._exit.
STOP_MARGIN = 2
#: Seconds the process may take to exit after the stop before os._exit (non-daemon threads, hangs).
EXIT_GRACE_SECONDS = 30.0
#: Boundaries without any optimizer.step() after which every boundary counts as a step.
NO_OPTIMIZER_SPANS = 8
#: Exit status of the child when the script or module does not exist.
EXIT_MISSING = 4
#: Steps between two reads of the execution-time metrics after the first three steps.
EXECUTE_READ_EVERY = 8
#: The Python frames torch_xla prints per block (PT_XLA_DEBUG_MAX_FRAME, default 8).
MAX_FRAMES = 16

#: Batches a row records (the last one replaces the last kept).
MAX_BATCHES = 8

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAIN_THREAD = threading.main_thread()


class TraceStop(SystemExit):
    """Raised from the patched ``torch_xla.sync`` once the requested steps are done."""


# --- where a call comes from -------------------------------------------------------------------

_library_dirs: tuple[str, ...] = ()
_user_code: dict = {}


def _set_library_dirs(*modules) -> None:
    """Library code is the standard library, installed packages (site-packages: torch,
    numpy, mpmath...), this package and the given modules' folders."""
    global _library_dirs
    dirs = {os.path.dirname(_HERE)}  # xla_lint/
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
            dirs.add(path)
    for module in modules:
        file = getattr(module, "__file__", None)
        if file:
            dirs.add(os.path.dirname(file))
            dirs.add(os.path.dirname(os.path.realpath(file)))
    _library_dirs = tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))
    _user_code.clear()


def is_user_file(filename: str) -> bool:
    """True for a file of the user's program: not the standard library, torch, torch_xla or
    xla-lint, and not a ``<frozen ...>``/``<string>`` pseudo-file."""
    if not filename or filename.startswith("<"):
        return False
    return not filename.startswith(_library_dirs)


#: Where torch_xla 2.9 runs step closures (``xm.add_step_closure``): ``_run_step_closures`` in
#: core/xla_model.py, called by ``torch_xla.sync`` once the step's graph is launched; with
#: ``run_async=True`` the ``event_loop`` thread of ``AsyncClosureHandler`` (utils/closures.py).
_CLOSURE_FRAMES = {
    ("_run_step_closures", os.path.join("core", "xla_model.py")): "sync",
    ("event_loop", os.path.join("utils", "closures.py")): "async",
}


def closure_kind(frame) -> str | None:
    """``"sync"`` when ``frame`` runs inside a step closure that ``torch_xla.sync`` runs (the
    host waits there), ``"async"`` inside one of ``run_async=True`` (torch_xla's closure
    thread), else None: read from the frames below ``frame``."""
    while frame is not None:
        code = frame.f_code
        for (name, tail), kind in _CLOSURE_FRAMES.items():
            if code.co_name == name and code.co_filename.endswith(tail):
                return kind
        frame = frame.f_back
    return None


def _is_user_code(code) -> bool:
    """Whether ``code`` is in the user's files (:func:`is_user_file`), memoised per code object."""
    user = _user_code.get(code)
    if user is None:
        user = _user_code[code] = is_user_file(code.co_filename)
    return user


def user_frames(frame, limit: int = MAX_FRAMES) -> list[list]:
    """``[path, line]`` of each user frame from ``frame`` outwards (innermost first, at most
    ``limit``): the report places an event in the innermost classified loop of this stack
    (a step function's sync runs in the training loop that called it)."""
    out: list[list] = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        if _is_user_code(code):
            out.append([code.co_filename, frame.f_lineno])
        frame = frame.f_back
    return out


def user_location(frame) -> dict | None:
    """``{"path", "line", "function"}`` of the first user frame from ``frame`` outwards."""
    while frame is not None:
        code = frame.f_code
        if _is_user_code(code):
            return {"path": code.co_filename, "line": frame.f_lineno, "function": code.co_name}
        frame = frame.f_back
    return None


# --- PT_XLA_DEBUG_FILE ---------------------------------------------------------------------------

_BLOCK_KINDS = {
    "Compilation Analysis": "compile",
    "Execution Analysis": "execution",
    "Unexpected Execution Analysis": "unexpected-execution",
}


def parse_debug_blocks(text: str) -> list[dict]:
    """The blocks torch_xla's ``PT_XLA_DEBUG_LEVEL`` writes (csrc/debug_util.cpp), in order.

    Each is ``{"kind": "compile"|"execution"|"unexpected-execution", "cause": str,
    "graph_hash": str, "graph_name": str|None, "inputs": int, "outputs": int, "frames":
    [{"path", "line", "function"}] (innermost first), "complete": bool, "start": int,
    "end": int}`` (``start``/``end``: character offsets in ``text``); a compile block also
    gets ``computation_hash`` and the sizes of the "Post Compilation Analysis" that follows
    it (``compiled_program_size_gb``, ...). A block cut off at the end has ``complete`` False.
    """
    blocks: list[dict] = []
    current: dict | None = None
    section = ""
    offset = 0
    for raw in text.splitlines(keepends=True):
        start, offset = offset, offset + len(raw)
        prefix, sep, rest = raw.rstrip("\r\n").partition(": ")
        if not sep:
            continue
        if prefix in ("Post Compilation Analysis", "Computation hash"):
            target = next((b for b in reversed(blocks) if b["kind"] == "compile"), None)
            if target is None:
                continue
            target["end"] = offset
            if prefix == "Computation hash":
                target["computation_hash"] = rest.strip()
                continue
            key, _, value = rest.partition(": ")
            if value.endswith(" GB"):
                try:
                    target[key.strip().lower().replace(" ", "_") + "_gb"] = float(value[:-3])
                except ValueError:
                    pass
            continue
        kind = _BLOCK_KINDS.get(prefix)
        if kind is None:
            continue
        if rest.startswith("====="):
            if current is None:
                current = {
                    "kind": kind,
                    "cause": "",
                    "graph_hash": None,
                    "graph_name": None,
                    "inputs": None,
                    "outputs": None,
                    "frames": [],
                    "complete": False,
                    "start": start,
                    "end": offset,
                }
                blocks.append(current)
                section = ""
            else:
                current["complete"] = True
                current["end"] = offset
                current = None
            continue
        if current is None or rest.startswith("-----"):
            continue
        stripped = rest.strip()
        if not rest.startswith("  "):
            section = stripped
            continue
        if section.endswith("Cause"):
            current["cause"] = (current["cause"] + " " + stripped).strip()
        elif section == "Graph Info:":
            key, _, value = stripped.partition(": ")
            if key == "Graph Hash":
                current["graph_hash"] = value
            elif key == "Graph Name":
                current["graph_name"] = value
            elif key == "Number of Graph Inputs":
                current["inputs"] = _int(value)
            elif key == "Number of Graph Outputs":
                current["outputs"] = _int(value)
        elif section.startswith("Python Frame"):
            frame = _parse_frame(stripped)
            if frame is not None:
                current["frames"].append(frame)
    return blocks


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _parse_frame(text: str) -> dict | None:
    """``func (/path/file.py:12)`` -> ``{"path", "line", "function"}``."""
    if not text.endswith(")") or " (" not in text:
        return None
    function, _, where = text[:-1].partition(" (")
    path, _, line = where.rpartition(":")
    if not path or not line.isdigit():
        return None
    return {"path": path, "line": int(line), "function": function}


def block_location(block: dict) -> dict | None:
    """The first user frame of a debug block (innermost first), or None."""
    return next((f for f in block["frames"] if is_user_file(f["path"])), None)


def block_event(block: dict, step: int) -> dict:
    """The ``compile`` or ``execution`` event for one parsed debug block."""
    event = {
        "event": "compile" if block["kind"] == "compile" else "execution",
        "step": step,
        "cause": block["cause"],
        "graph_hash": block["graph_hash"],
        "graph_inputs": block["inputs"],
        "graph_outputs": block["outputs"],
        "location": block_location(block),
        "frames": block["frames"][:MAX_FRAMES],
    }
    if block["kind"] == "unexpected-execution":
        event["unexpected"] = True
    for key in (
        "computation_hash",
        "compiled_program_size_gb",
        "graph_input_size_gb",
        "graph_output_size_gb",
    ):
        if key in block:
            event[key] = block[key]
    if not block["complete"]:
        event["partial"] = True
    return event


def is_sync_cause(cause: str) -> bool:
    """Whether torch_xla's cause guess names a step boundary, not a value read mid-step
    ("most likely user code trying to access tensor value before torch_xla.sync")."""
    return not cause.startswith("most likely user code")


# --- the tracer ----------------------------------------------------------------------------------


def _safe(method):
    """Run a tracer callback so that a bug of ours never breaks the script: an exception
    (not TraceStop, a SystemExit) becomes an ``internal`` event, once per place."""

    @functools.wraps(method)
    def safe(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self.internal_error(method.__name__, exc)
            return None

    return safe


class _Local(threading.local):
    busy = False


#: Set while a patched call runs torch's own code (a host read inside a host read is one read).
_LOCAL = _Local()
#: The tracer of each traced thread: the main thread, or each rank's thread.
_THREADS: dict[int, Tracer] = {}
#: The tracer that hears about what other threads do (optimizers, loaders): the first one made.
_DEFAULT: list = []


def _current() -> Tracer | None:
    """The calling thread's tracer, else the process's first one (None before any)."""
    tracer = _THREADS.get(threading.get_ident())
    if tracer is None and _DEFAULT:
        return _DEFAULT[0]
    return tracer


def _register(tracer: Tracer) -> None:
    """Make ``tracer`` the tracer of its thread (and the default if it is the first)."""
    _THREADS[tracer.thread.ident or threading.get_ident()] = tracer
    if not _DEFAULT:
        _DEFAULT.append(tracer)


def block_rank(block: dict) -> int | None:
    """The rank whose marker frame (``xla_lint_rank_N``) is in a debug block's frames."""
    for frame in block["frames"]:
        function = frame.get("function") or ""
        if function.startswith(RANK_MARKER) and function[len(RANK_MARKER) :].isdigit():
            return int(function[len(RANK_MARKER) :])
    return None


class DebugReader:
    """Reads what torch_xla appends to one process's ``PT_XLA_DEBUG_FILE`` and hands each
    tracer its blocks: all of them when the process has one tracer, else the blocks whose
    frames hold the tracer's rank marker (a block without a marker goes to the reader)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.offset = 0
        self.tail = ""
        self.lock = threading.Lock()
        self.queues: dict = {}

    def take(self, key: object, every_block: bool) -> list[dict]:
        """The complete blocks for ``key`` (a rank, or None) appended since the last call.
        ``every_block``: also parse a read that holds only boundary executions (to count them)."""
        if not self.path:
            return []
        with self.lock:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as handle:
                    handle.seek(self.offset)
                    text = handle.read()
                    self.offset = handle.tell()
            except OSError:
                text = ""
            if text:
                text = self.tail + text
                if (
                    every_block
                    or self.tail
                    or "Compilation Analysis" in text
                    or "most likely user code" in text
                ):
                    blocks = parse_debug_blocks(text)
                    if blocks and not blocks[-1]["complete"]:
                        self.tail = text[blocks[-1]["start"] :]  # torch_xla is still writing it
                        blocks.pop()
                    else:
                        self.tail = ""
                    local = {t.rank for t in list(_THREADS.values())}
                    for block in blocks:
                        rank = block_rank(block)
                        if rank is not None and rank not in local:
                            continue  # another process's rank (a debug file shared after fork)
                        self.queues.setdefault(key if rank is None else rank, []).append(block)
                # else: only the step's own graph ran, at its boundary: nothing to report
            return self.queues.pop(key, [])


_READERS: dict = {}


def _reader(path: str | None) -> DebugReader:
    """The one reader of a debug file in this process."""
    reader = _READERS.get(path)
    if reader is None:
        reader = _READERS[path] = DebugReader(path)
    return reader


class Tracer:
    """The trace state of the script's process, or of one rank: step counting, counters, and
    the event stream (one file each)."""

    def __init__(
        self,
        events_path: str,
        steps: int,
        debug_path: str | None,
        *,
        rank: int | None = None,
        thread: threading.Thread | None = None,
        shared: bool = False,
    ) -> None:
        self.out = open(events_path, "a", buffering=1, encoding="utf-8")
        self.lock = threading.Lock()
        self.steps_limit = max(1, steps)
        self.debug_path = debug_path
        self.reader = _reader(debug_path)
        self.rank = rank
        self.thread = thread or threading.main_thread()
        #: Several ranks in this process (one thread per device): the process's counters are
        #: shared, so a step's compiles and executions are counted from the rank's own blocks.
        self.shared = shared
        self.windows: list[tuple[float, float]] = []  # wall-clock spans of this rank's syncs
        self.rank_counts = {"compiles": 0, "executions": 0, "transfers": 0, "transfer_s": 0.0}
        self.abort_path = os.environ.get(ABORT_ENV) if rank is not None else None
        self.t0 = time.perf_counter()
        #: ``time.time()`` at ``t0``: torch_xla stamps metric samples with wall-clock seconds.
        self.wall0 = time.time()
        self.in_sync = False  # inside the script's torch_xla.sync (step closures run there)
        self.sync_started: float | None = None  # when the last boundary's sync began
        self.metric_counts: dict[str, int] = {}  # samples of each metric already taken
        self.step = 1  # the step in progress
        self.step_started = self.t0
        self.boundaries_in_step = 0
        self.total_boundaries = 0
        self.spans_without_optimizer = 0
        self.every_boundary_is_step = False
        #: Rows counted toward ``--steps`` (training steps once an optimizer has stepped).
        self.counted_steps = 0
        self.optimizers: list = []  # weak references
        self.optimizer_made = False
        self.optimizer_steps = 0
        self.optimizer_stepped = False  # in the current span
        #: user frames of the span's first optimizer step (innermost first): the loop it ran
        #: in is a training loop whatever the script's structure says (phases.place)
        self.optimizer_frames: list = []
        self.optimizer_steps_unsynced = 0  # optimizer steps since the last boundary
        #: where the first of those ran (the ``end`` event's ``optimizer_location``: the line
        #: of XLA203 in a script without a boundary that ends by itself)
        self.unsynced_location: dict | None = None
        self.reads: dict = {}  # (kind, path, line, function, closure) -> count
        self.read_frames: dict = {}  # the same key -> user frames of its first read in the row
        #: (kind, path, line, function, closure) -> [start, end] (seconds since t0) of each read
        #: during which torch_xla compiled (``CreateCompileHandles`` grew: a sharded tensor's
        #: gather compiles with no debug block).
        self.read_compiles: dict = {}
        self.batch: list | None = None
        #: The row's batches (at most MAX_BATCHES): ``{"loader": id, "index", "inputs"}``.
        self.batches: list[dict] = []
        self.model_inputs: list | None = None
        self.top_modules: list = []
        self.top_hooks: list = []
        self.launched = False  # a launch event was written
        self.ended = False  # an exit or error event was written
        self.dynamo_regions: set = set()  # torch.compile regions run in this step (no syncs)
        self.depth = 0
        self.parameters_sent = False
        self.stopping = False
        self.after_stop = 0
        self.finished = False
        self.internal_errors: set = set()
        self.counters: dict | None = None
        self.torch: Any = None
        self.xla: Any = None
        self.spmd = False
        self.explain = os.environ.get(EXPLAIN_ENV) == "1"
        self.ir_pending: str | None = None  # this step's IR text, taken before its boundary
        self.ir_previous: str | None = None  # the last different graph's
        self.ir_hash: object = None  # the graph hash of ir_previous/ir_pending

    # -- output --
    def emit(self, event: dict) -> None:
        """Append one event (with ``t``: seconds since the process started tracing)."""
        event.setdefault("t", round(time.perf_counter() - self.t0, 6))
        line = json.dumps(event, default=str)
        with self.lock:
            if not self.out.closed:
                self.out.write(line + "\n")

    def internal_error(self, where: str, exc: Exception) -> None:
        """Record a failure of the instrumentation itself (once per callback)."""
        if where in self.internal_errors:
            return
        self.internal_errors.add(where)
        tb = traceback.extract_tb(exc.__traceback__)
        line = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
        self.emit(
            {
                "event": "internal",
                "where": where,
                "message": f"{type(exc).__name__}: {exc}",
                "at": line,
            }
        )

    # -- counters --
    def _counter(self, name: str) -> int:
        return self.xla._XLAC._xla_counter_value(name) or 0

    def _metric(self, name: str) -> tuple[int, float, list]:
        data = self.xla._XLAC._xla_metric_data(name)
        if not data:
            return 0, 0.0, []
        return int(data[0]), float(data[1]), list(data[2])

    def new_samples(self, name: str) -> list[list[float]]:
        """The samples of metric ``name`` recorded since the last call, each ``[start, seconds]``
        (``start``: seconds since ``t0`` at which the measured work began: torch_xla stamps a
        sample with the wall-clock time it was recorded, at the end of the work)."""
        count, _, samples = self._metric(name)
        new = count - self.metric_counts.get(name, 0)
        self.metric_counts[name] = count
        if new <= 0:
            return []
        return [
            [round(ts - value / 1e9 - self.wall0, 6), round(value / 1e9, 6)]
            for ts, value in samples[-new:]
        ]

    def execute_samples(self, every: bool = False) -> list[list[float]]:
        """New ``ExecuteTime`` (one device) and ``ExecuteReplicatedTime`` (SPMD) samples: how
        long each graph ran (torch_xla/csrc/runtime/pjrt_computation_client.cc). Read at the
        first steps and then every :data:`EXECUTE_READ_EVERY` steps (``every``: now): a read
        copies the metric's whole sample buffer (~0.3 ms for 1024 samples), and the samples
        carry their times, so the report gives each to the step that launched its graph
        whichever event carries it."""
        if not every and self.step > 3 and self.step % EXECUTE_READ_EVERY:
            return []
        names = (
            ("ExecuteReplicatedTime",) if self.spmd else ("ExecuteTime", "ExecuteReplicatedTime")
        )
        return sorted(x for name in names for x in self.new_samples(name))

    def executions(self) -> int:
        """Graph executions so far (``ExecuteComputation`` + ``ExecuteReplicated`` in SPMD)."""
        return self._counter("ExecuteComputation") + self._counter("ExecuteReplicated")

    def snapshot(self) -> dict:
        """The counters a step is measured with. ``compiles`` are graph compiles: in eager
        mode (``torch_xla.experimental.eager_mode(True)``) every op compiled on its own counts
        in ``UncachedCompile`` too, timed as ``EagerOpCompileTime`` (not ``CompileTime``,
        no debug block); those are ``eager_op_compiles``, apart."""
        eager_ops = self._metric("EagerOpCompileTime")[0]
        compiles = self._counter("UncachedCompile") - eager_ops
        compile_count, compile_ns, _ = self._metric("CompileTime")
        transfers, transfer_ns, _ = self._metric("TransferFromDeviceTime")
        return {
            "compiles": compiles,
            "eager_op_compiles": eager_ops,
            "compile_samples": compile_count,
            "compile_ns": compile_ns,
            "executions": self.executions(),
            "transfers": transfers,
            "transfer_ns": transfer_ns,
            "cached_compiles": self._counter("CachedCompile"),
            "compile_handles": self._counter("CreateCompileHandles"),
        }

    # -- step boundaries --
    @_safe
    def on_sync(self, frame) -> None:
        """Called after every real ``torch_xla.sync`` of the traced thread."""
        if self.stopping:
            self.after_stop += 1
            if self.after_stop >= STOP_MARGIN:
                self.hard_exit("the script kept running after the stop")
            raise TraceStop(0)
        self.total_boundaries += 1
        self.boundaries_in_step += 1
        self.optimizer_steps_unsynced = 0
        counted = True
        if self.optimizer_made and not self.optimizer_stepped and not self.every_boundary_is_step:
            counted = False  # setup, evaluation, or a boundary inside a step (torch_xla.step()
            # syncs on entry too): a row of its own, not a training step
            if self.optimizer_steps == 0:
                self.spans_without_optimizer += 1
                if self.spans_without_optimizer >= NO_OPTIMIZER_SPANS:
                    self.every_boundary_is_step = True  # an optimizer that never steps
        self.end_step(user_location(frame), counted, user_frames(frame))
        if counted:
            self.counted_steps += 1
            if self.counted_steps >= self.steps_limit:
                self.stop("steps")
        self.check_abort(frame)

    @_safe
    def on_dynamo_run(self, region: object, frame) -> None:
        """A graph compiled by ``torch.compile`` is about to run. In a script that has made no
        step boundary of its own (a compiled step function needs none), the step ends when a
        region that already ran in it runs again (with graph breaks a step runs A, B, C: the
        next A starts the next step)."""
        self.optimizer_steps_unsynced = 0  # the graph runs now: nothing piles up
        if self.total_boundaries:
            return  # the script's own boundaries end its steps
        if self.stopping:
            self.after_stop += 1
            if self.after_stop >= STOP_MARGIN:
                self.hard_exit("the script kept running after the stop")
            raise TraceStop(0)
        if region in self.dynamo_regions:
            self.dynamo_regions = set()
            self.end_step(user_location(frame), True, user_frames(frame))
            self.counted_steps += 1
            if self.counted_steps >= self.steps_limit:
                self.stop("steps")
            self.check_abort(frame)
        self.dynamo_regions.add(region)

    def check_abort(self, frame) -> None:
        """A rank stops at this boundary when another rank failed (the abort file exists)."""
        if self.abort_path and os.path.exists(self.abort_path):
            self.flush_reads(self.step)
            self.flush_debug(self.step)
            self.stop("peer-error", user_location(frame))

    @_safe
    def end_step(
        self, boundary: dict | None, counted: bool = True, frames: list | None = None
    ) -> None:
        """Emit the row that ends at this boundary and start the next one (the next one
        starts even when emitting failed, so ``--steps`` still stops the script). Every
        boundary ends a row (``step`` numbers rows); ``counted``: the row counts toward
        ``--steps`` (it ran an optimizer step, or the script has no optimizer that steps);
        ``frames``: the boundary's user frames, innermost first (:func:`user_frames`)."""
        try:
            self._emit_step(boundary, counted, frames)
        finally:
            self.step += 1
            self.step_started = time.perf_counter()
            self.boundaries_in_step = 0
            self.optimizer_stepped = False
            self.optimizer_frames = []
            self.batch = None
            self.batches = []
            self.model_inputs = None

    def _emit_step(self, boundary: dict | None, counted: bool, frames: list | None) -> None:
        """Write the row's debug-file blocks, host reads and ``step`` event."""
        now = time.perf_counter()
        step = self.step
        figures = self._shared_figures() if self.shared else self._counter_figures()
        self.flush_debug(step)
        self.flush_reads(step)
        if self.shared:  # counted from this rank's own blocks, which flush_debug just read
            figures["compiles"] = self.rank_counts["compiles"]
            figures["executions"] = self.rank_counts["executions"]
            figures["compile_times_s"] = self._compile_times(figures["compiles"])
            figures["compile_s"] = round(sum(figures["compile_times_s"]), 6)
        self.rank_counts = dict.fromkeys(self.rank_counts, 0)
        event = {
            "event": "step",
            "step": step,
            "start": round(self.step_started - self.t0, 6),
            "duration_s": round(now - self.step_started, 6),
            "boundary_at": round(self.sync_started - self.t0, 6)
            if self.sync_started is not None and self.sync_started >= self.step_started
            else None,
            "boundaries": self.boundaries_in_step,
            "boundary": boundary,
            "boundary_frames": frames or [],
            "counted": counted,
            "trains": self.optimizer_stepped,
            "optimizer_frames": self.optimizer_frames,
            "batches": self.batches,
            **figures,
            "optimizer_steps": self.optimizer_steps,
            "inputs": self.batch if self.batch is not None else self.model_inputs,
            "inputs_from": "loader"
            if self.batch is not None
            else ("model" if self.model_inputs is not None else None),
            "optimizers": self.optimizer_states(),
        }
        if self.rank is not None:
            event["rank"] = self.rank
        self.emit(event)
        if self.explain:
            self.diff_ir(step, event["compiles"])
        if not self.parameters_sent and (self.top_modules or self.optimizer_steps):
            self.send_parameters(step)  # also drops the global module hooks of the first step

    def _counter_figures(self, last: bool = False) -> dict:
        """The step's compiles, executions and transfers from the process's counters (``last``:
        after the last step, every execution sample left)."""
        counters = self.snapshot()
        before = self.counters or {k: 0 for k in counters}
        self.counters = counters
        new_compiles = counters["compile_samples"] - before["compile_samples"]
        samples = self.new_samples("CompileTime") if new_compiles > 0 else []
        return {
            "compiles": counters["compiles"] - before["compiles"],
            "compile_s": round((counters["compile_ns"] - before["compile_ns"]) / 1e9, 6),
            "compile_times_s": [s[1] for s in samples] if new_compiles > 0 else [],
            # [start, seconds] of each compile: paired with torch_xla's blocks by place and time
            "compile_samples": samples,
            "execute_samples": self.execute_samples(every=last),
            "cached_compiles": counters["cached_compiles"] - before["cached_compiles"],
            "eager_op_compiles": counters["eager_op_compiles"] - before["eager_op_compiles"],
            "executions": counters["executions"] - before["executions"],
            "transfers": counters["transfers"] - before["transfers"],
            "transfer_s": round((counters["transfer_ns"] - before["transfer_ns"]) / 1e9, 6),
        }

    def _shared_figures(self) -> dict:
        """The step's transfers from this rank's own host reads (the process's counters are
        shared by its ranks); compiles and executions are filled in from its blocks."""
        return {
            "compiles": 0,
            "compile_s": 0.0,
            "compile_times_s": [],
            "cached_compiles": 0,
            "executions": 0,
            "transfers": self.rank_counts["transfers"],
            "transfer_s": round(self.rank_counts["transfer_s"], 6),
        }

    def _compile_times(self, compiles: int) -> list[float]:
        """``compiles`` times for a rank sharing its process: the ``CompileTime`` samples
        (stamped when recorded) inside this rank's boundaries and reads of the step, averaged
        (ranks compiling at the same moment see each other's samples)."""
        windows, self.windows = self.windows, []
        if not compiles:
            return []
        _, _, samples = self._metric("CompileTime")
        inside = [v / 1e9 for ts, v in samples if any(a <= ts <= b for a, b in windows)]
        if not inside:
            return []
        mean = sum(inside) / len(inside)
        return [round(mean, 6)] * compiles

    def stop(self, reason: str, location: dict | None = None) -> None:
        """Stop the script: from now on every boundary raises :class:`TraceStop`."""
        self.stopping = True
        self.emit(
            {
                "event": "stop",
                "reason": reason,
                "steps": self.step - 1,
                "location": location,
                "optimizer_steps": self.optimizer_steps,
            }
        )
        self.out.flush()
        watchdog = threading.Thread(
            target=self._exit_later, name="xla-lint-trace-watchdog", daemon=True
        )
        watchdog.start()
        raise TraceStop(0)

    def _exit_later(self) -> None:
        """The watchdog of a stop: end the process if it still runs after the grace period (a
        rank whose function returned is done; other ranks of the process still running their
        steps are waited for)."""
        time.sleep(EXIT_GRACE_SECONDS)
        while True:
            if self.rank is not None and self.finished:
                return
            if all(t.stopping or t.finished for t in list(_THREADS.values()) if t is not self):
                break
            time.sleep(1.0)
        self.hard_exit(f"the script did not exit within {EXIT_GRACE_SECONDS:.0f} s of the stop")

    def hard_exit(self, why: str) -> None:
        """Flush everything and end the process now (the script swallowed the stop, or hangs)."""
        self.emit({"event": "exit", "code": 0, "reason": "forced", "detail": why})
        self.finish()
        for other in list(_THREADS.values()):
            other.finish()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(0)

    # -- debug file --
    @_safe
    def flush_debug(self, step: int) -> None:
        """Turn what torch_xla appended to PT_XLA_DEBUG_FILE into events of ``step``. A
        simulated host (``--simulate-hosts``) also writes a ``graph`` event for every graph it
        compiled or ran, boundary executions included: the hosts are compared by them."""
        host = simulated_host() is not None
        for block in self.reader.take(self.rank, self.shared or host):
            if host:
                self.emit(
                    {
                        "event": "graph",
                        "step": step,
                        "kind": block["kind"],
                        "graph_hash": block["graph_hash"],
                        "cause": block["cause"],
                        "location": block_location(block),
                    }
                )
            if block["kind"] == "compile":
                self.rank_counts["compiles"] += 1
            else:
                self.rank_counts["executions"] += 1
                if is_sync_cause(block["cause"]) or _from_compiler(block):
                    continue  # the step's own graph at its boundary, or the openxla bridge's
            self.emit(block_event(block, step))

    # -- --explain: the IR of each step --
    @_safe
    def capture_ir(self) -> None:
        """Before a boundary that ends a step: the pending IR text of every optimizer's
        parameters (the whole training step), with ``location=`` from ``XLA_IR_DEBUG=1``; read
        only when the graph hash differs from the last text's (the text costs ~20 ms on a small
        FSDPv2 model; the hash does not)."""
        ends = self.optimizer_stepped or not self.optimizer_made or self.every_boundary_is_step
        if not ends:
            return
        params = [
            p
            for ref in self.optimizers
            if ref() is not None
            for group in ref().param_groups
            for p in group["params"]
            if p.is_xla
        ]
        if not params:
            return
        graph = self.xla._XLAC._get_graph_hash(params)
        if graph == self.ir_hash:
            return  # the same graph as the last text taken: nothing new to diff against
        self.ir_hash = graph
        self.ir_pending = self.xla._XLAC._get_xla_tensors_text(
            params
        )  # normalised only if it compiled

    @_safe
    def diff_ir(self, step: int, compiles: int) -> None:
        """After a step that compiled, the IR lines that changed since the last step, each
        with the place the new node was made (``func@file:line``)."""
        current, self.ir_pending = self.ir_pending, None
        if current is None:
            return
        previous, self.ir_previous = self.ir_previous, current
        if not compiles or previous is None:
            return
        import difflib

        old_lines, new_lines = _ir_lines(previous), _ir_lines(current)
        old = [op for op, _ in old_lines]
        new = [op for op, _ in new_lines]
        changes = []
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                before = old[i1 + k] if i1 + k < i2 else None
                after = new[j1 + k] if j1 + k < j2 else None
                where = new_lines[j1 + k][1] if j1 + k < j2 else old_lines[i1 + k][1]
                changes.append({"before": before, "after": after, "location": where})
        self.emit(
            {
                "event": "ir_diff",
                "step": step,
                "changes": changes[:MAX_IR_CHANGES],
                "changed": len(changes),
            }
        )

    # -- host reads --
    def host_read(self, frame, original, args, kwargs, *, kind: str):
        """Run one host read of an XLA tensor (``args[0]``) and count it at the user's line
        from ``frame`` (the caller's), also when it raised. (Whether it made a graph run is told
        by torch_xla's execution report for that line, not by counters: the step's own
        asynchronous execution may finish during the read.)"""
        started = time.time() if self.shared else 0.0
        handles = -1 if self.shared or self.xla is None else self._counter("CreateCompileHandles")
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            if self.shared:
                ended = time.time()
                self.windows.append((started, ended))
                self.rank_counts["transfers"] += 1
                self.rank_counts["transfer_s"] += ended - started
            compiled = handles >= 0 and self._counter("CreateCompileHandles") > handles
            self.record_read(kind, frame, (began, time.perf_counter()) if compiled else None)

    @_safe
    def record_read(self, kind: str, frame, compiled: tuple[float, float] | None = None) -> None:
        """Count one host read at the first user frame from ``frame``, with the step closure it
        ran in (:func:`closure_kind`) and, when torch_xla compiled during it, its span
        (``compiled``: ``perf_counter`` start and end)."""
        location = user_location(frame)
        closure = (
            closure_kind(frame)
            if self.in_sync or threading.current_thread() is not self.thread
            else None
        )
        key = (kind, *(location.values() if location else (None, None, None)), closure)
        if key not in self.reads:
            self.read_frames[key] = user_frames(frame)
        self.reads[key] = self.reads.get(key, 0) + 1
        if compiled is not None:
            span = [round(compiled[0] - self.t0, 6), round(compiled[1] - self.t0, 6)]
            self.read_compiles.setdefault(key, []).append(span)

    @_safe
    def flush_reads(self, step: int) -> None:
        """One ``host_read`` event per place and kind read during ``step``."""
        reads, self.reads = self.reads, {}
        spans, self.read_compiles = self.read_compiles, {}
        frames, self.read_frames = self.read_frames, {}
        for key, count in reads.items():
            kind, path, line, function, closure = key
            location = {"path": path, "line": line, "function": function} if path else None
            event = {
                "event": "host_read",
                "step": step,
                "kind": kind,
                "location": location,
                "count": count,
            }
            if closure is not None:
                event["closure"] = closure
            if frames.get(key):
                event["frames"] = frames[key]
            if key in spans:
                event["compile_spans"] = spans[key]
            self.emit(event)

    # -- optimizers --
    @_safe
    def on_optimizer_init(self, optimizer, frame) -> None:
        """Record an optimizer's class, hyper-parameters and construction site."""
        import weakref

        self.optimizer_made = True
        self.optimizers.append(weakref.ref(optimizer))
        defaults = getattr(optimizer, "defaults", {}) or {}
        betas = defaults.get("betas")
        dtype = None
        try:
            first = next(p for g in optimizer.param_groups for p in g["params"])
            dtype = str(first.dtype).replace("torch.", "")
        except (StopIteration, AttributeError, KeyError, TypeError):
            pass
        cls = type(optimizer)
        self.emit(
            {
                "event": "optimizer",
                "id": len(self.optimizers),
                "class": cls.__name__,
                "module": cls.__module__,
                "location": user_location(frame),
                "betas": list(betas) if isinstance(betas, (tuple, list)) else None,
                "capturable": defaults.get("capturable"),
                "foreach": defaults.get("foreach"),
                "fused": defaults.get("fused"),
                "lr": _number(defaults.get("lr")),
                "dtype": dtype,
            }
        )

    def optimizer_states(self) -> list:
        """Per optimizer: the step counter of its first parameter's state (Adam-style ``step``)."""
        out = []
        for index, ref in enumerate(self.optimizers, 1):
            optimizer = ref()
            if optimizer is None:
                continue
            value: str | float | None = None
            try:
                for state in optimizer.state.values():
                    step = state.get("step") if isinstance(state, dict) else None
                    if step is not None:
                        if hasattr(step, "is_xla") and step.is_xla:
                            value = "device"  # capturable: reading it would be a host read
                        else:
                            value = float(step)
                        break
            except Exception:
                value = None
            out.append({"id": index, "step": value})
        return out

    @_safe
    def on_optimizer_step(self) -> None:
        """Global optimizer step hook: this span is a training step (where the span's first
        one ran is kept: :attr:`optimizer_frames`)."""
        if not self.optimizer_stepped:
            self.optimizer_frames = user_frames(sys._getframe(1))
        self.optimizer_stepped = True
        self.optimizer_steps += 1
        self.optimizer_steps_unsynced += 1
        if self.optimizer_steps_unsynced == 1:
            self.unsynced_location = user_location(sys._getframe(1))
        if self.optimizer_steps == 1:
            # training begins: --steps counts training steps from here, not the setup or
            # evaluation syncs counted while no optimizer had stepped
            self.counted_steps = 0
            self.every_boundary_is_step = False
        if not self.stopping and self.optimizer_steps_unsynced >= max(2, self.steps_limit):
            self.flush_reads(self.step)
            self.flush_debug(self.step)
            self.stop("no-boundary", user_location(sys._getframe(1)))

    # -- loaders and batches --
    @_safe
    def on_loader(self, kind: str, loader, frame, **facts) -> None:
        """A DataLoader or MpDeviceLoader was made at the user's ``frame``."""
        self.emit(
            {
                "event": "loader",
                "kind": kind,
                "id": id(loader),
                "location": user_location(frame),
                **facts,
            }
        )

    def describe(self, value, limit: int = 16) -> list:
        """Shape, dtype and (XLA) sharding of the tensors in a batch, in order."""
        torch = self.torch
        out: list = []
        stack = [value]
        while stack and len(out) < limit:
            item = stack.pop(0)
            if isinstance(item, torch.Tensor):
                entry = {"shape": list(item.shape), "dtype": str(item.dtype).replace("torch.", "")}
                if item.is_xla:
                    entry["sharding"] = self.xla._XLAC._get_xla_sharding_spec(item)
                out.append(entry)
            elif isinstance(item, (list, tuple)):
                stack[:0] = list(item)
            elif isinstance(item, dict):
                stack[:0] = list(item.values())
        return out

    @_safe
    def on_batch(self, batch, source=None) -> None:
        """A batch the traced thread received from a loader; ``source`` is what handed it
        (a DataLoader's iterator, tagged with its loader by :func:`_tag_iterator`, or an
        ``MpDeviceLoader``'s ``PerDeviceLoader``): the row records each loader's batches
        apart (its ``id`` as in its ``loader`` event, and the batch's 1-based index in the
        loader's pass)."""
        if threading.current_thread() is not self.thread:
            return
        self.batch = self.describe(batch)
        loader, index = _batch_source(source)
        if len(self.batches) < MAX_BATCHES:
            self.batches.append({"loader": loader, "index": index, "inputs": self.batch})
        elif self.batches:
            self.batches[-1] = {"loader": loader, "index": index, "inputs": self.batch}

    # -- modules --
    @_safe
    def on_module_pre(self, module, args) -> None:
        """Global forward pre-hook of the first step: find the outermost module calls."""
        if threading.current_thread() is not self.thread or self.parameters_sent:
            return
        if self.depth == 0:
            if module not in self.top_modules and any(True for _ in module.parameters()):
                self.top_modules.append(module)
            if self.model_inputs is None and module in self.top_modules:
                self.model_inputs = self.describe(args)
        self.depth += 1

    @_safe
    def on_module_post(self, module, args, output) -> None:
        """Global forward hook (always called) of the first step."""
        if threading.current_thread() is self.thread and not self.parameters_sent:
            self.depth = max(0, self.depth - 1)

    @_safe
    def on_top_module_pre(self, module, args) -> None:
        """Forward pre-hook on the model after the first step: its inputs."""
        if self.model_inputs is None and threading.current_thread() is self.thread:
            self.model_inputs = self.describe(args)

    @_safe
    def send_parameters(self, step: int) -> None:
        """Once: each parameter of the outermost modules with its sharding and bytes per device."""
        self.parameters_sent = True
        _release_module_hooks()
        for module in self.top_modules:
            self.top_hooks.append(module.register_forward_pre_hook(self.on_top_module_pre))
        params = []
        seen = set()
        for index, module in enumerate(self.top_modules):
            for name, p in module.named_parameters():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                entry = {
                    "module": index,
                    "name": name.replace("_orig_module.", ""),
                    "shape": list(p.shape),
                    "dtype": str(p.dtype).replace("torch.", ""),
                    "bytes": p.numel() * p.element_size(),
                }
                if p.is_xla:
                    entry["sharding"] = self.xla._XLAC._get_xla_sharding_spec(p)
                params.append(entry)
        self.emit(
            {
                "event": "parameters",
                "step": step,
                "spmd": self.spmd,
                "modules": [type(m).__name__ for m in self.top_modules],
                "parameters": params,
            }
        )

    # -- the end --
    def finish(self) -> None:
        """Flush the step in progress (as a partial step) and close the stream; idempotent."""
        if self.finished:
            return
        self.finished = True
        if self.xla is not None:
            try:
                figures = None if self.shared else self._counter_figures(last=True)
                self.flush_debug(self.step)
                self.flush_reads(self.step)
                counters = self.snapshot()
                self.emit(
                    {
                        "event": "end",
                        # what happened after the last step's boundary (the final row)
                        "after_last_step": figures,
                        "steps": self.step - 1,
                        "step_in_progress": self.step,
                        "boundaries": self.total_boundaries,
                        "optimizer_steps": self.optimizer_steps,
                        "optimizer_steps_unsynced": self.optimizer_steps_unsynced,
                        "optimizer_location": (
                            self.unsynced_location if self.optimizer_steps_unsynced else None
                        ),
                        "boundaries_in_step": self.boundaries_in_step,
                        "partial_step_s": round(time.perf_counter() - self.step_started, 6),
                        "counters": counters,
                    }
                )
            except Exception as exc:
                self.emit(
                    {
                        "event": "end",
                        "steps": self.step - 1,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
        else:
            self.emit({"event": "end", "steps": 0, "torch_xla": False})
        with self.lock:
            self.out.flush()
            self.out.close()

    # -- torch_xla is there --
    def patch_torch_xla(self, torch_xla) -> None:
        """Install every patch (once per process) and start tracing; called right after
        ``import torch_xla`` finished."""
        install_patches(torch_xla)
        self.attach(torch_xla)

    def attach(self, torch_xla) -> None:
        """Start measuring with torch_xla imported: the ``torch_xla`` event, the counters step 1
        is measured from, and the first step's module hooks."""
        import torch

        self.torch, self.xla = torch, torch_xla
        try:
            import torch_xla.runtime as xr

            self.spmd = bool(xr.is_spmd())
        except Exception:
            pass
        self.emit(
            {
                "event": "torch_xla",
                "version": getattr(torch_xla, "__version__", None),
                "torch": torch.__version__,
                "pjrt_device": os.environ.get("PJRT_DEVICE"),
                "cpu_devices": os.environ.get("CPU_NUM_DEVICES"),
            }
        )
        self.counters = self.snapshot()
        self.step_started = time.perf_counter()  # step 1 starts once torch_xla is there
        _ensure_module_hooks()

    def outcome(self, exc: BaseException | None) -> tuple[int, str | None]:
        """Record how the script (or a rank's function) ended: ``exit`` or ``error``. Returns
        the exit status and, for an exception, its traceback as Python prints it."""
        self.ended = True
        if exc is None or isinstance(exc, TraceStop):
            stopped = exc is not None or self.stopping
            self.emit({"event": "exit", "code": 0, "reason": "stopped" if stopped else "finished"})
            return 0, None
        if isinstance(exc, SystemExit):
            if self.stopping:  # the script turned our stop into its own exit
                return 0, None
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            self.emit({"event": "exit", "code": status, "reason": "sys.exit"})
            return status, None
        text, location = _format_exception(exc)
        self.emit(
            {
                "event": "error",
                "type": type(exc).__name__,
                "message": str(exc)[:2000],
                "traceback": text[-8000:],
                "location": location,
            }
        )
        return 1, text


# --- patches (once per process; each call goes to the calling thread's tracer) -----------------

_PATCHED: list = []
_MODULE_HOOKS: list = []


def _is_compiling() -> bool:
    """``torch.compiler.is_compiling`` once torch is imported: dynamo folds it to True while it
    traces a function, so a patch that returns at once when it is True is skipped from the
    graph instead of breaking it (``threading.get_ident`` is not traceable)."""
    return False


#: Folders of torch's and torch_xla's compilers: a host read made from there (dynamo printing
#: or guarding a tensor) or a graph run there (the openxla bridge) is not the script's.
_COMPILER_DIRS: tuple[str, ...] = ()
#: The pid of the traced script's own process (empty in a worker started by ``spawn``).
_TOP_PID: list = []


def _wrap(
    original,
    *,
    before=None,
    after=None,
    around=None,
    own_thread: bool = False,
    skip_compiling: bool = False,
    skip_compiler: bool = False,
    exclusive: bool = False,
    when=None,
    always=None,
):
    """``original`` wrapped so that a call to it is recorded by a tracer: the one place that
    says when a patched call records and when it only calls ``original``.

    ``always(args, kwargs)``, when given, runs first on every call, recorded or not (what a
    launcher must do for the processes it starts; not for a wrapper with ``skip_compiling``,
    whose test must come first). Then the guards, in this order; each lets the call through to
    ``original`` unrecorded:

    1. *dynamo tracing* (``skip_compiling``): under ``torch.compiler.is_compiling()``, which
       dynamo folds to True while it traces a function, the wrapper returns at once, so that
       it stays out of the graph instead of breaking it (``threading.get_ident`` is not
       traceable); first, before anything dynamo cannot trace.
    2. *re-entrancy*: a call made inside an ``exclusive`` call is that call's own work and is
       recorded once, by the outer call (``print(tensor)`` calls ``.tolist()`` and
       ``.item()`` inside: one host read). Only exclusive calls (host reads) hold the guard,
       from their first recorder to their last: the syncs made inside a loader's ``next`` or
       inside ``torch_xla.launch`` are the script's and count.
    3. ``when(args, kwargs)`` false: the call is not one to record (a tensor not on XLA).
    4. *no tracer*: the calling thread's tracer with ``own_thread`` (a step boundary or a batch
       belongs to the thread that traces its steps), else :func:`_current` (the process's
       first tracer hears of what other threads make: optimizers, loaders); None before
       tracing starts, and in a worker process before its rank starts.
    5. *the compiler's call* (``skip_compiler``): called from torch's or torch_xla's compilers
       (:func:`_in_compiler`: dynamo printing a tensor, the openxla bridge syncing while it
       compiles), not by the script.

    Then the call is recorded around ``original``: ``around(tracer, frame, original, args,
    kwargs)`` makes the call itself and returns its result; else ``before(tracer, frame, args,
    kwargs)`` runs first (its value is ``after``'s ``state``) and, when ``original`` returned,
    ``after(tracer, frame, args, kwargs, result, state)``. ``frame`` is the caller's (the user's
    line is looked up from it); ``args`` start with ``self`` for a method."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if always is not None:
            always(args, kwargs)
        if skip_compiling and _is_compiling():
            return original(*args, **kwargs)
        if _LOCAL.busy or (when is not None and not when(args, kwargs)):
            return original(*args, **kwargs)
        tracer = _THREADS.get(threading.get_ident()) if own_thread else _current()
        frame = sys._getframe(1)
        if tracer is None or (skip_compiler and _in_compiler(frame)):
            return original(*args, **kwargs)
        if exclusive:
            _LOCAL.busy = True
        try:
            if around is not None:
                return around(tracer, frame, original, args, kwargs)
            state = before(tracer, frame, args, kwargs) if before is not None else None
            result = original(*args, **kwargs)
            if after is not None:
                after(tracer, frame, args, kwargs, result, state)
            return result
        finally:
            if exclusive:
                _LOCAL.busy = False

    return wrapper


def _patch(owner, name: str, **how):
    """Replace ``owner.name`` by :func:`_wrap` of it (``how``: its guards and recorders)."""
    wrapper = _wrap(getattr(owner, name), **how)
    setattr(owner, name, wrapper)
    return wrapper


def install_patches(torch_xla) -> None:
    """Patch torch and torch_xla once in this process (see the module docstring)."""
    if _PATCHED:
        return
    _PATCHED.append(True)
    import torch

    global _is_compiling, _COMPILER_DIRS
    _is_compiling = torch.compiler.is_compiling
    torch_dir, xla_dir = os.path.dirname(torch.__file__), os.path.dirname(torch_xla.__file__)
    _COMPILER_DIRS = tuple(
        os.path.join(root, name) + os.sep
        for root, names in (
            (torch_dir, ("_dynamo", "_functorch", "_inductor", "fx", "_subclasses", "_export")),
            (xla_dir, ("_dynamo",)),
        )
        for name in names
    )
    _set_library_dirs(torch, torch_xla)
    _patch_sync(torch_xla)
    _patch_tensor(torch)
    _patch_cpu_tensors(torch_xla)
    _patch_optim(torch)
    _patch_data(torch)
    _patch_launch(torch_xla)
    _after_import("torch_xla.distributed.parallel_loader", _patch_parallel_loader)
    _after_import("torch_xla.distributed.xla_multiprocessing", _patch_spawn)
    _after_import("torch_xla._internal.pjrt", _patch_spawn_fn)
    _after_import("torch_xla._dynamo.dynamo_bridge", _patch_dynamo_bridge)
    _after_import("torch_xla.distributed.spmd.xla_sharding", _patch_sharding_spec)
    _after_import("torch_xla.runtime", _patch_runtime)
    if simulated_host() is not None:
        _patch_seeds(torch, torch_xla)


def _before_sync(tracer: Tracer, frame, args, kwargs) -> float:
    """Before a step boundary: the IR to diff (``--explain``), and when it started."""
    if tracer.explain:
        tracer.capture_ir()
    tracer.in_sync = True  # its step closures run inside it
    tracer.sync_started = time.perf_counter()  # a step's graph is launched at its boundary
    return time.time() if tracer.shared else 0.0


def _after_sync(tracer: Tracer, frame, args, kwargs, result, started: float) -> None:
    """After a step boundary: its span (ranks sharing a process), then the boundary itself."""
    tracer.in_sync = False
    if tracer.shared:
        tracer.windows.append((started, time.time()))
    tracer.on_sync(frame)


def _patch_sync(torch_xla) -> None:
    original = torch_xla.sync
    sync = _patch(
        torch_xla,
        "sync",
        own_thread=True,
        skip_compiler=True,  # the openxla bridge syncs while it compiles
        before=_before_sync,
        after=_after_sync,
    )
    module: Any = sys.modules.get("torch_xla.torch_xla")
    if module is not None and getattr(module, "sync", None) is original:
        module.sync = sync


def _patch_tensor(torch) -> None:
    def to_cpu(args, kwargs) -> bool:
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, str):
            return device.startswith("cpu")
        return isinstance(device, torch.device) and device.type == "cpu"

    def wrap(name: str, kind: str, check=None) -> None:
        if getattr(torch.Tensor, name, None) is None:
            return

        def xla(args, kwargs) -> bool:
            return bool(args) and args[0].is_xla and (check is None or check(args[1:], kwargs))

        _patch(
            torch.Tensor,
            name,
            skip_compiling=True,
            skip_compiler=True,  # dynamo printing or guarding a tensor
            exclusive=True,  # a read inside a read (print(tensor) -> .tolist()) is one read
            when=xla,
            around=functools.partial(Tracer.host_read, kind=kind),  # no frame of its own
        )

    for name, kind in (
        ("item", ".item()"),
        ("tolist", ".tolist()"),
        ("cpu", ".cpu()"),
        ("numpy", ".numpy()"),
        ("__bool__", "bool(tensor)"),
        ("__int__", "int(tensor)"),
        ("__float__", "float(tensor)"),
        ("__index__", "tensor as an index"),
        ("__format__", "format(tensor)"),
        ("__repr__", "print(tensor)"),
        ("__array__", "numpy.asarray(tensor)"),
    ):
        wrap(name, kind)
    wrap("to", '.to("cpu")', to_cpu)


def _patch_cpu_tensors(torch_xla) -> None:
    """``xm.save`` (and ``xm.mesh_reduce``, ``xm.all_gather``'s host paths, distributed
    checkpoints) copy XLA tensors to the host through ``torch_xla._XLAC._xla_get_cpu_tensors``
    (torch_xla/core/xla_model.py ``_maybe_convert_to_cpu``), not a ``torch.Tensor`` method:
    one transfer (``TransferFromDeviceTime``) for the call's tensors, counted as one read named
    after the torch_xla function the user called (``xm.save()``). Calls with no tensor (a
    ``mesh_reduce`` of a Python float, a non-master ``xm.save``) copy nothing and are not
    reads."""
    xlac = getattr(torch_xla, "_XLAC", None)
    if getattr(xlac, "_xla_get_cpu_tensors", None) is None:
        return

    def around(tracer: Tracer, frame, original, args, kwargs):
        return tracer.host_read(frame, original, args, kwargs, kind=_api_kind(frame))

    _patch(
        xlac,
        "_xla_get_cpu_tensors",
        skip_compiling=True,
        skip_compiler=True,
        exclusive=True,
        when=lambda args, kwargs: bool(args) and bool(args[0]),
        around=around,
    )


def _api_kind(frame) -> str:
    """``xm.save()``: the library function the user's code called, from ``frame`` (inside
    it) outwards: the last frame before the first user frame."""
    name = None
    while frame is not None:
        code = frame.f_code
        if _is_user_code(code):
            break
        module = frame.f_globals.get("__name__", "")
        name = ("xm." if module == "torch_xla.core.xla_model" else "") + code.co_name
        frame = frame.f_back
    return f"{name}()" if name else "copy to the host"


def _patch_optim(torch) -> None:
    def made(tracer: Tracer, frame, args, kwargs, result, state) -> None:
        optimizer = args[0]
        if not getattr(optimizer, "_xla_lint_traced", False):  # once, through super().__init__
            optimizer._xla_lint_traced = True
            tracer.on_optimizer_init(optimizer, frame)

    _patch(torch.optim.Optimizer, "__init__", skip_compiling=True, after=made)
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def stepped(optimizer, args, kwargs) -> None:
        if _is_compiling() or _nested_step(sys._getframe(1)):
            return
        tracer = _current()
        if tracer is not None:
            tracer.on_optimizer_step()

    register_optimizer_step_post_hook(stepped)


def _nested_step(frame) -> bool:
    """Whether the optimizer step whose post hook runs from ``frame`` (torch's step wrapper,
    ``profile_hook_step``) was called inside another optimizer's step: an optimizer whose
    ``step()`` calls another's (torch_xla's ``ZeroRedundancyOptimizer`` steps its inner
    optimizer, any wrapper) is one optimizer step, counted by its outermost call. Read from
    the stack, so that a step that raised leaves nothing behind."""
    code = frame.f_code
    outer = frame.f_back
    while outer is not None:
        if outer.f_code is code:
            return True
        outer = outer.f_back
    return False


def _patch_data(torch) -> None:
    import torch.utils.data.dataloader as dl

    def made(tracer: Tracer, frame, args, kwargs, result, state) -> None:
        loader = args[0]
        try:
            size = len(loader.dataset)
        except TypeError:
            size = None
        tracer.on_loader(
            "DataLoader",
            loader,
            frame,
            batch_size=loader.batch_size,
            drop_last=loader.drop_last,
            dataset_size=size,
        )

    _patch(dl.DataLoader, "__init__", after=made)
    _patch(dl._BaseDataLoaderIter, "__init__", after=_tag_iterator)
    _patch(dl._BaseDataLoaderIter, "__next__", own_thread=True, after=_batch)


def _batch(tracer: Tracer, frame, args, kwargs, batch, state) -> None:
    """A batch a loader handed to the traced thread."""
    tracer.on_batch(batch, args[0] if args else None)


def _tag_iterator(tracer: Tracer, frame, args, kwargs, result, state) -> None:
    """``_BaseDataLoaderIter.__init__(self, loader)``: the iterator knows its loader."""
    if len(args) > 1:
        args[0]._xla_lint_loader = id(args[1])


def _batch_source(source) -> tuple[int | None, int | None]:
    """``(loader id, 1-based batch index in its pass)`` of what handed a batch: a DataLoader
    iterator (its ``_num_yielded``, which torch resets each pass) or a ``PerDeviceLoader``
    (``_loader`` the ParallelLoader, whose ``_cpu_loader`` is the DataLoader; counted here:
    ``MpDeviceLoader`` makes a new one for each pass)."""
    if source is None:
        return None, None
    loader = getattr(source, "_xla_lint_loader", None)
    if loader is not None:
        index = getattr(source, "_num_yielded", None)
        return loader, index if isinstance(index, int) else None
    parallel = getattr(source, "_loader", None)
    cpu_loader = getattr(parallel, "_cpu_loader", None)
    if cpu_loader is None:
        return None, None
    count = getattr(source, "_xla_lint_batches", 0) + 1
    try:
        source._xla_lint_batches = count
    except AttributeError:
        pass
    return id(cpu_loader), count


def _module_pre(module, args) -> None:
    if _is_compiling():
        return
    tracer = _THREADS.get(threading.get_ident())
    if tracer is not None:
        tracer.on_module_pre(module, args)


def _module_post(module, args, output) -> None:
    if _is_compiling():
        return
    tracer = _THREADS.get(threading.get_ident())
    if tracer is not None:
        tracer.on_module_post(module, args, output)


def _ensure_module_hooks() -> None:
    """Global module hooks while a traced thread has not finished its first step (they cost a
    call per module call, so they go once every tracer has its model)."""
    if _MODULE_HOOKS or all(t.parameters_sent for t in _THREADS.values()):
        return
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    _MODULE_HOOKS[:] = [
        register_module_forward_pre_hook(_module_pre),
        register_module_forward_hook(_module_post, always_call=True),
    ]


def _release_module_hooks() -> None:
    """Remove the global module hooks once no traced thread needs them."""
    if any(not t.parameters_sent for t in _THREADS.values()):
        return
    for handle in _MODULE_HOOKS:
        handle.remove()
    _MODULE_HOOKS.clear()


def _launcher(name: str, original):
    """``torch_xla.launch`` / ``xmp.spawn``: a ``launch`` event (the outermost call), and the
    worker processes it starts patch torch_xla when they import it (traced or not)."""

    def spawning(args, kwargs) -> None:
        os.environ[SPAWN_ENV] = "1"

    def launched(tracer: Tracer, frame, args, kwargs) -> None:
        if not tracer.launched:
            tracer.launched = True
            tracer.emit(
                {
                    "event": "launch",
                    "what": name,
                    "location": user_location(frame),
                    "start_method": kwargs.get("start_method", "spawn"),
                }
            )

    return _wrap(original, always=spawning, before=launched)


def _patch_launch(torch_xla) -> None:
    original = getattr(torch_xla, "launch", None)
    if original is None:
        return
    torch_xla.launch = _launcher("torch_xla.launch", original)
    module: Any = sys.modules.get("torch_xla.torch_xla")
    if module is not None and getattr(module, "launch", None) is original:
        module.launch = torch_xla.launch


def _patch_spawn(xmp) -> None:
    xmp.spawn = _launcher("xmp.spawn", xmp.spawn)


def _patch_spawn_fn(pjrt) -> None:
    """``_SpawnFn.__call__`` runs the per-device function in each thread of each worker
    process (torch_xla/_internal/pjrt.py ``_run_thread_per_device``): there it is a rank. In the
    script's own process (``nprocs=1``) the main thread's tracer already traces it."""
    original = pjrt._SpawnFn.__call__

    @functools.wraps(original)
    def __call__(self):
        if _is_top_process():
            return original(self)
        return _run_rank(lambda: original(self), "xmp.spawn")

    pjrt._SpawnFn.__call__ = __call__


def _in_compiler(frame) -> bool:
    """Whether a patched function was called by torch's or torch_xla's compiler: a frame of
    theirs between ``frame`` (the caller) and the first user frame (dynamo's AOT pass prints
    tensors through a dataclass ``__repr__``, for one)."""
    if not _COMPILER_DIRS:
        return False
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_COMPILER_DIRS):
            return True
        if is_user_file(filename):
            return False
        frame = frame.f_back
    return False


def _from_compiler(block: dict) -> bool:
    """Whether a debug block's frames pass through torch_xla's dynamo bridge (a graph it ran
    while compiling, which torch_xla's cause guess calls user code)."""
    return bool(_COMPILER_DIRS) and any(
        f["path"].startswith(_COMPILER_DIRS[-1]) for f in block["frames"]
    )


def _patch_dynamo_bridge(bridge) -> None:
    """Each graph compiled by ``torch.compile(backend="openxla")`` runs, without a
    ``torch_xla.sync``, when its ``optimized_mod`` is called (``extract_internal`` in
    torch_xla/_dynamo/dynamo_bridge.py runs it with ``_run_cached_graph``): in a script that
    never syncs itself, a compiled region running again ends the step (see
    :meth:`Tracer.on_dynamo_run`)."""
    original = bridge.extract_internal

    @functools.wraps(original)
    def extract_internal(*args, **kwargs):
        region = object()

        def runs(tracer: Tracer, frame, inputs, _kwargs) -> None:
            tracer.on_dynamo_run(region, frame)

        return _wrap(original(*args, **kwargs), own_thread=True, before=runs)

    bridge.extract_internal = extract_internal


def simulated_host() -> tuple[int, int] | None:
    """``(host index, host count)`` of a process traced with ``--simulate-hosts``, else None."""
    index, _, count = os.environ.get(HOST_ENV, "").partition("/")
    if not (index.isdigit() and count.isdigit()):
        return None
    return int(index), int(count)


def _patch_runtime(xr) -> None:
    _patch_use_spmd(xr)
    _patch_host(xr)


def _patch_host(xr) -> None:
    """Give a simulated host the identity a host of a pod sees: ``xr.process_index()`` and
    ``xr.process_count()`` (torch_xla/runtime.py, which read the PJRT client's process index
    and count) return the host's index and the number of hosts. Device counts are left as
    they are."""
    host = simulated_host()
    if host is None:
        return
    index, count = host
    originals = (xr.process_index, xr.process_count)

    @functools.wraps(originals[0])
    def process_index() -> int:
        return index

    @functools.wraps(originals[1])
    def process_count() -> int:
        return count

    xr.process_index, xr.process_count = process_index, process_count


def _patch_seeds(torch, torch_xla) -> None:
    """A simulated host writes a ``seed`` event for each seed of torch's generators it sets
    (torch/random.py ``manual_seed``, also ``torch.random.manual_seed``; torch_xla/torch_xla.py
    ``manual_seed``, which calls ``xm.set_rng_state``): hosts seeded differently are what
    XLA027 (per-host-seed) flags."""

    def patched(module, name: str, what: str) -> None:
        def seeded(tracer: Tracer, frame, args, kwargs) -> None:
            value = args[0] if args else kwargs.get("seed")
            tracer.emit(
                {
                    "event": "seed",
                    "what": what,
                    "value": _number(value),
                    "location": user_location(frame),
                }
            )

        _patch(module, name, skip_compiling=True, before=seeded)

    patched(torch, "manual_seed", "torch.manual_seed")
    if getattr(torch.random, "manual_seed", None) is not None:
        patched(torch.random, "manual_seed", "torch.manual_seed")
    patched(torch_xla, "manual_seed", "torch_xla.manual_seed")


def _patch_use_spmd(xr) -> None:
    def used(tracer: Tracer, frame, args, kwargs, result, state) -> None:
        tracer.spmd = True
        tracer.emit({"event": "spmd", "location": user_location(frame)})

    _patch(xr, "use_spmd", after=used)


def _patch_parallel_loader(pl) -> None:
    def made(tracer: Tracer, frame, args, kwargs, result, state) -> None:
        # MpDeviceLoader(loader, device, **kwargs)
        loader = args[1] if len(args) > 1 else kwargs.get("loader")
        spec = kwargs.get("input_sharding")
        facts = {"input_sharding": _describe_spec(spec)}
        site = getattr(spec, "_xla_lint_site", None)
        if site is not None:
            facts["sharding_location"] = site
        facts["wraps"] = id(loader)
        tracer.on_loader("MpDeviceLoader", args[0], frame, **facts)

    _patch(pl.MpDeviceLoader, "__init__", after=made)
    _patch(pl.PerDeviceLoader, "next", own_thread=True, after=_batch)


def _patch_sharding_spec(xs) -> None:
    original = xs.ShardingSpec.__post_init__

    @functools.wraps(original)
    def __post_init__(self):
        original(self)
        try:
            self._xla_lint_site = user_location(sys._getframe(1))
        except AttributeError:
            pass

    xs.ShardingSpec.__post_init__ = __post_init__


def _ir_lines(text: str) -> list[tuple[str, str | None]]:
    """The node lines of an IR text, normalised (see :func:`_normalise_ir`)."""
    return [_normalise_ir(line) for line in text.splitlines() if " = " in line]


def _normalise_ir(line: str) -> tuple[str, str | None]:
    """``(op, location)`` of one IR text line: ``%12 = f32[] prim::Constant(), location=f@a.py:3,
    xla_shape=f32[]`` -> ``("f32[] prim::Constant()", "f@a.py:3")`` (node numbers, scopes and
    the repeated shape dropped)."""
    _, _, rest = line.partition(" = ")
    location = None
    parts = []
    for part in rest.split(", "):
        if part.startswith("location="):
            location = part[len("location=") :]
        elif not part.startswith(("scope=", "xla_shape=", "ROOT=")):
            parts.append(part)
    op = ", ".join(parts)
    while "%" in op:  # operands: %12 -> %
        head, _, tail = op.partition("%")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        op = head + "#" + tail[digits:]
    return op, location


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _describe_spec(spec) -> object:
    """A ShardingSpec (or a dict/tuple of them) as plain data."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        return {str(k): _describe_spec(v) for k, v in spec.items()}
    partition = getattr(spec, "partition_spec", None)
    if partition is not None:
        return {
            "partition_spec": [list(p) if isinstance(p, tuple) else p for p in partition],
            "minibatch": bool(getattr(spec, "minibatch", False)),
        }
    return repr(spec)


# --- import hooks --------------------------------------------------------------------------------

_pending: dict = {}


class _AfterImport:
    """A ``sys.meta_path`` finder that runs a callback once a named module has executed."""

    def find_spec(self, name, path=None, target=None):
        """Wrap the real loader of a module we wait for; ``None`` for every other module."""
        callback = _pending.get(name)
        if callback is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            hook = _pending.pop(name, None)
            if hook is not None:
                hook(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_FINDER = _AfterImport()


def _after_import(name: str, callback) -> None:
    """Run ``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if (
        module is not None
        and getattr(module, "__spec__", None) is not None
        and name not in _pending
    ):
        callback(module)
        return
    _pending[name] = callback
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


# --- the entry point ------------------------------------------------------------------------------


def _format_exception(exc: BaseException) -> tuple[str, dict | None]:
    """The traceback as Python prints it, without this module's and runpy's frames; and the
    innermost user frame."""
    tb = exc.__traceback__
    skip = (os.path.abspath(__file__), runpy.__file__, "<frozen runpy>")
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in skip
        or tb.tb_frame.f_code.co_filename.startswith("<xla-lint rank ")
    ):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    location = None
    walk = tb
    while walk is not None:
        code = walk.tb_frame.f_code
        if is_user_file(code.co_filename):
            location = {"path": code.co_filename, "line": walk.tb_lineno, "function": code.co_name}
        walk = walk.tb_next
    return text, location


def _run(tracer: Tracer, kind: str, target: str, args: list[str]) -> int:
    """Run the script or module as ``__main__``; return its exit status."""
    if kind == "module":
        import importlib.util

        sys.path[0] = os.getcwd()
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            found = None
        if found is None:
            tracer.emit({"event": "missing", "what": f"no module named {target!r}"})
            return EXIT_MISSING
        sys.argv = [found.origin or target, *args]
        tracer.emit({"event": "script", "path": found.origin or target})
    else:
        target = os.path.abspath(target)
        if not os.path.exists(target):
            tracer.emit({"event": "missing", "what": f"no such script: {target}"})
            return EXIT_MISSING
        sys.path[0] = target if os.path.isdir(target) else os.path.dirname(target)
        sys.argv = [target, *args]
        tracer.emit({"event": "script", "path": target})
    try:
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except BaseException as exc:
        if isinstance(exc, SystemExit) and not isinstance(exc, TraceStop) and not tracer.stopping:
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        status, text = tracer.outcome(exc)
        if text and type(exc.__cause__).__name__ == "_RemoteTraceback":
            # a rank's exception, re-raised by the launcher: the rank printed its traceback
            text = f"{type(exc).__name__}: {exc} (raised in a worker process; traceback above)\n"
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()
        return status
    return tracer.outcome(None)[0]


# --- one process per device -----------------------------------------------------------------------


def rank_events_path(events_path: str, rank: int) -> str:
    """The events file of one rank, beside the run's: ``events.jsonl`` -> ``events.rank3.jsonl``."""
    base = events_path[: -len(".jsonl")] if events_path.endswith(".jsonl") else events_path
    return f"{base}.rank{rank}.jsonl"


def worker_file(path: str, pid: int) -> str:
    """A per-process twin of a file of the run's folder: ``pt_xla_debug.txt`` ->
    ``pt_xla_debug.1234.txt`` (each worker's torch_xla writes its own debug file)."""
    stem, ext = os.path.splitext(os.path.basename(path))
    return os.path.join(os.path.dirname(path), f"{stem}.{pid}{ext}")


def _is_top_process() -> bool:
    """Whether this is the traced script's own process (not a worker it started)."""
    return bool(_TOP_PID) and _TOP_PID[0] == os.getpid()


def _after_fork() -> None:
    """A forked child (a DataLoader worker, a ``fork`` launch) traces nothing it inherited,
    and dumps its stacks on a fatal signal into a file of its own."""
    _THREADS.clear()
    _DEFAULT.clear()
    _READERS.clear()
    fatal = os.environ.get(FATAL_ENV)
    if fatal:
        _dump_on_fatal_signal(worker_file(fatal, os.getpid()))


def _dump_stacks_on_request(path: str | None) -> None:
    """Every thread's Python stack into ``path`` on SIGUSR1: the runner asks for them before
    it ends a run that hangs (``--timeout``, Ctrl-C, a failed peer)."""
    if path and hasattr(signal, "SIGUSR1"):
        handle = open(path, "w", encoding="utf-8")
        faulthandler.register(signal.SIGUSR1, file=handle, all_threads=True)


def _dump_on_fatal_signal(path: str | None) -> None:
    """Every thread's Python stack into ``path`` when the process dies of a fatal signal
    (faulthandler's SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT handler writes them, then the
    signal kills the process as before): the runner reads them after the process died of one.
    A script that enables faulthandler itself replaces this file with its own."""
    if not path:
        return
    try:
        handle = open(path, "w", encoding="utf-8")
    except OSError:
        return
    faulthandler.enable(file=handle, all_threads=True)


def _marked(rank: int, call):
    """``call()`` through a frame named ``xla_lint_rank_N``: torch_xla's debug report lists the
    Python frames of each compile and execution, so a block names the rank that made it."""
    name = f"{RANK_MARKER}{rank}"
    namespace: dict = {}
    exec(
        compile(f"def {name}(call):\n    return call()\n", f"<xla-lint rank {rank}>", "exec"),
        namespace,
    )
    return namespace[name](call)


def _start_rank(rank: int, launcher: str, shared: bool, thread: threading.Thread) -> Tracer:
    """A tracer for one rank, its ``start`` event in its own file, measuring from now."""
    import torch_xla

    tracer = Tracer(
        rank_events_path(os.environ[EVENTS_ENV], rank),
        int(os.environ.get(STEPS_ENV, "20")),
        os.environ.get(DEBUG_FILE_ENV),
        rank=rank,
        thread=thread,
        shared=shared,
    )
    _register(tracer)
    main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
    tracer.emit(
        {
            "event": "start",
            "schema": SCHEMA_VERSION,
            "pid": os.getpid(),
            "kind": "path",
            "target": os.path.abspath(getattr(main, "__file__", None) or sys.argv[0] or "?"),
            "argv": sys.argv[1:] if launcher == "torchrun" else [],
            "python": sys.executable,
            "cwd": os.getcwd(),
            "steps_limit": tracer.steps_limit,
            "rank": rank,
            "launcher": launcher,
            "thread": thread.name,
            "shared": shared,
            "debug_file": os.environ.get(DEBUG_FILE_ENV),
            "explain": tracer.explain,
        }
    )
    tracer.attach(torch_xla)
    return tracer


def _rank_ended(tracer: Tracer, exc: BaseException | None) -> str | None:
    """Record how a rank ended; a rank that failed makes the others stop at their next boundary
    (so that none waits forever in a collective for it). Returns the traceback of an exception."""
    status, text = tracer.outcome(exc)
    abort = os.environ.get(ABORT_ENV)
    if status != 0 and abort:
        try:
            with open(abort, "a", encoding="utf-8") as handle:
                handle.write(f"{tracer.rank}\n")
        except OSError:
            pass
    return text


def _run_rank(call, launcher: str):
    """Run one rank's per-device function (in its thread) with its own tracer."""
    import torch_xla.runtime as xr

    rank = xr.global_ordinal()
    thread = threading.current_thread()
    tracer = _start_rank(rank, launcher, xr.addressable_device_count() > 1, thread)
    try:
        result = _marked(rank, call)
    except BaseException as exc:
        text = _rank_ended(tracer, exc)
        if text:  # the launcher may re-raise another rank's exception: print each rank's own
            sys.stderr.write(f"rank {rank}: {text}")
            sys.stderr.flush()
        raise
    finally:
        tracer.finish()
        if _THREADS.get(threading.get_ident()) is tracer:
            del _THREADS[threading.get_ident()]
        _release_module_hooks()
    _rank_ended(tracer, None)
    return result


def _torchrun_rank() -> int | None:
    """``RANK`` of a torchrun worker (``TORCHELASTIC_RUN_ID`` set); None elsewhere, and in a
    multiprocessing child of a worker (a DataLoader worker inherits ``RANK``)."""
    rank = os.environ.get("RANK", "")
    if not os.environ.get("TORCHELASTIC_RUN_ID") or not rank.isdigit():
        return None
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return None
    return int(rank)


def _on_worker_torch_xla(torch_xla) -> None:
    """A worker imported torch_xla: a torchrun worker is a rank from now on (its main thread);
    a worker of ``xmp.spawn`` gets the patches (its ranks start in ``_SpawnFn.__call__``)."""
    rank = _torchrun_rank()
    if rank is not None:
        install_patches(torch_xla)
        tracer = _start_rank(rank, "torchrun", False, threading.main_thread())
        previous = sys.excepthook

        def excepthook(kind, value, tb):
            _rank_ended(tracer, value)
            previous(kind, value, tb)

        def at_exit() -> None:
            if tracer.stopping and not tracer.ended:  # TraceStop (a SystemExit) ended the script
                tracer.outcome(TraceStop(0))
            tracer.finish()

        sys.excepthook = excepthook
        atexit.register(at_exit)
    elif os.environ.get(SPAWN_ENV):
        install_patches(torch_xla)


def worker_main() -> None:
    """Entry of every Python process the traced script starts (the ``sitecustomize`` of
    ``XLA_LINT_TRACE_SITE``): its own ``PT_XLA_DEBUG_FILE`` and stacks file, then wait for
    ``import torch_xla``."""
    if not os.environ.get(EVENTS_ENV) or _PATCHED or _THREADS:
        return
    debug = os.environ.get(DEBUG_FILE_ENV)
    if debug:  # read by torch_xla when it loads: each process reports to its own file
        os.environ[DEBUG_FILE_ENV] = worker_file(_top_file(debug), os.getpid())
    stacks, fatal = os.environ.get(STACKS_ENV), os.environ.get(FATAL_ENV)
    _dump_stacks_on_request(worker_file(stacks, os.getpid()) if stacks else None)
    _dump_on_fatal_signal(worker_file(fatal, os.getpid()) if fatal else None)
    os.register_at_fork(after_in_child=_after_fork)
    _set_library_dirs()
    _after_import("torch_xla", _on_worker_torch_xla)


def _top_file(path: str) -> str:
    """``pt_xla_debug.1234.txt`` (a worker's, inherited by its own children) -> ``pt_xla_debug.txt``."""
    stem, ext = os.path.splitext(path)
    head, _, tail = stem.rpartition(".")
    return head + ext if head and tail.isdigit() else path


def main() -> None:
    """Bootstrap entry: ``sys.argv[1:] == [KIND, TARGET, *ARGS]`` with KIND ``path`` or ``module``."""
    kind, target, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    _TOP_PID.append(os.getpid())
    site = os.environ.get(SITE_ENV)
    if site:  # every Python process the script starts loads the hook (not this one: started)
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = site + (os.pathsep + old if old else "")
    os.register_at_fork(after_in_child=_after_fork)
    tracer = Tracer(
        os.environ[EVENTS_ENV], int(os.environ.get(STEPS_ENV, "20")), os.environ.get(DEBUG_FILE_ENV)
    )
    _register(tracer)
    _set_library_dirs()
    _dump_stacks_on_request(os.environ.get(STACKS_ENV))
    _dump_on_fatal_signal(os.environ.get(FATAL_ENV))
    tracer.emit(
        {
            "event": "start",
            "schema": SCHEMA_VERSION,
            "pid": os.getpid(),
            "kind": kind,
            "target": target,
            "argv": args,
            "python": sys.executable,
            "cwd": os.getcwd(),
            "steps_limit": tracer.steps_limit,
            "explain": tracer.explain,
        }
    )
    _after_import("torch_xla", tracer.patch_torch_xla)
    status = _run(tracer, kind, target, args)
    tracer.finish()
    sys.exit(status)
