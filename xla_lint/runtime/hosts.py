"""Hosts: who takes part, the bounded rendezvous, the gloo group, simulated hosts.

A *host* is one process of the checker (one per machine on a pod). Host-level
coordination uses ``torch.distributed`` on the gloo backend - never XLA collectives,
which cannot time out and, in SPMD, ``xm.rendezvous`` is a no-op (lint rule XLA006).

Where the layout comes from (:func:`resolve_layout`):

* ``--coordinator HOST:PORT --num-hosts N --host-index I``, or torchrun-style
  ``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK``: a ``torch.distributed.TCPStore``
  served by host 0 at the coordinator. Every host registers ``join/<I>``; host 0 polls
  until all N indices arrived or ``--timeout`` passed, so it can name the missing ones,
  and publishes a verdict. Only then is the gloo group created on the same store.
* none of these, on a TPU pod (PJRT reports several processes): the group comes from
  ``init_method='xla://'`` (torch_xla/distributed/xla_backend.py registers it); there
  the TPU runtime itself waits for every host when it starts, so a missing host cannot
  be named by this checker.
* otherwise one host.

``--simulate-hosts N`` (:func:`launch_simulated_hosts`) starts N processes on
127.0.0.1 that join as N hosts; each is its own SPMD world of CPU devices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .env import HOST_LAYOUT_VARS
from .options import OptionsError, RuntimeOptions, option_differences
from .progress import (
    BEFORE_JOINING,
    EXIT_INTERRUPTED,
    PROGRESS_ENV,
    death,
    describe_death,
    describe_progress,
    first_line,
    how_it_ended,
    read_progress,
)

KEY = "xla_lint_runtime/"


@contextlib.contextmanager
def native_output_to_devnull() -> Iterator[None]:
    """Point file descriptors 1 and 2 at /dev/null for the duration.

    gloo prints "[Gloo] Rank i is connected to ..." through C++ ``std::cout`` while the
    group forms, which would land in host 0's report; Python exceptions still carry their
    messages. C stdio buffers are flushed before the descriptors are restored.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        with open(os.devnull, "w") as null:
            for fd in saved:
                os.dup2(null.fileno(), fd)
            yield
            _flush_c_stdio()
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def native_stderr_kept(into: list[str]) -> Iterator[None]:
    """Point file descriptor 2 at a temporary file for the duration and append what was
    written there to ``into``.

    torch's c10d logs a failed TCPStore connection at ERROR level with the whole C++
    stack of the exception (40 frames), which ``TORCH_CPP_LOG_LEVEL=ERROR`` lets through;
    the checker names the problem in one line instead and keeps this text for the JSON
    report (``errors[].traceback``) where there is one.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        try:
            os.dup2(log.fileno(), 2)
            yield
            _flush_c_stdio()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            text = log.read().decode("utf-8", "replace").strip()
            if text:
                into.append(text)


def wait_for_listener(host: str, port: int, deadline: float) -> bool:
    """True once something accepts TCP connections at ``host:port``, False when
    ``deadline`` (``time.monotonic()``) comes first. Strictly bounded: the name lookup and
    the connection attempts run in a daemon thread, each attempt at most 1 s."""
    found = threading.Event()

    def probe() -> None:
        while time.monotonic() < deadline:
            try:
                left = max(0.05, min(1.0, deadline - time.monotonic()))
                with socket.create_connection((host, port), timeout=left):
                    found.set()
                    return
            except OSError:
                time.sleep(max(0.0, min(0.25, deadline - time.monotonic())))

    threading.Thread(target=probe, name="xla-lint-coordinator-probe", daemon=True).start()
    return found.wait(max(0.0, deadline - time.monotonic()))


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


class RendezvousError(RuntimeError):
    """The hosts did not all join. ``result`` says who did (a :class:`RendezvousResult`);
    ``native_log`` is what torch's C++ side wrote while it failed (kept off the terminal)."""

    def __init__(
        self, message: str, result: RendezvousResult | None = None, native_log: str = ""
    ) -> None:
        super().__init__(message)
        self.result = result
        self.native_log = native_log


class StoreTimeout(TimeoutError):
    """Host 0's store did not answer within the time allowed (see :class:`BoundedStore`)."""


#: seconds host 0's store has to answer a ``wait`` once the wait's own timeout is over
STORE_ANSWER_S = 5.0
#: how long host 0 waits, after a failed rendezvous, for the other hosts to read why
VERDICT_READ_S = 10.0


