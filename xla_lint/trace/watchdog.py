"""The watchdog of ``xla-lint trace``: ends the traced script and every process it started
when the tracer dies, by any signal, SIGKILL included (no handler of the tracer runs then).

The tracer (:func:`start`) runs this file as a small process of its own, in a session of its
own (Ctrl-C and signals sent to the tracer's process group do not reach it), with the read end
of a pipe as its standard input; only the tracer holds the write end (the pipe is not
inheritable, so neither the traced script nor anything else gets it). The tracer writes a line
``PID START`` for each process it starts (``START``: field 22 of ``/proc/PID/stat``).

Every :data:`POLL_SECONDS` the watchdog refreshes the processes it watches from ``/proc``: the
roots, every process below a watched one that still runs, and every process in a watched
one's session or process group (a process started with a session of its own, such as a rank
of torchrun, stays below its parent; a process whose parent ended stays in the session). Each
is kept with its start time, so a pid the system reused is never signalled. At end of file
(the tracer closed the pipe after its child ended, or the tracer died) it sends SIGTERM to
every watched process still running, SIGKILL after :data:`GRACE_SECONDS`, and exits.

It is run by path with ``python -I -S`` and imports only the standard library (not xla-lint's
package, which would import the linter's modules).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import subprocess

POLL_SECONDS = 0.25
#: Seconds the watched processes get between SIGTERM and SIGKILL.
GRACE_SECONDS = 2.0
#: Seconds of rounds of SIGKILL for processes started while the others ended.
KILL_SECONDS = 2.0
#: Seconds the tracer waits for the watchdog to end after closing the pipe.
EXIT_WAIT_SECONDS = GRACE_SECONDS + KILL_SECONDS + 3.0


class Proc(NamedTuple):
    """One process as ``/proc/PID/stat`` shows it."""

    ppid: int
    pgrp: int
    session: int
    start: int


def scan() -> dict[int, Proc]:
    """Every running process (zombies left out), by pid; empty where there is no /proc."""
    table: dict[int, Proc] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            proc = read_stat(int(entry))
            if proc is not None:
                table[int(entry)] = proc
    return table


def read_stat(pid: int) -> Proc | None:
    """``pid`` from ``/proc/PID/stat``; None when it is gone, a zombie, or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return None
        return Proc(int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat`` (when ``pid`` started); None when it is gone."""
    proc = read_stat(pid)
    return None if proc is None else proc.start


def descendants(root: int, table: dict[int, Proc] | None = None) -> list[int]:
    """Every process below ``root`` in ``table`` (default: a fresh :func:`scan`)."""
    children: dict[int, list[int]] = {}
    for pid, proc in (scan() if table is None else table).items():
        children.setdefault(proc.ppid, []).append(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Family:
    """The processes watched: pid -> start time, refreshed from ``/proc``."""

    def __init__(self) -> None:
        self.known: dict[int, int] = {}
        tracer = os.getppid()
        self.mine = {os.getpid(), tracer, 0, 1}
        #: Sessions and groups never the family's: this process's and the tracer's (the
        #: traced script starts a session of its own).
        self.foreign = {0, 1}
        for pid in (0, tracer):
            try:
                self.foreign |= {os.getsid(pid), os.getpgid(pid)}
            except OSError:
                pass

    def add(self, pid: int, start: int) -> None:
        """Watch ``pid``, the process that started at ``start``."""
        if pid not in self.mine:
            self.known[pid] = start

    def refresh(self) -> dict[int, int]:
        """Forget the processes that ended, add the new ones of the family, and return those
        running."""
        if not self.known:
            return {}
        table = scan()
        alive = {p: s for p, s in self.known.items() if p in table and table[p].start == s}
        # A session or group id stays taken while a process is in it: those of the running
        # members are the family's, whoever else is in them.
        groups = {i for p in alive for i in (table[p].session, table[p].pgrp)} - self.foreign
        children: dict[int, list[int]] = {}
        for pid, proc in table.items():
            children.setdefault(proc.ppid, []).append(pid)
            if pid not in alive and (proc.session in groups or proc.pgrp in groups):
                alive[pid] = proc.start
        todo = list(alive)
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in alive:
                    alive[child] = table[child].start
                    todo.append(child)
        for pid in self.mine:
            alive.pop(pid, None)
        self.known = alive
        return dict(alive)

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every running member (checked again just before); how many."""
        sent = 0
        for pid, start in self.refresh().items():
            if start_time(pid) != start:
                continue
            try:
                os.kill(pid, sig)
                sent += 1
            except OSError:
                pass
        return sent


def end(family: Family) -> None:
    """SIGTERM to every running member, then SIGKILL to those left after the grace."""
    if not family.signal(signal.SIGTERM):
        return
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not family.refresh():
            return
    deadline = time.monotonic() + KILL_SECONDS
    while family.signal(signal.SIGKILL) and time.monotonic() < deadline:
        time.sleep(0.05)


def _watch(fd: int, family: Family) -> None:
    """Read ``PID START`` lines from ``fd`` and refresh the family until end of file."""
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            data = os.read(fd, 4096) if ready else None
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if data == b"":
            return
        if data:
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                words = line.split()
                if len(words) == 2 and all(w.isdigit() for w in words):
                    family.add(int(words[0]), int(words[1]))
        family.refresh()


def main() -> int:
    """Watch the processes named on standard input until it ends, then end them."""
    for name in ("SIGINT", "SIGHUP", "SIGPIPE"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    family = Family()
    try:
        _watch(0, family)
        end(family)
    except Exception:  # never a traceback: the tracer's output belongs to the user
        return 1
    return 0


class Watchdog:
    """The tracer's side: the watchdog process and the write end of its pipe."""

    def __init__(self, proc: subprocess.Popen, fd: int) -> None:
        self.proc = proc
        self.fd: int | None = fd

    def watch(self, pid: int) -> None:
        """Have the watchdog end ``pid`` (and every process it starts) if the tracer dies."""
        start = start_time(pid)
        if self.fd is None or start is None:
            return
        try:
            os.write(self.fd, f"{pid} {start}\n".encode())
        except OSError:
            pass

    def close(self, timeout: float = EXIT_WAIT_SECONDS) -> None:
        """Close the pipe (the watchdog ends what is left of the family, then exits) and wait
        for the watchdog, at most ``timeout`` seconds before killing it."""
        import subprocess

        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass


def start() -> Watchdog | None:
    """Start the watchdog (``python -I -S`` this file, standard input the pipe's read end);
    None when it cannot start (the run goes on unwatched)."""
    import subprocess

    read, write = os.pipe()  # neither end is inheritable; only the read end is passed, as stdin
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            stdin=read,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    return Watchdog(proc, write)


if __name__ == "__main__":
    sys.exit(main())
