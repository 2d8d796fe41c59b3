"""A traced script and the processes it starts end when ``xla-lint trace`` itself is killed
(SIGKILL: no handler of the tracer runs), whether they are in the script's process group or
started their own session, as the ranks of torchrun and ``xmp.spawn`` may.

The script imports nothing of torch; the tracer needs torch_xla installed (it refuses to
trace otherwise) but never imports it. One run takes ~2-4 s.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0  # seconds for the script and its child to be running
GONE_TIMEOUT = 10.0  # seconds for every process of the run to end after the tracer is killed

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(
        importlib.util.find_spec("torch_xla") is None, reason="xla-lint trace needs torch_xla"
    ),
]

# The script starts a child in a session of its own (out of reach of the script's process
# group), which starts a grandchild; each writes its pid and its child's into the folder
# named by its argument (a file named by its pid: --simulate-hosts runs several copies), then
# all sleep.
CHILD = """\
import os, subprocess, sys, time
grandchild = subprocess.Popen(["sleep", "120"])
path = os.path.join(sys.argv[1], f"child.{os.getpid()}")
with open(path + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {grandchild.pid}\\n")
os.replace(path + ".tmp", path)
time.sleep(120)
"""
SCRIPT = f"""\
import os, subprocess, sys, time
CHILD = {CHILD!r}
child = subprocess.Popen([sys.executable, "-c", CHILD, sys.argv[1]], start_new_session=True)
path = os.path.join(sys.argv[1], f"script.{{os.getpid()}}")
with open(path + ".tmp", "w") as f:
    f.write(f"{{os.getpid()}} {{child.pid}}\\n")
os.replace(path + ".tmp", path)
time.sleep(120)
"""


def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (None when ``pid`` is gone or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def _below(root: int) -> dict[int, int]:
    """Every live process below ``root`` (from /proc), with its start time."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid in parents.get(todo.pop(), []):
            start = _start_time(pid)
            if start is not None:
                found[pid] = start
                todo.append(pid)
    return found


def _alive(family: dict[int, int]) -> dict[int, int]:
    """The processes of ``family`` (pid -> start time) still running (the same process)."""
    return {pid: t for pid, t in family.items() if _start_time(pid) == t}


def _pids(folder: Path, kind: str, copies: int, deadline: float, tracer) -> dict[int, int]:
    """``pid -> its child's pid`` from the ``KIND.PID`` files, once ``copies`` are written."""
    while len(found := sorted(folder.glob(f"{kind}.*[0-9]"))) < copies:
        assert tracer.poll() is None, f"xla-lint trace ended early: {tracer.returncode}"
        assert time.monotonic() < deadline, f"{copies} {kind} files were not written in time"
        time.sleep(0.05)
    pairs = [[int(word) for word in path.read_text().split()] for path in found]
    return {pid: child for pid, child in pairs}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("copies", [1, 2], ids=["one-process", "simulate-hosts-2"])
def test_killing_the_tracer_ends_the_script_and_its_children(tmp_path, copies):
    script = tmp_path / "spawns.py"
    script.write_text(SCRIPT)
    pids = tmp_path / "pids"
    pids.mkdir()
    hosts = ["--simulate-hosts", str(copies)] if copies > 1 else []
    tracer = subprocess.Popen(
        [sys.executable, "-m", "xla_lint", "trace", "--no-static", "--timeout", "120", *hosts]
        + ["--events", str(tmp_path / "events.jsonl"), "--", "python", str(script), str(pids)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    family: dict[int, int] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT
        scripts = _pids(pids, "script", copies, deadline, tracer)
        children = _pids(pids, "child", copies, deadline, tracer)
        assert sorted(scripts.values()) == sorted(children), (scripts, children)
        family = _below(tracer.pid)  # the scripts, their children and grandchildren, helpers
        assert {*scripts, *children, *children.values()} <= set(family), family
        tracer.send_signal(signal.SIGKILL)
        tracer.wait(timeout=5)
        gone_by = time.monotonic() + GONE_TIMEOUT
        while _alive(family) and time.monotonic() < gone_by:
            time.sleep(0.1)
        left = _alive(family)
        assert not left, f"still running {GONE_TIMEOUT:.0f} s after the tracer was killed: {left}"
    finally:
        if tracer.poll() is None:
            family.update(_below(tracer.pid))
        for pid in _alive(family):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait(timeout=5)
