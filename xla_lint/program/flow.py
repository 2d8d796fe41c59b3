"""Device loaders across the program: every file's value flow joined and closed (:class:`LoaderFlows`).

Each file records where values that may be torch_xla device loaders go (its
:attr:`~xla_lint.program.facts.FileFacts.flows`: the sources of each call slot and return, keys
described in :mod:`xla_lint.analysis.loaders`). Joined here, a slot is

- a *loader* when some file passes a loader made there to it, or a value that is one: a
  parameter of a function some caller gives a loader, what a function that returns one returns
  (``def get_loader(): return pl.MpDeviceLoader(...)`` in ``data.py``, its result passed to
  ``loop.run_epoch`` in ``train.py``), transitively;
- *unknown* when a value the program cannot follow reaches it: ``f(*args)``, or a parameter of a
  function that no linted file calls or passes by name (its callers are elsewhere).

A finding that holds only if a value is not a loader (XLA203 on a loop over a parameter) names
that value's keys (:attr:`~xla_lint.diagnostics.Diagnostic.unless`); it is dropped when one of
them may be a loader: a loader, or unknown in a program that makes a device loader somewhere.
A call names its callee as written through imports (``loop.run_epoch``) or, for a method, by
attribute (``*.fit``); a name that is no function of the linted files (a package re-exporting
it) is matched to the functions of that last name. Building costs O(records); each query
O(keys).

Steps across the program (:meth:`LoaderFlows.in_step`): the functions some loop whose iterations
end a step calls, directly or through the functions they call (``body:`` records), in any file.
A call of a value is followed back to the functions it may be (``fn:`` sources along the value
flow): ``train = train_fns.GAN_training_function(...)`` in ``train.py`` and ``metrics = train(x,
y)`` in a loop over ``per_device_loader(device)`` run the closure ``train`` that
``GAN_training_function`` returns, one call per batch. A finding that holds only if its function
runs outside such a loop names ``stepped:F`` (any step loop) or ``batched:F`` (a loop over a
device loader: one call per batch) in its ``unless``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from .facts import FileFacts

LOADER = "loader"  # the source marker of xla_lint.analysis.loaders.LOADER
UNKNOWN = "?"  # xla_lint.analysis.loaders.UNKNOWN
RETURN = "ret:"
FUNCTION = "fn:"  # xla_lint.analysis.loaders.FUNCTION
RUN = "run:"  # what a step loop calls (xla_lint.analysis.loops.LoopFacts.step_records)
RUN_SYNC = "run:sync"
RUN_BATCH = "run:batch"
BODY = "body:"
STEPPED = "stepped:"  # an `unless` key: the function runs in a loop whose iterations end a step
BATCHED = "batched:"  # ... in a loop over a device loader (each iteration one batch)


def _last(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def _split_param(key: str) -> tuple[str, str, str] | None:
    """``("loop.run_epoch", "2", "loader")`` for ``loop.run_epoch#2:loader``, else None."""
    if key.startswith(RETURN):
        return None
    function, sep, rest = key.rpartition("#")
    if not sep or ":" not in rest:
        return None
    position, _, name = rest.partition(":")
    return function, position, name


