"""The parent side of ``xla-lint trace``: resolve the command, build the child's environment,
run the script in its own process group with a timeout, and collect the events.

The child is ``python -c BOOTSTRAP KIND TARGET ARGS...`` where the bootstrap loads
:mod:`xla_lint.trace.hook` by path (so the child imports nothing of xla-lint but that
standard-library-only file) and runs the script with :mod:`runpy`. torch_xla reads
``PT_XLA_DEBUG_LEVEL``, ``PT_XLA_DEBUG_FILE``, ``PJRT_DEVICE`` and ``CPU_NUM_DEVICES``
once, when it is imported (``GetDebugLevel`` in csrc/debug_util.cpp, the PJRT client in
runtime.py), so they are set in the environment before the child starts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import hook

PYTHON_NAMES = ("python", "python3")
LAUNCHERS = (
    "torchrun",
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate",
    "deepspeed",
)
DEFAULT_STEPS = 20
DEFAULT_TIMEOUT = 600.0
DEFAULT_CPU_DEVICES = 8
#: Seconds between asking the child for its Python stacks (SIGUSR1) and killing it.
STACK_GRACE_SECONDS = 1.0
KILL_GRACE_SECONDS = 3.0

BOOTSTRAP = (
    "import importlib.util as _u, sys as _s\n"
    "_spec = _u.spec_from_file_location('_xla_lint_trace_hook', {path!r})\n"
    "_m = _u.module_from_spec(_spec); _s.modules[_spec.name] = _m; _spec.loader.exec_module(_m)\n"
    "del _u, _s, _spec\n"
    "_m.main()\n"
)


class TraceUsageError(Exception):
    """A bad command line or a script that cannot be traced: one line, exit status 2."""


@dataclass(frozen=True)
class Target:
    """What to run: ``kind`` ``path`` (a script) or ``module`` (``-m``), its arguments."""

    kind: str
    target: str
    args: tuple[str, ...] = ()

    def display(self) -> str:
        """The command as the user would type it."""
        head = ["-m", self.target] if self.kind == "module" else [self.target]
        return " ".join(shlex.quote(a) for a in ["python", *head, *self.args])


@dataclass(frozen=True)
class TraceOptions:
    """The options of one ``xla-lint trace`` run."""

    command: tuple[str, ...]
    steps: int = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    device: str = "cpu"  # "cpu": CPU_NUM_DEVICES virtual devices; "auto": the machine's environment
    cpu_devices: int = DEFAULT_CPU_DEVICES
    events: str | None = None
    static: bool = True
    explain: bool = False
    cwd: str = field(default_factory=os.getcwd)


@dataclass
class RunResult:
    """What the child left: where the events are, its exit status, and how it ended."""

    target: Target
    events_file: str
    workdir: str
    returncode: int | None
    timed_out: bool
    interrupted: bool
    wall_s: float
    env_facts: dict


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return (
        word == sys.executable
        or name in PYTHON_NAMES
        or (name.startswith("python") and name[len("python") :].replace(".", "").isdigit())
    )


def resolve_target(command: list[str] | tuple[str, ...], cwd: str) -> Target:
    """The script or module to run from the words after ``--``.

    A leading ``python``/``python3``/``pythonX.Y`` (or this interpreter's path) means this
    interpreter; ``-m MODULE`` runs a module. Raises :class:`TraceUsageError` for an empty
    command, a missing script, an interpreter option we do not pass on, or a launcher that
    starts several processes (not traced yet).
    """
    words = list(command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise TraceUsageError(
            "nothing to trace: give the script after `--`, e.g. "
            "`xla-lint trace -- python train.py --epochs 1`"
        )
    if _is_python(words[0]):
        words = words[1:]
        if not words:
            raise TraceUsageError("`python` needs a script or `-m MODULE` to trace")
    head = words[0]
    if head == "-m":
        if len(words) < 2 or not words[1]:
            raise TraceUsageError("-m needs a module name")
        module = words[1]
        if module in LAUNCHERS:
            raise TraceUsageError(
                f"`-m {module}` starts one process per device, which trace does not follow yet; "
                "trace the training script itself (single process or SPMD)"
            )
        return Target("module", module, tuple(words[2:]))
    if head.startswith("-"):
        raise TraceUsageError(
            f"interpreter option {head!r} is not supported; give a script or `-m MODULE`"
        )
    if os.path.basename(head) in LAUNCHERS:
        raise TraceUsageError(
            f"`{os.path.basename(head)}` starts one process per device, which trace does not "
            "follow yet; trace the training script itself (single process or SPMD)"
        )
    path = head if os.path.isabs(head) else os.path.join(cwd, head)
    if not os.path.exists(path):
        raise TraceUsageError(f"no such script: {head}")
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "__main__.py")):
            raise TraceUsageError(f"{head} is a folder without __main__.py")
    return Target("path", os.path.abspath(path), tuple(words[1:]))


def torch_xla_available() -> bool:
    """Whether this interpreter can import torch_xla (checked without importing it)."""
    try:
        return importlib.util.find_spec("torch_xla") is not None
    except (ImportError, ValueError):
        return False


def build_env(
    opts: TraceOptions, events_file: str, workdir: str, environ: dict | None = None
) -> tuple[dict, dict]:
    """The child's environment and the facts to report about it.

    ``--device cpu`` (default): ``PJRT_DEVICE=CPU``, ``CPU_NUM_DEVICES=--cpu-devices`` and,
    unless ``XLA_FLAGS`` sets an optimization level, ``--xla_backend_optimization_level=0``
    (LLVM at -O0 compiles ~2-3x faster; compile counts and causes do not change).
    ``--device auto``: the device variables are left as they are.
    """
    from ..runtime.env import CPU_XLA_FLAGS

    env = dict(os.environ if environ is None else environ)
    facts: dict = {
        "pjrt_device": env.get("PJRT_DEVICE"),
        "cpu_devices": None,
        "xla_flags_added": None,
    }
    if opts.device == "cpu":
        env["PJRT_DEVICE"] = "CPU"
        env["CPU_NUM_DEVICES"] = str(opts.cpu_devices)
        facts.update(pjrt_device="CPU", cpu_devices=opts.cpu_devices)
        if "xla_backend_optimization_level" not in env.get("XLA_FLAGS", ""):
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {CPU_XLA_FLAGS}".strip()
            facts["xla_flags_added"] = CPU_XLA_FLAGS
    elif env.get("PJRT_DEVICE", "").upper().startswith("CPU"):
        facts["cpu_devices"] = int(env.get("CPU_NUM_DEVICES") or 1)
    env["PT_XLA_DEBUG_LEVEL"] = "2"
    env["PT_XLA_DEBUG_FILE"] = os.path.join(workdir, "pt_xla_debug.txt")
    env.setdefault(
        "PT_XLA_DEBUG_MAX_FRAME", "64"
    )  # the user's frame may be deep under library code
    env.pop("PT_XLA_DEBUG", None)  # level 100 plus a metrics dump at exit
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # XLA's C++ notices would bury the script's output
    env["PYTHONUNBUFFERED"] = "1"  # the script's output appears live and survives a forced exit
    env[hook.EVENTS_ENV] = events_file
    env[hook.STEPS_ENV] = str(opts.steps)
    env[hook.STACKS_ENV] = os.path.join(workdir, "stacks.txt")
    if opts.explain:
        env["XLA_IR_DEBUG"] = (
            "1"  # IR nodes get location=func@file:line (read when torch_xla loads)
        )
        env[hook.EXPLAIN_ENV] = "1"
    return env, facts


def child_command(target: Target) -> list[str]:
    """``python -c BOOTSTRAP KIND TARGET ARGS...`` with this interpreter."""
    return [
        sys.executable,
        "-c",
        BOOTSTRAP.format(path=os.path.abspath(hook.__file__)),
        target.kind,
        target.target,
        *target.args,
    ]


def run_child(opts: TraceOptions, target: Target, output=None) -> RunResult:
    """Run the traced script to its end, the step limit or the timeout; never raises for the
    script's own failures. ``output``: where the script's stdout and stderr go (default: our
    standard error, so that standard output carries only the report)."""
    workdir = tempfile.mkdtemp(prefix="xla-lint-trace-")
    events_file = (
        os.path.abspath(opts.events) if opts.events else os.path.join(workdir, "events.jsonl")
    )
    _check_events_file(events_file, target)
    try:
        Path(events_file).parent.mkdir(parents=True, exist_ok=True)
        Path(events_file).write_text("")
    except OSError as exc:
        raise TraceUsageError(
            f"cannot write the events file {events_file}: {exc.strerror or exc}"
        ) from None
    env, facts = build_env(opts, events_file, workdir)
    stream = sys.stderr if output is None else output
    try:
        stream.flush()
    except (AttributeError, ValueError):
        pass
    started = time.perf_counter()
    proc = subprocess.Popen(
        child_command(target),
        env=env,
        cwd=opts.cwd,
        stdin=subprocess.DEVNULL,
        stdout=stream,
        stderr=stream,
        start_new_session=True,
    )
    timed_out = interrupted = False
    # SIGTERM (`timeout`, a cancelled CI job) stops the run as Ctrl-C does: the child runs in
    # its own process group and would otherwise be left running.
    previous = (
        signal.signal(signal.SIGTERM, _raise_interrupt)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        proc.wait(timeout=opts.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop_child(proc)
    except KeyboardInterrupt:
        interrupted = True
        _stop_child(proc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    _append_parent_events(
        events_file, env, proc.returncode, timed_out, interrupted, opts.timeout, wall
    )
    if opts.events:  # everything is in the named events file now; drop torch_xla's raw report
        shutil.rmtree(workdir, ignore_errors=True)
    return RunResult(
        target, events_file, workdir, proc.returncode, timed_out, interrupted, wall, facts
    )


def _raise_interrupt(signum, frame) -> None:
    """SIGTERM handler while the child runs: stop it like Ctrl-C (partial report, its group ended)."""
    raise KeyboardInterrupt


def _check_events_file(path: str, target: Target) -> None:
    """Refuse an ``--events`` path that would destroy data: the traced script itself, or an
    existing file that is not empty and is not an events file of an earlier trace (its first
    line a JSON object with an ``event`` key). Raises :class:`TraceUsageError`."""
    if target.kind == "path" and os.path.exists(path) and os.path.samefile(path, target.target):
        raise TraceUsageError(f"--events {path} is the script being traced; give another file")
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    try:
        with open(path, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
    except (OSError, UnicodeDecodeError, ValueError):
        first = None
    if not isinstance(first, dict) or "event" not in first:
        raise TraceUsageError(
            f"--events {path} exists and is not an events file of xla-lint trace; "
            "it was left unchanged (give a new file)"
        )


def _stop_child(proc: subprocess.Popen) -> None:
    """Ask for the child's Python stacks (faulthandler on SIGUSR1), then end its process group."""
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except (ProcessLookupError, AttributeError):
        pass
    try:
        proc.wait(timeout=STACK_GRACE_SECONDS)
        return
    except subprocess.TimeoutExpired:
        pass
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.returncode is None:
        proc.wait()


def _append_parent_events(
    events_file: str,
    env: dict,
    returncode: int | None,
    timed_out: bool,
    interrupted: bool,
    timeout: float,
    wall: float,
) -> None:
    """Add what only the parent knows: compile blocks the child had no chance to turn into
    events (it crashed, hung or was killed mid-compile), the timeout with the stack the child
    was in, and its exit status."""
    from .events import read_events

    trace = read_events(events_file)
    step = (trace.steps[-1].step + 1) if trace.steps else 1
    lines: list[dict] = []
    debug = env.get("PT_XLA_DEBUG_FILE")
    if debug and os.path.exists(debug):
        try:
            text = Path(debug).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        hook._set_library_dirs(*_library_modules(trace))
        blocks = [b for b in hook.parse_debug_blocks(text) if b["kind"] == "compile"]
        for block in blocks[len(trace.compiles) :]:
            event = hook.block_event(block, step)
            event["from"] = "parent"
            lines.append(event)
    if timed_out or interrupted:
        hook._set_library_dirs(
            *_library_modules(trace)
        )  # the user's frame, not typing.py or mpmath
        stack = _read_stack(env.get(hook.STACKS_ENV))
        event = {
            "event": "timeout",
            "seconds": timeout if timed_out else round(wall, 3),
            "interrupted": interrupted,
            "stack": stack[: hook.MAX_FRAMES],
            "location": next((f for f in stack if hook.is_user_file(f["path"])), None),
        }
        lines.append(event)
    lines.append({"event": "child_exit", "code": returncode})
    t = round(wall, 6)
    with open(events_file, "a", encoding="utf-8") as handle:
        for event in lines:
            event.setdefault("t", t)
            handle.write(json.dumps(event, default=str) + "\n")


def _library_modules(trace) -> list:
    """Stand-ins whose ``__file__`` makes torch and torch_xla library code for user-frame tests."""

    class _M:
        def __init__(self, file):
            self.__file__ = file

    found = []
    for name in ("torch", "torch_xla"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            found.append(_M(spec.origin))
    return found


def _read_stack(path: str | None) -> list[dict]:
    """The main thread's frames (innermost first) from a faulthandler dump."""
    if not path or not os.path.exists(path):
        return []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    chunks = [c for c in text.split("\n\n") if "File " in c]
    # The script's thread is the one running a <module> frame (runpy -> the script's top level).
    main = next((c for c in chunks if "<module>" in c), None) or next(
        (c for c in chunks if "Current thread" in c), chunks[0] if chunks else ""
    )
    frames = []
    for line in main.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        path_part, _, rest = line[len('File "') :].partition('", line ')
        number, _, function = rest.partition(" in ")
        if number.strip().isdigit():
            frames.append(
                {"path": path_part, "line": int(number), "function": function.strip() or None}
            )
    return frames


def lint_static(path: str) -> tuple[list, str | None]:
    """The diagnostics xla-lint (with preview rules) reports for the program of ``path``:
    the script's folder is linted (the engine's program model needs the modules beside it)
    and only files of the program whose entry is ``path`` are kept. Returns
    ``(diagnostics, None)`` or ``([], reason)`` when linting failed."""
    from ..config import ConfigError, build_settings
    from ..discovery import DiscoveryError, discover
    from ..engine import run

    folder = os.path.dirname(os.path.abspath(path))
    try:
        settings = build_settings(cwd=Path(folder), preview=True)
        launchers: list[str] = []
        targets = discover([folder], settings, launchers)
        result = run(targets, settings, 1, cache=False, launchers=launchers, folders=[folder])
    except (ConfigError, DiscoveryError) as exc:
        return [], str(exc)
    except Exception as exc:  # noqa: BLE001 - the trace stands without the static view
        return [], f"{type(exc).__name__}: {exc}"
    entry = os.path.abspath(path)
    members = {entry}
    for program in result.program.programs:
        if os.path.abspath(program.entry) == entry:
            members |= {os.path.abspath(m) for m in program.members}
    return [d for d in result.diagnostics if os.path.abspath(d.path) in members], None


class StaticLint:
    """The static lint of the script's program, run in a thread beside the child."""

    def __init__(self, path: str | None) -> None:
        self.diagnostics: list = []
        self.error: str | None = None
        self._thread = None
        if path is not None:
            self._thread = threading.Thread(
                target=self._run, args=(path,), name="xla-lint-static", daemon=True
            )
            self._thread.start()

    def _run(self, path: str) -> None:
        self.diagnostics, self.error = lint_static(path)

    def result(self, path: str | None = None, timeout: float = 120.0) -> tuple[list, str | None]:
        """Wait for the lint (or run it now for ``path`` when none was started)."""
        if self._thread is None and path is not None:
            self._run(path)
        elif self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return [], "the static lint did not finish in time"
        return self.diagnostics, self.error
