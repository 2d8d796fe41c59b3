"""The command line: ``xla-lint [OPTIONS] [PATH]...``, ``xla-lint rule``, ``xla-lint runtime``.

Only option parsing and choosing a reporter live here; the work is in :mod:`xla_lint.engine`.
Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

import click

from . import __version__
from .config import ConfigError, Settings, build_settings
from .discovery import DiscoveryError, Target, discover
from .engine import default_jobs, finalize, lint_file, run
from .fixes import WriteError, fix_loop, write_atomic
from .reporters import Report, reporters
from .rules import all_rules, rule_by_code
from .source import SourceError, decode_with_encoding

EXIT_CLEAN, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to ``check``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args.insert(0, "check")
        return super().parse_args(ctx, args)


def _split_codes(values: tuple[str, ...]) -> list[str] | None:
    if not values:
        return None
    return [c for v in values for c in v.replace(" ", "").split(",") if c]


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xla-lint")
def main() -> None:
    """Lint PyTorch/XLA (torch_xla) training code.

    `xla-lint [OPTIONS] [PATH]...` lints (see `xla-lint check --help`);
    `xla-lint rule CODE` explains a rule; `xla-lint runtime` runs the runtime checker.
    """


@main.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--output-format", type=click.Choice(sorted(reporters())), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="pyproject.toml to read instead of the nearest one.")
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option("--target-version", help="torch_xla version to lint for, e.g. 2.9 (default from config, else 2.9).")
@click.option("--docs/--no-docs", default=None, help="Also lint Python code blocks of .md/.rst files found in folders.")
@click.option("--exclude", multiple=True, help="Glob patterns to skip, added to the configured ones.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: number of cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option("--cache-dir", type=str, default=None, help="Where to keep the result cache.")
def check(paths, select, extend_select, ignore, output_format, exit_zero, fix, diff, config_file,
          isolated, target_version, docs, exclude, jobs, no_cache, cache_dir) -> None:
    """Lint PATHs (files or folders; default: the current folder)."""
    try:
        settings = build_settings(
            cwd=Path.cwd(), config_file=config_file, select=_split_codes(select),
            extend_select=_split_codes(extend_select), ignore=_split_codes(ignore),
            exclude=list(exclude), target_version=target_version, docs=docs,
            cache_dir=cache_dir, isolated=isolated)
        targets = discover(list(paths) or ["."], settings)
    except (ConfigError, DiscoveryError) as exc:
        _fail(str(exc))
    result = run(targets, settings, jobs or default_jobs())
    diagnostics = result.diagnostics
    fixed = 0
    if fix or diff:
        diagnostics, fixed, write_failed = _fix(targets, settings, result, write=not diff)
        if diff:
            sys.exit(EXIT_FOUND if fixed else EXIT_CLEAN)
        if write_failed and not exit_zero:
            _emit(output_format, diagnostics, len(targets), fixed)
            sys.exit(EXIT_FOUND)
    _emit(output_format, diagnostics, len(targets), fixed)
    sys.exit(EXIT_CLEAN if exit_zero or not diagnostics else EXIT_FOUND)


def _emit(output_format: str, diagnostics, files: int, fixed: int) -> None:
    text = reporters()[output_format](Report(diagnostics, files=files, fixed=fixed))
    click.echo(text, nl=False)


def _fix(targets: list[Target], settings: Settings, result, write: bool):
    """Fix every file with a safe fix; return the diagnostics left, the fixes applied and whether a write failed."""
    by_path = {t.path: t for t in targets}
    fixable = sorted({d.path for d in result.diagnostics if d.fix is not None and d.fix.safe
                      and by_path.get(d.path) is not None and by_path[d.path].kind == "python"})
    remaining = [d for d in result.diagnostics if d.path not in fixable]
    total, failed = 0, False
    for path in fixable:
        target = by_path[path]
        try:
            with open(path, "rb") as handle:
                text, encoding = decode_with_encoding(handle.read())
        except (OSError, SourceError) as exc:
            click.echo(f"xla-lint: {path}: cannot read for fixing: {exc}", err=True)
            failed = True
            continue

        def relint(version: str, target=target) -> list:
            return finalize([lint_file(target, settings, text=version)], result.program, settings)[0]

        outcome = fix_loop(path, text, relint)
        if outcome.fixed != text:
            if not write:
                diff = difflib.unified_diff(text.splitlines(keepends=True), outcome.fixed.splitlines(keepends=True),
                                            fromfile=f"a/{path}", tofile=f"b/{path}")
                click.echo("".join(diff), nl=False)
            else:
                try:
                    write_atomic(path, outcome.fixed, encoding)
                except WriteError as exc:
                    click.echo(f"xla-lint: {exc}", err=True)
                    failed = True
                    remaining.extend(relint(text))
                    continue
            total += outcome.applied
        remaining.extend(relint(outcome.fixed if write else text))
    remaining.sort(key=lambda d: d.sort_key)
    return remaining, total, failed


def _fail(message: str) -> None:
    click.echo(f"xla-lint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule with its code, name and summary.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule_command(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain rule CODE, or list every rule with --all."""
    if show_all or code is None:
        if output_format == "json":
            click.echo(json.dumps([rule_to_json(r) for r in all_rules()], indent=2))
            return
        for r in all_rules():
            off = "" if r.default_enabled else " (off by default)"
            click.echo(f"{r.code} {r.name} [{r.severity.value}]{off}: {r.summary}")
        return
    rule = rule_by_code(code)
    if rule is None:
        _fail(f"unknown rule code {code!r}; `xla-lint rule --all` lists them")
    if output_format == "json":
        click.echo(json.dumps(rule_to_json(rule), indent=2))
        return
    flags = [rule.severity.value] + (["fixable"] if rule.fixable else []) + ([] if rule.default_enabled else ["off by default"])
    click.echo(f"{rule.code} {rule.name} ({', '.join(flags)})\n\n{rule.summary}\n\n{rule.explanation.rstrip()}")


def rule_to_json(rule) -> dict:
    """A rule as data: the one source the docs page and SARIF rule table are made from."""
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "message": rule.message,
        "severity": rule.severity.value,
        "fixable": rule.fixable,
        "default_enabled": rule.default_enabled,
        "explanation": rule.explanation,
    }


@main.command("runtime", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                           "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def runtime_command(args: tuple[str, ...]) -> None:
    """Run the runtime checker (same options as `python -m xla_lint.runtime`)."""
    try:
        from .runtime.cli import main as runtime_main
    except ImportError as exc:
        _fail(f"the runtime checker is not available: {exc}")
    sys.exit(runtime_main(list(args)))