class LoaderFlows:
    """The joined flow of ``files``; ``named``: path -> the bare names that file calls or passes
    (:attr:`FileFacts.references`, or read from the bytes of a file that was not parsed).

    A function's callers are known when a file whose calls are recorded calls or passes it
    (:attr:`FileFacts.flow_calls`, resolved as a call is; a method ``*.fit`` by its name in such
    a file). A parameter is unknown when no such caller exists, or when a file whose calls are
    not recorded (it does not import torch_xla) names the function: what it passes is not seen."""

    def __init__(self, files: Mapping[str, FileFacts], named: Mapping[str, set[str]]) -> None:
        self._named_known: set[str] = set()  # bare names from files whose calls are recorded
        self._named_unknown: set[str] = set()  # ... and from the others
        for path, f in files.items():
            names = named.get(path, f.references)
            if f.flow_calls is None:
                self._named_unknown |= names
            else:
                self._named_known |= names
        self.defined: set[str] = set()
        for f in files.values():
            self.defined |= f.flow_functions
        self._by_last: dict[str, set[str]] = {}
        for key in self.defined:
            self._by_last.setdefault(_last(key), set()).add(key)
        self._called_functions: set[str] = set()
        for f in files.values():
            for key in f.flow_calls or ():
                self._called_functions |= self.resolve(key)
        self._edges: dict[str, set[str]] = {}  # source node -> target nodes
        self._params: dict[str, set[str]] = {}  # function -> its parameter nodes seen as sources
        loader_seeds: set[str] = set()
        unknown_seeds: set[str] = set()
        # What step loops call (condition -> call targets) and what each function calls.
        self._runs: dict[str, set[str]] = {}
        self._bodies: dict[str, set[str]] = {}
        for f in files.values():
            for target, sources in f.flows.items():
                if target.startswith(RUN):
                    self._runs.setdefault(target, set()).update(sources)
                    continue
                if target.startswith(BODY):
                    self._bodies.setdefault(target[len(BODY) :], set()).update(sources)
                    continue
                for node in self._nodes(target):
                    for source in sources:
                        if source == LOADER:
                            loader_seeds.add(node)
                        elif source == UNKNOWN:
                            unknown_seeds.add(node)
                        else:
                            for s in self._nodes(source):
                                self._edges.setdefault(s, set()).add(node)
                                param = _split_param(s)
                                if param is not None:
                                    self._params.setdefault(param[0], set()).add(s)
        for function, params in self._params.items():
            if self._unknown_callers(function):
                unknown_seeds |= params
        self.loaders = self._close(loader_seeds)
        self.unknown = self._close(unknown_seeds)

    def resolve(self, function: str) -> set[str]:
        """The linted functions a call of ``function`` (as the caller names it) may run."""
        if function in self.defined:
            return {function}
        return self._by_last.get(_last(function)) or {function}

    def _nodes(self, key: str) -> set[str]:
        """``key`` with its function resolved (a parameter key is its function's own)."""
        if key.startswith(RETURN):
            return {RETURN + f for f in self.resolve(key[len(RETURN) :])}
        if _split_param(key) is not None:
            return {key}
        function, sep, slot = key.rpartition("#")
        if not sep:
            return {key}
        return {f"{f}#{slot}" for f in self.resolve(function)}

    def _unknown_callers(self, function: str) -> bool:
        """No file whose calls are recorded calls ``function`` (a method: names it), or a file
        whose calls are not recorded names it."""
        name = _last(function)
        if name in self._named_unknown:
            return True
        if function.startswith("*."):
            return name not in self._named_known
        return function not in self._called_functions

    def _close(self, seeds: set[str]) -> frozenset[str]:
        """Every node ``seeds`` reach: along the edges, and from a slot to the parameters it fills."""
        seen = set(seeds)
        work = list(seeds)
        while work:
            node = work.pop()
            following = set(self._edges.get(node, ()))
            if not node.startswith(RETURN) and _split_param(node) is None:
                function, _, slot = node.rpartition("#")
                for param in self._params.get(function, ()):
                    _, position, name = _split_param(param) or ("", "", "")
                    if slot in ("*", position, name):
                        following.add(param)
            for nxt in following:
                if nxt not in seen:
                    seen.add(nxt)
                    work.append(nxt)
        return frozenset(seen)

    # -- steps ------------------------------------------------------------------------
    @functools.cached_property
    def _reverse(self) -> dict[str, set[str]]:
        """The value flow's edges backwards: node -> the nodes it comes from."""
        out: dict[str, set[str]] = {}
        for source, targets in self._edges.items():
            for target in targets:
                out.setdefault(target, set()).add(source)
        return out

    def functions_of(self, target: str) -> set[str]:
        """The linted functions a call target (:meth:`LoaderFlow.targets`) may run: a function's
        key resolved as a call's; for a value (``ret:F``, a parameter, ``fn:F``), every function
        whose ``fn:`` source reaches it along the value flow (a parameter is filled by the slots
        of its function's calls)."""
        if target.startswith(FUNCTION):
            return self.resolve(target[len(FUNCTION) :])
        if not target.startswith(RETURN) and _split_param(target) is None:
            return self.resolve(target)
        found: set[str] = set()
        seen = set(self._nodes(target))
        work = list(seen)
        while work:
            node = work.pop()
            if node.startswith(FUNCTION):
                found |= self.resolve(node[len(FUNCTION) :])
                continue
            before = set(self._reverse.get(node, ()))
            param = _split_param(node)
            if param is not None:
                function, position, name = param
                before |= {f"{function}#{s}" for s in (position, name, "*") if s}
            for previous in before:
                if previous not in seen:
                    seen.add(previous)
                    work.append(previous)
        return found

    def _in_steps(self, batches_only: bool) -> frozenset[str]:
        seeds: set[str] = set()
        for condition, targets in self._runs.items():
            if condition == RUN_SYNC and batches_only:
                continue
            if condition.startswith(RUN_BATCH + "="):
                if not self.state(condition[len(RUN_BATCH) + 1 :])[0]:
                    continue  # a loop over a value no caller provably gives a device loader
            for target in targets:
                seeds |= self.functions_of(target)
        seen = set(seeds)
        work = list(seeds)
        while work:
            for target in self._bodies.get(work.pop(), ()):
                for function in self.functions_of(target):
                    if function not in seen:
                        seen.add(function)
                        work.append(function)
        return frozenset(seen)

    @functools.cached_property
    def stepped(self) -> frozenset[str]:
        """Functions that run inside an iteration of a loop whose iterations end a step (its body
        syncs, or it iterates a device loader), directly or through the functions they call."""
        return self._in_steps(False)

    @functools.cached_property
    def batched(self) -> frozenset[str]:
        """The subset that a loop over a device loader runs: once per batch."""
        return self._in_steps(True)

    def in_step(self, key: str) -> bool:
        """For a ``stepped:F``/``batched:F`` key: whether ``F`` runs inside such a loop (see
        :attr:`stepped`, :attr:`batched`); False for other keys."""
        if key.startswith(STEPPED):
            table, function = self.stepped, key[len(STEPPED) :]
        elif key.startswith(BATCHED):
            table, function = self.batched, key[len(BATCHED) :]
        else:
            return False
        return bool(self.resolve(function) & table) or function in table

    def state(self, key: str) -> tuple[bool, bool]:
        """(may be a loader, unknown) for a value's key (a parameter or a return)."""
        param = _split_param(key)
        if param is not None:
            function, position, name = param
            slots = {f"{function}#{s}" for s in (position, name, "*") if s}
            loader = key in self.loaders or bool(slots & self.loaders)
            unknown = (
                key in self.unknown or bool(slots & self.unknown) or self._unknown_callers(function)
            )
            return loader, unknown
        if key.startswith(RETURN):
            nodes = self._nodes(key)
            return bool(nodes & self.loaders), bool(nodes & self.unknown)
        return False, False

    def may_be_loader(self, keys: Iterable[str], program_makes_loader: bool) -> bool:
        """True when a value of ``keys`` may be a device loader: one is passed or returned to it,
        or (``program_makes_loader``: some file of the program makes one) it is unknown; or when
        a ``stepped:F``/``batched:F`` key holds (:meth:`in_step`): the finding's function runs
        inside a loop that ends a step on each iteration."""
        for key in keys:
            if key.startswith((STEPPED, BATCHED)):
                if self.in_step(key):
                    return True
                continue
            loader, unknown = self.state(key)
            if loader or (unknown and program_makes_loader):
                return True
        return False
