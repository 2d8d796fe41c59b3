"""Write ``xla_lint/data/torchtpu_api.json``: TorchTPU 0.2.0's public names, read from its wheel.

Usage::

    python tools/torchtpu_api.py [--wheels /work/wheels] [--out xla_lint/data/torchtpu_api.json]

The wheel is downloaded once into ``--wheels`` (``pip download --no-deps torch-tpu==0.2.0``,
a folder outside the repository) and never installed or imported: its Python sources are read
with :mod:`ast` only. What is read:

- ``torch_tpu/_internal/public_api.py`` ``_PUBLIC_MODULES``: the public modules
  (``torch.tpu``, ``torch.tpu.distributed``, ...), each export's target
  (``"torch_tpu._internal.pkg.mod:Qual.name"``) and whether it is a ``Property``;
- the target's definition in its module, followed through class attributes and module aliases
  (``precision = _precision_module.precision``), and its lifecycle decorator from
  ``torch_tpu/_internal/utils/annotations.py``: ``@experimental``, ``@stable``,
  ``@deprecated(version=...)`` or ``@internal_or_experimental(internal_when=torch >= X,
  prefer=...)`` (internal, and raising from user code, on torch >= X); an export without one
  is stable, and the ``__tt_api_stages__`` map (``ApiStageInfo(stage=Stage.X)``) of its module
  decides the attributes it lists.

Also recorded, for the TorchTPU rules (:mod:`xla_lint.rules.torchtpu`):

- ``signatures``: each public function's parameters (name, kind, default as source text), read
  from its ``def`` (``torch.tpu.ops.splash_sdpa``'s keyword-only ``is_causal=True``);
- ``deprecated_defs``: every function or method of the wheel marked deprecated, public or not:
  decorated ``@deprecated(version=..., reason=...)``, or warning through
  ``_compat.warn_deprecation_with_skip("...")`` (``torch_tpu._internal.pallas.pallas``'s
  ``custom_jax_kernel`` and its ``get_pallas_mesh`` alias);
- ``wheel_modules``: the dotted name of every Python module in the wheel (``torch_tpu.api`` is
  not one), and ``package_attrs``: the names ``torch_tpu/__init__.py`` binds at its top level
  (``tpu_device`` is not one);
- ``environment``: every ``TORCH_TPU_*`` name the wheel spells, in its Python sources and in
  the strings of its compiled libraries (``.so``), where most variables are read;
- ``metadata``: the wheel's ``Requires-Dist`` (``torch>=2.11.0,<=2.15.0``, ``libtpu>=0.0.50``)
  and ``Requires-Python``, which ``xla-lint migrate`` names at a ``torch_xla`` requirement pin.

The migration tool (:mod:`xla_lint.migrate`) and the rules never read the wheel: they read the
committed JSON, and a test fails when a suggested target is not a public, non-internal name in it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile

VERSION = "0.2.0"
PUBLIC_API = "torch_tpu/_internal/public_api.py"
STAGES = ("experimental", "stable", "deprecated", "internal")


def wheel_path(folder: str) -> str:
    """The torch-tpu 0.2.0 wheel in ``folder``, downloaded there first when absent."""
    os.makedirs(folder, exist_ok=True)
    for name in sorted(os.listdir(folder)):
        if name.startswith(f"torch_tpu-{VERSION}-") and name.endswith(".whl"):
            return os.path.join(folder, name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            f"torch-tpu=={VERSION}",
            "-d",
            folder,
        ],
        check=True,
    )
    return wheel_path(folder)


class Wheel:
    """The Python sources of the wheel, parsed on demand."""

    def __init__(self, path: str) -> None:
        self.zip = zipfile.ZipFile(path)
        self.names = set(self.zip.namelist())
        self._trees: dict[str, ast.Module] = {}

    def module(self, dotted: str) -> ast.Module | None:
        for path in (dotted.replace(".", "/") + ".py", dotted.replace(".", "/") + "/__init__.py"):
            if path in self.names:
                if path not in self._trees:
                    self._trees[path] = ast.parse(self.zip.read(path).decode("utf-8"))
                return self._trees[path]
        return None


def _string(node: ast.AST, consts: dict[str, str]) -> str | None:
    """The string an expression of public_api.py builds (constants, f-strings, ``_tpu_attr(x)``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                s = _string(v.value, consts)
                if s is None:
                    return None
                parts.append(s)
        return "".join(parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "_tpu_attr" and node.args:
            inner = _string(node.args[0], consts)
            return None if inner is None else f"{consts['_TPU_DEVICE_CLASS']}.{inner}"
    return None


def public_modules(wheel: Wheel) -> dict[str, dict[str, tuple[str, bool]]]:
    """``_PUBLIC_MODULES`` as {public module: {name: (target, is_property)}}."""
    tree = wheel.module("torch_tpu._internal.public_api")
    assert tree is not None, f"{PUBLIC_API} is not in the wheel"
    consts: dict[str, str] = {}
    table: ast.AST | None = None
    for stmt in tree.body:
        target = value = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        if target.id == "_PUBLIC_MODULES":
            table = value
            continue
        s = _string(value, consts)
        if s is not None:
            consts[target.id] = s
    assert isinstance(table, ast.Dict), "_PUBLIC_MODULES is not a dict literal"
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for key, spec in zip(table.keys, table.values, strict=True):
        module = _string(key, consts) if key is not None else None
        assert module is not None and isinstance(spec, ast.Call)
        exports: dict[str, tuple[str, bool]] = {}
        for kw in spec.keywords:
            if kw.arg != "exports":
                continue
            assert isinstance(kw.value, ast.Dict)
            for k, v in zip(kw.value.keys, kw.value.values, strict=True):
                name = _string(k, consts) if k is not None else None
                is_property = (
                    isinstance(v, ast.Call)
                    and isinstance(v.func, ast.Name)
                    and v.func.id == "Property"
                )
                target = _string(v.args[0] if is_property else v, consts)  # type: ignore[attr-defined]
                assert name is not None and target is not None, ast.dump(v)
                exports[name] = (target, is_property)
        out[module] = exports
    return out


def _decorator_stage(dec: ast.expr) -> dict | None:
    """The lifecycle stage a decorator of annotations.py gives, or None for another decorator."""
    call = dec if isinstance(dec, ast.Call) else None
    func = call.func if call is not None else dec
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    kwargs = {kw.arg: kw.value for kw in call.keywords} if call is not None else {}
    if name in ("experimental", "stable"):
        return {"stage": name}
    if name == "deprecated":
        version = kwargs.get("version") or (call.args[0] if call and call.args else None)
        out: dict = {"stage": "deprecated"}
        if isinstance(version, ast.Constant):
            out["since"] = version.value
        return out
    if name == "internal_or_experimental":
        out = {"stage": "internal"}
        when = kwargs.get("internal_when")
        if (
            isinstance(when, ast.Compare)
            and isinstance(when.comparators[0], ast.Tuple)
            and isinstance(when.ops[0], ast.GtE)
        ):
            out["internal_from_torch"] = ".".join(
                str(e.value) for e in when.comparators[0].elts if isinstance(e, ast.Constant)
            )
        prefer = kwargs.get("prefer")
        if isinstance(prefer, ast.Constant):
            out["prefer"] = prefer.value
        return out
    return None


def _stage_of_def(node: ast.AST) -> dict:
    for dec in getattr(node, "decorator_list", ()):
        found = _decorator_stage(dec)
        if found is not None:
            return found
    return {"stage": "stable"}  # annotations.py: unannotated is stable


def _imports(tree: ast.Module) -> dict[str, str]:
    """Module-level aliases: local name -> dotted module or module.attr."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    out[a.asname] = a.name
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for a in stmt.names:
                out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return out


def _stages_map(tree: ast.Module) -> dict[str, str]:
    """A module's ``__tt_api_stages__`` literal: attribute -> stage."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        value = getattr(stmt, "value", None)
        if not (isinstance(target, ast.Name) and target.id == "__tt_api_stages__"):
            continue
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Call)):
                continue
            for kw in v.keywords:
                if kw.arg == "stage" and isinstance(kw.value, ast.Attribute):
                    out[k.value] = kw.value.attr.lower()
    return out


