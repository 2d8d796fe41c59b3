"""Parsing and linting one piece of source: the part of the engine that needs LibCST.

:mod:`xla_lint.pipeline.run` imports this module only when a file has to be parsed (in the
worker processes, or for the first file that needs it), so runs that parse nothing
(every file answered from the result cache, or ruled out by the prefilter) never import
LibCST.
"""

from __future__ import annotations

import ast
import bisect
import functools
import itertools
import re
import threading
from dataclasses import replace

import libcst as cst
from libcst._nodes.internal import CodegenState  # what Module.code_for_node renders with

from . import timings
from .analysis.context import Dispatcher, FactsCollector, FileContext
from .analysis.loaders import LoaderFlow
from .analysis.loops import LoopFacts
from .analysis.names import LOCAL, BindingCollector, Scope
from .analysis.walk import silent_types, walk
from .config import Settings
from .diagnostics import Diagnostic, Edit, Fix
from .program.facts import FileFacts
from .program.modules import import_facts, module_of
from .results import FileResult, syntax_error
from .rule import Rule, SyntaxErrorRule
from .rules import all_rules
from .sources.blocks import CodeBlock
from .sources.docstrings import docstring_blocks
from .sources.documents import code_blocks
from .sources.notebooks import NotebookCell, NotPython
from .sources.prefilter import PREFILTER
from .sources.suppress import Suppressions, find_suppressions
from .sources.target import NOTEBOOK_SUFFIX, Target
from .sources.text import (
    SourceError,
    call_with_deep_stack,
    line_starts,
    mask_string_runs,
    python_syntax,
    split_lines,
)

_WHITESPACE = re.compile(r"\s+")


def _rules_for(settings: Settings, path: str) -> list[type[Rule]]:
    """The selected rules for ``path``, then ``settings.extra_rules`` (run whatever is selected)."""
    codes = settings.codes_for(path)
    return [
        r
        for r in all_rules()
        if r.code in codes and r is not SyntaxErrorRule and r.applies_to(settings.target_version)
    ] + list(settings.for_path(path).extra_rules)


