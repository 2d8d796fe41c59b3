"""The import scan: a file's dotted module name and the facts the program model needs from it
(imports, entry point?), read from its bytes with regular expressions, without parsing.
"""

from __future__ import annotations

import functools
import os
import re

from ..sources.text import read_source
from .facts import TEST_DEFINITION, FileFacts, is_library_call, resolve_relative


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


_IMPORT = re.compile(
    rb"(?:^|;)[ \t]*(?:from[ \t]+(?P<dots>\.*)[ \t]*(?P<base>[\w.]*)[ \t]+import[ \t]*(?P<names>\([^)]*\)|[^\n#;]*)"
    rb"|import[ \t]+(?P<modules>[^\n#;]*))",
    re.M,
)


# A file that is not parsed is an entry when it has a main guard, or a statement at column 0
# that does work: a loop, a `with`, or a call that is not a library idiom (the line-based
# counterpart of xla_lint.analysis.context.is_entry_module).
_MAIN_GUARD = re.compile(
    rb"""^if\s+(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)""", re.M
)


_TOP_WORK = re.compile(
    rb"^(?:(?:for|while|with|async\s+for|async\s+with)\b|(?P<call>[A-Za-z_][\w.]*)\()", re.M
)


_TYPE_CHECKING = re.compile(
    rb"^(?P<indent>[ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#[^\n]*)?$", re.M
)


def _type_checking_blocks(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of ``if TYPE_CHECKING:`` bodies (their imports never run): the lines after
    the ``if`` that are blank or indented deeper than it."""
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


def _does_work(data: bytes, is_package: bool, path: str) -> bool:
    if is_package or path.endswith("_pb2.py"):  # generated protocol buffers register at import
        return False
    if os.path.basename(path) == "__main__.py" or _MAIN_GUARD.search(data):
        return True
    for m in _TOP_WORK.finditer(data):
        call = m.group("call")
        if call is None:
            return True
        if is_library_call(call.decode("ascii")):
            continue
        return True
    return False


def import_facts(path: str, data: bytes) -> FileFacts | None:
    """The facts of a file that is not parsed: its module name, the modules it imports and
    whether it is an entry; no other fact is set.

    Such a file may still tie a program together (``train.py`` imports the module that
    calls ``use_spmd()`` and the one that shards), so its imports are read with a
    line-based scan of ``import``/``from ... import`` statements: no parse, and an import
    written inside a string counts too (the facts are "may" facts). None when it imports nothing.
    """
    if b"import" not in data:
        return None
    module, is_package = module_of(path)
    found: set[str] = set()
    data = data.replace(
        b"\\\n", b"  "
    )  # `from x \` + newline + `import y`: one statement (offsets kept)
    skipped = _type_checking_blocks(data)
    for m in _IMPORT.finditer(data):
        if skipped and any(a <= m.start() < b for a, b in skipped):
            continue
        if m.group("modules") is not None:
            for item in m.group("modules").decode("utf-8", "replace").split(","):
                name = item.strip().split(" ")[0].rstrip("\\")
                if name:
                    found.add(name)
            continue
        level = len(m.group("dots"))
        base = m.group("base").decode("utf-8", "replace")
        if level:
            base = resolve_relative(module, is_package, level, base or None)
        if base:
            found.add(base)
        for item in m.group("names").decode("utf-8", "replace").strip("()\\ \t").split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name and name != "*" and name.isidentifier():
                found.add(f"{base}.{name}" if base else name)
    if not found:
        return None
    prefixes = {".".join(n.split(".")[: i + 1]) for n in found for i in range(n.count(".") + 1)}
    return FileFacts(
        module=module,
        imports=frozenset(p for p in prefixes if p),
        entry=_does_work(data, is_package, path),
        defines_tests=bool(TEST_DEFINITION.search(data)),
    )


def called_names(path: str) -> set[str]:
    """The names a file that is not parsed calls (``name(`` anywhere in it), read again from
    disk only when the program model needs them (a function-level fact to match)."""
    try:
        data = read_source(path)
    except OSError:
        return set()
    return {m.decode("ascii") for m in _CALLED.findall(data)}
