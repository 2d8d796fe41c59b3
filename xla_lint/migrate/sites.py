"""The torch_xla uses of one file: one :class:`Site` each, with its class, target and rewrite.

The file is walked once by :class:`MigrationVisitor` through the linter's own traversal
(:func:`xla_lint.linter.lint_text`: the same scopes, name resolution (``ctx.qnames``), report
policy and positions as the rules), which reports every use as a finding whose fix is the
rewrite; :func:`file_sites` turns them into sites. Uses found:

- calls and references of torch_xla names, however imported (``xm.mark_step()``,
  ``from torch_xla import runtime as xr``; ``with torch_xla.step():``), the outermost name of a
  chain only;
- upstream calls that name XLA by a string: ``torch.autocast("xla")``,
  ``init_process_group("xla")``, ``torch.compile(backend="openxla")``, ``torch.device("xla")``;
- ``import``/``from`` statements of torch_xla (deleted once nothing in the file uses them);
- environment variables torch_xla reads, set or read in code (``os.environ["PJRT_DEVICE"] =``,
  ``os.environ.get("XLA_USE_BF16")``, ``os.putenv``, ``os.environ.update``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from ..analysis.context import FileContext, literal_string
from ..analysis.names import dotted_name
from ..diagnostics import Diagnostic, Edit, Fix
from ..linter import lint_text, parse_source
from ..rule import PendingFix, Replacement, Rule
from ..rules.deprecated import env_assignments
from ..sources.text import line_starts, split_lines
from . import rewrites, table
from .table import Entry

_SEP = "\t"


@dataclass(frozen=True)
class Site:
    """One torch_xla use: where (``path``, 1-based ``line`` and ``column``), what (``api``,
    fully qualified; an environment variable as ``env:NAME``), its ``cls`` and ``target``
    (:mod:`xla_lint.migrate.table`), the ``phase`` of the migration order, the map's ``row``,
    ``by_mode`` (mechanical only in a one-process-per-device program) and ``fix`` (the rewrite,
    None when it is not written)."""

    path: str
    line: int
    column: int
    api: str
    cls: str
    target: str
    phase: str
    row: int | None
    by_mode: bool = False
    fix: Fix | None = None
    cell: int | None = None  # a notebook's code cell (1-based), for a site found in one
    source: str = "python"  # what was read: python, notebook, document, shell, requirements

    @property
    def fixable(self) -> bool:
        return self.fix is not None


class MigrationVisitor(Rule):
    """Reports every torch_xla use of a file (not a registered rule: only ``xla-lint migrate``
    runs it). A finding's message carries the site's fields (:func:`_encode`)."""

    code = "MIGRATE"
    name = "torchtpu-migration"
    summary = "A torch_xla use and its TorchTPU migration."
    message = "torch_xla use"
    explanation = "See docs/migrate.md."

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.covered: set[int] = set()
        self._used: dict[str, int] | None = None
        self._dotted: set[str] | None = None

    # -- helpers -----------------------------------------------------------------------------
    def _site(self, node: cst.CSTNode, api: str, entry: Entry, fix: PendingFix | None) -> None:
        self.report(node, _encode(api, entry), fix=fix)

    def _fix(self, entry: Entry, node: cst.CSTNode) -> PendingFix | None:
        if entry.rewrite is None or entry.cls in (table.DECISION,):
            return None
        rewrite = rewrites.REWRITES.get(entry.rewrite)
        if rewrite is None:
            return None
        fix = rewrite(self.ctx, node)
        if fix is not None and entry.cls != table.MECHANICAL:
            fix.safe = False  # behaviour-change and no-equivalent deletions: --unsafe-fixes
        return fix

    def _cover(self, node: cst.CSTNode) -> bool:
        """True when ``node`` is inside a name already reported (``xm`` of ``xm.mark_step``)."""
        if id(node) in self.covered:
            return True
        parent = self.ctx.parent()
        if parent is not None and id(parent) in self.covered:
            self.covered.add(id(node))
            return True
        return False

    def _torch_xla(self, node: cst.CSTNode) -> str | None:
        names = sorted(
            n for n in self.ctx.qnames(node) if n == "torch_xla" or n.startswith("torch_xla.")
        )
        if not names:
            return None
        mapped = [n for n in names if n in table.APIS]
        return (mapped or names)[0]

    # -- imports -----------------------------------------------------------------------------
    def _uses(self) -> dict[str, int]:
        """How often each name is used outside import statements (not as an attribute's or a
        keyword's name; a name LibCST shows elsewhere, e.g. a parameter, counts: an over-count
        only keeps an import)."""
        if self._used is None:
            counts = _net_names(self.ctx.flat.nodes)
            for node in self.ctx.flat.nodes:
                if type(node) in (cst.Import, cst.ImportFrom):
                    for name, n in _net_names(_subtree(node)).items():
                        counts[name] = counts.get(name, 0) - n
            self._used = counts
        return self._used

    def _chains(self) -> set[str]:
        """The dotted names written in the file outside imports (``torch_xla.debug.metrics.x``),
        with every prefix: a submodule an import loads may be reached through them."""
        if self._dotted is None:
            counts: dict[str, int] = {}
            for node in self.ctx.flat.nodes:
                if type(node) is cst.Attribute:
                    name = dotted_name(node)
                    if name is not None:
                        counts[name] = counts.get(name, 0) + 1
                elif type(node) in (cst.Import, cst.ImportFrom):
                    for sub in _attributes_in(node):
                        counts[sub] = counts.get(sub, 0) - 1
            out = {name for name, n in counts.items() if n > 0}
            self._dotted = out
        return self._dotted

    def _loads_needed(self, modules: list[str]) -> bool:
        """True when the file writes a chain through one of ``modules`` (the submodules an
        import loads), which deleting the import could leave unloaded."""
        chains = self._chains()
        return any(c == m or c.startswith(m + ".") for m in modules if "." in m for c in chains)

    def _import_site(
        self, node: cst.Import | cst.ImportFrom, apis: list[str], bound: list[str], loads: list[str]
    ) -> None:
        line = self.ctx.parent()
        fix = None
        if (
            not self._loads_needed(loads)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and line.body[0] is node
            and all(self._uses().get(b, 0) <= 0 for b in bound)
        ):
            block = self.ctx.parent(2)
            body = getattr(block, "body", ())
            if isinstance(block, cst.IndentedBlock) and len(body) == 1:
                fix = PendingFix(
                    "replace the unused torch_xla import with pass", [Replacement(node, "pass")]
                )
            else:
                fix = PendingFix("delete the unused torch_xla import", [Replacement(line, "")])
        for i, api in enumerate(apis):
            self._site(node, api, table.IMPORT, fix if i == 0 else None)

    def visit_Import(self, node: cst.Import) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        apis, bound, others = [], [], False
        for alias in node.names:
            name = _dotted(alias.name)
            if name == "torch_xla" or name.startswith("torch_xla."):
                apis.append(name)
                bound.append(
                    alias.asname.name.value
                    if alias.asname and isinstance(alias.asname.name, cst.Name)
                    else name.split(".")[0]
                )
            else:
                others = True
        if apis:
            self._import_site(node, apis, bound if not others else ["\0"], apis)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = _dotted(node.module)
        if not (module == "torch_xla" or module.startswith("torch_xla.")):
            return
        if isinstance(node.names, cst.ImportStar):
            self._site(node, f"{module}.*", table.IMPORT, None)
            return
        apis, bound = [], []
        for alias in node.names:
            name = _dotted(alias.name)
            apis.append(f"{module}.{name}")
            bound.append(
                alias.asname.name.value
                if alias.asname and isinstance(alias.asname.name, cst.Name)
                else name
            )
        self._import_site(node, apis, bound, [module, *apis])

    # -- uses --------------------------------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        if len(node.items) != 1:
            return
        item = node.items[0].item
        if isinstance(item, cst.Call) and "torch_xla.step" in self.ctx.qnames(item.func):
            entry = table.APIS["torch_xla.step"]
            self.covered.update((id(item), id(item.func)))
            self._site(node, "torch_xla.step", entry, self._fix(entry, node))

    def visit_Call(self, node: cst.Call) -> None:
        if self._cover(node):
            return
        for key, value in env_assignments(self.ctx, node):
            self._env(value, key)
        self._env_read(node)
        self._device_strings(node)
        names = self.ctx.qnames(node.func)
        if not names:
            return
        api = self._torch_xla(node.func)
        entry: Entry | None = None
        if api is not None:
            found = table.entry_for(api)
            if found is not None:
                api, entry = found
            if api in ("torch_xla.device", f"{table.XM}.xla_device") and node.args:
                if rewrites.device_index_zero(node):
                    entry = replace(entry, rewrite=None) if entry else None
                else:
                    entry = Entry(
                        table.DECISION,
                        'torch.device("tpu"): each process owns one device (tpu:0); an '
                        "explicit index means the process layout changes",
                        "device",
                        1,
                        names=("torch.device",),
                    )
        elif "torch.device" in names and rewrites.is_xla_device_string(node):
            api, entry = 'torch.device("xla")', table.APIS["torch.device"]
        elif names & {"torch.autocast", "torch.amp.autocast"} and rewrites.is_xla_autocast(node):
            api, entry = 'torch.autocast("xla")', table.APIS["torch.autocast"]
        elif table.INIT_PROCESS_GROUP in names and rewrites.is_xla_process_group(node):
            api, entry = (
                'torch.distributed.init_process_group("xla")',
                table.APIS[table.INIT_PROCESS_GROUP],
            )
        elif "torch.compile" in names and rewrites.is_openxla_compile(node):
            api, entry = 'torch.compile(backend="openxla")', table.APIS["torch.compile"]
        if api is None or entry is None:
            return
        self.covered.update((id(node), id(node.func)))
        self._site(node, api, entry, self._fix(entry, node))

    def _device_strings(self, node: cst.Call) -> None:
        """``device="xla"`` (any call: ``torch.zeros(..., device="xla")``) and ``.to("xla")``."""
        found = []
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                found.append(arg)
        if (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "to"
            and node.args
            and node.args[0].keyword is None
        ):
            found.append(node.args[0])
        for arg in found:
            value = literal_string(arg.value)
            if value is None or not (value == "xla" or value.startswith("xla:")):
                continue
            if value in ("xla", "xla:0"):
                entry = table.DEVICE_STRING
                fix = PendingFix(
                    'use the "tpu" device',
                    [Replacement(arg.value, rewrites.quote(arg.value, "tpu"))],
                )
            else:
                entry, fix = table.DEVICE_INDEX, None
            self.covered.add(id(arg.value))
            self._site(arg.value, f'device "{value}"', entry, fix)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node: cst.Attribute | cst.Name) -> None:
        if self._cover(node):
            return
        api = self._torch_xla(node)
        if api is None or self._in_import():  # the cheaper test first: most names are not torch_xla
            return
        found = table.entry_for(api)
        if found is None:
            return
        self.covered.add(id(node))
        api, entry = found
        fix = None
        if entry.rewrite == "optimizer" and isinstance(self.ctx.parent(), cst.Arg):
            fix = None  # a class passed as a value: left for the person
        self._site(node, api, entry, fix)

    def _in_import(self) -> bool:
        return any(isinstance(n, (cst.Import, cst.ImportFrom)) for n in self.ctx.stack[-6:])

    # -- environment -------------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        for key, value in env_assignments(self.ctx, node):
            self._env(value, key)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if "os.environ" not in self.ctx.qnames(node.value) or len(node.slice) != 1:
            return
        parent = self.ctx.parent()
        if isinstance(parent, cst.AssignTarget):
            return  # an assignment: visit_Assign reports it
        index = node.slice[0].slice
        if isinstance(index, cst.Index):
            key = literal_string(index.value)
            if key is not None:
                self._env(node, key)

    def _env_read(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        if not names & {"os.environ.get", "os.getenv", "os.environ.pop"} or not node.args:
            return
        key = literal_string(node.args[0].value)
        if key is not None:
            self._env(node, key)

    def _env(self, node: cst.CSTNode, key: str) -> None:
        entry = table.env_entry(key)
        if entry is not None and id(node) not in self.covered:
            self.covered.add(id(node))
            self._site(node, f"env:{key}", entry, None)


def _subtree(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


def _net_names(nodes) -> dict[str, int]:
    """How often each name is used among ``nodes``: Name nodes, less those that are an
    attribute's name (``.autocast`` of ``torch.autocast``) or a keyword (``device=``)."""
    counts: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, cst.Name):
            counts[node.value] = counts.get(node.value, 0) + 1
        elif isinstance(node, cst.Attribute):
            counts[node.attr.value] = counts.get(node.attr.value, 0) - 1
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            counts[node.keyword.value] = counts.get(node.keyword.value, 0) - 1
    return counts


