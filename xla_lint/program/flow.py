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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .facts import FileFacts

LOADER = "loader"  # the source marker of xla_lint.analysis.loaders.LOADER
UNKNOWN = "?"  # xla_lint.analysis.loaders.UNKNOWN
RETURN = "ret:"


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
        for f in files.values():
            for target, sources in f.flows.items():
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
        or (``program_makes_loader``: some file of the program makes one) it is unknown."""
        for key in keys:
            loader, unknown = self.state(key)
            if loader or (unknown and program_makes_loader):
                return True
        return False
