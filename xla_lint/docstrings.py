"""``>>>`` examples in the docstrings of a Python file, linted like code (with ``docs`` on).

A docstring example runs, under doctest, with the module's globals: ``HybridMesh(...)``
in ``torch_xla/distributed/spmd/xla_sharding.py``'s docstrings is that module's
``HybridMesh``. So each example block is linted with the file's module-level names as
its enclosing scope (a name the file defines itself resolves to ``<module>.<name>``).
An example is a fragment, not a program: findings that depend on program facts (XLA002
"SPMD never enabled", ...) are dropped, since the fragment leaves out the set-up, and a
docstring's facts never leak into the file's. An example (a ``>>>`` line and its ``...`` lines) that does not parse on its own, such as
an output line written with a prompt, is blanked so the rest of the block is still linted;
positions are those of the file. No fixes are offered inside docstrings.

Docstring examples, and Markdown/reST code blocks written as an interactive session
(``>>> `` lines, :func:`is_repl_block`), are read the way they run: typed at a prompt.
Rules whose finding is about a program's output and not about torch_xla (a rule class
with ``repl_quiet = True``, such as XLA004 ``print`` without ``flush``: the REPL shows
every line at once) are not run on them (:func:`repl_rules`).
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from .diagnostics import Diagnostic
from .names import LOCAL, BindingCollector, Scope
from .notebooks import NotebookCell
from .rule import Rule, SyntaxErrorRule
from .source import CodeBlock, doctest_blocks


def docstring_blocks(text: str) -> list[list[CodeBlock]]:
    """The ``>>>`` blocks of every module, class and function docstring, one list per docstring.

    Returns [] when the text has no ``>>>`` or Python's own parser rejects it.
    """
    if ">>>" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    out: list[list[CodeBlock]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if not body or not isinstance(body[0], ast.Expr):
            continue
        value = body[0].value
        if (
            not (isinstance(value, ast.Constant) and isinstance(value.value, str))
            or ">>>" not in value.value
        ):
            continue
        # The raw source lines (not the evaluated string, whose escapes would shift lines).
        first, last = value.lineno, value.end_lineno or value.lineno
        raw = "\n".join(lines[first - 1 : last])
        blocks = [_repair(b, lines) for b in doctest_blocks(raw, first - 1)]
        if blocks:
            out.append(blocks)
    return out


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
    :func:`xla_lint.source.doctest_blocks`). A notebook cell's lines are its own, never a session."""
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
    from .linter import lint_text  # the linter calls this module; import late

    scope = None
    out: list[Diagnostic] = []
    rules = repl_rules(rules)  # every docstring example is a `>>>` session
    for blocks in docstring_blocks(text):
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
            out.extend(d for d in diags if d.code != SyntaxErrorRule.code and not d.requires)
    return out
