"""Settings: ``[tool.xla-lint]`` in the nearest ``pyproject.toml``, then command-line options.

Keys (all optional)::

    [tool.xla-lint]
    select = ["XLA0", "XLA2"]        # codes or prefixes; default: every rule on by default
    extend-select = ["XLA900"]       # added to the default (or to `select`)
    ignore = ["XLA004"]
    exclude = ["third_party/", "*_pb2.py"]   # extra glob patterns (matched on the path and each part)
    per-file-ignores = { "tests/*" = ["XLA004"] }
    target-version = "2.9"           # torch_xla version linted for
    max-file-size = "2MB"            # files larger than this are skipped, with a warning ("0": no limit)
    preview = false                  # also run preview rules (new, precision on real code not yet known) and stable rules' preview behaviour
    unsafe-fixes = false             # --fix also applies fixes marked unsafe (they change what the code does)
    unfixable = ["XLA005"]           # codes (or prefixes) whose fixes are never offered or applied
    extend-safe-fixes = ["XLA005"]   # treat these codes' unsafe fixes as safe
    extend-unsafe-fixes = ["XLA013"] # treat these codes' safe fixes as unsafe
    docs = false                     # lint code blocks of .md/.rst found in folders, and docstring examples
    cache-dir = ".xla_lint_cache"
    # Entries whose launcher lives outside the tree, and the mode it runs them in:
    # "spmd", "multiprocess", "unbuffered" (a string or a list), or "single" (an entry, nothing set).
    # Patterns match as `exclude` does: the path from the configuration's folder, or any part of
    # it ("train.py" is every train.py; "tools/train.py" that one)
    entry-points = { "train.py" = "spmd", "scripts/*.py" = ["multiprocess", "unbuffered"] }

An unknown key, code or value raises :class:`ConfigError`, whose message names it.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .catalogue import RULES
from .sources.text import MAX_CONFIG_BYTES, read_source

DEFAULT_TARGET = (2, 9)
DEFAULT_MAX_FILE_SIZE = 2_000_000  # bytes: LibCST needs ~30 s and ~1 GB per MB of source
KNOWN_KEYS = {
    "max-file-size",
    "preview",
    "unsafe-fixes",
    "unfixable",
    "extend-safe-fixes",
    "extend-unsafe-fixes",
    "select",
    "extend-select",
    "ignore",
    "exclude",
    "per-file-ignores",
    "target-version",
    "docs",
    "cache-dir",
    "force-exclude",
    "entry-points",
}
ENTRY_MODES = ("spmd", "multiprocess", "unbuffered", "single")


class ConfigError(Exception):
    """A configuration or option value that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Settings:
    """The merged configuration of one run. ``selected`` is the final set of rule codes."""

    selected: frozenset[str]
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    target_version: tuple[int, int] = DEFAULT_TARGET
    docs: bool = False
    force_exclude: bool = (
        False  # apply `exclude` to files named explicitly too (pre-commit passes every file)
    )
    cache_dir: str = ".xla_lint_cache"
    root: str = "."
    config_path: str | None = None
    # `entry-points`: (glob pattern, facts declared) for entries launched from outside the tree.
    entry_points: tuple[tuple[str, frozenset[str]], ...] = ()
    preview: bool = False
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; 0: no limit
    # Fixes, as in Ruff: `--fix` applies unsafe ones too when `unsafe_fixes`; codes (prefixes)
    # in `unfixable` get no fix; `extend_safe_fixes`/`extend_unsafe_fixes` re-mark a code's fixes.
    unsafe_fixes: bool = False
    unfixable: tuple[str, ...] = ()
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    # Things the user asked for that this run does not do (a preview rule selected by its code
    # without preview mode); the command line prints them as warnings.
    warnings: tuple[str, ...] = ()
    # The command-line values this was built with (build_settings' keyword arguments), so that a
    # folder's own configuration can be merged with them as this one was (:meth:`nest`).
    overrides: tuple[tuple[str, Any], ...] = ()
    # `--config` or `--isolated`: one configuration for every file, none found per folder.
    fixed: bool = False
    # The configurations of folders below this one's, deepest first: (absolute folder, Settings);
    # a file under one of them is linted with it (:meth:`for_path`), as Ruff uses each file's
    # nearest configuration.
    nested: tuple[tuple[str, Settings], ...] = ()
    # Rule classes run on every parsed file besides the selected ones, whatever the selection
    # (``xla-lint migrate`` runs its visitor, :class:`xla_lint.migrate.sites.MigrationVisitor`,
    # in the lint's own traversal: each file is parsed once). Not a configuration key.
    extra_rules: tuple[type, ...] = ()

    def for_path(self, path: str) -> Settings:
        """The settings ``path`` is linted with: those of the nearest folder above it with its
        own ``[tool.xla-lint]`` (:meth:`nest`), else these."""
        if not self.nested:
            return self
        full = os.path.abspath(path)
        for folder, settings in self.nested:
            if full.startswith(folder + os.sep):
                return settings
        return self

    def nest(self, configs: Sequence[str]) -> Settings:
        """These settings, with the ``pyproject.toml`` files among ``configs`` that have a
        ``[tool.xla-lint]`` table (other than this one's) applying to the files below their
        folders, each merged with the same command-line values. Unchanged with ``--config`` or
        ``--isolated``. Raises :class:`ConfigError` naming a nested file that is invalid."""
        if self.fixed:
            return self
        own = os.path.abspath(self.config_path) if self.config_path else None
        found = []
        for config in configs:
            path = os.path.abspath(config)
            if os.path.basename(path) != "pyproject.toml" or path == own:
                continue
            if find_pyproject(Path(path).parent) != Path(path).resolve():
                continue  # no [tool.xla-lint] table of its own
            nested = build_settings(
                cwd=Path(path).parent, config_file=Path(path), **dict(self.overrides)
            )
            found.append(
                (
                    os.path.dirname(path),
                    replace(nested, cache_dir=self.cache_dir, extra_rules=self.extra_rules),
                )
            )
        if not found:
            return self
        found.sort(key=lambda item: -len(item[0]))
        return replace(self, nested=tuple(found))

    def declared_entries(self, paths) -> dict[str, frozenset[str]]:
        """The paths among ``paths`` that ``entry-points`` names, with the facts declared for each."""
        out: dict[str, frozenset[str]] = {}
        if not self.entry_points and not self.nested:
            return out
        for path in paths:
            own = self.for_path(path)
            for pattern, facts in own.entry_points:
                if _path_matches(path, pattern, own.root):
                    out[path] = out.get(path, frozenset()) | facts
        return out

    def codes_for(self, path: str) -> frozenset[str]:
        """Codes enabled for ``path`` (by its nearest configuration) after ``per-file-ignores``."""
        own = self.for_path(path)
        codes = own.selected
        for pattern, ignored in own.per_file_ignores:
            if _path_matches(path, pattern, own.root):
                codes = frozenset(c for c in codes if not _has_prefix(c, tuple(ignored)))
        return codes

    def fix_safety(self, code: str, safe: bool) -> bool | None:
        """How a fix of ``code`` that its rule marks ``safe`` (or not) is treated in this run.

        True: safe (``--fix`` applies it); False: unsafe (applied only with ``--unsafe-fixes``);
        None: the code is ``unfixable``, the fix is not offered at all. ``unfixable`` wins, then
        ``extend-unsafe-fixes`` (the more cautious), then ``extend-safe-fixes``.
        """
        if _has_prefix(code, self.unfixable):
            return None
        if _has_prefix(code, self.extend_unsafe_fixes):
            return False
        if _has_prefix(code, self.extend_safe_fixes):
            return True
        return safe

    def fingerprint(self) -> str:
        """Text that changes whenever a setting that changes diagnostics changes (cache key)."""
        return repr(
            (
                sorted(self.selected),
                self.target_version,
                self.docs,
                [(folder, nested.fingerprint()) for folder, nested in self.nested],
                [f"{r.__module__}.{r.__qualname__}" for r in self.extra_rules],
            )
        )


