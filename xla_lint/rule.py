"""What a rule is: a small class with its code, name, message, explanation and examples.

A rule visits LibCST nodes through ``visit_<Node>``/``leave_<Node>`` methods, asks the
:class:`~xla_lint.analysis.context.FileContext` what a name resolves to and which SPMD branch it
is in, and reports nodes. It never parses, never resolves imports itself and never
looks at other files: the engine answers those questions once for every rule.

Every rule carries ``valid`` and ``invalid`` examples; ``tests/test_rule_examples.py``
lints each of them and checks the lines reported and, where given, the fixed source.
``xla-lint rule``, ``docs/rules.md`` and the SARIF rule table are rendered from the
same fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from .diagnostics import OptionCheck, Severity
from .program.facts import Fact

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.context import FileContext


@dataclass
class Report:
    """A finding a rule kept (:meth:`Rule.report`), before it becomes a Diagnostic: the node, the
    message, the fix asked for, the program facts it rests on, and the traversal's stack when
    reported (module first)."""

    rule: type[Rule]
    node: cst.CSTNode
    message: str
    fix: PendingFix | None
    requires: tuple[tuple[Fact, bool], ...]
    ancestors: tuple[cst.CSTNode, ...] = ()
    severity: Severity | None = None  # None: the rule's own
    # Kept or dropped by what the launches pass (Diagnostic.option).
    option: OptionCheck | None = None
    unless: tuple[str, ...] = ()  # flow keys of values assumed not to be device loaders
    # More facts the finding needs outside preview mode (Diagnostic.stable_requires).
    stable_requires: tuple[tuple[Fact, bool], ...] = ()
    # The plain functions the node is in (Diagnostic.runs_in).
    runs_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag: ``lines`` are the 1-based lines reported (exactly),
    ``fixed`` the source after ``--fix`` (None: the example has no safe fix to check),
    ``unsafe_fixed`` the source after ``--fix --unsafe-fixes`` (None: nothing to check)."""

    code: str
    lines: tuple[int, ...]
    fixed: str | None = None
    files: tuple[tuple[str, str], ...] = ()  # other modules of the same program (name, source)
    unsafe_fixed: str | None = None


@dataclass(frozen=True)
class Valid:
    """An example the rule must not flag (a correct program or a false-positive trap)."""

    code: str
    files: tuple[tuple[str, str], ...] = ()


@dataclass
class Replacement:
    """Replace ``node`` by ``new`` (a node, or source text) when the fix is applied."""

    node: cst.CSTNode
    new: cst.CSTNode | str


@dataclass
class PendingFix:
    """A fix in terms of nodes; the engine turns it into text :class:`~xla_lint.diagnostics.Edit`s."""

    description: str
    replacements: Sequence[Replacement]
    safe: bool = True
    add_imports: tuple[tuple[str, str | None], ...] = ()


