"""Which of a file's top-level definitions must be used for one of its lines to run when another
module imports the file (:class:`ImportReach`).

A module's code runs in a program that imports it only in part: its module-level statements run
at import, its ``if __name__ == "__main__":`` block never does, and a function or class body runs
only when something uses that definition. For a line in ``def setup():`` the answer is the
definitions through which ``setup`` can be reached: ``setup`` itself and every other top-level
definition of the file that names it (``def main(): setup()``), transitively. The program model
(:meth:`xla_lint.program.model.ProgramModel.witness`) then asks whether a module of the program
that imports the file names one of them; a program that names none of them never runs the line
(unseen6: a CUDA module's ``setup()`` reading ``LOCAL_RANK``, which only its own torchrun
``__main__`` reaches, imported by an ``xmp.spawn`` script for two helpers).

Names are matched as words of the source text (a call, a subclass ``class B(A)``, a registry
``{"a": train_a}``, a string), so a use is missed only through names built at run time. A
definition that module-level code names, or that has decorators (``@app.command()`` registers
it), may run whenever the file is imported: nothing is restricted for it.
"""

from __future__ import annotations

import ast
import bisect
import re

#: The answer for a line in the ``if __name__ == "__main__":`` block: it runs only in the program
#: whose entry the file is (no identifier, so no importer's words hold it).
ENTRY_ONLY: tuple[str, ...] = ("<__main__>",)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The kinds of top-level statement.
_MODULE, _MAIN, _DEFINITION = 0, 1, 2


class ImportReach:
    """The top-level statements of one file (``syntax``: CPython's parse of ``text``), with the
    words each one's lines hold, decorators included. Built once per file that has findings."""

    def __init__(self, syntax: ast.Module, text: str) -> None:
        lines = text.splitlines()
        starts: list[int] = []
        self._statements: list[tuple[int, int, int, str, bool, frozenset[str]]] = []
        defined: set[str] = set()
        for stmt in syntax.body:
            decorators = getattr(stmt, "decorator_list", ())
            first = min([stmt.lineno, *(d.lineno for d in decorators)])
            last = stmt.end_lineno or stmt.lineno
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind, name = _DEFINITION, stmt.name
                defined.add(name)
            elif isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
                kind, name = _MAIN, ""
            else:
                kind, name = _MODULE, ""
            words = frozenset(_WORD.findall("\n".join(lines[first - 1 : last])))
            starts.append(first)
            self._statements.append((first, last, kind, name, bool(decorators), words))
        self._starts = starts
        self._defined = frozenset(defined)

    def of(self, line: int) -> tuple[str, ...]:
        """For the 1-based ``line`` of the file: ``()`` when it runs whenever the file is imported
        (module-level code, or a definition module-level code names or that is decorated);
        :data:`ENTRY_ONLY` in the ``__main__`` block; else the sorted names of the top-level
        definitions one of which an importer must name for the line to run."""
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0 or line > self._statements[i][1]:
            return ()  # between statements (a comment): nothing to restrict
        _, _, kind, name, decorated, _ = self._statements[i]
        if kind == _MAIN:
            return ENTRY_ONLY
        if kind == _MODULE or decorated:
            return ()
        names, todo = {name}, [name]
        while todo:
            wanted = todo.pop()
            for _, _, other_kind, other, other_decorated, words in self._statements:
                if wanted not in words or other == wanted:
                    continue
                if other_kind == _MODULE:
                    return ()  # module-level code names it: it may run at import
                if other_kind == _DEFINITION and other not in names:
                    if other_decorated:
                        return ()
                    names.add(other)
                    todo.append(other)
        return tuple(sorted(names))


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"``, either side first (CPython's tree; the LibCST twin is
    :func:`xla_lint.analysis.context.is_main_guard`)."""
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
    ):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )
