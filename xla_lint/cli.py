"""The command line: ``xla-lint [OPTIONS] [PATH]...``, ``xla-lint rule``, ``xla-lint runtime``.

Only option parsing and choosing a reporter live here; the work is in :mod:`xla_lint.pipeline.run`.
Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn

import click

from . import __version__, timings
from .config import ConfigError, Settings, build_settings
from .diagnostics import Diagnostic
from .pipeline.discover import DiscoveryError
from .pipeline.fixes import (
    WriteError,
    applies,
    fix_loop,
    hidden_unsafe,
    parses,
    unified_diff,
    write_atomic,
)
from .pipeline.run import TOO_LARGE, default_jobs, lint_file
from .pipeline.workspace import lint_buffer, lint_paths, relinter
from .reporters import Report, reporters, rule_to_json
from .reporters import statistics as statistics_report
from .reporters.explain import render_rule
from .results import FileResult, syntax_error
from .sources.target import DOCUMENT_SUFFIXES, NOTEBOOK_SUFFIX, Target
from .sources.text import SourceError, decode_with_encoding, read_source
from .stdout import guard

EXIT_CLEAN, EXIT_FOUND, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a job stopped by Ctrl-C
FORMATS = [
    "text",
    "concise",
    "full",
    "json",
    "json-lines",
    "sarif",
    "github",
    "gitlab",
    "junit",
    "pylint",
]


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to ``check``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (
            args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")
        ):
            args.insert(0, "check")
        return super().parse_args(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        """Click's, except that a Ctrl-C while the command line is parsed (an option's type
        or callback, a default read from the environment) is :func:`_interrupted`'s one line:
        click's ``main`` catches it there, echoes an empty line to standard error (it closes
        the terminal's ``^C``; click/core.py ``Command.main``) and raises ``Abort``, so the
        output began with a blank line. The subcommand's parse runs inside :meth:`invoke`,
        which handles its Ctrl-C the same way."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            _interrupted()

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's ``main``, except that a usage error is one line on standard error
        (``xla-lint: error: No such option: --formt``, exit 2) like every other error of
        ours, instead of click's usage block, and a Ctrl-C anywhere is one line and exit 130
        (:func:`_interrupted`)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        guard()  # `xla-lint . | head`: the run ends as it would have, quietly (docs/cli.md)
        _keep_interrupts()
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except KeyboardInterrupt:  # before click's own handler (its shell-completion check)
            _interrupted()
        except SystemExit:
            if _INTERRUPTS:  # Ctrl-C landed where Python could only print and ignore it
                _interrupted()
            raise
        except click.exceptions.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "xla-lint"
            click.echo(f"xla-lint: error: {exc.format_message()} (see {where} --help)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"xla-lint: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            _interrupted()
        if _INTERRUPTS:
            _interrupted()
        sys.exit(rv if isinstance(rv, int) else EXIT_CLEAN)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except KeyboardInterrupt:  # click would print "Aborted!" and exit 1, the code for findings
            _interrupted()
        except Exception as exc:  # a bug of ours: one line, a defined exit code, no traceback
            click.echo(
                f"xla-lint: internal error (please report): {type(exc).__name__}: {exc}", err=True
            )
            sys.exit(EXIT_ERROR)


# Set by a lint run (``check``) that has written its report and every file it writes (fixes,
# the cache) and stopped its worker processes: nothing is left but the interpreter's teardown,
# which ``xla_lint.__main__`` then skips (freeing every object of a warm run's cached results
# and program model took 35 ms of 0.26 s on the synthetic 2,401-file tree).
FINISHED = False


# Ctrl-Cs that Python could not raise where they landed (see _keep_interrupts).
_INTERRUPTS: list[BaseException] = []


def _keep_interrupts() -> None:
    """A Ctrl-C that lands in a finaliser or a weakref callback (the process pool's, while
    results come in) is printed by Python as "Exception ignored in ..." and then lost: the run
    went on and exited 1 as if never interrupted (seen 1 time in 3 on a loaded machine). Keep
    it instead, silently, so that the run ends as an interrupted one (:func:`_interrupted`)."""
    default = sys.unraisablehook

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _INTERRUPTS.append(unraisable.exc_value)
        else:
            default(unraisable)

    sys.unraisablehook = hook


def _interrupted() -> NoReturn:
    """Ctrl-C: one line and exit 130 at once. ``os._exit``, not ``sys.exit``: the parse of a
    large file runs in a daemon thread (``source.call_with_deep_stack``) that is still inside
    LibCST's native parser, and finalising the interpreter under it aborts the process
    (SIGABRT, exit 134, seen 2 times in 3). Every ``finally`` of ours has run by now."""
    click.echo("xla-lint: interrupted", err=True)
    exit_at_once(EXIT_INTERRUPTED)


def exit_at_once(code: int) -> NoReturn:
    """End the process with ``code`` once the standard streams are flushed, without the
    interpreter's teardown (``os._exit``): after Ctrl-C (:func:`_interrupted`) and after a
    finished lint run (``xla_lint.__main__``)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _split_codes(values: tuple[str, ...], option: str) -> list[str] | None:
    """The codes of a repeatable, comma-separated option; None when it was not given.

    Raises click.UsageError when it was given but names nothing (``--select ''``, often an
    empty shell variable): read as "not given" it would silently run the default set."""
    if not values:
        return None
    codes = [c for v in values for c in v.replace(" ", "").split(",") if c]
    if not codes:
        raise click.UsageError(
            f"{option} {values[0]!r} names no rule; give codes or prefixes such as XLA001,XLA2"
        )
    return codes


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xla-lint")
def main() -> None:
    """Lint PyTorch/XLA (torch_xla) training code.

    `xla-lint [OPTIONS] [PATH]...` lints (see `xla-lint check --help`);
    `xla-lint rule CODE` explains a rule; `xla-lint runtime` runs the runtime checker;
    `xla-lint trace -- python train.py` runs your script for a few steps and shows what it
    compiles, syncs and shards, line by line; `xla-lint server` is the language server for editors.
    """


@main.command("check")
@click.argument(
    "paths", nargs=-1, type=click.Path(path_type=str, readable=False)
)  # unreadable paths: XLA000, as in folders
@click.option(
    "--select",
    multiple=True,
    help="Rule codes or prefixes to enable (replaces the configured set).",
)
@click.option(
    "--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition."
)
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option(
    "--preview/--no-preview",
    default=None,
    help="Also run preview rules: new rules whose precision on real code is not yet known, "
    "and stable rules' preview behaviour (default from config `preview`, else off).",
)
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text (= concise), concise, full (source line, caret, fix diff), json, json-lines (one object a "
    "line), sarif (SARIF 2.1.0), github (GitHub Actions annotations), gitlab (GitLab Code Quality), "
    "junit (JUnit XML), pylint (path:line: [CODE] message).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found.")
@click.option(
    "--fix", is_flag=True, help="Apply safe fixes in place (with `-`: print the fixed source)."
)
@click.option(
    "--unsafe-fixes/--no-unsafe-fixes",
    default=None,
    help="Let --fix and --diff apply fixes marked unsafe too: they change what the code computes, "
    "check each (default from config `unsafe-fixes`, else off).",
)
@click.option(
    "--add-noqa",
    is_flag=True,
    help="Add `# noqa: CODE` to every line with a diagnostic (merged with an existing noqa), so a "
    "codebase can adopt xla-lint and fail only on new findings.",
)
@click.option(
    "--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them."
)
@click.option(
    "--show-fixes", is_flag=True, help="List the fixes --fix would apply (or, with --fix, applied)."
)
@click.option(
    "--statistics",
    is_flag=True,
    help="Print how many diagnostics of each code, most frequent first.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the diagnostics: no summary line.")
@click.option(
    "--verbose", "-v", is_flag=True, help="Report files read, skipped and timing on standard error."
)
@click.option(
    "--show-programs",
    is_flag=True,
    help="Print the programs found (entries, tests, documents), the mode of each and where it comes from; "
    "report nothing else.",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Color the output; auto: when standard output is a terminal and NO_COLOR is not set.",
)
@click.option(
    "--stdin-filename",
    help="With PATH `-`: the file name to report (and match per-file-ignores) for standard input.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="pyproject.toml to read instead of the nearest one.",
)
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option(
    "--target-version",
    help="torch_xla version to lint for, e.g. 2.9 (default from config, else 2.9).",
)
@click.option(
    "--docs/--no-docs",
    default=None,
    help="Also lint Python code blocks of .md/.rst files found in folders.",
)
@click.option(
    "--exclude", multiple=True, help="Glob patterns to skip, added to the configured ones."
)
@click.option(
    "--force-exclude",
    is_flag=True,
    default=None,
    help="Apply exclude to files named on the command line too (pre-commit passes every file).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default and most: the number of cores).",
)
@click.option(
    "--max-file-size",
    default=None,
    metavar="SIZE",
    help='Skip (with a warning) files that need parsing and are larger than SIZE, e.g. "5MB"; '
    '"0": no limit (default from config, else 2MB).',
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option("--cache-dir", type=str, default=None, help="Where to keep the result cache.")
def check(
    paths,
    select,
    extend_select,
    ignore,
    preview,
    output_format,
    exit_zero,
    fix,
    unsafe_fixes,
    add_noqa,
    diff,
    show_fixes,
    statistics,
    quiet,
    verbose,
    show_programs,
    color,
    stdin_filename,
    config_file,
    isolated,
    target_version,
    docs,
    exclude,
    force_exclude,
    jobs,
    max_file_size,
    no_cache,
    cache_dir,
) -> None:
    """Lint PATHs (files or folders; default: the current folder; `-`: standard input)."""
    options = Output(output_format, use_color(color), quiet, show_fixes, statistics)
    if statistics and output_format not in ("text", "concise", "full", "json"):
        _fail(
            f"--statistics prints text or JSON; it cannot be shown as --output-format {output_format}"
        )
    if diff and output_format != "text":
        _fail(
            f"--diff prints a unified diff; it cannot be combined with --output-format {output_format}"
        )
    if show_programs and (
        "-" in paths or fix or diff or statistics or output_format not in ("text", "json")
    ):
        _fail(
            "--show-programs lists the programs of files and folders; it cannot be combined with `-`, "
            "--fix, --diff, --statistics or --output-format " + output_format
        )
    if add_noqa and ("-" in paths or fix or diff or show_programs):
        _fail(
            "--add-noqa writes comments into files; it cannot be combined with `-`, --fix, --diff or --show-programs"
        )
    if "-" in paths and len(paths) > 1:
        _fail("`-` (standard input) cannot be combined with other paths")
    if stdin_filename and "-" not in paths:
        _fail("--stdin-filename needs the path `-` (standard input)")
    try:
        settings = build_settings(
            cwd=Path.cwd(),
            start=_config_start(paths, stdin_filename),
            config_file=config_file,
            select=_split_codes(select, "--select"),
            extend_select=_split_codes(extend_select, "--extend-select"),
            ignore=_split_codes(ignore, "--ignore"),
            exclude=list(exclude),
            target_version=target_version,
            docs=docs,
            cache_dir=cache_dir,
            isolated=isolated,
            force_exclude=force_exclude,
            preview=preview,
            max_file_size=max_file_size,
            unsafe_fixes=unsafe_fixes,
        )
        options = replace(options, unsafe_fixes=settings.unsafe_fixes)
        for warning in settings.warnings:
            click.echo(f"xla-lint: warning: {warning}", err=True)
        if paths == ("-",):
            _check_stdin(
                settings, stdin_filename or "-", options, fix=fix, diff=diff, exit_zero=exit_zero
            )
        started = time.perf_counter()
        # More workers than cores only adds start-up and contention (-j 1000 took 50x longer).
        targets, result = lint_paths(
            paths,
            settings,
            jobs=min(jobs or default_jobs(), default_jobs()),
            cache=not no_cache,
        )
        settings = result.settings or settings  # with the folders' own configurations
    except (ConfigError, DiscoveryError) as exc:
        _fail(str(exc))
    if verbose:
        _log_run(result, time.perf_counter() - started)
    else:
        for r in result.files:  # never silently: a skipped file is a file nothing was checked in
            if r.skipped_reason and r.skipped_reason.startswith(TOO_LARGE):
                click.echo(f"xla-lint: warning: skipped {r.path} ({r.skipped_reason})", err=True)
    if show_programs:
        if output_format == "json":
            click.echo(json.dumps(result.program.to_json(), indent=2))
        else:
            lines = result.program.describe()
            click.echo(
                "\n".join(lines)
                if lines
                else "no programs found: every linted module is library code"
            )
        sys.exit(EXIT_CLEAN)
    if add_noqa:
        sys.exit(_add_noqa(targets, result.diagnostics))
    diagnostics = result.diagnostics
    fixed, applied = 0, None
    if fix or diff:
        diagnostics, fixed, write_failed, applied = _fix(targets, settings, result, write=not diff)
        if diff:
            _diff_notes(applied, hidden_unsafe(result.diagnostics, settings.unsafe_fixes))
            sys.exit(EXIT_FOUND if fixed else EXIT_CLEAN)
        if write_failed and not exit_zero:
            _emit(options, diagnostics, len(targets), fixed, applied)
            sys.exit(EXIT_FOUND)
    with timings.timed("report"):
        _emit(options, diagnostics, len(targets), fixed, applied)
    if timings.ENABLED:
        timings.report()
    global FINISHED
    FINISHED = True
    sys.exit(EXIT_CLEAN if exit_zero or not diagnostics else EXIT_FOUND)


@dataclass(frozen=True)
class Output:
    """How to show a run: format name, colors on, --quiet, --show-fixes, --statistics, and
    whether unsafe fixes count as fixable (--unsafe-fixes)."""

    format: str
    color: bool
    quiet: bool = False
    show_fixes: bool = False
    statistics: bool = False
    unsafe_fixes: bool = False


def use_color(choice: str, stream=None) -> bool:
    """``--color``: ``always``/``never``; ``auto`` is on when ``stream`` (stdout) is a terminal
    and ``NO_COLOR`` is unset or empty (https://no-color.org)."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _report(
    options: Output,
    diagnostics,
    files: int,
    fixed: int,
    applied=None,
    sources: dict[str, str] | None = None,
) -> str:
    report = Report(
        diagnostics,
        files=files,
        fixed=fixed,
        color=options.color,
        quiet=options.quiet,
        show_fixes=options.show_fixes,
        applied=applied,
        unsafe_fixes=options.unsafe_fixes,
    )
    if options.statistics:
        return statistics_report.render(report, as_json=options.format == "json")
    if options.format == "full":
        report.sources = sources if sources is not None else _read_sources(diagnostics)
    return reporters()[options.format](report)


def _emit(options: Output, diagnostics, files: int, fixed: int, applied=None) -> None:
    click.echo(_report(options, diagnostics, files, fixed, applied), nl=False, color=options.color)


def _read_sources(diagnostics) -> dict[str, str]:
    """The text of each file with a diagnostic (files that cannot be read are left out)."""
    sources = {}
    for path in sorted({d.path for d in diagnostics}):
        try:
            sources[path] = decode_with_encoding(read_source(path))[0]
        except (OSError, SourceError):
            continue
    return sources


def _log_run(result, seconds: float) -> None:
    """``--verbose``: each file read or skipped (and each doc block skipped), then the count and time, on standard error."""
    parsed = failed = 0
    skipped: dict[str, int] = {}  # kind of reason ("no torch_xla", "too large", ...) -> files
    for r in result.files:
        if r.skipped_reason:
            kind = r.skipped_reason.split(" (")[0].split(":")[0]
            skipped[kind] = skipped.get(kind, 0) + 1
            click.echo(f"xla-lint: skipped {r.path} ({r.skipped_reason})", err=True)
        elif r.parsed:
            parsed += 1
            click.echo(f"xla-lint: linted {r.path}", err=True)
        else:
            failed += 1
            click.echo(f"xla-lint: could not parse {r.path}", err=True)
        for note in r.notes:
            click.echo(f"xla-lint: {note}", err=True)
    n = len(result.files)
    total = sum(skipped.values())
    why = ", ".join(
        f"{count} {kind}" for kind, count in sorted(skipped.items(), key=lambda kc: (-kc[1], kc[0]))
    )
    parts = [f"{parsed} linted", f"{total} skipped" + (f" ({why})" if why else "")]
    if failed:
        parts.append(f"{failed} not parsed (XLA000)")
    blocks = sum(len(r.notes) for r in result.files)
    if blocks:
        parts.append(f"{blocks} doc {'block' if blocks == 1 else 'blocks'} skipped")
    click.echo(
        f"xla-lint: {n} {'file' if n == 1 else 'files'} read ({', '.join(parts)}) in {seconds:.3f}s; "
        f"{result.suppressed} suppressed by comments",
        err=True,
    )


def _config_start(paths: tuple[str, ...], stdin_filename: str | None) -> Path | None:
    """The folder the configuration is looked for from: the one holding every path named (the
    folder named, or a named file's folder), ``--stdin-filename``'s folder for standard input;
    None (the current folder) when no path is named."""
    named = [stdin_filename or "."] if paths == ("-",) else list(paths)
    folders = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in named]
    if not folders:
        return None
    try:
        return Path(os.path.commonpath(folders))
    except ValueError:  # paths on different drives
        return None


