"""Runs the stages for a set of files and returns diagnostics.

::

    discover ─► read + decode ─► prefilter ─► parse (LibCST) ─► one traversal: facts + rules
             ─► program facts (all files) ─► keep findings whose facts hold ─► suppressions ─► sort

A file's own work (:func:`lint_file`) depends on nothing but the file and the settings,
so it runs in parallel worker processes and can be cached; only the cheap program-facts
join and the filtering run after every file is done.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass, field, replace

import libcst as cst

from .config import Settings
from .context import Dispatcher, FactsCollector, FileContext
from .docstrings import lint_docstrings
from .diagnostics import Diagnostic, Edit, Fix, Severity
from .discovery import Target
from .facts import FileFacts, ProgramFacts, compute_program_facts
from .names import BindingCollector, Scope
from .rule import Rule, SyntaxErrorRule
from .rules import all_rules
from .source import SourceError, call_with_deep_stack, code_blocks, decode, python_syntax, read_source
from .suppress import Suppressions, find_suppressions
from .walk import silent_types, walk

# A file none of whose text matches cannot concern any rule: every rule is about a
# torch_xla API or an XLA_* environment variable, and reports only in files that name one.
# ``init_process_group``: a file calling ``init_process_group("xla")`` makes its program
# multi-process (a program fact) even when it does not name torch_xla itself.
PREFILTER = re.compile(r"torch_xla|XLA_|init_process_group")
# The same test on the raw bytes, before decoding: every encoding Python accepts for
# source (the coding cookie must be readable as ASCII) spells these words in ASCII.
PREFILTER_BYTES = (b"torch_xla", b"XLA_", b"init_process_group")


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


def _syntax_error_position(text: str, exc: "cst.ParserSyntaxError") -> tuple[str, int, int]:
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
    message = str(exc.message).strip().splitlines()[0] if str(exc.message).strip() else "syntax error"
    return message, exc.raw_line, exc.raw_column + 1


def parse_source(text: str, path: str, line_offset: int = 0, column_offset: int = 0
                 ) -> "tuple[cst.Module, ast.Module | None] | Diagnostic":
    """The LibCST module of ``text`` with CPython's (None when CPython refuses the text), or
    the XLA000 diagnostic saying why it cannot be parsed."""
    syntax, deep = python_syntax(text)  # LibCST's native parser would overflow the stack on deep input
    if deep is not None:
        return syntax_error(path, deep.message, deep.line + line_offset, deep.column + column_offset)
    try:
        return cst.parse_module(text), syntax
    except cst.ParserSyntaxError as exc:
        message, line, column = _syntax_error_position(text, exc)
        return syntax_error(path, message, line + line_offset, column + column_offset)
    except RecursionError:
        return syntax_error(path, "nesting too deep to parse", 1 + line_offset, 1 + column_offset)
    except Exception as exc:  # the native parser raises other errors on some inputs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return syntax_error(path, first, 1 + line_offset, 1 + column_offset)


def lint_text(text: str, path: str, rules: list[type[Rule]], *, target_version=(2, 9),
              module: str = "", is_package: bool = False, line_offset: int = 0,
              column_offset: int = 0, with_fixes: bool = True, group: str | None = None,
              globals_scope=None, tree: cst.Module | None = None, syntax: "ast.Module | None" = None,
              ) -> tuple[list[Diagnostic], FileFacts | None]:
    """Lint one piece of Python source (``tree``: its parse, when the caller already has it,
    and ``syntax`` CPython's, which places the reported nodes: :mod:`xla_lint.positions`).

    Returns the diagnostics (positions moved by the offsets, ``requires`` still to be
    checked) and the source's facts; a source that does not parse yields one XLA000
    diagnostic and no facts. Never raises for bad input.
    """
    if tree is None:
        parsed = parse_source(text, path, line_offset, column_offset)
        if isinstance(parsed, Diagnostic):
            return [parsed], None
        tree, syntax = parsed

    ctx = FileContext(tree, module, is_package, target_version, globals_scope)
    facts = FactsCollector(ctx, module)
    facts.facts.group = group
    instances = [rule(ctx) for rule in rules]
    try:
        # walk(): LibCST's visit order, without rebuilding every node (5-10x faster than tree.visit)
        dispatcher = Dispatcher(ctx, [facts, *instances])
        walk(tree, dispatcher, silent_types(frozenset(dispatcher._visit) | frozenset(dispatcher._leave)))
    except RecursionError:
        return [syntax_error(path, "nesting too deep to analyse", 1 + line_offset, 1 + column_offset)], None

    if not ctx.reports:
        return [], facts.facts
    # Imported here: libcst.metadata costs ~70 ms to import, and most files have no report.
    from .positions import locate

    wanted = [(rep.node, rep.ancestors) for rep in ctx.reports]
    if with_fixes:
        wanted += [(r.node, rep.ancestors) for rep in ctx.reports if rep.fix is not None
                   for r in rep.fix.replacements]
    if syntax is None:
        syntax = python_syntax(text)[0]
    positions = locate(tree, syntax, wanted)

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
    A Python file whose bytes name neither torch_xla nor an ``XLA_`` variable is not
    parsed (see :data:`PREFILTER`): it yields only the imports that tie it into programs.
    """
    if text is not None:
        return _lint_decoded(target, settings, text)
    try:
        data = read_source(target.path)
    except OSError as exc:
        result = FileResult(target.path)
        result.diagnostics.append(syntax_error(target.path, f"cannot read file: {exc.strerror or exc}", 1, 1))
        return result
    return lint_bytes(target, settings, data)


def needs_parse(data: bytes) -> bool:
    """True when the bytes name torch_xla, an ``XLA_`` variable or ``init_process_group``."""
    return any(word in data for word in PREFILTER_BYTES)


def lint_bytes(target: Target, settings: Settings, data: bytes) -> FileResult:
    """Lint a file given its bytes; see :func:`lint_file`."""
    if not needs_parse(data):
        result = FileResult(target.path, skipped_reason="no torch_xla")
        if target.kind == "python":
            facts = import_facts(target.path, data)
            if facts is not None:
                result.facts.append(facts)
        return result
    try:
        text = decode(data)
    except SourceError as exc:
        result = FileResult(target.path)
        result.diagnostics.append(syntax_error(target.path, exc.message, exc.line, exc.column))
        return result
    return _lint_decoded(target, settings, text)


def _lint_decoded(target: Target, settings: Settings, text: str) -> FileResult:
    # In a thread with a deep stack: LibCST recurses once or more per nesting level.
    try:
        return call_with_deep_stack(_lint_decoded_here, target, settings, text)
    except Exception as exc:  # a bug of ours must cost one file, not the run
        result = FileResult(target.path)
        result.diagnostics.append(syntax_error(
            target.path, f"xla-lint internal error, file skipped (please report): {type(exc).__name__}: {exc}", 1, 1))
        return result


def _lint_decoded_here(target: Target, settings: Settings, text: str) -> FileResult:
    path = target.path
    result = FileResult(path)
    rules = _rules_for(settings, path)
    if target.kind == "doc":
        _lint_document(path, text, rules, settings, result)
        return result
    if not PREFILTER.search(text):
        result.skipped_reason = "no torch_xla"
        facts = import_facts(path, text.encode("utf-8", "replace"))
        if facts is not None:
            result.facts.append(facts)
        return result
    module, is_package = module_of(path)
    diags, facts = lint_text(text, path, rules, target_version=settings.target_version,
                             module=module, is_package=is_package)
    result.diagnostics = diags
    if settings.docs and facts is not None:  # `>>>` examples in docstrings (xla_lint/docstrings.py)
        result.diagnostics = diags + lint_docstrings(text, path, rules, target_version=settings.target_version,
                                                     module=module, is_package=is_package)
    if facts is not None:
        result.facts.append(facts)
        result.parsed = True
        result.suppressions = find_suppressions(text)
    return result


@functools.lru_cache(maxsize=4096)
def _package_of(folder: str) -> tuple[str, ...]:
    """Dotted parts of the package ``folder`` is (empty when it has no ``__init__.py``)."""
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        return ()
    parent = os.path.dirname(folder)
    if parent == folder:
        return (os.path.basename(folder),)
    return (*_package_of(parent), os.path.basename(folder))


def module_of(path: str) -> tuple[str, bool]:
    """:func:`xla_lint.facts.module_name` with the folder walk memoised (one ``stat`` per folder)."""
    absolute = os.path.abspath(path)
    folder, name = os.path.split(absolute)
    is_package = name == "__init__.py"
    parts = _package_of(folder)
    if not is_package:
        parts = (*parts, name[:-3] if name.endswith(".py") else os.path.splitext(name)[0])
    return ".".join(parts), is_package


_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(?P<dots>\.*)[ \t]*(?P<base>[\w.]*)[ \t]+import[ \t]*(?P<names>\([^)]*\)|[^\n#;]*)"
    rb"|import[ \t]+(?P<modules>[^\n#;]*))", re.M)


def import_facts(path: str, data: bytes) -> FileFacts | None:
    """The facts of a file that is not parsed: its module name and the modules it imports, no fact set.

    Such a file may still tie a program together (``train.py`` imports the module that
    calls ``use_spmd()`` and the one that shards), so its imports are read with a
    line-based scan of ``import``/``from ... import`` statements: no parse, and an import
    written inside a string counts too (the facts are "may" facts). None when it imports nothing.
    """
    if b"import" not in data:
        return None
    module, is_package = module_of(path)
    found: set[str] = set()
    for m in _IMPORT.finditer(data):
        if m.group("modules") is not None:
            for item in m.group("modules").decode("utf-8", "replace").split(","):
                name = item.strip().split(" ")[0].rstrip("\\")
                if name:
                    found.add(name)
            continue
        level = len(m.group("dots"))
        base = m.group("base").decode("utf-8", "replace")
        if level:
            from .names import resolve_relative

            base = resolve_relative(module, is_package, level, base or None)
        if base:
            found.add(base)
        for item in m.group("names").decode("utf-8", "replace").strip("()\\ \t").split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name and name != "*" and name.isidentifier():
                found.add(f"{base}.{name}" if base else name)
    if not found:
        return None
    prefixes = {".".join(n.split(".")[:i + 1]) for n in found for i in range(n.count(".") + 1)}
    return FileFacts(module=module, imports=frozenset(p for p in prefixes if p))


def _lint_document(path: str, text: str, rules: list[type[Rule]], settings: Settings,
                   result: FileResult) -> None:
    """Lint the Python code blocks of a Markdown/reStructuredText document.

    Each block is linted on its own (a page's examples are separate snippets: what one
    block does first is no reason to flag another), with its positions in the document,
    but names resolve across the page: an import in one block binds names in the others
    (each block's unbound names are looked up in the page's module-level bindings), and
    all blocks form one program for the program facts. Blocks that do not parse are
    skipped: in documentation they are more often prose or pseudo-code than bugs.
    """
    blocks = code_blocks(path, text)
    if not blocks or not PREFILTER.search(text):
        return
    page = Scope("module", None)
    parsed = []  # each block parsed once; the ones that do not parse are skipped
    for block in blocks:
        parsed_block = parse_source(block.code, path)
        if isinstance(parsed_block, Diagnostic):
            continue
        tree, syntax = parsed_block
        parsed.append((block, tree, syntax))
        collected = BindingCollector().collect(tree)
        for name, values in collected.bindings.items():
            page.bindings.setdefault(name, set()).update(values)
        page.star_imports.extend(collected.star_imports)
    for block, tree, syntax in parsed:
        diags, facts = lint_text(block.code, path, rules, target_version=settings.target_version,
                                 line_offset=block.line_offset, column_offset=block.indent,
                                 with_fixes=False, group=path, globals_scope=page, tree=tree, syntax=syntax)
        once = {r.code for r in rules if r.once_per_file}
        seen = {d.code for d in result.diagnostics if d.code in once}
        for d in diags:
            if d.code == SyntaxErrorRule.code:
                continue
            if d.code in once:  # the page is one program: its facts, and so the finding, are the same
                if d.code in seen:
                    continue
                seen.add(d.code)
            result.diagnostics.append(d)
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


def result_to_json(result: FileResult) -> dict:
    """A :class:`FileResult` as JSON data (for the result cache); see :func:`result_from_json`."""
    return {
        "path": result.path,
        "diagnostics": [{**d.to_json(), "requires": [list(r) for r in d.requires]} for d in result.diagnostics],
        "facts": [f.to_json() for f in result.facts],
        "suppressions": result.suppressions.to_json(),
        "parsed": result.parsed,
        "skipped_reason": result.skipped_reason,
    }


def result_from_json(data: dict) -> FileResult:
    """Inverse of :func:`result_to_json`; raises KeyError/TypeError/ValueError on malformed data."""
    path = data["path"]
    reason = data["skipped_reason"]
    if not isinstance(path, str) or not (reason is None or isinstance(reason, str)):
        raise TypeError("malformed file result")
    return FileResult(path, [Diagnostic.from_json(d) for d in data["diagnostics"]],
                      [FileFacts.from_json(f) for f in data["facts"]],
                      Suppressions.from_json(data["suppressions"]), bool(data["parsed"]), reason)


# Parallel linting pays only when there is real parsing to share out: starting a worker
# costs ~20 ms (fork) and LibCST parses ~50-100 KB of source per second per core.
PARALLEL_MIN_BYTES = 48 * 1024
PARALLEL_MIN_FILES = 4

_worker_state: dict = {}


def _worker_init(settings: Settings, cache_dir: str | None) -> None:
    _worker_state["settings"] = settings
    _worker_state["cache"] = None
    if cache_dir is not None:
        from .cache import ResultCache

        _worker_state["cache"] = ResultCache(cache_dir, settings.fingerprint())


def _worker_lint(job: tuple[int, Target, bytes, str | None]) -> tuple[int, FileResult]:
    index, target, data, key = job
    result = lint_bytes(target, _worker_state["settings"], data)
    cache = _worker_state["cache"]
    if cache is not None and key is not None:
        cache.store(target.path, key, result)
    return index, result


def lint_targets(targets: list[Target], settings: Settings, jobs: int = 1,
                 cache_dir: str | None = None) -> list[FileResult]:
    """Lint every target; results in the order of ``targets``.

    Each file is read once. Files the prefilter rules out yield their imports only;
    the others are answered from the result cache in ``cache_dir`` (None: no cache,
    see :mod:`xla_lint.cache`) or linted, in up to ``jobs`` worker processes once there
    is enough source to parse (at least :data:`PARALLEL_MIN_FILES` files and
    :data:`PARALLEL_MIN_BYTES` bytes), else in this process. Files go to the workers
    as they are read, so reading the rest of the tree overlaps with linting.
    """
    cache = None
    if cache_dir is not None:
        from .cache import ResultCache

        cache = ResultCache(cache_dir, settings.fingerprint())
    results: list[FileResult | None] = [None] * len(targets)
    queued: list[tuple[int, Target, bytes, str | None]] = []
    queued_bytes = 0
    pool: _Pool | None = None
    try:
        for index, target in enumerate(targets):
            try:
                data = read_source(target.path)
            except OSError as exc:
                result = FileResult(target.path)
                result.diagnostics.append(syntax_error(target.path, f"cannot read file: {exc.strerror or exc}", 1, 1))
                results[index] = result
                continue
            if not needs_parse(data):
                results[index] = lint_bytes(target, settings, data)
                continue
            key = None
            if cache is not None:
                module, is_package = module_of(target.path) if target.kind == "python" else ("", False)
                key = cache.key(target.path, target.kind, data, settings.codes_for(target.path), module, is_package)
                hit = cache.load(target.path, key)
                if hit is not None:
                    results[index] = hit
                    continue
            job = (index, target, data, key)
            if pool is not None:
                pool.submit(job)
                continue
            queued.append(job)
            queued_bytes += len(data)
            if jobs > 1 and len(queued) >= PARALLEL_MIN_FILES and queued_bytes >= PARALLEL_MIN_BYTES:
                pool = _Pool(settings, cache_dir, jobs)
                for job in sorted(queued, key=lambda j: -len(j[2])):
                    pool.submit(job)
                queued = []
        if pool is not None:
            for index, result in pool.results():
                results[index] = result
    finally:
        if pool is not None:
            pool.close()
    for index, target, data, key in queued:  # too little to be worth worker processes
        results[index] = lint_bytes(target, settings, data)
        if cache is not None and key is not None:
            cache.store(target.path, key, results[index])
    return results  # type: ignore[return-value]


class _Pool:
    """Worker processes linting jobs ``(index, target, bytes, cache key)`` as they are submitted.

    A worker that dies (out of memory, a crash in native code) does not take the run
    with it: each file it may have held is linted again alone in a fresh process, and
    one that kills that process too is reported as XLA000.
    """

    def __init__(self, settings: Settings, cache_dir: str | None, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:  # fork: workers inherit the imported rules instead of importing them again
            self._context = multiprocessing.get_context("fork")
        except ValueError:  # pragma: no cover - not on Linux/macOS
            self._context = multiprocessing.get_context()
        self._initargs = (settings, cache_dir)
        self._executor = ProcessPoolExecutor(max_workers=workers, mp_context=self._context,
                                             initializer=_worker_init, initargs=self._initargs)
        self._jobs: list = []
        self._futures: list = []

    def submit(self, job: tuple[int, Target, bytes, str | None]) -> None:
        from concurrent.futures.process import BrokenProcessPool

        self._jobs.append(job)
        try:
            self._futures.append(self._executor.submit(_worker_lint, job))
        except (BrokenProcessPool, RuntimeError):  # the pool died already: results() redoes it
            self._futures.append(None)

    def results(self) -> list[tuple[int, FileResult]]:
        """``(index, result)`` of every submitted job, sorted by index."""
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        done: dict[int, FileResult] = {}
        for job, future in zip(self._jobs, self._futures):
            if future is None:
                continue
            try:
                index, result = future.result()
                done[index] = result
            except BrokenProcessPool:
                pass
        for job in self._jobs:
            if job[0] in done:
                continue
            try:
                with ProcessPoolExecutor(max_workers=1, mp_context=self._context, initializer=_worker_init,
                                         initargs=self._initargs) as alone:
                    done[job[0]] = alone.submit(_worker_lint, job).result()[1]
            except BrokenProcessPool:
                result = FileResult(job[1].path)
                result.diagnostics.append(syntax_error(job[1].path, "the parser crashed on this file", 1, 1))
                done[job[0]] = result
        return sorted(done.items())

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


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


def run(targets: list[Target], settings: Settings, jobs: int = 1, cache: bool = False) -> RunResult:
    """Lint ``targets`` in up to ``jobs`` processes and return the diagnostics to report.

    ``cache``: answer unchanged files from (and store new results in) ``settings.cache_dir``.
    """
    results = lint_targets(targets, settings, jobs, settings.cache_dir if cache else None)
    program = program_facts(results)
    diagnostics, suppressed = finalize(results, program, settings)
    return RunResult(diagnostics, results, program, suppressed)


def default_jobs() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