class Rule:
    """Base class of every rule.

    Subclasses set the class attributes below and define ``visit_<Node>`` /
    ``leave_<Node>`` methods taking the node. One instance is made per file.
    """

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, stable
    summary: ClassVar[str]  # one line for `xla-lint rule --all`
    message: ClassVar[str]  # default diagnostic message
    severity: ClassVar[Severity] = Severity.ERROR
    explanation: ClassVar[
        str
    ]  # Markdown: What it does / Why is this bad / Example / Use instead / References
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()
    default_enabled: ClassVar[bool] = True
    # A new rule whose precision on real code is not yet known: off unless preview mode is on
    # (`--preview`, config `preview = true`), as in Ruff. Promoted only with real-code figures.
    preview: ClassVar[bool] = False
    # Other rules the examples are linted with (XLA900's comments name codes that must run).
    examples_need: ClassVar[tuple[str, ...]] = ()
    # Reported at most once per file (for a document: once per page, not once per code block).
    once_per_file: ClassVar[bool] = False
    fixable: ClassVar[bool] = False
    # The lowest torch_xla version (major, minor) the rule applies to, and the first it stops applying to.
    since_version: ClassVar[tuple[int, int] | None] = None
    # Rules about removed or deprecated APIs: silent in code that does not run on the target
    # version (an old-version branch of a version guard, an ImportError fallback; xla_lint/analysis/guards.py).
    # "removed": also in a `try` body whose ImportError/AttributeError handler catches what the
    # removed API raises (the program works); True: deprecated APIs, which run there and are reported.
    version_guarded: ClassVar[bool | str] = False
    # The platform the rule is about: "xla" (torch_xla), or "torchtpu" (Google's TorchTPU,
    # xla_lint/rules/torchtpu.py), whose findings are dropped in the branches of dual-backend
    # code that run only with torch_xla or another platform
    # (xla_lint.analysis.torchtpu.runs_on_torchtpu, asked by those rules) rather than in those
    # that run without XLA.
    platform: ClassVar[str] = "xla"

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        fix: PendingFix | None = None,
        requires: Iterable[tuple[str, bool]] = (),
        severity: Severity | None = None,
        option: OptionCheck | None = None,
        unless: Iterable[str] = (),
        stable_requires: Iterable[tuple[str, bool]] = (),
        runs_in: Iterable[str] = (),
    ) -> bool:
        """Report ``node``; ``requires`` names program facts (``(Fact.SPMD, True)``) the finding depends on.

        ``unless``: value-flow keys (:mod:`xla_lint.analysis.loaders`) of values the finding
        assumes are not device loaders; the engine drops it when the program says one may be
        (:attr:`xla_lint.diagnostics.Diagnostic.unless`).

        ``stable_requires``: more facts the finding needs outside preview mode; where only
        ``requires`` hold, the finding is the rule's *preview behaviour*, reported only with
        ``--preview`` (as Ruff has preview behaviour of stable rules). ``runs_in``: the plain
        functions the node is in; the engine drops the finding when the tree never names one
        of them (:attr:`xla_lint.diagnostics.Diagnostic.runs_in`).

        ``severity`` overrides the rule's for this finding (XLA019: an error when the value is
        known to be wrong, a warning when it cannot be known). ``option``: the finding rests on
        what the program's launches pass for a command-line option
        (:class:`~xla_lint.diagnostics.OptionCheck`, checked in the join). The report policy is here, the
        same for every rule; the context only answers the questions. A finding is dropped
        (returns False) when:

        - the rule is ``version_guarded`` and the code does not run on the target version
          (:func:`xla_lint.analysis.guards.runs_on_target`);
        - the code runs only on another platform, or never (``if debug and False:``)
          (:func:`~xla_lint.analysis.guards.runs_on_xla`, :func:`~xla_lint.analysis.guards.in_dead_code`;
          a TorchTPU rule asks :func:`~xla_lint.analysis.torchtpu.runs_on_torchtpu` instead);
        - it requires SPMD on or off and an enclosing ``if xr.is_spmd():`` branch runs in the
          other mode (a branch that matches answers the fact, so it is no longer required).

        Raises ``ValueError`` for a fact that is not a :class:`~xla_lint.program.facts.Fact`.
        """
        ctx = self.ctx
        facts = tuple((Fact(name), value) for name, value in requires)
        stable = tuple((Fact(name), value) for name, value in stable_requires)
        if self.version_guarded and not ctx.runs_on_target(
            caught=self.version_guarded == "removed"
        ):
            return False
        if self.platform != "torchtpu" and (not ctx.runs_on_xla() or ctx.in_dead_code()):
            return False  # a TorchTPU rule asks where TorchTPU code runs itself (rules/torchtpu.py)
        branch = ctx.spmd_branch() if any(k == Fact.SPMD for k, _ in facts) else None
        if branch is not None:
            if any(k == Fact.SPMD and value != branch for k, value in facts):
                return False  # this branch runs in the other mode
            facts = tuple((k, value) for k, value in facts if k != Fact.SPMD)
        ctx.reports.append(
            Report(
                type(self),
                node,
                message or self.message,
                fix,
                facts,
                tuple(ctx.stack),
                severity,
                option,
                tuple(sorted(set(unless))),
                stable,
                tuple(runs_in),
            )
        )
        return True

    @classmethod
    def applies_to(cls, target_version: tuple[int, int]) -> bool:
        return cls.since_version is None or target_version >= cls.since_version


class SyntaxErrorRule(Rule):
    """Stands for files the parser rejects; the engine reports it, no visitor runs it."""

    code = "XLA000"
    name = "syntax-error"
    summary = "The file could not be read or parsed; it was skipped."
    message = "cannot parse"
    explanation = """\
## What it does
Reports a file that xla-lint could not read or parse (a syntax error, bytes that are not
valid in the file's encoding, a NUL byte, nesting deeper than the parser handles). The
file is skipped; the other files are linted as usual.

## Why is this bad
Nothing else can be checked in a file that does not parse, and Python will refuse it too.

## Example
```python
def train(:
    pass
```

## Use instead
Fix the syntax error the diagnostic points at.

## References
- https://docs.python.org/3/reference/lexical_analysis.html#encoding-declarations
"""
