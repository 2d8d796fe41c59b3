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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hook, watchdog

PYTHON_NAMES = ("python", "python3")
#: Launchers whose workers are traced (each worker a rank): the command, or the module.
TORCHRUN = ("torchrun",)
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
#: Launchers that are refused (exit status 2).
LAUNCHERS = ("accelerate", "deepspeed")
SUPPORTED_MODES = (
    "trace the script itself (single process, SPMD, or one process per device with "
    "`torch_xla.launch`/`xmp.spawn`), or run it with `torchrun`"
)
DEFAULT_STEPS = 20
DEFAULT_TIMEOUT = 600.0
DEFAULT_CPU_DEVICES = 8
#: Seconds between asking the child for its Python stacks (SIGUSR1) and killing it.
STACK_GRACE_SECONDS = 1.0
KILL_GRACE_SECONDS = 3.0
#: Seconds the other ranks get to stop after one failed (a rank blocked in a collective that
#: waits for the failed one never reaches its next boundary); then every process is ended.
PEER_ERROR_GRACE_SECONDS = 20.0
POLL_SECONDS = 0.25

#: The ``sitecustomize.py`` that loads the hook in every Python process the script starts
#: (``site`` imports ``sitecustomize`` from ``sys.path`` at every interpreter start; the folder
#: holding it is put on ``PYTHONPATH`` by the traced process for its children only).
SITECUSTOMIZE = """\
\"\"\"Written by xla-lint trace: load its hook in every Python process the traced script starts.\"\"\"

import os as _os
import sys as _sys


def _xla_lint_trace():
    path = _os.environ.get("XLA_LINT_TRACE_HOOK")
    if not path or "_xla_lint_trace_hook" in _sys.modules:
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location("_xla_lint_trace_hook", path)
    module = importlib.util.module_from_spec(spec)
    _sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.worker_main()


def _next_sitecustomize():
    \"\"\"Leave sys.path as it would be, and run the sitecustomize this folder hides.\"\"\"
    here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    this = _sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    _sys.modules.setdefault("sitecustomize", this)  # the import that runs this file needs one


try:
    _xla_lint_trace()
except Exception as _exc:
    _sys.stderr.write(f"xla-lint trace: no hook in process {_os.getpid()}: {_exc!r}\\n")
_next_sitecustomize()
"""

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
    launcher: str | None = None  # "torchrun": the target is torch.distributed.run

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
    simulate_hosts: int | None = None  # N >= 2: N copies of the script, each a host of a pod
    #: ``--fast-compile``: LLVM at -O0 on CPU (``--xla_backend_optimization_level=0``): faster
    #: compiles, slower steps; off, the script runs with the flags of a bare run.
    fast_compile: bool = False


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


def _python_shebang(program: str) -> bool:
    """Whether the file ``program`` starts with a ``#!`` line naming a Python interpreter
    (``#!/usr/bin/env python3``, a virtualenv's ``#!/.../bin/python``), or with the ``/bin/sh``
    trampoline pip writes for a console script when the interpreter's path is too long for a
    ``#!`` line (``#!/bin/sh``, then ``'''exec' "/long/path/python" "$0" "$@"``)."""
    try:
        with open(program, "rb") as f:
            first, second = f.readline(256), f.readline(1024)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    if any(_is_python(word) for word in first[2:].decode("utf-8", "replace").split()):
        return True
    if not second.startswith(b"'''exec' "):
        return False
    try:
        words = shlex.split(second[len(b"'''exec' ") :].decode("utf-8", "replace"))
    except ValueError:
        return False
    return bool(words) and _is_python(words[0])


#: Bytes of a script read to tell whether it is Python source.
SOURCE_PROBE_BYTES = 1 << 20


