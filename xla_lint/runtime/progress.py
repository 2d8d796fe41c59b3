"""Where each host is (stage and step), so that a host that dies can be named with the
last step it reached. Torch-free.

A host publishes its progress in two places, both best effort:

* the file named by ``$XLA_LINT_RUNTIME_PROGRESS`` (set by the ``--simulate-hosts``
  launcher, which reads it when a host's process ends: a host that ends without having
  written its ``exit`` stage died, and its last stage and step are in the file);
* once the hosts have joined, the host group's TCPStore (key ``progress/<i>``), where
  host 0 reads it when a host never reaches the gather.

On a real multi-host run (not simulated), a store write that fails means host 0, which
serves the store, is gone: :meth:`Progress.update` raises :class:`CoordinatorLost` so
the host stops at its next step instead of training on (simulated hosts leave that to
the launcher, which knows the exit status).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

PROGRESS_ENV = "XLA_LINT_RUNTIME_PROGRESS"

#: stages before the host joined the group (a death there is "before joining")
BEFORE_JOINING = ("start", "rendezvous")

#: how host 0 ended, as another host sees it when host 0's store stops answering
COORDINATOR_LOST = "stopped answering (the host store it serves broke the connection: host 0 died or its machine is gone)"
#: the same when the store keeps the connection but does not answer (a TimeoutError)
COORDINATOR_HUNG = "stopped answering (the host store it serves kept the connection but did not answer: host 0 hangs, or its machine is unreachable)"


class HostLost(RuntimeError):
    """Another host is gone: ``deaths`` are dicts as :func:`death` makes them; ``where``
    is where this host was when it noticed (:func:`describe_progress`)."""

    def __init__(self, message: str, deaths: list[dict], where: str = "") -> None:
        super().__init__(message)
        self.deaths, self.where = deaths, where


#: exit status after Ctrl-C (SIGINT), as shells report a job stopped by it: 128 + 2
EXIT_INTERRUPTED = 130


class JobInterrupted(KeyboardInterrupt):
    """Ctrl-C inside the job; ``record`` is the run record so far (a ``RunRecord`` of
    xla_lint/runtime/job.py, its ``interrupted`` set), for the partial report."""

    def __init__(self, record: Any) -> None:
        super().__init__()
        self.record = record


class CoordinatorLost(HostLost):
    """Host 0's TCPStore stopped answering: host 0 died or its machine is unreachable."""


class Progress:
    """This host's stage (``start``, ``rendezvous``, ``joined``, the job stages of
    xla_lint/runtime/job.py, ``gather``, ``report``, ``exit``) and step (1-based, in
    ``train``), published on every change. ``steps`` is ``--steps``."""

    def __init__(self, host_index: int, steps: int, path: str | None = None) -> None:
        self.host_index, self.steps, self.path = host_index, steps, path
        self.stage = "start"
        self.step: int | None = None
        self.store: Any = None
        self.key = ""
        self.raise_on_loss = False
        self.host0: dict | None = None  # host 0's last progress, as this host last read it

    @classmethod
    def from_env(cls, host_index: int, steps: int) -> Progress:
        """A Progress writing to ``$XLA_LINT_RUNTIME_PROGRESS`` if it is set."""
        return cls(host_index, steps, os.environ.get(PROGRESS_ENV) or None)

    def attach(self, store: Any, key: str, raise_on_loss: bool) -> None:
        """Also publish to ``store`` under ``key``; ``raise_on_loss``: a failed write raises
        :class:`CoordinatorLost` (real hosts) instead of being ignored (simulated hosts)."""
        self.store, self.key, self.raise_on_loss = store, key, raise_on_loss
        self._publish()

    def update(self, stage: str, step: int | None = None) -> None:
        """Record the new stage/step and publish it."""
        self.stage, self.step = stage, step
        self._publish()

    def finish(self, status: int | str | None) -> None:
        """The host ends on its own (normally, or after printing its own error)."""
        self.stage, self.step = "exit", None
        self._write_file({"status": status})

    def as_dict(self) -> dict:
        """``{"host", "pid", "stage", "step", "steps"}``."""
        return {
            "host": self.host_index,
            "pid": os.getpid(),
            "stage": self.stage,
            "step": self.step,
            "steps": self.steps,
        }

    def _publish(self) -> None:
        # The store first, then the file: a reader that sees step N in the file (the
        # launcher, a test that stops the host there) knows host 0 can already read it.
        try:
            self._publish_to_store()
        finally:
            self._write_file({})

    def _publish_to_store(self) -> None:
        if self.store is None:
            return
        try:
            self.store.set(self.key, json.dumps(self.as_dict()))
            if (
                self.host_index != 0 and self.raise_on_loss
            ):  # remember where host 0 was, in case it dies
                key0 = self.key.rsplit("/", 1)[0] + "/0"
                if self.host0 is not None or self.store.check([key0]):
                    self.host0 = json.loads(self.store.get(key0))
        except Exception as exc:
            self.store = None  # one failure is enough: host 0's store is gone
            if self.raise_on_loss:
                where = describe_progress(self.as_dict())
                msg = (
                    f"host 0 (the coordinator, which serves the host store) stopped answering while host "
                    f"{self.host_index} was {where}: {first_line(exc)}"
                )
                how = COORDINATOR_HUNG if isinstance(exc, TimeoutError) else COORDINATOR_LOST
                raise CoordinatorLost(
                    msg, [death(0, how, self.host0, last_seen=True)], where
                ) from None

    def _write_file(self, extra: dict) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**self.as_dict(), **extra}, f)
            os.replace(tmp, self.path)
        except OSError:
            pass