def _specificity(code: str, prefixes) -> int:
    """The length of the longest of ``prefixes`` that ``code`` starts with; 0 when none does
    (a rule on by default is selected that weakly), -1 for an ignore list that none matches."""
    return max((len(p) for p in prefixes if code.startswith(p)), default=-1)


def _has_prefix(code: str, prefixes: tuple[str, ...]) -> bool:
    return any(code.startswith(p) for p in prefixes)


def _path_matches(path: str, pattern: str, root: str) -> bool:
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path(root).resolve()).as_posix()
    except (ValueError, OSError):
        rel = p.as_posix()
    pattern = pattern.rstrip("/")
    return (
        fnmatch.fnmatch(rel, pattern)
        or fnmatch.fnmatch(p.name, pattern)
        or any(fnmatch.fnmatch(part, pattern) for part in Path(rel).parts)
        or fnmatch.fnmatch(rel, pattern + "/*")
    )


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.xla-lint]`` table."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.exists() and not candidate.is_file():  # a FIFO, a socket, a folder
            raise ConfigError(
                f"{candidate}: not a regular file, so its configuration cannot be read"
            )
        if candidate.is_file():
            try:
                data = tomllib.loads(read_source(str(candidate), MAX_CONFIG_BYTES).decode("utf-8"))
            except OSError as exc:
                raise ConfigError(f"{candidate}: cannot read ({exc.strerror or exc})") from None
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{candidate}: not valid TOML: {exc}") from None
            tool = data.get("tool")
            if (
                isinstance(tool, dict) and "xla-lint" in tool
            ):  # `tool = 5` is some other tool's business
                return candidate
    return None