def _check_stdin(
    settings: Settings, name: str, options: Output, *, fix: bool, diff: bool, exit_zero: bool
) -> None:
    """Lint standard input as file ``name``; with ``fix`` print the fixed source on standard
    output (the report then goes to standard error), with ``diff`` a unified diff. Exits."""
    if sys.stdin is None:  # started with standard input closed (`xla-lint - <&-`)
        _fail("standard input is closed; name files to lint instead of `-`")
    data = sys.stdin.buffer.read()
    kind = "doc" if name.lower().endswith(DOCUMENT_SUFFIXES) else "python"
    target = Target(name, kind)
    try:
        text, encoding = decode_with_encoding(data)
    except SourceError as exc:
        text, encoding = None, "utf-8"
        result = FileResult(name, [syntax_error(name, exc.message, exc.line, exc.column)])
    else:
        result = lint_file(target, settings, text=text)
    program, diagnostics = lint_buffer(target, settings, result)  # stdin is run as a program
    fixed, applied = 0, None
    if (fix or diff) and text is not None and kind == "python":
        relint = relinter(target, settings, program)
        outcome = fix_loop(name, text, relint, settings.unsafe_fixes)
        fixed = outcome.applied
        applied = [d for d in diagnostics if applies(d, settings.unsafe_fixes)] if fixed else []
        if diff:
            _write_bytes(unified_diff(text, outcome.fixed, name, encoding))
            _diff_notes(applied, hidden_unsafe(diagnostics, settings.unsafe_fixes))
            sys.exit(EXIT_FOUND if fixed else EXIT_CLEAN)
        diagnostics = relint(outcome.fixed)
        text = outcome.fixed
    elif diff:
        _diff_notes([], hidden_unsafe(diagnostics, settings.unsafe_fixes))
        sys.exit(EXIT_CLEAN)
    sources = {name: text} if text is not None else {}
    out = _report(options, diagnostics, 1, fixed, applied, sources)
    if fix:
        sys.stdout.buffer.write(text.encode(encoding) if text is not None else data)
        sys.stdout.flush()
        click.echo(out, nl=False, err=True, color=options.color)
    else:
        click.echo(out, nl=False, color=options.color)
    sys.exit(EXIT_CLEAN if exit_zero or not diagnostics else EXIT_FOUND)


def _fix(targets: list[Target], settings: Settings, result, write: bool):
    """Fix every file with a fix ``--fix`` applies (safe ones; unsafe too with
    ``settings.unsafe_fixes``); return the diagnostics left, the fixes applied, whether a write
    failed, and the diagnostics whose fixes went in (those of the first round)."""
    unsafe = settings.unsafe_fixes
    by_path = {t.path: t for t in targets}
    fixable = sorted(
        {
            d.path
            for d in result.diagnostics
            if applies(d, unsafe)
            and by_path.get(d.path) is not None
            and by_path[d.path].kind == "python"
        }
    )
    remaining = [d for d in result.diagnostics if d.path not in fixable]
    applied: list[Diagnostic] = []
    total, failed = 0, False
    for path in fixable:
        target = by_path[path]
        try:
            original = read_source(path)
            text, encoding = decode_with_encoding(original)
        except (OSError, SourceError) as exc:
            click.echo(f"xla-lint: {path}: cannot read for fixing: {exc}", err=True)
            failed = True
            continue

        relint = relinter(target, settings, result.program)
        outcome = fix_loop(path, text, relint, unsafe)
        if outcome.fixed != text:
            if not write:
                _write_bytes(unified_diff(text, outcome.fixed, path, encoding))
            else:
                try:
                    write_atomic(path, outcome.fixed, encoding, expected=original)
                except WriteError as exc:
                    click.echo(f"xla-lint: {exc}", err=True)
                    failed = True
                    remaining.extend(relint(text))
                    continue
            total += outcome.applied
            applied.extend(d for d in result.diagnostics if d.path == path and applies(d, unsafe))
        remaining.extend(relint(outcome.fixed if write else text))
    remaining.sort(key=lambda d: d.sort_key)
    return remaining, total, failed, applied


