"""The records every stage shares: a diagnostic, its fix, and the edits a fix is made of.

Positions are 1-based lines and 1-based columns counted in characters (not bytes),
as editors show them; ``end_line``/``end_column`` point one past the last character.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    """How bad a finding is.

    ``error``: the code raises, hangs or computes a wrong result.
    ``warning``: the code works but is slow, deprecated or fragile.
    """

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (1-based line and column, end exclusive) with ``content``."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_json(self) -> dict:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }

    @classmethod
    def from_json(cls, data: dict) -> Edit:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError/ValueError on a malformed object."""
        return cls(
            int(data["line"]),
            int(data["column"]),
            int(data["end_line"]),
            int(data["end_column"]),
            _text(data["content"]),
        )


@dataclass(frozen=True)
class Fix:
    """A change that resolves a diagnostic.

    ``edits`` are applied together or not at all; ``add_imports`` names modules
    (``"torch_xla"``) or ``(module, name)`` pairs that must be imported once the edits
    are in, added with LibCST's ``AddImportsVisitor``. ``safe`` fixes are applied by
    ``--fix``; unsafe ones are only shown.
    """

    description: str
    edits: tuple[Edit, ...]
    safe: bool = True
    add_imports: tuple[tuple[str, str | None], ...] = ()

    def to_json(self) -> dict:
        return {
            "description": self.description,
            "safe": self.safe,
            "edits": [e.to_json() for e in self.edits],
            "add_imports": [{"module": m, "name": n} for m, n in self.add_imports],
        }

    @classmethod
    def from_json(cls, data: dict) -> Fix:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError/ValueError on a malformed object."""
        return cls(
            _text(data["description"]),
            tuple(Edit.from_json(e) for e in data["edits"]),
            bool(data["safe"]),
            tuple(
                (_text(i["module"]), None if i["name"] is None else _text(i["name"]))
                for i in data["add_imports"]
            ),
        )


@dataclass(frozen=True)
class OptionCheck:
    """A finding that rests on the value a launch passes for a command-line option.

    ``option`` is the option as the program defines it (``--num_cores``), ``type`` its
    argparse ``type=`` (``"int"``, ``"float"``, ``None``: a string), ``good`` the values (their
    ``repr`` after the type conversion) that make the code right. The join
    (:func:`xla_lint.pipeline.run.finalize`) reads what each launch of the program passes
    (:attr:`xla_lint.program.model.Launch.argv`): when one passes a value outside ``good`` the
    finding is an error whose message is ``message`` formatted with ``value`` (as written),
    ``where`` (the launcher's line) and ``given`` (``--num_cores 8``); otherwise it stays as
    reported (``keep``) or is dropped (the code's own default is right).
    """

    option: str
    type: str | None
    good: tuple[str, ...]
    message: str
    keep: bool = False

    def to_json(self) -> dict:
        return {
            "option": self.option,
            "type": self.type,
            "good": list(self.good),
            "message": self.message,
            "keep": self.keep,
        }

    @classmethod
    def from_json(cls, data: dict) -> OptionCheck:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError/ValueError on a malformed object."""
        kind = data["type"]
        return cls(
            _text(data["option"]),
            None if kind is None else _text(kind),
            tuple(_text(g) for g in data["good"]),
            _text(data["message"]),
            bool(data["keep"]),
        )


@dataclass(frozen=True)
class Diagnostic:
    """One finding of one rule at one place of one file.

    ``requires`` holds the program facts (``("spmd", True)``, ``("multiprocess", True)``,
    ...) that must hold for the finding to be reported; the engine checks them once
    every file's facts are known (see :mod:`xla_lint.program.facts`), so a file's diagnostics
    can be computed, and cached, before the rest of the program is read.

    In a notebook, ``line``/``column`` are still those of the ``.ipynb`` file, and ``cell``
    (counted from 1 over all cells, markdown ones too), ``cell_line`` and ``cell_column``
    (1-based, in the cell's source as written) name the place in the cell; None elsewhere.
    ``launch`` (a finding in a shell script): the place of the command (``run.sh:3``) whose
    program ``requires`` is checked against, instead of the file's own programs. ``option``: a
    finding kept or dropped by what the program's launches pass for an option
    (:class:`OptionCheck`).
    ``unless`` holds value-flow keys (``("loop.run_epoch#2:loader",)``, ``("ret:data.get_loader",)``:
    see :mod:`xla_lint.analysis.loaders`) of values the finding assumes are not torch_xla device
    loaders; the engine drops it when the program's joined flow says one may be
    (:meth:`xla_lint.program.model.ProgramModel.may_be_loader`).
    ``stable_requires``: more facts the finding needs outside preview mode; where only
    ``requires`` hold, it is its rule's preview behaviour, reported only with ``--preview``.
    ``runs_in``: the plain functions (not methods, not decorated) the finding's code is in; the
    engine drops it when the tree names one of them nowhere but in its ``def``
    (:meth:`xla_lint.program.model.ProgramModel.never_named`): no program of the tree runs it.
    ``reach``: for a finding with ``requires``, the top-level definitions of its file one of which
    a module importing the file must name for the finding's line to run there
    (:class:`xla_lint.analysis.reach.ImportReach`; ``()``: it runs whenever the file is imported);
    a program whose importers of the file name none of them is no witness.
    """

    code: str
    name: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: Severity = Severity.ERROR
    fix: Fix | None = None
    requires: tuple[tuple[str, bool], ...] = ()
    cell: int | None = None
    cell_line: int | None = None
    cell_column: int | None = None
    launch: str = ""
    option: OptionCheck | None = None
    unless: tuple[str, ...] = ()
    stable_requires: tuple[tuple[str, bool], ...] = ()
    runs_in: tuple[str, ...] = ()
    reach: tuple[str, ...] = ()

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)

    def to_json(self) -> dict:
        """The stable JSON shape documented in docs/cli.md; ``cell``, ``cell_line`` and
        ``cell_column`` are added for a diagnostic in a notebook cell."""
        data = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": self.fix.to_json() if self.fix else None,
        }
        if self.cell is not None:
            data["cell"] = self.cell
            data["cell_line"] = self.cell_line
            data["cell_column"] = self.cell_column
        return data

    @classmethod
    def from_json(cls, data: dict) -> Diagnostic:
        """Inverse of :meth:`to_json`; a ``"requires"`` list of ``[fact, value]`` pairs, a
        ``"launch"`` place, an ``"option"`` check, an ``"unless"`` list of flow keys, a
        ``"stable_requires"`` list and ``"runs_in"`` and ``"reach"`` lists of names, when present (the result
        cache stores them), are read back too. Raises
        KeyError/TypeError/ValueError on a malformed object."""
        return cls(
            _text(data["code"]),
            _text(data["name"]),
            _text(data["message"]),
            _text(data["path"]),
            int(data["line"]),
            int(data["column"]),
            int(data["end_line"]),
            int(data["end_column"]),
            Severity(data["severity"]),
            None if data.get("fix") is None else Fix.from_json(data["fix"]),
            tuple((_text(k), bool(v)) for k, v in data.get("requires", ())),
            _number(data.get("cell")),
            _number(data.get("cell_line")),
            _number(data.get("cell_column")),
            _text(data.get("launch", "")),
            None if data.get("option") is None else OptionCheck.from_json(data["option"]),
            tuple(_text(k) for k in data.get("unless", ())),
            tuple((_text(k), bool(v)) for k, v in data.get("stable_requires", ())),
            tuple(_text(k) for k in data.get("runs_in", ())),
            tuple(_text(k) for k in data.get("reach", ())),
        )


def _number(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value