def load_table(path: Path, required: bool = False) -> dict[str, Any]:
    """The ``[tool.xla-lint]`` table of ``path``; raises ConfigError on bad TOML, and with
    ``required`` (a file named by ``--config``) when the file has no such table: its settings
    would otherwise be silently the defaults."""
    try:
        data = tomllib.loads(read_source(str(path), MAX_CONFIG_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table")
    if required and "xla-lint" not in tool:
        raise ConfigError(
            f"{path}: no [tool.xla-lint] table (the file --config names must have one)"
        )
    table = tool.get("xla-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.xla-lint] must be a table")
    return table


# torch_xla's releases: 1.5 ... 1.13, then 2.0 ... 2.9 (the last).
RELEASES = frozenset({(1, minor) for minor in range(5, 14)} | {(2, minor) for minor in range(10)})


def parse_version(text: str) -> tuple[int, int]:
    """``"2.9"`` (or ``"2.9.0"``) -> ``(2, 9)``; raises ConfigError for anything that is not a
    torch_xla release in :data:`RELEASES` (``"2"``, ``"3.0"``, ``"1.0"``, ``"2.9rc1"``)."""
    parts = str(text).strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() for p in parts):
        raise ConfigError(f"target-version must look like '2.9', got {text!r}")
    version = int(parts[0]), int(parts[1])
    if version not in RELEASES:
        raise ConfigError(
            f"target-version {text!r} is not a torch_xla release (1.5 to 1.13, 2.0 to 2.9)"
        )
    return version


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}


def parse_size(value: Any, key: str, source: str) -> int:
    """``"2MB"``, ``"512 KiB"``, ``"0"`` or a whole number of bytes -> bytes (0: no limit);
    ConfigError naming ``key`` and ``source`` otherwise."""
    error = ConfigError(
        f'{source}: {key} must be a size such as "2MB", "512KB" or "0" (no limit), got {value!r}'
    )
    if isinstance(value, bool):
        raise error
    if isinstance(value, int):
        if value < 0:
            raise error
        return value
    if not isinstance(value, str):
        raise error
    text = value.strip().upper().replace(" ", "")
    number = text.rstrip("KMGTIB")
    unit = text[len(number) :]
    try:
        amount = float(number)
    except ValueError:
        raise error from None
    if unit not in _SIZE_UNITS or amount < 0 or amount != amount or amount == float("inf"):
        raise error
    return int(amount * _SIZE_UNITS[unit])