def _diff_notes(applied: list, hidden: list) -> None:
    """After ``--diff``, on standard error: which fixes in the diff are unsafe, and how many
    unsafe fixes it leaves out (``--unsafe-fixes`` would add them)."""
    unsafe = [d for d in applied if d.fix is not None and not d.fix.safe]
    if unsafe:
        click.echo(
            f"xla-lint: {len(unsafe)} of the fixes in this diff {'is' if len(unsafe) == 1 else 'are'} "
            "unsafe (they change what the code computes; check them):",
            err=True,
        )
        for d in unsafe:
            click.echo(f"  {d.path}:{d.line}:{d.column}: {d.code} {d.fix.description}", err=True)
    if hidden:
        n = len(hidden)
        click.echo(
            f"xla-lint: {n} unsafe {'fix is' if n == 1 else 'fixes are'} not in this diff "
            "(--unsafe-fixes adds them)",
            err=True,
        )


def _add_noqa(targets: list[Target], diagnostics) -> int:
    """``--add-noqa``: write a ``# noqa`` for every diagnostic into its Python file (atomically,
    only when the file still parses); one summary line on standard error. Returns the exit
    status: 0, or 1 when a file could not be written."""
    from .pipeline.noqa import add_noqa

    python = {t.path for t in targets if t.kind == "python"}
    wanted: dict[str, dict[int, set[str]]] = {}
    left: dict[str, int] = {}  # notebooks and documents: diagnostics no comment was added for
    for d in diagnostics:
        if d.code == "XLA000":
            continue
        if d.path in python and not d.path.endswith(NOTEBOOK_SUFFIX):
            wanted.setdefault(d.path, {}).setdefault(d.line, set()).add(d.code)
        else:
            left[d.path] = left.get(d.path, 0) + 1
    for path, count in sorted(left.items()):
        click.echo(
            f"xla-lint: {path}: no noqa added for {count} "
            f"{'diagnostic' if count == 1 else 'diagnostics'}: notebooks and documents are not "
            "rewritten; add the comments by hand or use per-file-ignores",
            err=True,
        )
    added = files = 0
    failed = False
    for path in sorted(wanted):
        try:
            original = read_source(path)
            text, encoding = decode_with_encoding(original)
            edit = add_noqa(text, wanted[path])
        except (
            OSError,
            SourceError,
            SyntaxError,
            ValueError,
        ) as exc:  # tokenize errors are ValueError/SyntaxError
            click.echo(f"xla-lint: {path}: cannot add noqa: {exc}", err=True)
            failed = True
            continue
        for line in edit.skipped:
            click.echo(
                f"xla-lint: {path}:{line}: no noqa added: the line ends inside a string or a "
                "backslash continuation",
                err=True,
            )
        if not edit.added:
            continue
        if not parses(edit.text):
            click.echo(
                f"xla-lint: {path}: would not parse with the noqa comments added, left unchanged",
                err=True,
            )
            failed = True
            continue
        try:
            write_atomic(path, edit.text, encoding, expected=original)
        except WriteError as exc:
            click.echo(f"xla-lint: {exc}", err=True)
            failed = True
            continue
        added += edit.added
        files += 1
    click.echo(
        f"Added {added} noqa {'directive' if added == 1 else 'directives'} to {files} "
        f"{'file' if files == 1 else 'files'}.",
        err=True,
    )
    return EXIT_FOUND if failed else EXIT_CLEAN