def read_progress(path: str) -> dict | None:
    """The last progress a host wrote to ``path``, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def describe_progress(progress: dict | None) -> str:
    """``"in step 3 of 10 (train stage)"``, ``"in the checkpoint stage"``, ``"before joining"``."""
    if not progress:
        return "before it reported any progress"
    stage, step = progress.get("stage"), progress.get("step")
    if stage == "train" and step:
        return f"in step {step} of {progress.get('steps')} (train stage)"
    if stage in BEFORE_JOINING:
        return "before joining the other hosts"
    if stage == "joined":
        return "after joining the other hosts, before the job's first stage"
    return f"in the {stage} stage"


def how_it_ended(returncode: int) -> str:
    """``-9`` -> ``"died (signal 9, SIGKILL)"``, ``3`` -> ``"died (exit status 3)"``
    (``returncode`` as :class:`subprocess.Popen` reports it: minus the signal number)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"died (signal {-returncode}, {name})"
    return f"died (exit status {returncode})"


def death(host: int, how: str, progress: dict | None, **extra: Any) -> dict:
    """One entry of ``rendezvous.died`` in the report: ``{"host", "how", "stage", "step",
    "steps", "where", ...extra}``. ``how`` follows "host N" (``"died (signal 9, SIGKILL)"``,
    ``"stopped answering (...)"``); ``where`` is :func:`describe_progress` of its last progress."""
    progress = progress or {}
    where = describe_progress(progress) if progress else ""
    return {
        "host": host,
        "how": how,
        "stage": progress.get("stage"),
        "step": progress.get("step"),
        "steps": progress.get("steps"),
        "where": where,
        **extra,
    }


def describe_death(d: dict) -> str:
    """``"host 1 died (signal 9, SIGKILL) in step 3 of 10 (train stage)"``; with
    ``last_seen`` (the progress was read while the host was still there): ``"host 1 never
    reached the gather (...); it was last seen in step 3 of 10 (train stage)"``."""
    if not d.get("where"):
        return f"host {d['host']} {d['how']}"
    return f"host {d['host']} {d['how']}" + (
        f"; it was last seen {d['where']}" if d.get("last_seen") else f" {d['where']}"
    )


def first_line(exc: BaseException | str) -> str:
    """``Type: first line of the message`` of an exception (torch's C++ errors carry a
    stack trace after it), or the first non-blank line of a string."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, str):
        return lines[0] if lines else ""
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