def _version_of(value: Any, key: str, source: str) -> tuple[int, int]:
    """``value`` as a (major, minor) torch_xla version; ConfigError naming ``source`` otherwise.

    Only a string is taken: TOML reads an unquoted ``2.10`` as the number 2.1.
    """
    if not isinstance(value, str):
        raise ConfigError(
            f'{source}: {key} must be a quoted string such as "2.9" (an unquoted 2.10 is the number 2.1)'
        )
    try:
        return parse_version(value)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _codes(value: Any, key: str, source: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{source}: {key} must be a list of rule codes, e.g. ["XLA001"]')
    known = [r.code for r in RULES]
    out = []
    names = {r.name: r.code for r in RULES}
    for written in value:
        v = written.strip().upper()
        if v == "ALL":
            v = "XLA"
        if not any(code.startswith(v) for code in known) or not v.startswith("XLA"):
            named = names.get(written.strip().lower())
            if named is not None:  # `--select per-replica-seed`: as in Ruff, codes only
                raise ConfigError(
                    f"{source}: {written.strip()!r} in {key} is a rule name; "
                    f"{key} takes codes: {named}"
                )
            raise ConfigError(f"{source}: unknown rule code {v!r} in {key}")
        out.append(v)
    return out


def build_settings(
    *,
    cwd: Path,
    config_file: Path | None = None,
    select: list[str] | None = None,
    extend_select: list[str] | None = None,
    ignore: list[str] | None = None,
    exclude: list[str] | None = None,
    target_version: str | None = None,
    docs: bool | None = None,
    cache_dir: str | None = None,
    isolated: bool = False,
    force_exclude: bool | None = None,
    entry_points: dict[str, Any] | None = None,
    preview: bool | None = None,
    max_file_size: str | None = None,
    unsafe_fixes: bool | None = None,
    start: Path | None = None,
) -> Settings:
    """Merge the config file (found from ``cwd`` unless given) with command-line values.

    ``start``: the folder of what is linted (the folder holding every path named); the nearest
    ``[tool.xla-lint]`` at or above it is used, as Ruff uses the nearest configuration, so
    ``xla-lint proj`` from the parent folder reads ``proj/pyproject.toml``. When ``start`` has
    none above it (a path outside the current folder), the one found from ``cwd`` applies.

    Command-line ``select``/``ignore`` replace the file's; ``extend_select`` and
    ``exclude`` add to them. Raises ConfigError with a one-line message.
    """
    overrides = tuple(
        (key, value)
        for key, value in (
            ("select", select),
            ("extend_select", extend_select),
            ("ignore", ignore),
            ("exclude", exclude),
            ("target_version", target_version),
            ("docs", docs),
            ("cache_dir", cache_dir),
            ("force_exclude", force_exclude),
            ("entry_points", entry_points),
            ("preview", preview),
            ("max_file_size", max_file_size),
            ("unsafe_fixes", unsafe_fixes),
        )
        if value is not None
    )
    path = None
    table: dict[str, Any] = {}
    if not isolated:
        path = config_file or (start is not None and find_pyproject(start)) or find_pyproject(cwd)
        if path is not None:
            table = load_table(path, required=config_file is not None)
    source = str(path) if path else "configuration"
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r} in [tool.xla-lint]")

    file_select = _codes(table["select"], "select", source) if "select" in table else None
    if file_select == []:  # as `--select ''` on the command line: nothing would be checked
        raise ConfigError(
            f"{source}: select = [] turns every rule off; remove it for the default rules, "
            "or list codes"
        )
    file_extend = _codes(table.get("extend-select", []), "extend-select", source)
    file_ignore = _codes(table.get("ignore", []), "ignore", source)
    cli_select = _codes(select, "--select", "command line") if select else None
    cli_extend = _codes(extend_select, "--extend-select", "command line") if extend_select else []
    cli_ignore = _codes(ignore, "--ignore", "command line") if ignore else None

    preview_on = table.get("preview", False) if preview is None else preview
    if not isinstance(preview_on, bool):
        raise ConfigError(f"{source}: preview must be true or false")
    unsafe_on = table.get("unsafe-fixes", False) if unsafe_fixes is None else unsafe_fixes
    if not isinstance(unsafe_on, bool):
        raise ConfigError(f"{source}: unsafe-fixes must be true or false")
    fix_lists = {
        key: tuple(_codes(table.get(key, []), key, source))
        for key in ("unfixable", "extend-safe-fixes", "extend-unsafe-fixes")
    }
    chosen = cli_select if cli_select is not None else file_select
    ignored = cli_ignore if cli_ignore is not None else file_ignore
    extend = file_extend + cli_extend
    selected = set()
    warnings = []
    for rule in RULES:
        on = (
            any(rule.code.startswith(p) for p in chosen)
            if chosen is not None
            else rule.default_enabled
        )
        on = on or any(rule.code.startswith(p) for p in extend)
        if rule.preview and not preview_on:
            # As in Ruff: a preview rule runs only in preview mode, even when selected by its code.
            if rule.code in (chosen or ()) or rule.code in extend:
                warnings.append(
                    f"{rule.code} ({rule.name}) is a preview rule: it runs only with --preview "
                    "(or `preview = true` in [tool.xla-lint])"
                )
            continue
        # As in Ruff, the more specific of a select and an ignore that both match wins (a tie:
        # the ignore): `--ignore XLA --select XLA004` runs XLA004, `--select XLA0 --ignore XLA004` not.
        chosen_by = (
            _specificity(rule.code, chosen)
            if chosen is not None
            else (0 if rule.default_enabled else -1)
        )
        if on and _specificity(rule.code, ignored) < max(
            chosen_by, _specificity(rule.code, extend)
        ):
            selected.add(rule.code)

    excl = table.get("exclude", [])
    if not isinstance(excl, list) or not all(isinstance(e, str) for e in excl):
        raise ConfigError(f"{source}: exclude must be a list of glob patterns")
    pfi_raw = table.get("per-file-ignores", {})
    if not isinstance(pfi_raw, dict):
        raise ConfigError(f"{source}: per-file-ignores must be a table of pattern = [codes]")
    pfi = tuple(
        (pat, frozenset(_codes(codes, f"per-file-ignores.{pat}", source)))
        for pat, codes in pfi_raw.items()
    )

    if target_version is not None:
        version = _version_of(target_version, "--target-version", "command line")
    else:
        version = _version_of(table.get("target-version", "2.9"), "target-version", source)
    doc_flag = table.get("docs", False) if docs is None else docs
    if not isinstance(doc_flag, bool):
        raise ConfigError(f"{source}: docs must be true or false")
    force = table.get("force-exclude", False) if force_exclude is None else force_exclude
    if not isinstance(force, bool):
        raise ConfigError(f"{source}: force-exclude must be true or false")
    cdir = cache_dir or table.get("cache-dir", ".xla_lint_cache")
    if not isinstance(cdir, str):
        raise ConfigError(f"{source}: cache-dir must be a string")
    if not cdir.strip():  # "" would write the cache's files into the project's own folder
        raise ConfigError(f"{source}: cache-dir must name a folder (it is empty)")
    if max_file_size is not None:
        size_limit = parse_size(max_file_size, "--max-file-size", "command line")
    else:
        size_limit = parse_size(
            table.get("max-file-size", DEFAULT_MAX_FILE_SIZE), "max-file-size", source
        )
    entries = _entry_points(table.get("entry-points", {}), source)
    if entry_points:
        entries += _entry_points(entry_points, "entry points")
    root = str(path.parent) if path is not None else str(cwd)
    if path is not None and cache_dir is None and not Path(cdir).is_absolute():
        cdir = str(Path(root) / cdir)
    return Settings(
        selected=frozenset(selected),
        exclude=tuple(excl) + tuple(exclude or ()),
        per_file_ignores=pfi,
        target_version=version,
        docs=bool(doc_flag),
        force_exclude=force,
        cache_dir=cdir,
        root=root,
        config_path=str(path) if path else None,
        entry_points=entries,
        preview=preview_on,
        max_file_size=size_limit,
        unsafe_fixes=unsafe_on,
        unfixable=fix_lists["unfixable"],
        extend_safe_fixes=fix_lists["extend-safe-fixes"],
        extend_unsafe_fixes=fix_lists["extend-unsafe-fixes"],
        warnings=tuple(warnings),
        overrides=overrides,
        fixed=isolated or config_file is not None,
    )