class BoundedStore:
    """Host 0's TCPStore as another host uses it, every call bounded.

    torch 2.9's TCPStore client reads the server's answer with no time limit: ``check``,
    ``add`` and ``get`` block in ``recv`` until host 0 answers, and ``wait`` (``get`` too)
    sends CANCEL_WAIT once its timeout is over and then blocks the same way. A host 0 that
    hangs - stopped, or its machine gone without closing the connection - would hang every
    other host forever. Each call runs in a daemon thread and raises :class:`StoreTimeout`
    after ``limit`` seconds (a ``wait``: its own timeout + :data:`STORE_ANSWER_S`); from
    then on the store counts as lost and every call raises at once.
    """

    def __init__(self, store: Any, limit: float) -> None:
        self.store, self.limit = store, limit
        self.lost: str | None = None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if not callable(method):
            return method
        return lambda *args, **kwargs: self._call(name, method, args, kwargs)

    def _call(self, name: str, method: Any, args: tuple, kwargs: dict) -> Any:
        if self.lost:
            raise StoreTimeout(self.lost)
        limit = self.limit
        if name == "wait" and len(args) > 1 and isinstance(args[1], timedelta):
            limit = args[1].total_seconds() + STORE_ANSWER_S
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = method(*args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=call, name=f"xla-lint-store-{name}", daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            self.lost = f"host 0's store did not answer a {name} within {limit:g} s"
            raise StoreTimeout(self.lost)
        if "error" in box:
            raise box["error"]
        return box.get("value")


@dataclass(frozen=True)
class HostLayout:
    """This process's place among the hosts.

    ``source`` is ``"single"``, ``"cli"`` (``--coordinator``...), ``"env"``
    (``MASTER_ADDR``...), ``"simulated"`` (``--simulate-hosts`` child) or ``"xla"``
    (decided later, from PJRT). ``coordinator`` is ``(host, port)`` or None.
    """

    host_index: int = 0
    num_hosts: int = 1
    coordinator: tuple[str, int] | None = None
    source: str = "single"


@dataclass
class RendezvousResult:
    """Outcome of the rendezvous, as host 0 saw it (JSON-ready via :meth:`to_json`).

    ``joined``/``missing``/``duplicates`` are host indices; ``elapsed_s`` is seconds
    from this host's start of the rendezvous until the verdict; ``hosts`` maps a host
    index (as str) to what it sent: hostname, pid, its ``--num-hosts``.
    """

    expected: int = 1
    joined: list[int] = field(default_factory=lambda: [0])
    missing: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    timeout_s: float = 0.0
    source: str = "single"
    coordinator: str | None = None
    hosts: dict = field(default_factory=dict)
    message: str = ""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.duplicates and not self.message

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "ok": self.ok}


_HOST_ENV = (
    "MASTER_ADDR",
    "WORLD_SIZE",
    "RANK",
)  # torch.distributed's env:// description of a host


def resolve_layout(opts: RuntimeOptions, environ: dict | None = None) -> HostLayout:
    """Work out host index, host count and coordinator from options, then environment.

    Raises :class:`OptionsError` for an incomplete multi-host description (exit 2).
    """
    env = os.environ if environ is None else environ
    if opts.coordinator or opts.num_hosts is not None or opts.host_index is not None:
        num = opts.num_hosts if opts.num_hosts is not None else 1
        index = opts.host_index if opts.host_index is not None else 0
        if num > 1 and not opts.coordinator:
            raise OptionsError("--num-hosts > 1 needs --coordinator HOST:PORT (host 0's address)")
        if num > 1 and opts.host_index is None:
            raise OptionsError("--num-hosts > 1 needs --host-index (0 on the coordinator host)")
        coord = None
        if opts.coordinator:
            host, _, port_text = opts.coordinator.rpartition(":")
            coord = (host, int(port_text))
        source = "simulated" if opts.simulated else "cli"
        return HostLayout(index, num, coord if num > 1 else None, source)
    described = [k for k in _HOST_ENV if env.get(k)]
    if described and len(described) < len(_HOST_ENV) and env.get("WORLD_SIZE", "1") != "1":
        # WORLD_SIZE=2 RANK=1 without MASTER_ADDR used to run as a lone host 0 and pass.
        missing = [k for k in _HOST_ENV if k not in described]
        raise OptionsError(
            f"{', '.join(described)} set but not {', '.join(missing)}: set all three "
            "(MASTER_ADDR is host 0's address) or use --coordinator/--num-hosts/--host-index"
        )
    if len(described) == len(_HOST_ENV):
        num, index = int(env["WORLD_SIZE"]), int(env["RANK"])
        if not 0 <= index < num:
            raise OptionsError(f"RANK={index} is outside [0, WORLD_SIZE={num})")
        port = int(env.get("MASTER_PORT") or 29500)
        return HostLayout(index, num, (env["MASTER_ADDR"], port) if num > 1 else None, "env")
    return HostLayout()