def _write_bytes(data: bytes) -> None:
    """Write ``data`` to standard output as is (a diff in its file's encoding)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _fail(message: str) -> None:
    click.echo(f"xla-lint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@main.command("rule")
@click.argument("code", required=False)
@click.option(
    "--all", "show_all", is_flag=True, help="List every rule with its code, name and summary."
)
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Emphasise headings and code; auto: when standard output is a terminal and NO_COLOR is not set.",
)
def rule_command(code: str | None, show_all: bool, output_format: str, color: str) -> None:
    """Explain rule CODE, or list every rule with --all."""
    from .rules import (
        all_rules,
        find_rule,
    )  # the rule classes (and LibCST): only this command needs them

    colored = use_color(color)
    if show_all or code is None:
        if output_format == "json":
            click.echo(json.dumps([rule_to_json(r) for r in all_rules()], indent=2))
            return
        for r in all_rules():
            off = (" (preview)" if r.preview else "") + (
                "" if r.default_enabled else " (off by default)"
            )
            click.echo(
                f"{click.style(r.code, bold=True) if colored else r.code} {r.name} "
                f"[{r.severity.value}]{off}: {r.summary}",
                color=colored,
            )
        return
    rule = find_rule(code)
    if rule is None:
        _fail(
            f"unknown rule {code!r} (a code such as XLA201 or a name such as host-sync-in-step); "
            "`xla-lint rule --all` lists them"
        )
    if output_format == "json":
        click.echo(json.dumps(rule_to_json(rule), indent=2))
        return
    click.echo(render_rule(rule, colored), nl=False, color=colored)


@main.command(
    "trace", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help=(
        "Training steps to trace (optimizer steps: `optimizer.step()`/`xm.optimizer_step`; every "
        "step boundary when the script has no optimizer); setup and evaluation syncs do not "
        "count. The script is then stopped at a step boundary."
    ),
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds for the whole run; then the script is killed and the partial report shown.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "auto"]),
    default="cpu",
    show_default=True,
    help="cpu: PJRT_DEVICE=CPU with --cpu-devices virtual devices; auto: keep the environment (TPU).",
)
@click.option(
    "--cpu-devices",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Virtual CPU devices with --device cpu.",
)
@click.option(
    "--events",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to stream the events (JSONL); default: a new temporary folder, named in the report.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON (schema in docs/trace.md)."
)
@click.option(
    "--static/--no-static",
    default=True,
    show_default=True,
    help="Also lint the script's program (preview rules on) and mark what the run confirmed. "
    "--no-static also turns off phase detection (setup/training/evaluation come from the "
    "script's loops): every row is then a step of the hook's own, and compiles outside the "
    "training steps are not reported as after-warm-up findings.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="For a compile after warm-up, name the IR nodes that changed and where they were made "
    "(XLA_IR_DEBUG=1; slows each step a little).",
)
@click.option(
    "--simulate-hosts",
    type=click.IntRange(min=2),
    default=None,
    help="Run N copies of the script, each a simulated host of a pod (xr.process_index() is "
    "its index, xr.process_count() N), and report the first step where their graphs differ.",
)
@click.option(
    "--fast-compile",
    is_flag=True,
    help="LLVM at -O0 on CPU (XLA_FLAGS=--xla_backend_optimization_level=0): compiles faster, "
    "steps run slower. Off, the script runs with the XLA flags of a bare run.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def trace_command(
    steps,
    timeout,
    device,
    cpu_devices,
    events,
    as_json,
    static,
    explain,
    simulate_hosts,
    fast_compile,
    command,
) -> None:
    """Run a training script for a few steps: what compiled, synced and was sharded, per step.

    `xla-lint trace [OPTIONS] -- [python] SCRIPT [ARGS]...` or `-- python -m MODULE [ARGS]...`.
    Exit status: 0 no finding, 1 findings or the script failed or timed out, 2 usage error.
    """
    from .trace import TraceOptions, TraceUsageError, run_trace  # torch-free until the child runs

    if timeout != timeout or timeout == float("inf"):  # click's FloatRange lets nan and inf through
        _fail(f"--timeout must be a finite number of seconds, got {timeout}")
    words = list(command)
    if (
        words
        and words[0].startswith("-")
        and words[0] != "--"
        and ("--" in words or words[0].startswith("--"))
    ):
        # `trace --stepz 3 -- python x.py`: an option of ours, mistyped, before the `--` (click
        # drops the `--` right after an unknown option: a long option first is always ours; a
        # Python interpreter option comes after `python`)
        ctx = click.get_current_context()
        known = [
            o for p in ctx.command.params for o in getattr(p, "opts", ()) if o.startswith("--")
        ]
        raise click.NoSuchOption(words[0].split("=")[0], possibilities=known, ctx=ctx)
    try:
        code = run_trace(
            TraceOptions(
                tuple(command),
                steps=steps,
                timeout=timeout,
                device=device,
                cpu_devices=cpu_devices,
                events=events,
                static=static,
                explain=explain,
                simulate_hosts=simulate_hosts,
                fast_compile=fast_compile,
            ),
            as_json=as_json,
        )
    except TraceUsageError as exc:
        _fail(str(exc))
    sys.exit(code)


@main.command(
    "runtime",
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": [],
    },
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def runtime_command(args: tuple[str, ...]) -> None:
    """Run the runtime checker (same options as `python -m xla_lint.runtime`)."""
    try:
        from .runtime.cli import main as runtime_main
    except ImportError as exc:
        _fail(f"the runtime checker is not available: {exc}")
    sys.exit(runtime_main(list(args), prog_name="xla-lint runtime"))


@main.command("server")
@click.option(
    "--stdio", is_flag=True, help="Speak LSP over standard input and output (the default)."
)
def server_command(stdio: bool) -> None:
    """Run the language server (LSP over standard input and output); see docs/editors.md."""
    try:
        from .server import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        _fail(  # xla-lint is not on PyPI: `pip install 'xla-lint[lsp]'` finds nothing
            "xla-lint server needs the lsp extra: pip install -e '.[lsp]' in a clone of "
            "xla-lint, or pip install 'xla-lint[lsp] @ git+REPOSITORY-URL' (docs/editors.md)"
        )
    sys.exit(serve())


@main.command("migrate")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--to",
    "to",
    type=click.Choice(["torchtpu"]),
    required=True,
    help="The stack to migrate to: torchtpu (torch-tpu 0.2.0).",
)
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="How to print the report.",
)
@click.option("--fix", is_flag=True, help="Write the mechanical rewrites into the files.")
@click.option("--diff", is_flag=True, help="Print the rewrites as a unified diff; change nothing.")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix or --diff: also the behaviour-changing rewrites (decisions never).",
)
@click.option("--config", "config_file", type=click.Path(), help="Use this pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option("--exclude", multiple=True, help="Extra glob patterns of paths to skip.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes.")
def migrate_command(
    paths, to, output_format, fix, diff, unsafe_fixes, config_file, isolated, exclude, jobs
) -> None:
    """Report every torch_xla use of PATHs and its TorchTPU equivalent; --fix/--diff rewrite
    the mechanical ones (docs/migrate.md). Exit 0 with no site left, 1 with sites, 2 on error."""
    from .migrate.report import render
    from .migrate.run import fix_paths, migrate_paths

    if fix and diff:
        _fail("--fix writes the files and --diff only shows the change: choose one")
    if diff and output_format != "text":
        _fail(
            f"--diff prints a unified diff; it cannot be combined with --output-format {output_format}"
        )
    if "-" in paths:
        _fail("migrate reads files and folders, not standard input")
    try:
        settings = build_settings(
            cwd=Path.cwd(),
            start=_config_start(paths, None),
            config_file=config_file,
            select=["XLA000"],  # the program model needs no rule
            exclude=list(exclude),
            isolated=isolated,
        )
        workers = min(jobs or default_jobs(), default_jobs())
        migration = migrate_paths(paths, settings, jobs=workers)
    except (ConfigError, DiscoveryError) as exc:
        _fail(str(exc))
    if fix or diff:
        result = fix_paths(migration, unsafe=unsafe_fixes, write=fix)
        for message in result.failed:
            click.echo(f"xla-lint: {message}", err=True)
        if diff:
            _write_bytes(result.diff)
            sys.exit(EXIT_FOUND if result.diff else EXIT_CLEAN)
        click.echo(
            f"xla-lint: {result.applied} rewrite{'s' * (result.applied != 1)} in "
            f"{len(result.outcomes)} file{'s' * (len(result.outcomes) != 1)}",
            err=True,
        )
        migration = migrate_paths(paths, settings, jobs=workers)
    click.echo(render(migration, output_format))
    sys.exit(EXIT_FOUND if migration.sites else EXIT_CLEAN)