def _not_python(path: str) -> str | None:
    """Why the file ``path`` cannot be a Python script, or ``None`` when it may be one: not a
    regular file (a FIFO or a device: reading it could block), an executable binary, NUL bytes
    (Python source has none), or a ``#!`` line naming another interpreter (``#!/bin/sh``; a
    ``.py`` file is Python whatever its ``#!`` line says). What ``python FILE`` also runs is
    accepted: a zip archive (a zipapp) and compiled bytecode of this Python (``.pyc``)."""
    import stat
    import zipfile

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
        with open(path, "rb") as f:
            head = f.read(SOURCE_PROBE_BYTES)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if head.startswith(b"\x7fELF"):
        return "an executable binary"
    if head.startswith(importlib.util.MAGIC_NUMBER):
        return None
    if b"\0" in head:
        return None if zipfile.is_zipfile(path) else "a binary file: it holds NUL bytes"
    if head.startswith(b"#!") and not path.endswith((".py", ".pyw")) and not _python_shebang(path):
        line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        return f"its #! line runs {line}"
    return None


def resolve_target(command: list[str] | tuple[str, ...], cwd: str) -> Target:
    """The script or module to run from the words after ``--``.

    A leading ``python``/``python3``/``pythonX.Y`` (or this interpreter's path) means this
    interpreter; ``-m MODULE`` runs a module. Raises :class:`TraceUsageError` for an empty
    command, a missing script, a file or program that is not Python (a binary, a ``#!`` line
    naming another interpreter: :func:`_not_python`), an interpreter option we do not pass
    on, or a launcher that is not traced.
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
        if module in TORCHRUN_MODULES:
            return Target("module", module, tuple(words[2:]), launcher="torchrun")
        if module.split(".")[0] in LAUNCHERS:
            raise TraceUsageError(f"`-m {module}` is not traced; {SUPPORTED_MODES}")
        return Target("module", module, tuple(words[2:]))
    if head.startswith("-"):
        raise TraceUsageError(
            f"interpreter option {head!r} is not supported; give a script or `-m MODULE`"
        )
    if os.path.basename(head) in TORCHRUN:
        return Target("module", "torch.distributed.run", tuple(words[1:]), launcher="torchrun")
    if os.path.basename(head) in LAUNCHERS:
        raise TraceUsageError(f"`{os.path.basename(head)}` is not traced; {SUPPORTED_MODES}")
    path = head if os.path.isabs(head) else os.path.join(cwd, head)
    if not os.path.exists(path):
        program = shutil.which(head) if os.sep not in head else None
        if program is None:
            raise TraceUsageError(f"no such script: {head}")
        if not _python_shebang(program):
            raise TraceUsageError(
                f"`{head}` is not a Python script ({program}); trace runs Python: "
                "`xla-lint trace -- python train.py ARGS` or `-- python -m MODULE ARGS`"
            )
        path = program  # a console script on PATH, e.g. one installed by pip
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "__main__.py")):
            raise TraceUsageError(f"{head} is a folder without __main__.py")
    else:
        why = _not_python(path)
        if why is not None:
            raise TraceUsageError(
                f"`{head}` is not a Python script ({why}); trace runs Python: "
                "`xla-lint trace -- python train.py ARGS` or `-- python -m MODULE ARGS`"
            )
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

    ``--device cpu`` (default): ``PJRT_DEVICE=CPU`` and ``CPU_NUM_DEVICES=--cpu-devices``;
    ``XLA_FLAGS`` is left as the user's environment has it (the flags of a bare run), unless
    ``--fast-compile`` asks for ``--xla_backend_optimization_level=0`` (LLVM at -O0: compiles
    faster, steps run slower; compile counts and causes do not change), which an optimization
    level already in ``XLA_FLAGS`` overrides. ``--device auto``: the device variables are left
    as they are. The facts name the ``XLA_FLAGS`` the run used (``xla_flags``, None: none).
    """
    from ..runtime.env import CPU_XLA_FLAGS

    env = dict(os.environ if environ is None else environ)
    facts: dict = {
        "pjrt_device": env.get("PJRT_DEVICE"),
        "cpu_devices": None,
        "xla_flags_added": None,
        "fast_compile": opts.fast_compile,
    }
    if opts.device == "cpu":
        env["PJRT_DEVICE"] = "CPU"
        env["CPU_NUM_DEVICES"] = str(opts.cpu_devices)
        facts.update(pjrt_device="CPU", cpu_devices=opts.cpu_devices)
    if opts.fast_compile and "xla_backend_optimization_level" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {CPU_XLA_FLAGS}".strip()
        facts["xla_flags_added"] = CPU_XLA_FLAGS
    if opts.device != "cpu" and env.get("PJRT_DEVICE", "").upper().startswith("CPU"):
        facts["cpu_devices"] = int(env.get("CPU_NUM_DEVICES") or 1)
    facts["xla_flags"] = env.get("XLA_FLAGS") or None
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
    env[hook.FATAL_ENV] = os.path.join(workdir, "fatal.txt")
    env[hook.SITE_ENV] = os.path.join(workdir, "site")
    env[hook.HOOK_ENV] = os.path.abspath(hook.__file__)
    env[hook.ABORT_ENV] = os.path.join(workdir, "abort")
    for name in (hook.SPAWN_ENV, hook.HOST_ENV):
        env.pop(name, None)
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