class HostGroup:
    """The joined hosts: a TCPStore (host 0 serves it) and a gloo process group.

    Create with :meth:`join`. ``result`` is the :class:`RendezvousResult`; ``pg`` the
    gloo group (None for one host). All waits are bounded.
    """

    def __init__(
        self, layout: HostLayout, result: RendezvousResult, store: Any = None, pg: Any = None
    ) -> None:
        self.layout, self.result, self.store, self.pg = layout, result, store, pg

    @property
    def host_index(self) -> int:
        return self.layout.host_index

    @property
    def num_hosts(self) -> int:
        return self.layout.num_hosts

    # -- joining ------------------------------------------------------------------------
    @classmethod
    def join(
        cls, layout: HostLayout, timeout: float, group_timeout: float, options: dict | None = None
    ) -> HostGroup:
        """Rendezvous within ``timeout`` seconds, then create the gloo group whose
        collectives time out after ``group_timeout`` seconds (``--job-timeout``: how long a
        joined host may keep the others waiting). The other hosts also use host 0's store
        through a :class:`BoundedStore` with that limit.

        ``options`` (:meth:`RuntimeOptions.comparable`) travel with each host's join; host 0
        compares them. Raises :class:`RendezvousError` naming the hosts that did not join,
        the duplicated host indices, the unreachable coordinator or the options that differ
        between hosts, and :class:`OptionsError` when host 0 cannot serve the coordinator
        port because it is in use.
        """
        if layout.num_hosts == 1 and layout.source in ("single", "cli", "env", "simulated"):
            if layout.source == "single":
                grp = cls._maybe_join_xla(layout, timeout, group_timeout, options)
                if grp is not None:
                    return grp
            host = {"hostname": socket.gethostname(), "pid": os.getpid(), "num_hosts": 1}
            return cls(
                layout, RendezvousResult(source=layout.source, timeout_s=timeout, hosts={"0": host})
            )
        return cls._join_store(layout, timeout, group_timeout, options)

    @classmethod
    def _join_store(
        cls, layout: HostLayout, timeout: float, group_timeout: float, options: dict | None
    ) -> HostGroup:
        t0 = time.monotonic()
        # join() comes here for several hosts, and resolve_layout gives those a coordinator
        assert layout.coordinator is not None
        host, port = layout.coordinator
        me, n = layout.host_index, layout.num_hosts
        coord = f"{host}:{port}"
        result = RendezvousResult(
            expected=n, joined=[], timeout_s=timeout, source=layout.source, coordinator=coord
        )
        unreachable = (
            f"host {me} of {n} could not reach the coordinator {coord} (host 0) within {timeout:g} s: "
            f"start the command on host 0 too, and check that {coord} is reachable from this host"
        )
        # A host other than 0 first waits, in Python, until host 0 listens: torch's TCPStore
        # client retries a refused connection once its own timeout is over (try=0, then
        # try=1: 2 x --timeout in all) and logs the C++ stack of each failure. The wait
        # starts before torch is imported, so --timeout is the whole wait.
        if me != 0 and not wait_for_listener(host, port, t0 + timeout):
            result.message = unreachable
            raise RendezvousError(unreachable, result)
        import torch.distributed as dist

        native: list[str] = []
        connect_s = timeout if me == 0 else max(1.0, t0 + timeout - time.monotonic())
        store: Any
        try:
            with native_stderr_kept(native):
                store = dist.TCPStore(
                    host,
                    port,
                    world_size=None,
                    is_master=(me == 0),
                    timeout=timedelta(seconds=connect_s),
                    wait_for_workers=False,
                )
            store.set_timeout(timedelta(seconds=timeout))  # the store's later waits
            if me != 0:  # a hung host 0 must not hang this host: every call bounded
                store = BoundedStore(store, timeout)
        except Exception as exc:
            if me == 0 and (
                "EADDRINUSE" in str(exc) or "address already in use" in str(exc).lower()
            ):
                raise OptionsError(
                    f"--coordinator {coord}: port {port} is already in use on this machine, so host 0 "
                    "cannot serve the host store there; pick a free port"
                ) from None
            if me == 0:
                msg = f"host 0 could not serve the coordinator store on {coord}: {first_line(exc)}"
            else:
                msg = unreachable
            result.message = msg
            raise RendezvousError(msg, result, "\n".join(native)) from None
        claims = store.add(f"{KEY}claim/{me}", 1)
        payload = {
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "num_hosts": n,
            "claim": claims,
            "options": options,
        }
        store.set(f"{KEY}join/{me}", json.dumps(payload))
        if me == 0:
            verdict = cls._host0_collect(store, n, t0, timeout, result)
            store.set(f"{KEY}verdict", json.dumps(verdict))
            if verdict["message"]:  # a failed rendezvous: host 0 exits, and its store with it
                cls._await_verdict_read(store, len(verdict["joined"]) - 1)
        else:
            waited = time.monotonic()
            try:
                store.wait([f"{KEY}verdict"], timedelta(seconds=timeout + 30))
                verdict = json.loads(store.get(f"{KEY}verdict"))
            except Exception as exc:
                waited = time.monotonic() - waited
                if waited >= timeout + 30:
                    msg = f"host {me} of {n}: host 0 gave no rendezvous verdict within {timeout + 30:g} s"
                else:
                    msg = (
                        f"host {me} of {n}: host 0's store stopped answering {waited:.1f} s into the wait "
                        f"for its rendezvous verdict (host 0 ended or its machine is gone; its own output "
                        f"says why): {first_line(exc)}"
                    )
                result.message = msg
                raise RendezvousError(msg, result) from None
            try:
                store.add(f"{KEY}verdict_read", 1)
            except Exception:
                pass  # host 0 waits for this acknowledgement at most VERDICT_READ_S
        for k in ("joined", "missing", "duplicates", "hosts", "message"):
            setattr(result, k, verdict[k])
        result.elapsed_s = round(time.monotonic() - t0, 3)
        if not result.ok:
            raise RendezvousError(result.message, result)
        try:
            raw = store.store if isinstance(store, BoundedStore) else store
            with native_output_to_devnull():  # gloo's "[Gloo] Rank i is connected to ..." on stdout
                dist.init_process_group(
                    "gloo",
                    store=dist.PrefixStore(f"{KEY}pg", raw),
                    rank=me,
                    world_size=n,
                    timeout=timedelta(seconds=group_timeout),
                )
        except Exception as exc:
            result.message = f"host {me}: the gloo process group did not form: {exc}"
            raise RendezvousError(result.message, result) from None
        result.elapsed_s = round(time.monotonic() - t0, 3)
        if isinstance(store, BoundedStore):
            store.limit = group_timeout  # joined: a host may now keep the others --job-timeout
        return cls(layout, result, store, dist.group.WORLD)

    @staticmethod
    def _await_verdict_read(store: Any, others: int) -> None:
        """Host 0, before it exits after a failed rendezvous: wait at most
        :data:`VERDICT_READ_S` seconds until the ``others`` joined hosts have read the
        verdict. Its exit closes the store they read it from; without the wait, a host that
        had not read it yet saw a broken connection instead of the reason (measured on a
        loaded 2-core machine)."""
        deadline = time.monotonic() + VERDICT_READ_S
        while others > 0 and time.monotonic() < deadline:
            try:
                if store.add(f"{KEY}verdict_read", 0) >= others:
                    return
            except Exception:
                return
            time.sleep(0.05)

    @staticmethod
    def _host0_collect(
        store: Any, n: int, t0: float, timeout: float, result: RendezvousResult
    ) -> dict:
        """Poll ``join/<i>`` keys until all ``n`` hosts arrived or ``timeout`` passed.

        When a host is missing at the first poll, one line on standard error says how long
        host 0 waits (``waiting up to 120 s for 3 hosts to join (joined: 0)``)."""
        keys = [f"{KEY}join/{i}" for i in range(n)]
        arrived: set[int] = set()
        announced = False
        while True:
            arrived |= {i for i in range(n) if i not in arrived and store.check([keys[i]])}
            if len(arrived) == n or time.monotonic() - t0 > timeout:
                break
            if not announced:
                joined = ", ".join(map(str, sorted(arrived))) or "none"
                print(
                    f"waiting up to {timeout:g} s for {n} hosts to join (joined: {joined})",
                    file=sys.stderr,
                    flush=True,
                )
                announced = True
            time.sleep(0.1)
        hosts = {str(i): json.loads(store.get(keys[i])) for i in sorted(arrived)}
        duplicates = sorted(i for i in arrived if store.add(f"{KEY}claim/{i}", 0) > 1)
        missing = sorted(set(range(n)) - arrived)
        wrong_n = sorted(int(i) for i, h in hosts.items() if h.get("num_hosts") != n)
        problems = []
        for i in missing:
            problems.append(
                f"host {i} of {n} did not join within {timeout:g} s: start the command on every host"
            )
        for i in duplicates:
            problems.append(
                f"host index {i} was claimed by {store.add(f'{KEY}claim/{i}', 0)} processes: give every host its own --host-index"
            )
        for i in wrong_n:
            problems.append(
                f"host {i} was started with --num-hosts {hosts[str(i)]['num_hosts']}, host 0 with {n}"
            )
        differences = option_differences(
            {int(i): h["options"] for i, h in hosts.items() if h.get("options") is not None}
        )
        if differences:
            problems.append(
                "the hosts were started with different options: "
                + "; ".join(differences)
                + " (start the same command on every host)"
            )
        for h in hosts.values():
            h.pop("options", None)  # compared; the report has host 0's options
        message = "; ".join(problems)
        if missing:
            message += f" (host indices run 0..{n - 1}; joined: {', '.join(map(str, sorted(arrived))) or 'none'})"
        return {
            "joined": sorted(arrived),
            "missing": missing,
            "duplicates": duplicates,
            "hosts": hosts,
            "message": message,
        }

    @classmethod
    def _maybe_join_xla(
        cls, layout: HostLayout, timeout: float, group_timeout: float, options: dict | None
    ) -> HostGroup | None:
        """On a multi-process PJRT runtime (a TPU pod), the gloo group from ``xla://``."""
        if os.environ.get("PJRT_DEVICE", "").upper().startswith("CPU"):
            return None
        import torch.distributed as dist
        import torch_xla.runtime as xr

        xr.use_spmd()
        if xr.process_count() <= 1:
            return None
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the xla:// rendezvous handler

        t0 = time.monotonic()
        with native_output_to_devnull():
            # one timeout for both: here creating the group is the join (--timeout), and its
            # collectives wait for a slow host (--job-timeout)
            dist.init_process_group(
                "gloo",
                init_method="xla://",
                timeout=timedelta(seconds=max(timeout, group_timeout)),
            )
        n, me = dist.get_world_size(), dist.get_rank()
        payloads: list = [None] * n
        dist.all_gather_object(
            payloads,
            {
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "num_hosts": n,
                "xla_process_index": xr.process_index(),
                "options": options,
            },
        )
        indices = sorted(p["xla_process_index"] for p in payloads)
        differences = option_differences(
            {i: p.pop("options") for i, p in enumerate(payloads) if p.get("options") is not None}
        )
        result = RendezvousResult(
            expected=n,
            joined=indices,
            timeout_s=timeout,
            source="xla",
            hosts={str(i): p for i, p in enumerate(payloads)},
        )
        if indices != list(range(n)):
            result.duplicates = sorted({i for i in indices if indices.count(i) > 1})
            result.message = f"PJRT process indices are not 0..{n - 1}: {indices}"
        if differences:
            problems = [result.message] if result.message else []
            problems.append(
                "the hosts were started with different options: " + "; ".join(differences)
            )
            result.message = "; ".join(problems)
        result.elapsed_s = round(time.monotonic() - t0, 3)
        if not result.ok:
            raise RendezvousError(result.message, result)
        return cls(HostLayout(me, n, None, "xla"), result, None, dist.group.WORLD)

    # -- after the job --------------------------------------------------------------------
    def gather(self, obj: Any) -> list:
        """Every host's ``obj`` (picklable), in host order, on every host, over gloo.

        Raises the torch.distributed error when a host does not take part within the group
        timeout. Before gathering, each host marks ``done/<i>`` in the store so host 0 can
        tell which host was missing.
        """
        if self.pg is None:
            return [obj]
        import torch.distributed as dist

        if self.store is not None:
            self.store.set(f"{KEY}done/{self.host_index}", "1")
        out: list = [None] * self.num_hosts
        dist.all_gather_object(out, obj)
        return out

    def lost_hosts(self) -> list[dict] | None:
        """After a failed gather: the hosts that never marked ``done/<i>``, each as a
        :func:`~xla_lint.runtime.progress.death` with the last progress it published.
        None when the store itself is gone (host 0 died)."""
        if self.store is None:
            return []
        if isinstance(self.store, BoundedStore):  # the gather already waited --job-timeout:
            self.store.limit = min(self.store.limit, STORE_ANSWER_S)  # a live host 0 answers now
        try:
            lost = [i for i in range(self.num_hosts) if not self.store.check([f"{KEY}done/{i}"])]
            out = []
            for i in lost:
                key = f"{KEY}progress/{i}"
                progress = json.loads(self.store.get(key)) if self.store.check([key]) else None
                out.append(
                    death(i, "never reached the gather (it died or hung)", progress, last_seen=True)
                )
            return out
        except Exception:
            return None

    def share_status(
        self, code: int | None, timeout: float = 60.0, lost: Sequence[int] = ()
    ) -> int:
        """Host 0 publishes the exit status; the others wait (bounded) and return it.

        Host 0 waits (at most ``timeout`` s) until every host except those in ``lost``
        has read it, since the others read it from the store that host 0 serves.
        """
        if self.pg is None:
            return code if code is not None else 0
        if self.store is None:  # xla:// group
            import torch.distributed as dist

            box = [code]
            dist.broadcast_object_list(box, src=0)
            status = box[0]  # host 0's code: only the other hosts pass None
            assert status is not None
            return int(status)
        if self.host_index == 0:
            self.store.set(f"{KEY}status", str(code))
            readers = self.num_hosts - 1 - len([i for i in set(lost) if i != 0])
            deadline = time.monotonic() + timeout
            while self.store.add(f"{KEY}status_read", 0) < readers and time.monotonic() < deadline:
                time.sleep(0.05)
            return int(code or 0)
        try:
            self.store.wait([f"{KEY}status"], timedelta(seconds=timeout))
            status = int(self.store.get(f"{KEY}status"))
            self.store.add(f"{KEY}status_read", 1)
            return status
        except Exception as exc:
            print(
                f"host {self.host_index}: host 0 published no result ({first_line(exc)})",
                file=sys.stderr,
                flush=True,
            )
            return 1

    def close(self) -> None:
        """Destroy the gloo group (never raises)."""
        if self.pg is None:
            return
        try:
            import torch.distributed as dist

            dist.destroy_process_group()
        except Exception:
            pass


