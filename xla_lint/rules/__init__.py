"""The rule catalogue: one module per family of rules, each rule a :class:`~xla_lint.rule.Rule` subclass.

Families: ``mesh`` (meshes, partition specs), ``spmd`` (SPMD mode, process identity,
rendezvous, launch), ``checkpoint`` (saving sharded state), ``output`` (logging),
``fsdp`` (FSDPv2), ``initialization`` (runtime initialisation: the compilation cache,
torchax), ``multiprocess`` (one process per device), ``recompilation``
(host syncs and graph breaks), ``scan`` (compiled loops: ``scan``, ``scan_layers``), ``deprecated`` (removed and deprecated APIs), ``torchtpu``
(XLA4xx, preview: programs already on Google's TorchTPU, each rule resting on the torch-tpu 0.2.0
wheel's source), ``meta`` (about xla-lint's own comments). A family that outgrows one module becomes a package with one
module per rule and a ``common`` module for what its rules share (``recompilation/``,
``multiprocess/``); an analysis that two or more families use lives in :mod:`xla_lint.analysis`
(``devices``, ``meshes``, ``loops``, ``seeds``). Adding a module here, or in a family's package,
is all it takes to register its rules.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from ..rule import Rule, SyntaxErrorRule


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by code. Raises RuntimeError on a duplicate code or name."""
    found: dict[str, type[Rule]] = {SyntaxErrorRule.code: SyntaxErrorRule}
    names = {SyntaxErrorRule.name}
    for info in sorted(pkgutil.walk_packages(__path__, f"{__name__}."), key=lambda i: i.name):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Rule)
                and obj.__module__ == module.__name__
                and getattr(obj, "code", None)
            ):
                if obj.code in found or obj.name in names:
                    raise RuntimeError(f"duplicate rule {obj.code} {obj.name}")
                found[obj.code] = obj
                names.add(obj.name)
    return tuple(sorted(found.values(), key=lambda r: r.code))


def find_rule(text: str) -> type[Rule] | None:
    """The rule whose code (``XLA201``, any case) or name (``host-sync-in-step``) is ``text``, or None."""
    text = text.strip()
    return rule_by_code(text) or next((r for r in all_rules() if r.name == text.lower()), None)


def rule_by_code(code: str) -> type[Rule] | None:
    """The rule with this exact code (case-insensitive), or None."""
    code = code.upper()
    for rule in all_rules():
        if rule.code == code:
            return rule
    return None