def _attributes_in(node: cst.CSTNode) -> list[str]:
    """The dotted names of the Attribute nodes below ``node``."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is cst.Attribute:
            name = dotted_name(n)
            if name is not None:
                out.append(name)
        stack.extend(n.children)
    return out


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _encode(api: str, entry: Entry) -> str:
    """A site's fields as the finding's message (the linter's findings carry a message only)."""
    fields = (
        entry.cls,
        api,
        entry.phase,
        "" if entry.row is None else str(entry.row),
        "1" if entry.by_mode else "",
        entry.target,
    )
    return _SEP.join(f.replace(_SEP, " ") for f in fields)


def _decode(d: Diagnostic) -> Site:
    cls, api, phase, row, by_mode, target = d.message.split(_SEP, 5)
    return Site(
        d.path,
        d.line,
        d.column,
        api,
        cls,
        target,
        phase,
        int(row) if row else None,
        bool(by_mode),
        d.fix,
        d.cell,
    )


def _whole_lines(fix: Fix, text: str, starts: list[int]) -> Fix:
    """A deletion's edit widened to its whole line(s) when nothing else stands on them (no
    blank line left where the statement was)."""
    edits = []
    for e in fix.edits:
        if e.content == "" and e.end_line < len(starts):
            before = text[starts[e.line - 1] : starts[e.line - 1] + e.column - 1]
            after_start = starts[e.end_line - 1] + e.end_column - 1
            after = text[after_start : starts[e.end_line]]
            if not before.strip() and not after.strip():
                e = Edit(e.line, 1, e.end_line + 1, 1, "")
        edits.append(e)
    return replace(fix, edits=tuple(edits))


def _indent_unwrapped(fix: Fix, text: str, starts: list[int]) -> Fix:
    """The unwrapped ``with`` body's lines after the first indented to the ``with``'s column."""
    edits = []
    for e in fix.edits:
        prefix = text[starts[e.line - 1] : starts[e.line - 1] + e.column - 1]
        if prefix.strip():
            return replace(fix, edits=())  # not at the start of its line: not rewritten
        lines = e.content.split("\n")
        content = "\n".join([lines[0]] + [prefix + ln if ln else ln for ln in lines[1:]])
        edits.append(replace(e, content=content))
    return replace(fix, edits=tuple(edits))


def file_sites(text: str, path: str, module: str = "", is_package: bool = False) -> list[Site]:
    """Every torch_xla use in the Python source ``text`` (of ``path``, module ``module``), in
    order. A file that does not parse has none (the lint run reports it as XLA000). ``xla-lint
    migrate`` finds most files' sites in the lint's own traversal instead (the visitor is one of
    its :attr:`~xla_lint.config.Settings.extra_rules`, :func:`sites_of_diagnostics`); this parses
    the file again, for the files the lint's prefilter skips and for each round of ``--fix``."""
    if not may_name_xla(text):
        return []
    parsed = parse_source(text, path)
    if isinstance(parsed, Diagnostic):
        return []
    tree, syntax = parsed
    found, _ = lint_text(
        text,
        path,
        [MigrationVisitor],
        module=module,
        is_package=is_package,
        tree=tree,
        syntax=syntax,
    )
    return sites_of_diagnostics(found, text)


def may_name_xla(text: str) -> bool:
    """True when ``text`` can hold a site: it spells ``xla`` or ``XLA`` (``"xla"`` device
    strings, ``XLA_*`` variables) or ``PJRT_`` (``PJRT_DEVICE``)."""
    return "xla" in text or "XLA" in text or "PJRT_" in text


def sites_of_diagnostics(found: list[Diagnostic], text: str | None) -> list[Site]:
    """The sites of the :class:`MigrationVisitor` findings among ``found`` (a file's findings,
    ``text`` its source: a deletion's edit is widened to whole lines with it, a ``with``'s
    unwrapped body re-indented; None: no finding has a fix), in order. A finding made in a
    notebook cell keeps its cell (:attr:`Site.cell`)."""
    starts: list[int] = []
    out = []
    for d in found:
        if d.code != MigrationVisitor.code:
            continue
        if d.fix is not None and text is None:
            d = replace(d, fix=None)
        elif d.fix is not None and text is not None:
            if not starts:
                starts = line_starts(split_lines(text))
            fix = _whole_lines(d.fix, text, starts)
            if fix.description == rewrites.UNWRAP:
                fix = _indent_unwrapped(fix, text, starts)
            d = replace(d, fix=fix if fix.edits else None)
        out.append(_decode(d))
    out.sort(key=lambda s: (s.line, s.column, s.api))
    return out