def run_child(
    opts: TraceOptions, target: Target, output=None, extra_env: dict | None = None
) -> RunResult:
    """Run the traced script to its end, the step limit or the timeout; never raises for the
    script's own failures. ``output``: where the script's stdout and stderr go (default: our
    standard error, so that standard output carries only the report). ``extra_env``: more
    variables for the child (a simulated host's identity)."""
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
    _remove_rank_files(events_file)
    env, facts = build_env(opts, events_file, workdir)
    env.update(extra_env or {})
    site = Path(env[hook.SITE_ENV])
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    stream = sys.stderr if output is None else output
    try:
        stream.flush()
    except (AttributeError, ValueError):
        pass
    started = time.perf_counter()
    # The child runs in a session of its own, out of reach of a signal that ends us; the
    # watchdog ends it and everything it started when we die, even by SIGKILL.
    guard = watchdog.start()
    try:
        proc = subprocess.Popen(
            child_command(target),
            env=env,
            cwd=opts.cwd,
            stdin=subprocess.DEVNULL,
            stdout=stream,
            stderr=stream,
            start_new_session=True,
        )
    except BaseException:
        if guard is not None:
            guard.close()
        raise
    if guard is not None:
        guard.watch(proc.pid)
    timed_out = interrupted = peers_ended = False
    # SIGTERM (`timeout`, a cancelled CI job) stops the run as Ctrl-C does: the child runs in
    # its own process group and would otherwise be left running.
    previous = (
        signal.signal(signal.SIGTERM, _raise_interrupt)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    abort = env[hook.ABORT_ENV]
    failed_at: float | None = None
    try:
        while True:
            now = time.perf_counter()
            if now - started >= opts.timeout:
                timed_out = True
                _stop_child(proc, events_file)
                break
            try:
                proc.wait(timeout=min(POLL_SECONDS, opts.timeout - (now - started)))
                break
            except subprocess.TimeoutExpired:
                pass
            if failed_at is None and os.path.exists(abort):
                failed_at = time.perf_counter()
            if failed_at is not None and time.perf_counter() - failed_at > PEER_ERROR_GRACE_SECONDS:
                peers_ended = True  # a rank failed and the others did not stop: end them all
                _stop_child(proc, events_file)
                break
    except KeyboardInterrupt:
        interrupted = True
        _stop_child(proc, events_file)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if guard is not None:  # the child has ended (or is left to the watchdog to end)
            guard.close()
    wall = time.perf_counter() - started
    if proc.returncode is not None and proc.returncode < 0 and not (timed_out or interrupted):
        _echo_fatal_dump(env.get(hook.FATAL_ENV), stream)
    _append_parent_events(
        events_file, env, proc.returncode, timed_out, interrupted, opts.timeout, wall, peers_ended
    )
    dumps: list[str] = []
    for rank, path in rank_files(events_file).items():
        dump = _append_rank_events(path, rank, timed_out or interrupted or peers_ended, wall, env)
        if dump is not None and dump not in dumps:  # ranks sharing a process share its dump
            dumps.append(dump)
            _echo_fatal_dump(dump, stream)
    if peers_ended:
        with open(events_file, "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps(
                    {
                        "event": "peers_ended",
                        "t": round(wall, 6),
                        "seconds": PEER_ERROR_GRACE_SECONDS,
                    }
                )
                + "\n"
            )
    if opts.events:  # everything is in the named events files now; drop torch_xla's raw report
        shutil.rmtree(workdir, ignore_errors=True)
    return RunResult(
        target, events_file, workdir, proc.returncode, timed_out, interrupted, wall, facts
    )


def _echo_fatal_dump(path: str | None, stream) -> None:
    """Show what faulthandler wrote when the script died of a fatal signal where the script's
    standard error goes, as ``python -X faulthandler`` would have printed it there."""
    text = _read_dump(path)
    if not text.startswith("Fatal Python error: "):
        return
    try:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
    except (AttributeError, OSError, ValueError):
        pass


def rank_files(events_file: str) -> dict[int, str]:
    """The per-rank events files beside ``events_file`` (``events.rank3.jsonl``), by rank."""
    probe = hook.rank_events_path(events_file, 0)
    head, tail = probe[: -len("0.jsonl")], ".jsonl"
    folder = os.path.dirname(head) or "."
    prefix = os.path.basename(head)
    found: dict[int, str] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        number = (
            name[len(prefix) : -len(tail)]
            if name.startswith(prefix) and name.endswith(tail)
            else ""
        )
        if number.isdigit():
            found[int(number)] = os.path.join(folder, name)
    return dict(sorted(found.items()))


def _remove_rank_files(events_file: str) -> None:
    """Remove the rank files an earlier trace left beside ``events_file`` (events files only)."""
    for path in rank_files(events_file).values():
        try:
            with open(path, encoding="utf-8") as handle:
                first = handle.readline()
            if not first.strip() or "event" in json.loads(first):
                os.remove(path)
        except (OSError, ValueError, TypeError):
            continue


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