# --- simulated hosts -------------------------------------------------------------------


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: seconds a host the launcher stops may take to exit on SIGTERM (it removes its
#: temporary checkpoint) before it is killed
STOP_GRACE_S = 5.0
#: seconds the launcher still waits for the other hosts once host 0 has ended, or for
#: host 0 to finish printing a report it had started when another host died
AFTER_HOST0_S = 30.0
#: how often the launcher looks at its hosts, seconds
POLL_S = 0.1
#: seconds the launcher gives its hosts, after Ctrl-C, to stop and leave their run records
#: (a host inside a compile notices when it returns) before it stops them
INTERRUPT_GRACE_S = 10.0


class _LauncherInterrupted(KeyboardInterrupt):
    """Ctrl-C reached the launcher."""


def launch_simulated_hosts(opts: RuntimeOptions, device_env: dict | None = None) -> int:
    """Start ``--simulate-hosts N`` processes on 127.0.0.1 acting as hosts 0..N-1 and
    watch them. Returns the exit status: host 0's, or 1 when a host died, 2 when a host
    found a usage error.

    Each runs ``python -m xla_lint.runtime`` with ``--coordinator 127.0.0.1:<port>
    --num-hosts N --host-index I --simulated-host`` and its own ``--cpu-devices`` CPU
    devices (``PJRT_DEVICE=CPU``), so every process is an independent SPMD world; the
    cross-host parts (rendezvous, gathering, consistency) go over gloo on loopback.
    Host 0 prints the report and writes ``--json``; the others print only their errors.
    ``--inject missing-host:H`` never starts host H.

    Every host writes its stage and step to a progress file
    (:mod:`xla_lint.runtime.progress`). The launcher polls the processes every
    :data:`POLL_S` s: a host whose process ends without having written its ``exit``
    stage died, and then the launcher stops the others (SIGTERM, SIGKILL after
    :data:`STOP_GRACE_S` s) and prints the report itself, naming the dead host, its
    signal or exit status and the last stage and step it reached (``device_env`` goes
    into that report). Waits at most ``--timeout`` + ``--job-timeout`` + 60 s in all.

    Ctrl-C (SIGINT to the launcher, or a host that ended interrupted): every host gets
    SIGINT and leaves its run record so far beside its progress file; the launcher prints
    the partial report from them (:func:`_conclude_interrupted`) and returns 130.
    """
    n = opts.simulate_hosts or 1
    port = free_loopback_port()
    missing = {inj.arg for inj in opts.inject if inj.kind == "missing-host"}
    env = {k: v for k, v in os.environ.items() if k not in HOST_LAYOUT_VARS}
    env["GLOO_SOCKET_IFNAME"] = env.get("GLOO_SOCKET_IFNAME_SIMULATED", "lo")
    workdir = tempfile.mkdtemp(prefix="xla-lint-hosts-")
    paths = {i: os.path.join(workdir, f"host-{i}.json") for i in range(n)}
    procs: dict[int, subprocess.Popen] = {}
    t0 = time.monotonic()

    def stop_children(signum, frame):  # SIGTERM to the launcher ends its hosts too
        stop_processes(list(procs.values()))
        raise SystemExit(128 + signum)

    def interrupt(signum, frame):  # Ctrl-C: the hosts leave their records, the launcher reports
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _forward_sigint(procs)
        raise _LauncherInterrupted

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, stop_children),
        signal.SIGINT: signal.signal(signal.SIGINT, interrupt),
    }
    try:
        for i in range(n):
            if i in missing:
                continue
            child = dataclasses.replace(
                opts,
                simulate_hosts=None,
                simulated=True,
                coordinator=f"127.0.0.1:{port}",
                num_hosts=n,
                host_index=i,
                json_path=opts.json_path if i == 0 else None,
                inject=tuple(j for j in opts.inject if j.kind != "missing-host"),
            )
            procs[i] = subprocess.Popen(
                [sys.executable, "-m", "xla_lint.runtime", *child.to_argv()],
                env={**env, PROGRESS_ENV: paths[i]},
            )
        watch = _watch(procs, paths, t0, opts.timeout + opts.job_timeout + 60)
        if watch.interrupted:  # a host was interrupted on its own: the others the same way
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _forward_sigint(procs)
            return _conclude_interrupted(opts, procs, paths, t0, port, device_env or {})
        return _conclude(opts, watch, procs, paths, t0, port, device_env or {})
    except _LauncherInterrupted:
        return _conclude_interrupted(opts, procs, paths, t0, port, device_env or {})
    finally:
        stop_processes(list(procs.values()))
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Watch:
    """What :func:`_watch` saw: exit codes by host, deaths, and why it stopped watching."""

    codes: dict = field(default_factory=dict)
    deaths: list = field(default_factory=list)
    usage_error: bool = False
    timed_out: bool = False
    interrupted: bool = False


