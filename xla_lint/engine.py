"""Runs the stages for a set of files and returns diagnostics.

::

    discover ─► read + decode ─► prefilter ─► parse (LibCST) ─► one traversal: facts + rules
             ─► program facts (all files) ─► keep findings whose facts hold ─► suppressions ─► sort

A file's own work (:func:`lint_file`) depends on nothing but the file and the settings,
so it runs in parallel worker processes and can be cached; only the cheap program-facts
join and the filtering run after every file is done.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .config import Settings
from .context import Dispatcher, FactsCollector, FileContext
from .diagnostics import Diagnostic, Edit, Fix, Severity
from .discovery import Target
from .facts import FileFacts, ProgramFacts, compute_program_facts, module_name
from .rule import Rule, SyntaxErrorRule
from .rules import all_rules
from .source import SourceError, code_blocks, decode
from .suppress import Suppressions, find_suppressions

# A file none of whose text matches cannot concern any rule: every rule is about a
# torch_xla API or an XLA_* environment variable, and reports only in files that name one.
PREFILTER = re.compile(r"torch_xla|XLA_")


@dataclass
class FileResult:
    """What one file (or document) yields before program facts are applied.

    ``facts`` is None for files skipped by the prefilter; a document's code blocks
    each contribute facts (``block_facts``), joined as one program.
    """

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: list[FileFacts] = field(default_factory=list)
    suppressions: Suppressions = field(default_factory=Suppressions)
    parsed: bool = False
    skipped_reason: str | None = None


def _rules_for(settings: Settings, path: str) -> list[type[Rule]]:
    codes = settings.codes_for(path)
    return [r for r in all_rules() if r.code in codes and r is not SyntaxErrorRule
            and r.applies_to(settings.target_version)]


def syntax_error(path: str, message: str, line: int, column: int) -> Diagnostic:
    """The XLA000 diagnostic for a file that cannot be read or parsed."""
    return Diagnostic(SyntaxErrorRule.code, SyntaxErrorRule.name, f"cannot parse: {message}", path,
                      line, column, line, column + 1, Severity.ERROR)


def lint_text(text: str, path: str, rules: list[type[Rule]], *, target_version=(2, 9),
              module: str = "", is_package: bool = False, line_offset: int = 0,
              column_offset: int = 0, with_fixes: bool = True, group: str | None = None,
              ) -> tuple[list[Diagnostic], FileFacts | None]:
    """Lint one piece of Python source.

    Returns the diagnostics (positions moved by the offsets, ``requires`` still to be
    checked) and the source's facts; a source that does not parse yields one XLA000
    diagnostic and no facts. Never raises for bad input.
    """
    try:
        tree = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        message = str(exc.message).strip().splitlines()[0] if str(exc.message).strip() else "syntax error"
        return [syntax_error(path, message, exc.raw_line + line_offset, exc.raw_column + 1 + column_offset)], None
    except RecursionError:
        return [syntax_error(path, "nesting too deep to parse", 1 + line_offset, 1 + column_offset)], None
    except Exception as exc:  # the native parser raises other errors on some inputs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [syntax_error(path, first, 1 + line_offset, 1 + column_offset)], None

    ctx = FileContext(tree, module, is_package, target_version)
    facts = FactsCollector(ctx, module)
    facts.facts.group = group
    instances = [rule(ctx) for rule in rules]
    try:
        tree.visit(Dispatcher(ctx, [facts, *instances]))
    except RecursionError:
        return [syntax_error(path, "nesting too deep to analyse", 1 + line_offset, 1 + column_offset)], None

    if not ctx.reports:
        return [], facts.facts
    positions = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)

    def place(node: cst.CSTNode) -> tuple[int, int, int, int]:
        r = positions[node]
        return (r.start.line + line_offset, r.start.column + 1 + column_offset,
                r.end.line + line_offset, r.end.column + 1 + column_offset)

    out = []
    for rep in ctx.reports:
        line, col, end_line, end_col = place(rep.node)
        fix = None
        if rep.fix is not None and with_fixes:
            edits = []
            for repl in rep.fix.replacements:
                a, b, c, d = place(repl.node)
                content = repl.new if isinstance(repl.new, str) else tree.code_for_node(repl.new)
                edits.append(Edit(a, b, c, d, content))
            fix = Fix(rep.fix.description, tuple(edits), rep.fix.safe, tuple(rep.fix.add_imports))
        out.append(Diagnostic(rep.rule.code, rep.rule.name, rep.message, path, line, col, end_line,
                              end_col, rep.rule.severity, fix, rep.requires))
    return out, facts.facts


def lint_file(target: Target, settings: Settings, text: str | None = None) -> FileResult:
    """Read, decode and lint one file (``text`` given: lint that instead of the file's bytes).

    Never raises for bad input: unreadable or undecodable files give an XLA000 diagnostic.
    """
    path = target.path
    result = FileResult(path)
    if text is None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            result.diagnostics.append(syntax_error(path, f"cannot read file: {exc.strerror or exc}", 1, 1))
            return result
        try:
            text = decode(data)
        except SourceError as exc:
            result.diagnostics.append(syntax_error(path, exc.message, exc.line, exc.column))
            return result
    rules = _rules_for(settings, path)
    if target.kind == "doc":
        _lint_document(path, text, rules, settings, result)
        return result
    if not PREFILTER.search(text):
        result.skipped_reason = "no torch_xla"
        return result
    module, is_package = module_name(path)
    diags, facts = lint_text(text, path, rules, target_version=settings.target_version,
                             module=module, is_package=is_package)
    result.diagnostics = diags
    if facts is not None:
        result.facts.append(facts)
        result.parsed = True
        result.suppressions = find_suppressions(text)
    return result


def _lint_document(path: str, text: str, rules: list[type[Rule]], settings: Settings,
                   result: FileResult) -> None:
    """Lint the Python code blocks of a Markdown/reStructuredText document as one program.

    The blocks are laid out at their own lines of an otherwise blank module, so an import
    in one block resolves names in the next and positions are the document's. When that
    module does not parse (one block is pseudo-code), each block is linted on its own and
    blocks that do not parse are skipped: in documentation they are more often prose than bugs.
    """
    blocks = code_blocks(path, text)
    if not blocks or not PREFILTER.search(text):
        return
    lines = [""] * (max(b.line_offset + b.code.count("\n") for b in blocks) + 1)
    indent_of: dict[int, int] = {}
    for block in blocks:
        for i, line in enumerate(block.code.splitlines()):
            lines[block.line_offset + i] = line
            indent_of[block.line_offset + i + 1] = block.indent
    combined = "\n".join(lines) + "\n"
    diags, facts = lint_text(combined, path, rules, target_version=settings.target_version,
                             with_fixes=False, group=path)
    if facts is not None:
        result.diagnostics.extend(
            replace(d, column=d.column + indent_of.get(d.line, 0),
                    end_column=d.end_column + indent_of.get(d.end_line, 0)) for d in diags)
        result.facts.append(facts)
        result.parsed = True
        for block in blocks:
            result.suppressions.merge(find_suppressions(block.code).shift(block.line_offset, block.indent))
        return
    for block in blocks:
        diags, facts = lint_text(block.code, path, rules, target_version=settings.target_version,
                                 line_offset=block.line_offset, column_offset=block.indent,
                                 with_fixes=False, group=path)
        result.diagnostics.extend(d for d in diags if d.code != SyntaxErrorRule.code)
        if facts is not None:
            result.facts.append(facts)
            result.parsed = True
            result.suppressions.merge(find_suppressions(block.code).shift(block.line_offset, block.indent))


@dataclass
class RunResult:
    """A finished run: ``diagnostics`` kept after facts and suppressions, sorted by path and position."""

    diagnostics: list[Diagnostic]
    files: list[FileResult]
    program: ProgramFacts
    suppressed: int = 0


def _lint_one(args: tuple[Target, Settings]) -> FileResult:
    return lint_file(*args)


def lint_targets(targets: list[Target], settings: Settings, jobs: int = 1) -> list[FileResult]:
    """Lint every target, in ``jobs`` worker processes when there is enough work."""
    if jobs > 1 and len(targets) >= 8:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            chunk = max(1, len(targets) // (jobs * 8))
            return list(pool.map(_lint_one, [(t, settings) for t in targets], chunksize=chunk))
    return [lint_file(t, settings) for t in targets]


def program_facts(results: list[FileResult]) -> ProgramFacts:
    """Join the facts of every linted file (code blocks of one document are one program)."""
    table: dict[str, FileFacts] = {}
    for r in results:
        for i, f in enumerate(r.facts):
            table[r.path if len(r.facts) == 1 and f.group is None else f"{r.path}#{i}"] = f
    joined = compute_program_facts(table)
    # A document's blocks share one program; give the document the blocks' joined facts.
    for r in results:
        if len(r.facts) > 1 or (r.facts and r.facts[0].group is not None):
            keys = [f"{r.path}#{i}" for i in range(len(r.facts))]
            agg: dict[str, bool] = {}
            for k in keys:
                for name, value in joined.per_file.get(k, {}).items():
                    agg[name] = agg.get(name, False) or value
            joined.per_file[r.path] = agg
    return joined


_FACT_PHRASES = {
    "spmd": "SPMD is enabled in {}",
    "shards": "the program shards in {}",
    "multiprocess": "the program launches one process per device in {}",
}


def _attribution(program: ProgramFacts, path: str, requires: tuple[tuple[str, bool], ...]) -> str:
    """`` (SPMD is enabled in main.py)`` when a fact the finding needs comes from another file."""
    notes = []
    for name, value in requires:
        src = program.source_of(path, name) if value else None
        if src is not None and name in _FACT_PHRASES:
            notes.append(_FACT_PHRASES[name].format(src))
    return f" ({'; '.join(notes)})" if notes else ""


def finalize(results: list[FileResult], program: ProgramFacts,
             settings: Settings | None = None) -> tuple[list[Diagnostic], int]:
    """Keep the diagnostics whose facts hold and that no comment suppresses; sort them.

    With ``settings`` given, files for which XLA900 is enabled also get a diagnostic for
    each ``# noqa`` naming XLA codes that silence nothing (see :func:`unused_noqa`).
    """
    kept: list[Diagnostic] = []
    suppressed = 0
    for r in results:
        for d in r.diagnostics:
            if d.requires and not program.holds(r.path, d.requires):
                continue
            if r.suppressions.suppresses(d.code, d.line):
                suppressed += 1
                continue
            kept.append(replace(d, message=d.message + _attribution(program, r.path, d.requires), requires=()))
        if settings is not None and UNUSED_NOQA in settings.codes_for(r.path):
            for d in unused_noqa(r, settings):
                if r.suppressions.suppresses(d.code, d.line):
                    suppressed += 1
                else:
                    kept.append(d)
    kept.sort(key=lambda d: d.sort_key)
    return kept, suppressed


# ---- XLA900 unused-noqa: which `# noqa: XLA...` comments silenced nothing ----------------

UNUSED_NOQA = "XLA900"


def unused_noqa(result: FileResult, settings: Settings) -> list[Diagnostic]:
    """XLA900 diagnostics for ``result``'s ``# noqa: CODES`` comments naming XLA codes that silence nothing.

    A code counts as used when a diagnostic of that code was made on the comment's line,
    before the program-facts filter (the comment is needed when the file is linted with its
    whole program). Bare ``# noqa``, other tools' codes and ``XLA900`` itself are never
    reported. The fix (none for documents) removes the directive, or only its unused codes.
    """
    from .discovery import DOC_SUFFIXES
    from .rules import rule_by_code

    used = {(d.line, d.code) for d in result.diagnostics}
    enabled = {c for c in settings.codes_for(result.path)
               if (rule := rule_by_code(c)) is not None and rule.applies_to(settings.target_version)}
    is_doc = result.path.lower().endswith(DOC_SUFFIXES)
    out = []
    for comment in sorted(result.suppressions.noqa.values(), key=lambda c: c.line):
        if comment.codes is None:
            continue
        reasons: dict[str, list[str]] = {"unused": [], "non-enabled": [], "unknown": []}
        unused: set[str] = set()
        for code, _, _ in comment.code_spans:
            if not code.startswith("XLA") or code == UNUSED_NOQA or code in unused:
                continue
            if rule_by_code(code) is None:
                reasons["unknown"].append(code)
            elif code not in enabled:
                reasons["non-enabled"].append(code)
            elif (comment.line, code) not in used:
                reasons["unused"].append(code)
            else:
                continue
            unused.add(code)
        if not unused:
            continue
        detail = "; ".join(f"{kind}: {', '.join(codes)}" for kind, codes in reasons.items() if codes)
        fix = None
        if not is_doc:
            kept_codes = [c for c, _, _ in comment.code_spans if c not in unused]
            if kept_codes:
                first, last = comment.code_spans[0][1], comment.code_spans[-1][2]
                edit = Edit(comment.line, first, comment.line, last, ", ".join(dict.fromkeys(kept_codes)))
                description = f"remove unused {', '.join(sorted(unused))} from `noqa`"
            else:
                edit = Edit(comment.line, comment.remove_column, comment.line, comment.remove_end_column,
                            comment.replacement)
                description = "remove unused `noqa` directive"
            fix = Fix(description, (edit,))
        out.append(Diagnostic(UNUSED_NOQA, "unused-noqa", f"unused `noqa` directive ({detail})", result.path,
                              comment.line, comment.column, comment.line, comment.end_column,
                              Severity.WARNING, fix))
    return out


def run(targets: list[Target], settings: Settings, jobs: int = 1) -> RunResult:
    """Lint ``targets`` and return the diagnostics to report."""
    results = lint_targets(targets, settings, jobs)
    program = program_facts(results)
    diagnostics, suppressed = finalize(results, program, settings)
    return RunResult(diagnostics, results, program, suppressed)


def default_jobs() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