def _stop_child(proc: subprocess.Popen, events_file: str | None = None) -> None:
    """Ask the child and its ranks for their Python stacks (faulthandler on SIGUSR1), then end
    the child's process group and every process below it (torchrun starts each worker in its
    own session, so the group alone would leave them running)."""
    ranks = _rank_pids(events_file) if events_file else []
    family = [pid for pid in _descendants(proc.pid) if pid != proc.pid]
    for pid in [proc.pid, *ranks]:
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError, AttributeError):
            pass
    try:
        proc.wait(timeout=STACK_GRACE_SECONDS)
        if not family:
            return
    except subprocess.TimeoutExpired:
        pass
    family = sorted(set(family) | set(_descendants(proc.pid)) - {proc.pid})
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        for pid in family:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace)
            if not any(_alive(pid) for pid in family):
                break
            if grace is not None:
                time.sleep(min(grace, 1.0))
        except subprocess.TimeoutExpired:
            continue
    if proc.returncode is None:
        proc.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc; empty where there is none)."""
    return watchdog.descendants(root)


def _rank_pids(events_file: str) -> list[int]:
    """The processes of the ranks that have started (from their ``start`` events)."""
    pids = set()
    for path in rank_files(events_file).values():
        try:
            with open(path, encoding="utf-8") as handle:
                first = json.loads(handle.readline() or "{}")
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and isinstance(first.get("pid"), int):
            pids.add(first["pid"])
    return sorted(pids)


def _append_parent_events(
    events_file: str,
    env: dict,
    returncode: int | None,
    timed_out: bool,
    interrupted: bool,
    timeout: float,
    wall: float,
    ended: bool = False,
) -> None:
    """Add what only the parent knows: compile blocks the child had no chance to turn into
    events (it crashed, hung or was killed mid-compile), the timeout with the stack the child
    was in, the signal it died of (not one the run ended it with: ``ended``) with its stack at
    the crash, and its exit status."""
    from .events import read_events

    trace = read_events(events_file)
    lines = _late_compiles(trace, env.get("PT_XLA_DEBUG_FILE"))
    if returncode is not None and returncode < 0 and not (timed_out or interrupted or ended):
        hook._set_library_dirs(*_library_modules(trace))
        crash = crash_event(-returncode, env.get(hook.FATAL_ENV))
        if crash is not None:
            lines.append(crash)
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
    _append_events(events_file, lines, wall)


def _append_rank_events(path: str, rank: int, stopped: bool, wall: float, env: dict) -> str | None:
    """Add to a rank's file what only the parent knows: compiles of its debug report that the
    rank could not turn into events, the fatal signal its process died of (a ``crash`` event
    from the process's ``fatal.PID.txt``, see :func:`rank_crash_event`) and, when the run was
    ended, where the rank was. Returns the dump file of a crash it added, else None."""
    from .events import read_events

    trace = read_events(path)
    start = trace.start or {}
    # A rank's own blocks; unmarked ones too unless ranks share the process (then they belong
    # to no rank in particular).
    owners = (rank,) if start.get("shared") else (rank, None)
    lines = _late_compiles(trace, start.get("debug_file"), lambda b: hook.block_rank(b) in owners)
    dump = None
    if trace.end is None and trace.crash is None and isinstance(start.get("pid"), int):
        hook._set_library_dirs(*_library_modules(trace))
        fatal = env.get(hook.FATAL_ENV)
        dump = hook.worker_file(fatal, start["pid"]) if fatal else None
        crash = rank_crash_event(dump, rank, start["pid"])
        if crash is not None:
            lines.append(crash)
        else:
            dump = None
    if stopped and trace.end is None and dump is None and isinstance(start.get("pid"), int):
        hook._set_library_dirs(*_library_modules(trace))
        stack = _read_stack(
            hook.worker_file(env[hook.STACKS_ENV], start["pid"]),
            f"<xla-lint rank {rank}>" if start.get("shared") else None,
        )
        lines.append(
            {
                "event": "timeout",
                "seconds": round(wall, 3),
                "stack": stack[: hook.MAX_FRAMES],
                "location": next((f for f in stack if hook.is_user_file(f["path"])), None),
            }
        )
    if lines:
        _append_events(path, lines, wall)
    return dump


def _late_compiles(
    trace: Any, debug: str | None, keep: Callable[[dict], bool] = lambda block: True
) -> list[dict]:
    """Compile events for the blocks of the debug report ``debug`` (those ``keep`` accepts)
    that the traced process had no chance to turn into events itself (it crashed, hung or was
    killed mid-compile): the blocks after the ``trace.compiles`` it wrote, placed in the step
    after its last."""
    if not debug or not os.path.exists(debug):
        return []
    try:
        text = Path(debug).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    hook._set_library_dirs(*_library_modules(trace))
    blocks = [b for b in hook.parse_debug_blocks(text) if b["kind"] == "compile" and keep(b)]
    step = (trace.steps[-1].step + 1) if trace.steps else 1
    out = []
    for block in blocks[len(trace.compiles) :]:
        event = hook.block_event(block, step)
        event["from"] = "parent"
        out.append(event)
    return out


def _append_events(path: str, lines: list[dict], wall: float) -> None:
    """Append ``lines`` to the events file ``path``, stamped at ``wall`` seconds if unstamped."""
    t = round(wall, 6)
    with open(path, "a", encoding="utf-8") as handle:
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


def _read_dump(path: str | None) -> str:
    """The text of a faulthandler dump file ("" when there is none)."""
    if not path or not os.path.exists(path):
        return ""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _read_stack(path: str | None, marker: str | None = None) -> list[dict]:
    """The script's thread's frames (innermost first) from a faulthandler dump; with
    ``marker``, the thread whose frames hold that file name (a rank sharing its process)."""
    return _dump_frames(_read_dump(path), marker)


def _dump_thread(text: str, marker: str | None = None, current_first: bool = False) -> str:
    """One thread's part of a faulthandler dump: the thread holding ``marker``, else (with
    ``current_first``: the thread that got the signal, else) the script's thread, the one
    running a ``<module>`` frame (runpy -> the script's top level); "" without frames."""
    chunks = [c for c in text.split("\n\n") if "File " in c]
    current = next((c for c in chunks if "Current thread" in c), None)
    main = next((c for c in chunks if marker and marker in c), None)
    return (
        main
        or (current if current_first else None)
        or next((c for c in chunks if "<module>" in c), None)
        or current
        or (chunks[0] if chunks else "")
    )


def _dump_frames(text: str, marker: str | None = None, current_first: bool = False) -> list[dict]:
    """The frames (innermost first) of one thread of a faulthandler dump, chosen as
    :func:`_dump_thread` does."""
    frames = []
    for line in _dump_thread(text, marker, current_first).splitlines():
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


#: faulthandler's words for the fatal signals it handles (Modules/faulthandler.c).
FATAL_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Bus error": "SIGBUS",
    "Illegal instruction": "SIGILL",
    "Floating-point exception": "SIGFPE",
    "Floating point exception": "SIGFPE",
    "Aborted": "SIGABRT",
}