def _watch(
    procs: dict[int, subprocess.Popen], paths: dict[int, str], t0: float, limit: float
) -> _Watch:
    """Poll the hosts until all ended, one died, one hit a usage error, host 0 ended
    :data:`AFTER_HOST0_S` s ago, or ``limit`` s passed."""
    w = _Watch()
    host0_ended = None
    while True:
        now = time.monotonic()
        for i, proc in procs.items():
            if i in w.codes or proc.poll() is None:
                continue
            w.codes[i] = proc.returncode
            progress = read_progress(paths[i])
            if not progress or progress.get("stage") != "exit":
                w.deaths.append(
                    death(i, how_it_ended(proc.returncode), progress, detected_s=round(now - t0, 3))
                )
            elif progress.get("status") == "interrupted":
                w.interrupted = True
            elif proc.returncode == 2:
                w.usage_error = True
        if 0 in w.codes and host0_ended is None:
            host0_ended = now
        if w.interrupted:
            return w
        if w.deaths or w.usage_error or len(w.codes) == len(procs):
            return w
        if (host0_ended is not None and now - host0_ended > AFTER_HOST0_S) or now - t0 > limit:
            w.timed_out = now - t0 > limit
            return w
        time.sleep(POLL_S)


def _conclude(
    opts: RuntimeOptions,
    w: _Watch,
    procs: dict[int, subprocess.Popen],
    paths: dict[int, str],
    t0: float,
    port: int,
    device_env: dict,
) -> int:
    """Stop what still runs, report what :func:`_watch` saw, return the exit status."""
    running = [i for i in procs if i not in w.codes]
    host0_reporting = 0 in running and (read_progress(paths[0]) or {}).get("stage") == "report"
    if w.deaths and host0_reporting:  # host 0 has every record and is printing: let it finish
        try:
            w.codes[0] = procs[0].wait(timeout=AFTER_HOST0_S)
        except subprocess.TimeoutExpired:
            pass
    stragglers = [i for i in procs if i not in w.codes]
    stopped = [{"host": i, "where": describe_progress(read_progress(paths[i]))} for i in stragglers]
    if w.timed_out or (not w.deaths and not w.usage_error):
        limit = (
            "--timeout + --job-timeout + 60 s"
            if w.timed_out
            else f"{AFTER_HOST0_S:g} s after host 0 ended"
        )
        for i in stragglers:
            w.deaths.append(
                death(
                    i,
                    f"did not finish within {limit} (stopped by the launcher)",
                    read_progress(paths[i]),
                    detected_s=round(time.monotonic() - t0, 3),
                )
            )
    stop_processes([procs[i] for i in stragglers])
    if w.usage_error and not w.deaths:
        return 2
    if 0 not in procs:
        print(
            "simulated host 0 was not started (--inject missing-host:0): no report",
            file=sys.stderr,
            flush=True,
        )
        return 1
    host0_reported = 0 in w.codes and (read_progress(paths[0]) or {}).get("stage") == "exit"
    if w.deaths and not host0_reported:
        return _launcher_report(opts, w.deaths, stopped, procs, paths, t0, port, device_env)
    for d in w.deaths:
        print(f"simulated {describe_death(d)}", file=sys.stderr, flush=True)
    if w.deaths:
        return 1
    code0 = w.codes[0]
    if code0 == 0 and any(c != 0 for c in w.codes.values()):
        bad = ", ".join(f"host {i}: {c}" for i, c in w.codes.items() if c != 0)
        print(f"simulated hosts exited non-zero ({bad})", file=sys.stderr, flush=True)
        return 1
    return code0


