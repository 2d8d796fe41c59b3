"""What the language server knows about one workspace folder, without any LSP in it.

A :class:`Project` holds the folder's settings (its ``[tool.xla-lint]``), the engine's result
for every file the folder's run would lint (:func:`xla_lint.pipeline.run.lint_targets`, answered
from the result cache when it can), and the program model built from them
(:func:`xla_lint.pipeline.run.program_facts`). An open document is linted from its unsaved text as
if it were its file, with the facts of the programs around it: ``train.py`` calling
``xr.use_spmd()`` and importing ``model.py`` makes ``model.py``'s SPMD findings hold while
``model.py`` is edited, as ``xla-lint - --stdin-filename model.py`` would (but with the
whole folder's facts).

The program model is rebuilt when a file's facts change on disk (:meth:`Project.refresh`,
on save), not on every edit: an edit that leaves the document's own facts as they are
reuses it, and one that changes them (``use_spmd()`` typed into ``train.py``) builds one
model with the buffer's facts in place of the file's, kept until the facts change again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import ConfigError, Settings, build_settings
from ..diagnostics import Diagnostic
from ..pipeline.discover import SKIPPED_FOLDERS, DiscoveryError, discover
from ..pipeline.run import (
    finalize,
    lint_bytes,
    lint_file,
    lint_reached,
    program_facts,
    too_large,
)
from ..pipeline.workspace import scan_folder
from ..program.facts import FileFacts
from ..program.model import Launch, ProgramModel
from ..results import FileResult
from ..sources.prefilter import PREFILTER
from ..sources.target import Target
from ..sources.text import call_with_deep_stack
from .incremental import Parsed, parsed, reparse

PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass
class Linted:
    """One lint of a document: the text and version it was made for, the engine's result for
    the text before program facts (``result``: its facts, its suppressions) and the
    diagnostics to show (``diagnostics``, after facts and ``# noqa``)."""

    version: int | None
    text: str
    result: FileResult | None  # None: the document is not linted (excluded, not Python)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def load_settings(folder: str) -> tuple[Settings, str | None]:
    """The settings for ``folder`` (the nearest ``[tool.xla-lint]`` at or above it) and None,
    or the default settings and the configuration error that made them necessary."""
    try:
        settings, error = build_settings(cwd=Path(folder)), None
    except ConfigError as exc:
        settings, error = build_settings(cwd=Path(folder), isolated=True), str(exc)
    if not os.path.isabs(settings.cache_dir):  # no pyproject: the cache goes in the folder
        settings = replace(settings, cache_dir=os.path.join(folder, settings.cache_dir))
    return settings, error


class Project:
    """A workspace folder (``root``), or with ``root`` None the folder of files opened
    outside every workspace folder (``folder``), each linted alone as a program of its own.

    ``error`` is the configuration error, if any (the defaults are used instead).
    Not thread-safe: the server calls it from one worker thread.
    """

    def __init__(self, root: str | None, folder: str, jobs: int = 1) -> None:
        self.root = root
        self.settings, self.error = load_settings(root or folder)
        self.results: dict[str, FileResult] = {}
        self.launches: list[Launch] = []
        self._edited: tuple[str, list[FileFacts], ProgramModel] | None = None
        self._parses: dict[str, Parsed] = {}  # open document -> the parse of its last text
        if root is not None:
            try:
                self.results, self.launches, self.settings = scan_folder(root, self.settings, jobs)
            except ConfigError as exc:  # a folder's own configuration is invalid: its error shown
                self.error = str(exc)
                self.results, self.launches, _ = scan_folder(
                    root, replace(self.settings, fixed=True), jobs
                )
        self.program = self._build(self.results)

    def _build(self, results: dict[str, FileResult], entry: str | None = None) -> ProgramModel:
        """The program model of ``results``; ``entry``: a file linted alone, run as a program."""
        if self.root is None:
            return program_facts(
                list(results.values()), self.settings, entries=(entry,) if entry else ()
            )
        return program_facts(list(results.values()), self.settings, self.launches)

    def lints(self, path: str) -> bool:
        """Whether ``path`` is linted: a Python file that ``xla-lint ROOT`` would lint (not
        excluded, not in a hidden, virtualenv or build folder), or one not yet on disk."""
        if not path.endswith(PYTHON_SUFFIXES):
            return False
        if self.root is None or path in self.results or not os.path.exists(path):
            return True
        rel = os.path.relpath(path, self.root)
        parts = Path(rel).parts[:-1]
        if any(p.startswith(".") or p in SKIPPED_FOLDERS for p in parts):
            return False
        try:
            return bool(discover([path], replace(self.settings.for_path(path), force_exclude=True)))
        except DiscoveryError:
            return True

    def lint(self, path: str, text: str) -> tuple[FileResult, list[Diagnostic]]:
        """Lint ``text`` as the file ``path``: the engine's result and the diagnostics to show."""
        result = self._lint_text(path, text)
        return result, self.finish(path, result, text)

    def forget(self, path: str) -> None:
        """Drop what was kept to lint the next edit of ``path`` quickly (its parse)."""
        self._parses.pop(path, None)

    def _lint_text(self, path: str, text: str) -> FileResult:
        """:func:`xla_lint.pipeline.run.lint_file` of ``text`` as ``path``, parsed again only around
        the edit when the last text of ``path`` was parsed (:mod:`.incremental`)."""
        target = Target(path, "python")
        data = text.encode("utf-8", "replace")
        if too_large(self.settings.for_path(path), data) or not PREFILTER.search(text):
            self._parses.pop(path, None)
            return lint_bytes(target, self.settings, data)
        try:
            return call_with_deep_stack(self._lint_parsed, path, text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # anything amiss: the engine's own way, which reports it
            self._parses.pop(path, None)
            return lint_file(target, self.settings, text=text)

    def _lint_parsed(self, path: str, text: str) -> FileResult:
        """Parse ``text`` (again around the edit, when it can) and lint the tree. A text that
        does not parse gets the engine's XLA000; the last parse is kept for the next edit."""
        from ..linter import lint_decoded, parse_source

        old = self._parses.get(path)
        parse = reparse(old, text) if old is not None else None
        syntax = None
        if parse is None:
            whole = parse_source(text, path)
            if isinstance(whole, Diagnostic):  # linter.lint_text reports it, or reads around it
                self._parses.pop(path, None)
                return lint_decoded(Target(path, "python"), self.settings, text)
            module, syntax = whole
            parse = parsed(text, module)
        else:
            module = parse.module
        if parse is None:
            self._parses.pop(path, None)
        else:
            self._parses[path] = parse
        return lint_decoded(Target(path, "python"), self.settings, text, (module, syntax))

    def finish(self, path: str, result: FileResult, text: str) -> list[Diagnostic]:
        """The diagnostics of ``result`` (``text`` linted as ``path``) under the programs'
        facts, after suppressions: :func:`xla_lint.pipeline.run.finalize`."""
        program = self.program_for(path, result)
        found = finalize([self._reached(result, program, text)], program, self.settings)[0]
        if self.root is None:
            return found
        # Other files named in messages (the program that sets a fact) as a run in the folder
        # names them: relative to it.
        prefix = self.root.rstrip(os.sep) + os.sep
        return [replace(d, message=d.message.replace(prefix, "")) for d in found]

    def program_for(self, path: str, result: FileResult) -> ProgramModel:
        """The program model with ``result``'s facts for ``path``: the project's own when they
        are the facts it has (the usual edit), else one built with them (kept for the next edit)."""
        if self.root is None:
            return self._build({path: result}, entry=path)
        if not result.parsed and result.skipped_reason is None:  # a syntax error: no facts to use
            return self.program
        known = self.results.get(path)
        if known is not None and known.facts == result.facts:
            return self.program
        if self._edited is not None and self._edited[:2] == (path, result.facts):
            return self._edited[2]
        program = self._build({**self.results, path: result})
        self._edited = (path, result.facts, program)
        return program

    def _reached(self, result: FileResult, program: ProgramModel, text: str) -> FileResult:
        """``result``, linted again by :data:`~xla_lint.pipeline.run.PROGRAM_RULES` when it was skipped
        (no torch_xla) and an XLA script program reaches it: :func:`xla_lint.pipeline.run.lint_reached`
        of the buffer's ``text``."""
        return lint_reached([result], program, self.settings, {result.path: text})[0]

    def refresh(self, path: str, result: FileResult | None = None) -> bool:
        """Take ``path``'s facts from ``result`` (its text as saved) or from the disk (deleted:
        forgotten); rebuild the program model when they changed. Returns whether they did."""
        if self.root is None or (path not in self.results and not self.lints(path)):
            return False
        old = self.results.get(path)
        if result is None and os.path.isfile(path):
            result = lint_file(Target(path, "python"), self.settings)
        if result is None:
            if old is None:
                return False
            del self.results[path]
        else:
            self.results[path] = result
            if old is not None and old.facts == result.facts:
                return False
        self.program = self._build(self.results)
        self._edited = None
        return True

    def contains(self, path: str) -> bool:
        """Whether ``path`` is under this project's folder."""
        return self.root is not None and (path + os.sep).startswith(
            self.root.rstrip(os.sep) + os.sep
        )