def signal_name(number: int) -> str:
    """``11`` -> ``SIGSEGV`` (``signal 64`` for a number this platform does not name)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crash_event(number: int | None, path: str | None, marker: str | None = None) -> dict | None:
    """The ``crash`` event of a process that died of signal ``number`` (None: read it from the
    dump), with the Python stack faulthandler wrote to ``path`` at the crash (the thread that
    got the signal, or with ``marker`` the thread whose frames hold that file name; innermost
    first, down to the script's top level or the marker's frame) and its first user frame.
    ``current_thread`` says whether that thread is the one that got the signal. None when the
    number is unknown and there is no dump."""
    text = _read_dump(path)
    fatal = None
    if text.startswith("Fatal Python error: "):
        fatal = text.partition("\n")[0][len("Fatal Python error: ") :].strip()
    if number is None:
        name = FATAL_SIGNALS.get(fatal or "")
        if name is None:
            return None
        number = int(getattr(signal, name))
    thread = _dump_thread(text, marker, current_first=True) if fatal else ""
    frames = _dump_frames(text, marker, current_first=True) if fatal else []
    # runpy and the bootstrap below the script, or the rank's marker frame and the launcher's
    # below it, are ours
    ours = next(
        (i for i, f in enumerate(frames) if "runpy" in f["path"] or f["path"] == marker),
        len(frames),
    )
    stack = frames[:ours]
    while len(stack) > 1 and stack[-1]["path"] == os.path.abspath(hook.__file__):
        stack.pop()  # the hook's frames that called the rank's function
    return {
        "event": "crash",
        "signal": number,
        "name": signal_name(number),
        "fatal": fatal,
        "stack": stack[: hook.MAX_FRAMES],
        "location": next((f for f in stack if hook.is_user_file(f["path"])), None),
        "current_thread": "Current thread" in thread,
    }


def rank_crash_event(path: str | None, rank: int, pid: int) -> dict | None:
    """The ``crash`` event of a rank whose process (``pid``) died of a fatal signal, from the
    faulthandler dump that process wrote to ``path`` (``fatal.PID.txt``,
    :func:`~xla_lint.trace.hook.worker_file`): the signal, the stack of the rank's own thread
    (the one running its ``<xla-lint rank N>`` frame; a torchrun worker's, the thread that got
    the signal) and ``rank`` and ``pid``. None when the process left no dump of a fatal
    signal (it ended otherwise, or was killed by one faulthandler cannot catch)."""
    event = crash_event(None, path, f"<xla-lint rank {rank}>")
    if event is None:
        return None
    return {**event, "rank": rank, "pid": pid}


def sys_path_folders(path: str, cwd: str) -> list[str]:
    """The folders the script ``path`` puts on ``sys.path`` itself, as Python would find them:
    ``sys.path.append(F)`` and ``sys.path.insert(I, F)`` anywhere in the script, where ``F``
    is a string literal (relative to ``cwd``, the folder the script runs in, as Python reads
    a relative entry), or ``os.path.join``/``dirname``/``abspath``/``realpath`` of literals and
    ``__file__``. Only folders that exist; not the script's own folder. ``[]`` for a script
    that cannot be read or parsed."""
    import ast

    script = os.path.abspath(path)
    try:
        with open(script, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []

    def value(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id == "__file__":
            return script
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        func = node.func
        if not (
            isinstance(func.value, ast.Attribute)
            and func.value.attr == "path"
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "os"
        ):
            return None
        args = [value(a) for a in node.args]
        if not args or any(a is None for a in args) or node.keywords:
            return None
        words = [a for a in args if a is not None]
        if func.attr == "join":
            return os.path.join(*words)
        if func.attr == "dirname" and len(words) == 1:
            return os.path.dirname(words[0])
        if func.attr in ("abspath", "realpath", "normpath") and len(words) == 1:
            return os.path.normpath(os.path.join(cwd, words[0]))
        return None

    own = os.path.dirname(script)
    found: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        if not (
            isinstance(target, ast.Attribute)
            and target.attr == "path"
            and isinstance(target.value, ast.Name)
            and target.value.id == "sys"
        ):
            continue
        index = {"append": 0, "insert": 1}.get(node.func.attr)
        if index is None or len(node.args) <= index:
            continue
        folder = value(node.args[index])
        if folder is None:
            continue
        folder = os.path.normpath(os.path.join(cwd, folder))
        if os.path.isdir(folder) and folder != own and folder not in found:
            found.append(folder)
    return found


def lint_static(path: str, cwd: str | None = None) -> tuple[list, str | None]:
    """The diagnostics xla-lint (with preview rules) reports for the program of ``path``:
    the script's folder is linted (the engine's program model needs the modules beside it),
    with the folders the script puts on ``sys.path`` (:func:`sys_path_folders`, relative ones
    from ``cwd``, default the script's folder), and only files of the program whose entry is
    ``path`` are kept. Returns ``(diagnostics, None)`` or ``([], reason)`` when linting
    failed."""
    from ..config import ConfigError, build_settings
    from ..pipeline.discover import DiscoveryError
    from ..pipeline.workspace import lint_paths

    folder = os.path.dirname(os.path.abspath(path))
    folders = [folder, *sys_path_folders(path, cwd or folder)]
    # a folder inside another that is linted anyway is not linted twice
    folders = [
        f
        for f in folders
        if not any(o != f and (f + os.sep).startswith(o + os.sep) for o in folders)
    ]
    try:
        settings = build_settings(cwd=Path(folder), preview=True)
        _, result = lint_paths(folders, settings)
    except (ConfigError, DiscoveryError) as exc:
        return [], str(exc)
    except Exception as exc:
        return [], f"{type(exc).__name__}: {exc}"
    entry = os.path.abspath(path)
    members = {entry}
    for program in result.program.programs:
        if os.path.abspath(program.entry) == entry:
            members |= {os.path.abspath(m) for m in program.members}
    return [d for d in result.diagnostics if os.path.abspath(d.path) in members], None


class StaticLint:
    """The static lint of the script's program, run in a thread beside the child."""

    def __init__(self, path: str | None, cwd: str | None = None) -> None:
        self.diagnostics: list = []
        self.error: str | None = None
        self.cwd = cwd  # where the script runs: relative sys.path entries are read from it
        self._thread = None
        if path is not None:
            self._thread = threading.Thread(
                target=self._run, args=(path,), name="xla-lint-static", daemon=True
            )
            self._thread.start()

    def _run(self, path: str) -> None:
        self.diagnostics, self.error = lint_static(path, self.cwd)

    def result(self, path: str | None = None, timeout: float = 120.0) -> tuple[list, str | None]:
        """Wait for the lint (or run it now for ``path`` when none was started)."""
        if self._thread is None and path is not None:
            self._run(path)
        elif self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return [], "the static lint did not finish in time"
        return self.diagnostics, self.error