def _forward_sigint(procs: dict[int, subprocess.Popen]) -> None:
    """SIGINT to every host still running (from a terminal they got it already; a simulated
    host handles only the first, :func:`xla_lint.runtime.runner._interrupt_once`)."""
    for proc in procs.values():
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _conclude_interrupted(
    opts: RuntimeOptions,
    procs: dict[int, subprocess.Popen],
    paths: dict[int, str],
    t0: float,
    port: int,
    device_env: dict,
) -> int:
    """After Ctrl-C: wait (at most :data:`INTERRUPT_GRACE_S` s) for the hosts to stop, stop
    the rest, and print the partial report from the run records they left
    (``<progress file>.record.json``, xla_lint/runtime/runner.py): the checks the run
    reached on every host, the others SKIPped as not run. Returns 130."""
    from .report import report_interrupted

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: the wait is bounded anyway
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    stragglers = [i for i, p in procs.items() if p.poll() is None]
    stop_processes([procs[i] for i in stragglers])
    left = {i: _read_json(f"{paths[i]}.record.json") for i in procs}
    progress = {i: read_progress(paths[i]) or {} for i in procs}
    if 0 in procs and (
        left[0].get("reported")
        or (progress[0].get("stage") == "exit" and isinstance(progress[0].get("status"), int))
    ):
        return EXIT_INTERRUPTED  # host 0 had printed its report already
    n = opts.simulate_hosts or 1
    records = [left.get(i, {}).get("record") for i in range(n)]
    rendezvous = left.get(0, {}).get("rendezvous")
    if rendezvous:
        rendezvous = {**rendezvous, "source": "simulated"}
    else:
        rendezvous = {
            "ok": False,
            "expected": n,
            "joined": [],
            "missing": sorted(set(range(n)) - set(procs)),
            "duplicates": [],
            "elapsed_s": None,
            "timeout_s": opts.timeout,
            "source": "simulated",
            "coordinator": f"127.0.0.1:{port}",
            "hosts": {},
            "message": "interrupted (Ctrl-C) before the hosts joined",
        }
    places = [
        f"host {i} {left[i].get('interrupted') or describe_progress(progress[i])}"
        for i in sorted(procs)
    ]
    where = "on " + ", ".join(places)
    if stragglers:
        where += (
            f" (the launcher stopped host(s) {', '.join(map(str, stragglers))}, still running "
            f"{INTERRUPT_GRACE_S:g} s after Ctrl-C)"
        )
    interrupted = {"signal": "SIGINT", "where": where, "joined": bool(rendezvous.get("ok"))}
    return report_interrupted(
        opts.to_json(),
        rendezvous,
        records,
        device_env,
        time.monotonic() - t0,
        interrupted,
        opts.json_path,
        opts.quiet,
    )


