"""The import scan: a file's dotted module name and the facts the program model needs from it
(imports, entry point?), read from its bytes with regular expressions, without parsing.
"""

from __future__ import annotations

import functools
import os
import re

from ..sources.text import read_source
from .facts import FileFacts, import_prefixes, is_library_call, resolve_relative


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
    """:func:`xla_lint.program.facts.module_name` with the folder walk memoised (one ``stat`` per folder)."""
    absolute = os.path.abspath(path)
    folder, name = os.path.split(absolute)
    is_package = name == "__init__.py"
    parts = _package_of(folder)
    if not is_package:
        parts = (*parts, name[:-3] if name.endswith(".py") else os.path.splitext(name)[0])
    return ".".join(parts), is_package


# One import statement, matched where a statement starts (a line's start, or after a `;`).
_STATEMENT = re.compile(
    rb"[ \t]*(?:from[ \t]+(?P<dots>\.*)[ \t]*(?P<base>[\w.]*)[ \t]+import[ \t]*(?P<names>\([^)]*\)|[^\n#;]*)"
    rb"|import[ \t]+(?P<modules>[^\n#;]*))"
)


# A file that is not parsed is an entry when it has a main guard, or a statement at column 0
# that does work: a loop, a `with`, or a call that is not a library idiom (the line-based
# counterpart of xla_lint.analysis.context.is_entry_module); it defines tests when a line starts
# with what :data:`xla_lint.program.facts.TEST_DEFINITION` matches. One pattern finds them all,
# each beginning with the line break before the statement, so the regular expression engine
# looks only at line starts (the text gets a leading line break for its first line).
_TOP_LEVEL = re.compile(
    rb"\n(?:(?P<work>for|while|with|async\s+for|async\s+with)\b"
    rb"|(?P<test>(?:async[ \t]+)?def[ \t]+test|class[ \t]+(?:Test|\w+\([^)]*TestCase))"
    rb"""|(?P<main>if\s+(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__))"""
    rb"|(?P<call>[A-Za-z_][\w.]*)\()"
)


_TYPE_CHECKING = re.compile(
    rb"\n(?P<indent>[ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#[^\n]*)?(?=\n|$)"
)


def _type_checking_blocks(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of ``if TYPE_CHECKING:`` bodies (their imports never run): the lines after
    the ``if`` that are blank or indented deeper than it. ``data`` starts with a line break."""
    out = []
    for m in _TYPE_CHECKING.finditer(data):
        indent = len(m.group("indent"))
        start = end = m.end()
        while end < len(data):
            nl = data.find(b"\n", end + 1)
            line_end = len(data) if nl < 0 else nl
            line = data[end + 1 : line_end]
            if line.strip() and len(line) - len(line.lstrip(b" \t")) <= indent:
                break
            end = line_end
        out.append((start, end))
    return out


_CALLED = re.compile(
    rb"([A-Za-z_]\w*)\s*\("
)  # names a file calls (a function fact counts when called)


def _top_level(data: bytes, is_package: bool, path: str) -> tuple[bool, bool]:
    """(is an entry, defines tests) of ``data`` (starting with a line break): see :data:`_TOP_LEVEL`."""
    counts = not (
        is_package or path.endswith("_pb2.py")
    )  # generated protocol buffers register at import
    entry = counts and os.path.basename(path) == "__main__.py"
    tests = False
    for m in _TOP_LEVEL.finditer(data):
        if m.group("test") is not None:
            tests = True
        elif counts and not entry:
            call = m.group("call")
            entry = call is None or not is_library_call(call.decode("ascii"))
        if tests and (entry or not counts):
            break
    return entry, tests


def _imported(data: bytes, module: str, is_package: bool) -> tuple[set[str], dict[str, int]]:
    """The modules (and ``module.name`` of each ``from module import name``) the import
    statements of ``data`` name, those in ``if TYPE_CHECKING:`` bodies left out, and for the
    names only relative imports gave, the depth of their anchor package
    (:func:`~xla_lint.program.facts.import_prefixes`); ``data`` starts with a line break. One
    scan: each ``import`` word, then the statement it is in."""
    found: set[str] = set()
    absolute: set[str] = set()
    anchors: dict[str, int] = {}
    skipped = _type_checking_blocks(data) if b"TYPE_CHECKING" in data else ()
    done: set[int] = set()
    find = data.find
    at = find(b"import")
    while at >= 0:
        line = data.rfind(b"\n", 0, at) + 1
        semicolon = data.rfind(b";", line, at)
        start = line if semicolon < 0 else semicolon + 1
        at = find(b"import", at + 6)
        if start in done:
            continue
        done.add(start)
        m = _STATEMENT.match(data, start)
        if m is None:
            continue
        if skipped and any(a <= start - (start > line) < b for a, b in skipped):
            continue
        if m.group("modules") is not None:
            for item in m.group("modules").decode("utf-8", "replace").split(","):
                name = item.strip().split(" ")[0].rstrip("\\")
                if name:
                    found.add(name)
                    absolute.add(name)
            continue
        level = len(m.group("dots"))
        base = m.group("base").decode("utf-8", "replace")
        anchor = ""
        if level:
            anchor = resolve_relative(module, is_package, level, None)
            base = resolve_relative(module, is_package, level, base or None)
        names = [base] if base else []
        for item in m.group("names").decode("utf-8", "replace").strip("()\\ \t").split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name and name != "*" and name.isidentifier():
                names.append(f"{base}.{name}" if base else name)
        for name in names:
            found.add(name)
            if not level:
                absolute.add(name)
            else:
                depth = anchor.count(".") + 1 if anchor else 1
                anchors[name] = min(depth, anchors.get(name, depth))
    return found, {n: d for n, d in anchors.items() if n not in absolute}


def import_facts(path: str, data: bytes) -> FileFacts | None:
    """The facts of a file that is not parsed: its module name, the modules it imports and
    whether it is an entry; no other fact is set.

    Such a file may still tie a program together (``train.py`` imports the module that
    calls ``use_spmd()`` and the one that shards), so its imports are read with a
    line-based scan of ``import``/``from ... import`` statements: no parse, and an import
    written inside a string counts too (the facts are "may" facts). None when it imports nothing.
    The scan visits each ``import`` word once; the entry and test tests look only at line
    starts (``benchmarks/program_model.py --scan`` measures it).
    """
    if b"import" not in data:
        return None
    module, is_package = module_of(path)
    # `from x \` + newline + `import y`: one statement (offsets kept); a leading line break
    # makes every line start one (the patterns above begin with it).
    data = b"\n" + data.replace(b"\\\n", b"  ")
    found, anchors = _imported(data, module, is_package)
    if not found:
        return None
    prefixes = import_prefixes(found, anchors)
    entry, tests = _top_level(data, is_package, path)
    return FileFacts(
        module=module,
        imports=frozenset(p for p in prefixes if p),
        entry=entry,
        defines_tests=tests,
    )


def called_names(path: str) -> set[str]:
    """The names a file that is not parsed calls (``name(`` anywhere in it), read again from
    disk only when the program model needs them (a function-level fact to match)."""
    try:
        data = read_source(path)
    except OSError:
        return set()
    return {m.decode("ascii") for m in _CALLED.findall(data)}