def _is_overload(node: ast.AST) -> bool:
    """A ``@typing.overload`` stub: its decorators are not the implementation's."""
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in getattr(node, "decorator_list", ())
    )


def _with_bases(cls: ast.ClassDef, tree: ast.Module) -> list[ast.stmt]:
    """The body of ``cls`` followed by those of its base classes defined in the same module
    (``TpuDeviceModule(_DeviceModule)`` inherits ``device_count``): the class's own member,
    searched first, wins."""
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    out: list[ast.stmt] = []
    todo, seen = [cls], set()
    while todo:
        c = todo.pop(0)
        if c.name in seen:
            continue
        seen.add(c.name)
        out.extend(c.body)
        todo.extend(classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes)
    return out


def resolve(wheel: Wheel, target: str, depth: int = 0) -> tuple[dict, str]:
    """The stage of ``target`` (``"pkg.mod:Qual.name"``) and where it is defined (``pkg.mod:Qual``)."""
    module, _, qual = target.partition(":")
    tree = wheel.module(module)
    if tree is None or depth > 5:
        # a package attribute (``pkg:name``) defined in pkg/name.py, or unreadable
        return {"stage": "stable"}, target
    parts = qual.split(".")
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    staged = _stages_map(tree)
    if parts[-1] in staged and len(parts) <= 2:
        return {"stage": staged[parts[-1]]}, target
    for i, part in enumerate(parts):
        found = None
        for stmt in scope:
            if (
                isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and stmt.name == part
                and not _is_overload(stmt)
            ):
                found = stmt  # the first definition: the class's own, a property's getter
                break
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                names = [stmt.target] if isinstance(stmt, ast.AnnAssign) else list(stmt.targets)
                if any(isinstance(n, ast.Name) and n.id == part for n in names):
                    found = stmt
                    break
        if found is None:
            # re-exported from a submodule: ``from .x import part``
            alias = _imports(tree).get(part)
            if alias is not None:
                mod, _, attr = alias.rpartition(".")
                return resolve(wheel, f"{mod}:{attr}", depth + 1)
            if i == 0 and wheel.module(f"{module}.{part}") is not None:
                return resolve(wheel, f"{module}.{part}:{'.'.join(parts[1:])}", depth + 1)
            return {"stage": "stable"}, target
        if isinstance(found, ast.ClassDef) and i < len(parts) - 1:
            scope = _with_bases(found, tree)
            continue
        break
    if isinstance(found, (ast.Assign, ast.AnnAssign)) and found.value is not None:
        value = found.value
        aliases = _imports(tree)
        if isinstance(value, ast.Name):
            if value.id in aliases:
                mod, _, attr = aliases[value.id].rpartition(".")
                return resolve(wheel, f"{mod}:{attr}", depth + 1)
            return resolve(wheel, f"{module}:{value.id}", depth + 1)
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id in aliases
        ):
            return resolve(wheel, f"{aliases[value.value.id]}:{value.attr}", depth + 1)
        return {"stage": "stable"}, target
    return _stage_of_def(found), target