def _launcher_report(
    opts: RuntimeOptions,
    deaths: list[dict],
    stopped: list[dict],
    procs: dict[int, subprocess.Popen],
    paths: dict[int, str],
    t0: float,
    port: int,
    device_env: dict,
) -> int:
    """Host 0 cannot report (it died or was stopped): the launcher prints the report."""
    from .report import report_lost_hosts

    n = opts.simulate_hosts or 1
    dead = {d["host"] for d in deaths}
    rendezvous = {
        "ok": False,
        "expected": n,
        "missing": sorted(set(range(n)) - set(procs)),
        "duplicates": [],
        "joined": sorted(
            i
            for i in procs
            if (read_progress(paths[i]) or {}).get("stage") not in (None, *BEFORE_JOINING)
        ),
        "elapsed_s": None,
        "timeout_s": opts.timeout,
        "source": "simulated",
        "coordinator": f"127.0.0.1:{port}",
        "hosts": {},
        "stopped": stopped,
    }
    note = "; ".join(
        f"the launcher stopped host {x['host']}, which was {x['where']}"
        for x in stopped
        if x["host"] not in dead
    )
    return report_lost_hosts(
        opts.to_json(),
        rendezvous,
        deaths,
        device_env,
        time.monotonic() - t0,
        opts.json_path,
        opts.quiet,
        note=note,
    )


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every process still running, SIGKILL those still there after
    :data:`STOP_GRACE_S` s; returns once all have ended (bounded)."""
    alive = [p for p in procs if p.poll() is None]
    for proc in alive:
        proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in alive:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