def _syntax_error_position(text: str, exc: cst.ParserSyntaxError) -> tuple[str, int, int]:
    """Message, 1-based line and column of a syntax error.

    LibCST's native parser reports the token after the error, and its message and its
    position disagree; CPython's own parser, asked only on this error path, names the
    exact place (``def f(:`` -> line 1, column 7, "invalid syntax"). When CPython accepts
    what LibCST refused (newer syntax), LibCST's account is used.
    """
    import ast

    try:
        ast.parse(text)
    except SyntaxError as err:
        if err.lineno:
            return (err.msg or "invalid syntax"), err.lineno, max(1, err.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        pass
    message = (
        str(exc.message).strip().splitlines()[0] if str(exc.message).strip() else "syntax error"
    )
    return message, exc.raw_line, exc.raw_column + 1


def _skip_validation(self: cst.CSTNode) -> None:
    """A :class:`CSTNode`'s ``__post_init__`` while :func:`parse_module` runs: nothing."""


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)`` without LibCST's per-node validation.

    Every node LibCST's native parser builds runs ``CSTNode.__post_init__``, which validates
    the node (``libcst/_nodes/base.py``; whitespace nodes match a regular expression each): a
    sixth of the parse's time on torch_xla's own tree, spent re-checking what the parser has
    just produced from source it accepted (LibCST's own comment there says validation could
    be skipped when parsing a file). Nodes built after the parse (a fix's ``with_changes``)
    are validated as before. Raises what ``cst.parse_module`` raises.
    """
    global _parsing
    with _parse_lock:  # parses overlap in the editor server's threads: the last one restores
        if _parsing == 0:
            cst.CSTNode.__post_init__ = _skip_validation  # type: ignore[method-assign]
        _parsing += 1
    try:
        return cst.parse_module(text)
    finally:
        with _parse_lock:
            _parsing -= 1
            if _parsing == 0:
                cst.CSTNode.__post_init__ = _VALIDATE  # type: ignore[method-assign]


_VALIDATE = cst.CSTNode.__post_init__
_parse_lock = threading.Lock()
_parsing = 0  # parse_module calls running now (any thread)


LIBCST_LIMIT = "LibCST's parser cannot read this file, although Python compiles it"


def _parse_masked(text: str) -> tuple[cst.Module, ast.Module | None] | None:
    """LibCST's and CPython's parse of ``text`` with its long runs of adjacent string literals
    blanked (:func:`~xla_lint.sources.text.mask_string_runs`), when that is what LibCST could
    not read; None otherwise. Positions are those of ``text``."""
    masked = mask_string_runs(text)
    if masked is None:
        return None
    try:
        return parse_module(masked), python_syntax(masked)[0]
    except Exception:  # still not readable: the file stays unlinted, as reported
        return None


def parse_source(
    text: str, path: str, line_offset: int = 0, column_offset: int = 0
) -> tuple[cst.Module, ast.Module | None] | Diagnostic:
    """The LibCST module of ``text`` with CPython's (None when CPython refuses the text), or
    the XLA000 diagnostic saying why it cannot be parsed."""
    syntax, deep = python_syntax(
        text
    )  # LibCST's native parser would overflow the stack on deep input
    if deep is not None:
        return syntax_error(
            path, deep.message, deep.line + line_offset, deep.column + column_offset
        )
    try:
        return parse_module(text), syntax
    except cst.ParserSyntaxError as exc:
        message, line, column = _syntax_error_position(text, exc)
        if syntax is not None:  # Python compiles it: a limit of LibCST's parser, not an error
            message = f"{LIBCST_LIMIT} ({message}); nothing in it was linted"
        return syntax_error(path, message, line + line_offset, column + column_offset)
    except RecursionError:
        return syntax_error(path, "nesting too deep to parse", 1 + line_offset, 1 + column_offset)
    except Exception as exc:  # the native parser raises other errors on some inputs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return syntax_error(path, first, 1 + line_offset, 1 + column_offset)


def lint_text(
    text: str,
    path: str,
    rules: list[type[Rule]],
    *,
    target_version=(2, 9),
    module: str = "",
    is_package: bool = False,
    line_offset: int = 0,
    column_offset: int = 0,
    with_fixes: bool = True,
    group: str | None = None,
    globals_scope=None,
    tree: cst.Module | None = None,
    syntax: ast.Module | None = None,
    in_xla_program: bool = False,
    notebook: bool | None = None,
) -> tuple[list[Diagnostic], FileFacts | None]:
    """Lint one piece of Python source (``tree``: its parse, when the caller already has it,
    and ``syntax`` CPython's, which places the reported nodes: :mod:`xla_lint.analysis.positions`).

    Returns the diagnostics (positions moved by the offsets, ``requires`` still to be
    checked) and the source's facts; a source that does not parse yields one XLA000
    diagnostic and no facts. ``in_xla_program``: the source does not import torch_xla but an
    XLA program imports it (:attr:`FileContext.in_xla_program`). ``notebook``: the source runs
    in a notebook's kernel (:attr:`FileContext.notebook`); None: a ``.ipynb`` path says so.
    Never raises for bad input.
    """
    if tree is None:
        with timings.timed("parse"):
            parsed = parse_source(text, path, line_offset, column_offset)
        if isinstance(parsed, Diagnostic):
            masked = _parse_masked(text) if LIBCST_LIMIT in parsed.message else None
            if masked is None:
                return [parsed], None
            parsed, with_fixes = masked, False  # a fix computed from the masked text would lose it
        tree, syntax = parsed

    started = timings.clock() if timings.ENABLED else 0.0
    ctx = FileContext(
        tree,
        module,
        is_package,
        target_version,
        globals_scope,
        notebook=path.lower().endswith(NOTEBOOK_SUFFIX) if notebook is None else notebook,
        in_xla_program=in_xla_program,
    )
    facts = FactsCollector(ctx, module)
    facts.facts.group = group
    instances = [rule(ctx) for rule in rules]
    try:
        # walk(): LibCST's visit order, without rebuilding every node (5-10x faster than tree.visit)
        dispatcher = Dispatcher(ctx, [facts, *instances])
        in_facts = _time_facts(dispatcher, facts, started) if timings.ENABLED else None
        walk(
            tree,
            dispatcher,
            silent_types(frozenset(dispatcher._visit) | frozenset(dispatcher._leave)),
        )
        if in_facts is not None:
            walked = timings.clock() - in_facts[1]
            timings.add("facts", in_facts[0])
            timings.add("rules", walked - in_facts[0])
        if ctx.imports_torch_xla:
            flow_started = timings.clock() if timings.ENABLED else 0.0
            record_flow(ctx, facts.facts)
            if timings.ENABLED:
                timings.add("facts", timings.clock() - flow_started, calls=0)
    except RecursionError:
        return [
            syntax_error(path, "nesting too deep to analyse", 1 + line_offset, 1 + column_offset)
        ], None

    if not ctx.reports:
        return [], facts.facts
    fixes_started = timings.clock() if timings.ENABLED else 0.0
    # Imported here: libcst.metadata costs ~70 ms to import, and most files have no report.
    from .analysis.positions import locate
    from .analysis.reach import ImportReach

    wanted = [(rep.node, rep.ancestors) for rep in ctx.reports]
    if with_fixes:
        wanted += [
            (r.node, rep.ancestors)
            for rep in ctx.reports
            if rep.fix is not None
            for r in rep.fix.replacements
        ]
    if syntax is None:
        syntax = python_syntax(text)[0]
    positions = locate(tree, syntax, wanted)

    def place(node: cst.CSTNode) -> tuple[int, int, int, int]:
        r = positions[node]
        return (
            r.start.line + line_offset,
            r.start.column + 1 + column_offset,
            r.end.line + line_offset,
            r.end.column + 1 + column_offset,
        )

    starts: list[int] = []

    def holds(node: cst.CSTNode) -> bool:
        """The text at ``node``'s position is ``node``'s own code, whitespace aside (LibCST's code
        of a node omits the block indentation of its continuation lines) and without the
        node's own parentheses (outside its position), so an edit there replaces what the
        rule saw."""
        if not starts:
            starts.extend(line_starts(split_lines(text)))
        r = positions[node]
        if r.end.line >= len(starts):
            return False
        here = text[
            starts[r.start.line - 1] + r.start.column : starts[r.end.line - 1] + r.end.column
        ]
        return _WHITESPACE.sub("", here) == _WHITESPACE.sub(
            "", tree.code_for_node(_without_parens(node))
        )

    out = []
    reach: ImportReach | None = None
    for rep in ctx.reports:
        line, col, end_line, end_col = place(rep.node)
        needs: tuple[str, ...] = ()
        if (rep.requires or rep.stable_requires) and syntax is not None:
            if reach is None:
                reach = ImportReach(syntax, text)
            needs = reach.of(line - line_offset)
        fix = None
        if (
            rep.fix is not None
            and with_fixes
            and all(holds(repl.node) for repl in rep.fix.replacements)
        ):
            edits = []
            for repl in rep.fix.replacements:
                a, b, c, d = place(repl.node)
                new = repl.new
                if not isinstance(new, str) and getattr(repl.node, "lpar", None):
                    # The replaced node's parentheses lie outside its position and stay in the
                    # file; the new node (made with with_changes) still carries them.
                    new = _without_parens(new)
                if isinstance(new, str):
                    content = new
                else:
                    inside = (a, b) >= (line, col) and (c, d) <= (end_line, end_col)
                    content = _code_in_place(tree, new, repl.node, rep.ancestors, inside)
                edits.append(Edit(a, b, c, d, content))
            fix = Fix(rep.fix.description, tuple(edits), rep.fix.safe, tuple(rep.fix.add_imports))
        out.append(
            Diagnostic(
                rep.rule.code,
                rep.rule.name,
                rep.message,
                path,
                line,
                col,
                end_line,
                end_col,
                rep.severity or rep.rule.severity,
                fix,
                rep.requires,
                option=rep.option,
                unless=rep.unless,
                stable_requires=rep.stable_requires,
                runs_in=rep.runs_in,
                reach=needs,
            )
        )
    if timings.ENABLED:
        timings.add("fixes", timings.clock() - fixes_started)
    return out, facts.facts


def _time_facts(dispatcher: Dispatcher, facts: FactsCollector, started: float) -> list[float]:
    """With timings on: count the model built so far (from ``started``) and every callback of the
    facts collector to the ``facts`` stage, the rest of the traversal to ``rules``. Returns
    ``[seconds in the facts collector, when the walk starts]``, which the callbacks update."""
    clock = timings.clock
    timings.add("facts", clock() - started, calls=0)
    spent = [0.0, clock()]

    def timed(callback):
        def run(node):
            start = clock()
            try:
                return callback(node)
            finally:
                spent[0] += clock() - start

        return run

    for table in (dispatcher._visit, dispatcher._leave):
        for callbacks in table.values():
            callbacks[:] = [
                timed(c) if getattr(c, "__self__", None) is facts else c for c in callbacks
            ]
    spent[1] = clock()
    return spent


def record_flow(ctx: FileContext, facts: FileFacts) -> None:
    """Put the file's device-loader value flow (:class:`~xla_lint.analysis.loaders.LoaderFlow`)
    and what its step loops and functions call (:meth:`LoopFacts.step_records`) in its facts, for
    the program model to join (:mod:`xla_lint.program.flow`)."""
    flow = LoaderFlow.of(ctx)
    steps = ctx.memo(LoopFacts, lambda: LoopFacts(ctx)).step_records()
    facts.flows = {**flow.records(), **steps}
    facts.flow_functions = flow.defined
    facts.flow_calls = flow.called()
    facts.makes_device_loader = flow.makes_loader


def lint_decoded(
    target: Target,
    settings: Settings,
    text: str,
    parsed: tuple[cst.Module, ast.Module | None] | None = None,
    *,
    prefiltered: bool = False,
) -> FileResult:
    """Lint decoded source text (see :func:`xla_lint.pipeline.run.lint_file`); never raises for bad input.

    ``parsed``: LibCST's module of ``text`` and CPython's (or None), when the caller has
    parsed it already (the language server parses again only around an edit).
    ``prefiltered``: the caller found the prefilter's words in ``text`` already.

    An error inside the linter costs the file (an XLA000 naming it), not the run. That
    includes LibCST's native parser panicking: pyo3 raises ``PanicException``, which derives
    from ``BaseException``; only interrupts and exits are let through.
    """
    return _guarded(target, settings, text, False, parsed, prefiltered)


def lint_in_xla_program(target: Target, settings: Settings, text: str) -> FileResult:
    """Lint a module that does not name torch_xla but that an XLA program imports (the
    engine's second pass, :func:`xla_lint.pipeline.run.lint_reached`), with ``settings``' rules."""
    return _guarded(target, settings, text, True)


def _guarded(
    target: Target,
    settings: Settings,
    text: str,
    in_xla_program: bool,
    parsed: tuple[cst.Module, ast.Module | None] | None = None,
    prefiltered: bool = False,
) -> FileResult:
    """:func:`_lint_decoded_here` in a thread with a deep stack (LibCST recurses once or more
    per nesting level); a bug of ours, or a parser panic, costs the file, not the run."""
    settings = settings.for_path(target.path)  # the file's nearest configuration
    try:
        return call_with_deep_stack(
            _lint_decoded_here, target, settings, text, in_xla_program, parsed, prefiltered
        )
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:
        result = FileResult(target.path)
        result.diagnostics.append(
            syntax_error(
                target.path,
                f"xla-lint internal error, file skipped (please report): {type(exc).__name__}: {exc}",
                1,
                1,
            )
        )
        return result


def _lint_decoded_here(
    target: Target,
    settings: Settings,
    text: str,
    in_xla_program: bool = False,
    parsed: tuple[cst.Module, ast.Module | None] | None = None,
    prefiltered: bool = False,
) -> FileResult:
    path = target.path
    result = FileResult(path)
    rules = _rules_for(settings, path)
    if target.kind == "doc":
        _lint_document(path, text, rules, settings, result, prefiltered)
        return result
    if not in_xla_program and not prefiltered and not PREFILTER.search(text):
        result.skipped_reason = "no torch_xla"
        facts = import_facts(path, text.encode("utf-8", "replace"))
        if facts is not None:
            result.facts.append(facts)
        return result
    module, is_package = module_of(path)
    diags, facts = lint_text(
        text,
        path,
        rules,
        target_version=settings.target_version,
        module=module,
        is_package=is_package,
        in_xla_program=in_xla_program,
        tree=parsed[0] if parsed is not None else None,
        syntax=parsed[1] if parsed is not None else None,
    )
    result.diagnostics = diags
    if settings.docs and facts is not None:  # `>>>` examples in docstrings (xla_lint/linter.py)
        result.diagnostics = diags + lint_docstrings(
            text,
            path,
            rules,
            target_version=settings.target_version,
            module=module,
            is_package=is_package,
        )
    if facts is not None:
        result.facts.append(facts)
        result.parsed = True
        result.suppressions = find_suppressions(text)
    return result


def _skipped_block(d: Diagnostic) -> str:
    """The ``--verbose`` note for a documentation block skipped because of ``d`` (its XLA000,
    placed in the document): ``README.md:5:7: Python block skipped, it does not parse: invalid syntax``."""
    reason = d.message.removeprefix("cannot parse: ")
    return f"{d.path}:{d.line}:{d.column}: Python block skipped, it does not parse: {reason}"


def _code_in_place(
    tree: cst.Module,
    new: cst.CSTNode,
    old: cst.CSTNode,
    ancestors: tuple[cst.CSTNode, ...],
    inside: bool,
) -> str:
    """The source of ``new``, which replaces ``old``, indented as the blocks around ``old`` are:
    a line that LibCST indents (a call's arguments on lines of their own) takes the indentation
    of every enclosing block, as it had in the file (``Module.code_for_node`` renders a node as
    if it were at the module's top level, so a multi-line call in a function lost its indent).
    ``ancestors`` is the reported node's stack (module first); ``inside``: ``old`` lies within
    the reported node (or is it). A replaced node that is neither inside it nor one of its
    ancestors is rendered at top level, as before."""
    if old in ancestors:
        blocks = ancestors[: ancestors.index(old)]
    elif inside:
        blocks = ancestors
    else:
        blocks = ()
    state = CodegenState(default_indent=tree.default_indent, default_newline=tree.default_newline)
    for node in blocks:
        if type(node) is cst.IndentedBlock:
            state.increase_indent(tree.default_indent if node.indent is None else node.indent)
    new._codegen(state)
    return "".join(state.tokens)


def _without_parens(node: cst.CSTNode) -> cst.CSTNode:
    """``node`` without its own parentheses (which lie outside its reported position)."""
    if getattr(node, "lpar", None) or getattr(node, "rpar", None):
        return node.with_changes(lpar=(), rpar=())
    return node


def _in_cell(cell: NotebookCell, d: Diagnostic) -> Diagnostic:
    """``d``, made on the cell's own lines, placed in the notebook file (:meth:`NotebookCell.place`),
    with the cell's number and the line and column in the cell as written."""
    lines = max(len(cell.shifts), 1)
    if d.end_line > lines:  # a span past the cell (the program of all cells) ends with it
        d = replace(d, end_line=lines, end_column=10**6)
    line, column = cell.place(d.line, d.column)
    end_line, end_column = cell.place(d.end_line, d.end_column)
    if (end_line, end_column) < (line, column):
        end_line, end_column = line, column
    return replace(
        d,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        cell=cell.number,
        cell_line=d.line,
        cell_column=cell.cell_column(d.line, d.column),
    )


def _cell_suppressions(
    cell: NotebookCell, diags: list[Diagnostic]
) -> tuple[list[Diagnostic], Suppressions]:
    """The ``noqa`` comments of ``cell`` (read in its source as written), placed in the file,
    and ``diags`` (on the cell's lines) without the ones a comment silences when the cell has
    no place line by line (then they are checked here, by the cell's lines)."""
    suppressions = find_suppressions(cell.source or cell.code)
    if not cell.rows:
        diags = [d for d in diags if not suppressions.suppresses(d.code, d.line)]
        return diags, Suppressions({}, suppressions.disabled_codes, suppressions.disable_all)
    first_line, _, start = cell.rows[0]
    return diags, suppressions.shift(first_line - 1, start)


def _lint_kernel(
    path: str,
    cells: list[NotebookCell],
    joined: tuple[cst.Module, ast.Module | None],
    rules: list[type[Rule]],
    settings: Settings,
    result: FileResult,
) -> None:
    """Lint ``cells``, the kernel's cells that parse, as the one module ``joined`` (their code
    in order), and place each diagnostic back in its cell."""
    program = "".join(cell.code for cell in cells)
    starts = list(itertools.accumulate((len(c.shifts) for c in cells), initial=1))[:-1]
    diags, facts = lint_text(
        program,
        path,
        rules,
        target_version=settings.target_version,
        with_fixes=False,
        group=path,
        tree=joined[0],
        syntax=joined[1],
    )
    by_cell: dict[int, list[Diagnostic]] = {}
    for d in diags:  # a program too deep to analyse: its XLA000 lands in its cell
        at = bisect.bisect_right(starts, d.line) - 1
        offset = starts[at] - 1
        by_cell.setdefault(at, []).append(
            replace(d, line=d.line - offset, end_line=d.end_line - offset)
        )
    for at, cell in enumerate(cells):
        kept, suppressions = _cell_suppressions(cell, by_cell.get(at, []))
        result.diagnostics.extend(_in_cell(cell, d) for d in kept)
        if facts is not None:
            result.suppressions.merge(suppressions)
    if facts is not None:
        result.facts.append(facts)
        result.parsed = True


def _lint_notebook(
    path: str,
    cells: list[NotebookCell],
    rules: list[type[Rule]],
    settings: Settings,
    result: FileResult,
) -> None:
    """Lint a notebook as its kernel runs it: one program, the cells in order in one process.

    Each cell is parsed alone: one that does not parse is XLA000 at its line (the kernel
    raises SyntaxError for it and runs none of it). The cells that parse are joined, in
    order, into one module and linted once, so a rule sees what earlier cells did (a runtime
    use in cell 1 before ``xmp.spawn`` in cell 4 is XLA018, as in a script); each diagnostic
    is placed back in its cell and in the file. A ``%%writefile x.py`` or ``%%python`` body
    runs outside the kernel: it is linted on its own (no names from the kernel, no program
    facts: its findings that need them are dropped), and skipped, named for ``--verbose``,
    when it does not parse.
    """
    notes: list[str] = []
    kernel: list[NotebookCell] = []
    for cell in cells:
        if cell.kind == "kernel" and python_syntax(cell.code)[0] is not None:
            kernel.append(cell)  # CPython parses it (15x faster than LibCST): the join will tell
            continue
        parsed = parse_source(cell.code, path)
        if isinstance(parsed, Diagnostic):
            if cell.kind == "kernel":
                result.diagnostics.append(_in_cell(cell, parsed))
            else:
                d = _in_cell(cell, parsed)
                reason = d.message.removeprefix("cannot parse: ")
                notes.append(
                    f"{d.path}:{d.line}:{d.column}: cell {cell.number} skipped (a script run "
                    f"outside the kernel), it does not parse: {reason}"
                )
            continue
        if cell.kind == "kernel":  # newer syntax than this Python's, that LibCST reads
            kernel.append(cell)
            continue
        diags, _ = lint_text(
            cell.code,
            path,
            rules,
            target_version=settings.target_version,
            with_fixes=False,
            tree=parsed[0],
            syntax=parsed[1],
            notebook=False,  # a script of its own, run outside the kernel
        )
        diags, suppressions = _cell_suppressions(
            cell, [d for d in diags if not d.requires and not d.stable_requires and not d.runs_in]
        )
        result.diagnostics.extend(_in_cell(cell, d) for d in diags)
        result.suppressions.merge(suppressions)
        result.parsed = True
    joined = parse_source("".join(cell.code for cell in kernel), path) if kernel else None
    if isinstance(joined, Diagnostic):  # a cell LibCST cannot read: find it, lint the others
        readable = []
        for cell in kernel:
            parsed = parse_source(cell.code, path)
            if isinstance(parsed, Diagnostic):
                result.diagnostics.append(_in_cell(cell, parsed))
            else:
                readable.append(cell)
        kernel = readable
        joined = parse_source("".join(cell.code for cell in kernel), path) if kernel else None
    if isinstance(joined, tuple):
        _lint_kernel(path, kernel, joined, rules, settings, result)
    result.diagnostics.sort(key=lambda d: d.sort_key)
    if notes:
        result.notes = notes
        if not result.parsed and not result.diagnostics:
            result.skipped_reason = "no Python code cell parses"


def _lint_document(
    path: str,
    text: str,
    rules: list[type[Rule]],
    settings: Settings,
    result: FileResult,
    prefiltered: bool = False,
) -> None:
    """Lint the Python code blocks of a Markdown/reStructuredText document, or the code cells of a
    notebook (:func:`_lint_notebook`).

    Each block is linted on its own (a page's examples are separate snippets: what one
    block does first is no reason to flag another), with its positions in the document,
    but names resolve across the page: an import in one block binds names in the others
    (each block's unbound names are looked up in the page's module-level bindings), and
    all blocks form one program for the program facts.

    A page's block that does not parse is skipped, not reported: in documentation it is
    more often an excerpt or pseudo-code than a bug (17 of the 167 Python blocks on the pages
    naming torch_xla in pytorch/xla, accelerate, diffusers and five other projects). Each one skipped is named
    in ``result.notes`` (``path:line:column: ...``), which ``--verbose`` prints. A page or notebook with no
    Python block, and a notebook whose kernel is not Python, is skipped
    (``result.skipped_reason``), never counted as a file that does not parse.
    """
    if not prefiltered and not PREFILTER.search(text):
        result.skipped_reason = "no torch_xla"
        return
    notebook = path.lower().endswith(NOTEBOOK_SUFFIX)
    try:
        blocks = code_blocks(path, text)
    except NotPython as exc:  # an R or Julia notebook: nothing to lint, nothing wrong
        result.skipped_reason = exc.reason
        return
    except SourceError as exc:  # a notebook that is not nbformat 4 JSON
        result.diagnostics.append(syntax_error(path, exc.message, exc.line, exc.column))
        return
    if not blocks:
        result.skipped_reason = "no Python code cells" if notebook else "no Python code blocks"
        return
    if notebook:
        _lint_notebook(
            path, [b for b in blocks if isinstance(b, NotebookCell)], rules, settings, result
        )
        return
    notes: list[str] = []
    page = Scope("module", None)
    parsed = []  # each block parsed once; the ones that do not parse are skipped
    for block in blocks:
        parsed_block = parse_source(block.code, path, block.line_offset, block.indent)
        if isinstance(parsed_block, Diagnostic):
            notes.append(_skipped_block(parsed_block))
            continue
        tree, syntax = parsed_block
        parsed.append((block, tree, syntax))
        collected = BindingCollector().collect(tree)
        for name, values in collected.bindings.items():
            page.bindings.setdefault(name, set()).update(values)
        page.star_imports.extend(collected.star_imports)
    for block, tree, syntax in parsed:
        diags, facts = lint_text(
            block.code,
            path,
            block_rules(text, block, rules),  # no XLA004 in `>>>` sessions
            target_version=settings.target_version,
            line_offset=block.line_offset,
            column_offset=block.indent,
            with_fixes=False,
            group=path,
            globals_scope=page,
            tree=tree,
            syntax=syntax,
        )
        if facts is None:  # parsed, but too deep to analyse
            notes.extend(_skipped_block(d) for d in diags if d.code == SyntaxErrorRule.code)
            continue
        suppressions = find_suppressions(block.code).shift(block.line_offset, block.indent)
        once = {r.code for r in rules if r.once_per_file}
        seen = {d.code for d in result.diagnostics if d.code in once}
        for d in diags:
            if (
                d.code in once
            ):  # the page is one program: its facts, and so the finding, are the same
                if d.code in seen:
                    continue
                seen.add(d.code)
            result.diagnostics.append(d)
        result.facts.append(facts)
        result.parsed = True
        result.suppressions.merge(suppressions)
    if notes:
        result.notes = notes  # printed by --verbose
        if not result.parsed and not result.diagnostics:
            result.skipped_reason = "no Python code block parses"


# -- docstring examples and ``>>>`` sessions ------------------------------------------
# ``>>>`` examples in the docstrings of a Python file, linted like code (with ``docs`` on).
#
# A docstring example runs, under doctest, with the module's globals: ``HybridMesh(...)``
# in ``torch_xla/distributed/spmd/xla_sharding.py``'s docstrings is that module's
# ``HybridMesh``. So each example block is linted with the file's module-level names as
# its enclosing scope (a name the file defines itself resolves to ``<module>.<name>``).
# An example is a fragment, not a program: findings that depend on program facts (XLA002
# "SPMD never enabled", ...) are dropped, since the fragment leaves out the set-up, and a
# docstring's facts never leak into the file's. An example (a ``>>>`` line and its ``...`` lines) that does not parse on its own, such as
# an output line written with a prompt, is blanked so the rest of the block is still linted;
# positions are those of the file. No fixes are offered inside docstrings.
#
# Docstring examples, and Markdown/reST code blocks written as an interactive session
# (``>>> `` lines, :func:`is_repl_block`), are read the way they run: typed at a prompt.
# Rules whose finding is about a program's output and not about torch_xla (a rule class
# with ``repl_quiet = True``, such as XLA004 ``print`` without ``flush``: the REPL shows
# every line at once) are not run on them (:func:`repl_rules`).


def _parses(code: str) -> bool:
    try:
        cst.parse_module(code)
    except Exception:
        return False
    return True


def _repair(block: CodeBlock, lines: list[str]) -> CodeBlock:
    """``block`` with every example that does not parse alone replaced by blank lines."""
    if _parses(block.code):
        return block
    code_lines = block.code.splitlines()
    examples: list[list[int]] = []
    for i in range(len(code_lines)):
        original = (
            lines[block.line_offset + i].lstrip() if block.line_offset + i < len(lines) else ""
        )
        if original.startswith(">>>") or not examples:
            examples.append([i])
        else:
            examples[-1].append(i)
    for example in examples:
        if not _parses("\n".join(code_lines[i] for i in example) + "\n"):
            for i in example:
                code_lines[i] = ""
    return CodeBlock("\n".join(code_lines) + "\n", block.line_offset, block.indent)


def module_globals(text: str, module: str, is_package: bool) -> Scope | None:
    """The file's module-level names as a scope examples can look names up in;
    names the file binds itself become ``<module>.<name>``. None if it does not parse."""
    try:
        tree = cst.parse_module(text)
    except Exception:
        return None
    root = BindingCollector(module, is_package).collect(tree)
    scope = Scope("module", None, star_imports=list(root.star_imports))
    for name, targets in root.bindings.items():
        for target in targets:
            if target == LOCAL:
                if module:
                    scope.bind(name, f"{module}.{name}")
            else:
                scope.bind(name, target)
    return scope


def repl_rules(rules: list[type[Rule]]) -> list[type[Rule]]:
    """``rules`` without those that say nothing about code typed at a ``>>>`` prompt
    (a rule class setting ``repl_quiet = True``)."""
    return [r for r in rules if not getattr(r, "repl_quiet", False)]


@functools.lru_cache(maxsize=8)
def _lines(text: str) -> tuple[str, ...]:
    return tuple(text.splitlines())


def is_repl_block(text: str, block: CodeBlock) -> bool:
    """True when ``block`` of the document ``text`` is written as an interactive session: its
    first line in the document starts (after indentation) with ``>>>`` (see
    :func:`xla_lint.sources.blocks.doctest_blocks`). A notebook cell's lines are its own, never a session."""
    if isinstance(block, NotebookCell):
        return False
    lines = _lines(text)
    return 0 <= block.line_offset < len(lines) and lines[block.line_offset].lstrip().startswith(
        ">>>"
    )


def block_rules(text: str, block: CodeBlock, rules: list[type[Rule]]) -> list[type[Rule]]:
    """The rules to run on ``block`` of the document ``text``: :func:`repl_rules` for a
    ``>>>`` session, else ``rules``."""
    return repl_rules(rules) if is_repl_block(text, block) else rules


def lint_docstrings(
    text: str,
    path: str,
    rules: list[type[Rule]],
    *,
    target_version=(2, 9),
    module: str = "",
    is_package: bool = False,
) -> list[Diagnostic]:
    """Diagnostics for the docstring examples of a Python file, positioned in the file.

    Findings that need program facts are dropped (an example is a fragment). Examples
    that do not parse are skipped, never reported.
    """
    scope = None
    out: list[Diagnostic] = []
    rules = repl_rules(rules)  # every docstring example is a `>>>` session
    for raw_blocks in docstring_blocks(text):
        lines = text.splitlines()
        blocks = [_repair(b, lines) for b in raw_blocks]
        if scope is None:
            scope = module_globals(text, module, is_package)
        for block in blocks:
            diags, _ = lint_text(
                block.code,
                path,
                rules,
                target_version=target_version,
                module=module,
                line_offset=block.line_offset,
                column_offset=block.indent,
                with_fixes=False,
                globals_scope=scope,
            )
            out.extend(
                d
                for d in diags
                if d.code != SyntaxErrorRule.code
                and not d.requires
                and not d.stable_requires
                and not d.runs_in
                and d.option is None
                and not d.unless
            )
    return out