def _entry_points(value: Any, source: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``{pattern: mode or [modes]}`` checked; ConfigError naming ``source`` otherwise."""
    if not isinstance(value, dict):
        raise ConfigError(
            f'{source}: entry-points must be a table of pattern = mode, e.g. {{ "train.py" = "spmd" }}'
        )
    out = []
    for pattern, modes in value.items():
        listed = [modes] if isinstance(modes, str) else modes
        if (
            not isinstance(listed, list)
            or not listed
            or not all(isinstance(m, str) for m in listed)
        ):
            raise ConfigError(
                f"{source}: entry-points.{pattern} must be one of {', '.join(ENTRY_MODES)} or a list of them"
            )
        bad = [m for m in listed if m not in ENTRY_MODES]
        if bad:
            raise ConfigError(
                f"{source}: entry-points.{pattern}: unknown mode {bad[0]!r} "
                f"(one of {', '.join(ENTRY_MODES)})"
            )
        if "single" in listed and len(set(listed)) > 1:
            raise ConfigError(
                f'{source}: entry-points.{pattern}: "single" declares no mode; it cannot go '
                f"with {', '.join(sorted(set(listed) - {'single'}))}"
            )
        glob = pattern.strip()
        while glob.startswith("./"):
            glob = glob[2:]
        if not glob or glob.startswith("../"):
            raise ConfigError(
                f"{source}: entry-points: {pattern!r} names no file in the tree "
                f"(patterns are relative to the folder of the configuration)"
            )
        out.append((glob, frozenset(listed)))
    return tuple(out)


def with_selected(settings: Settings, codes: frozenset[str]) -> Settings:
    return replace(settings, selected=codes)