def _definition(wheel: Wheel, where: str) -> ast.AST | None:
    """The ``def`` or ``class`` at ``where`` (``"pkg.mod:Qual.name"``), through class bodies."""
    module, _, qual = where.partition(":")
    tree = wheel.module(module)
    if tree is None or not qual:
        return None
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in qual.split("."):
        found = next(
            (
                s
                for s in scope
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and s.name == part
                and not _is_overload(s)
            ),
            None,
        )
        if found is None:
            return None
        if isinstance(found, ast.ClassDef):
            scope = _with_bases(found, tree)
    return found


def signature(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[dict]:
    """The parameters of ``func``: name, kind (``positional_only``, ``positional``,
    ``var_positional``, ``keyword_only``, ``var_keyword``) and default (source text, when any);
    a classmethod's ``cls`` is left out."""
    a = func.args
    out: list[dict] = []
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(
        a.defaults
    )
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if i == 0 and arg.arg in ("cls", "self"):
            continue
        kind = "positional_only" if i < len(a.posonlyargs) else "positional"
        out.append(_param(arg.arg, kind, default))
    if a.vararg is not None:
        out.append(_param(a.vararg.arg, "var_positional", None))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append(_param(arg.arg, "keyword_only", default))
    if a.kwarg is not None:
        out.append(_param(a.kwarg.arg, "var_keyword", None))
    return out


def _param(name: str, kind: str, default: ast.expr | None) -> dict:
    out = {"name": name, "kind": kind}
    if default is not None:
        out["default"] = ast.unparse(default)
    return out


def deprecated_defs(wheel: Wheel) -> dict[str, dict]:
    """Every function or method of the wheel's Python sources marked deprecated:
    ``"pkg.mod:Qual"`` -> ``{"since", "reason"}`` (``@deprecated``) or ``{"message"}``
    (a ``warn_deprecation_with_skip("...")`` call at the top of its body)."""
    out: dict[str, dict] = {}
    for path in sorted(wheel.names):
        if not (path.startswith("torch_tpu/") and path.endswith(".py")):
            continue
        dotted = path[:-3].replace("/", ".").removesuffix(".__init__")
        tree = wheel.module(dotted)
        if tree is None:
            continue
        todo: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
        while todo:
            prefix, body = todo.pop()
            for stmt in body:
                if isinstance(stmt, ast.ClassDef):
                    todo.append((f"{prefix}{stmt.name}.", stmt.body))
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if _is_overload(stmt):
                    continue
                found = _deprecation(stmt)
                if found is not None:
                    out[f"{dotted}:{prefix}{stmt.name}"] = found
    return dict(sorted(out.items()))


def _deprecation(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict | None:
    for dec in func.decorator_list:
        stage = _decorator_stage(dec)
        if stage is not None and stage["stage"] == "deprecated":
            reason = next(
                (
                    kw.value.value
                    for kw in getattr(dec, "keywords", ())
                    if kw.arg == "reason" and isinstance(kw.value, ast.Constant)
                ),
                None,
            )
            return {**({"since": stage["since"]} if "since" in stage else {}), "reason": reason}
    for stmt in func.body[:3]:  # the docstring, ``if warn_deprecated:``, the warning
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "warn_deprecation_with_skip"
                and node.args
            ):
                parts = [
                    n.value
                    for n in ast.walk(node.args[0])
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                ]
                return {"message": "".join(parts)}
    return None


def package_attrs(wheel: Wheel) -> list[str]:
    """The names ``torch_tpu/__init__.py`` binds at its top level (imports, assignments, defs),
    also inside a top-level ``try``."""
    tree = wheel.module("torch_tpu")
    assert tree is not None
    out: set[str] = set()
    todo = list(tree.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.Try):
            todo.extend(stmt.body)
            for handler in stmt.handlers:
                todo.extend(handler.body)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return sorted(out)


_ENV_NAME = re.compile(rb"TORCH_TPU_[A-Z0-9_]*[A-Z0-9]")


def environment(wheel_file: str) -> list[str]:
    """Every ``TORCH_TPU_*`` name spelled in the wheel's Python sources and compiled libraries."""
    found: set[str] = set()
    with zipfile.ZipFile(wheel_file) as archive:
        for info in archive.infolist():
            if info.filename.endswith((".py", ".so")) or ".so." in info.filename:
                data = archive.read(info)
                found.update(m.decode("ascii") for m in _ENV_NAME.findall(data))
    return sorted(found)


def requirements(wheel_file: str) -> dict:
    """The wheel's ``METADATA``: ``Requires-Dist`` (unconditional ones, by canonical name) and
    ``Requires-Python``, what a requirement pin of a migrated project must satisfy."""
    with zipfile.ZipFile(wheel_file) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode("utf-8")
    dist: dict[str, str] = {}
    python = ""
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, _, value = line.partition(": ")
        if key == "Requires-Dist" and ";" not in value:
            name = re.match(r"[A-Za-z0-9._-]+", value)
            if name:
                dist[re.sub(r"[-_.]+", "-", name.group(0)).lower()] = value.strip()
        elif key == "Requires-Python":
            python = value.strip()
    return {"requires_dist": dict(sorted(dist.items())), "requires_python": python}


def build(wheel_file: str) -> dict:
    """The data file's content: every public name with its kind, stage and definition."""
    wheel = Wheel(wheel_file)
    names: dict[str, dict] = {}
    signatures: dict[str, list[dict]] = {}
    for module, exports in sorted(public_modules(wheel).items()):
        for name, (target, is_property) in sorted(exports.items()):
            stage, where = resolve(wheel, target)
            assert stage["stage"] in STAGES, stage
            names[f"{module}.{name}"] = {
                "kind": "property" if is_property else "attr",
                **stage,
                "defined": where,
            }
            found = None if is_property else _definition(wheel, where)
            if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
                signatures[f"{module}.{name}"] = signature(found)
    with open(wheel_file, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    counts: dict[str, int] = {}
    for info in names.values():
        counts[info["stage"]] = counts.get(info["stage"], 0) + 1
    return {
        "package": "torch-tpu",
        "version": VERSION,
        "wheel": os.path.basename(wheel_file),
        "sha256": digest,
        "read_from": PUBLIC_API,
        "modules": sorted(public_modules(wheel)),
        "counts": dict(sorted(counts.items())),
        "names": names,
        "signatures": signatures,
        "deprecated_defs": deprecated_defs(wheel),
        "wheel_modules": sorted(
            p[:-3].replace("/", ".").removesuffix(".__init__")
            for p in wheel.names
            if p.startswith("torch_tpu/") and p.endswith(".py")
        ),
        "package_attrs": package_attrs(wheel),
        "environment": environment(wheel_file),
        "metadata": requirements(wheel_file),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", default="/work/wheels", help="where the wheel is kept")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument(
        "--out", default=os.path.join(here, "xla_lint", "data", "torchtpu_api.json")
    )
    args = parser.parse_args(argv)
    data = build(wheel_path(args.wheels))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=False)
        handle.write("\n")
    print(f"{args.out}: {len(data['names'])} names, {data['counts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
