"""Linting a shell script: the findings of the launch rules at the script's own lines.

A shell script is not parsed as Python. :mod:`xla_lint.program.launchers` reads its commands as
bash would (:class:`~xla_lint.program.model.Launch`: what runs, with which environment and
arguments); this module reports, at the line that is the mistake:

- **XLA013** ``removed-api``: ``python -m torch_xla.distributed.xla_dist ...`` (torch_xla 2.9.0
  has no ``torch_xla/distributed/xla_dist.py``: the command fails with ``No module named``), or
  ``accelerate launch --tpu --tpu_cluster``, whose ``tpu_pod_launcher`` imports it; and a
  variable torch_xla no longer reads (``XRT_TPU_CONFIG``, ``XLA_USE_FP16``) in the environment of
  a command that runs Python, at the line that sets it.
- **XLA304** ``deprecated-env-var``: ``export XLA_USE_BF16=1`` (``XLA_USE_SPMD``,
  ``XLA_DOWNCAST_BF16``, ``XLA_USE_32BIT_LONG``) reaching a command that runs Python, at the line
  that sets it (the ``export``, or the command's own ``VAR=1 python ...``). A tool run with
  ``python -m`` (``pip``, ``venv``: :data:`TOOL_MODULES`) is not such a command.
- **XLA007** ``spmd-multiprocess-launch``: a launch that starts one process per device
  (``accelerate launch --tpu``: ``xmp.spawn`` with no ``nprocs``; ``torchrun --nproc-per-node N``,
  N other than 1) of a program that uses SPMD. Whether the program uses SPMD is a fact of the
  whole program, so the finding carries ``launch`` and ``requires``: the join
  (:func:`xla_lint.pipeline.run.finalize`) keeps it when the launched program is SPMD.

Each finding's code, name and severity are the rule's (the rule classes document the shell
cases; ``tests/pipeline/test_shell.py`` checks the severities against them). ``# noqa: XLA013``
comments of the script suppress as in Python (:func:`~xla_lint.sources.suppress.find_shell_suppressions`).
Nothing here imports LibCST.
"""

from __future__ import annotations

from ..analysis.apis import REMOVED_MODULES
from ..catalogue import BY_CODE
from ..config import Settings
from ..diagnostics import Diagnostic, Severity
from ..program.launchers import scan
from ..program.model import Launch
from ..results import FileResult
from ..sources.suppress import find_shell_suppressions

# The severities of the rules reported here (xla_lint/rules/: RemovedApi, DeprecatedEnvVar,
# SpmdMultiprocessLaunch); the catalogue holds no severities.
SEVERITY = {"XLA013": Severity.ERROR, "XLA304": Severity.WARNING, "XLA007": Severity.ERROR}

# The same tables as xla_lint/rules/deprecated.py (REMOVED_ENV, XRT_REMOVED_IN, DEPRECATED_ENV),
# which this layer cannot import without LibCST; tests/pipeline/test_shell.py keeps them equal.
XRT_REMOVED_IN = (2, 1)
REMOVED_ENV = {"XLA_USE_FP16": (2, 5), "XLA_DOWNCAST_FP16": (2, 5)}
DEPRECATED_ENV = {
    "XLA_USE_SPMD": "call `torch_xla.runtime.use_spmd()` in the program instead",
    "XLA_USE_BF16": "convert the model with `model.to(torch.bfloat16)` or use "
    "`torch.autocast('xla', dtype=torch.bfloat16)`",
    "XLA_DOWNCAST_BF16": "convert the model with `model.to(torch.bfloat16)` or use "
    "`torch.autocast('xla', dtype=torch.bfloat16)`",
    "XLA_USE_32BIT_LONG": "use int32 tensors explicitly",
}


def lint_shell(path: str, text: str, settings: Settings) -> tuple[FileResult, list[Launch]]:
    """The findings of the shell script ``path`` (its ``text``) and the launches it holds.

    Never raises for a script it cannot read: a command whose quotes do not close is skipped
    (as :func:`xla_lint.program.launchers.scan` skips it).
    """
    result = FileResult(path, suppressions=find_shell_suppressions(text), parsed=True, shell=True)
    try:
        launches = scan(path, text)
    except Exception:  # a launcher only adds facts: one we cannot read never ends the run
        return result, []
    codes = {
        c
        for c in settings.codes_for(path)
        if c in SEVERITY
        and (info := BY_CODE.get(c)) is not None
        and info.applies_to(settings.target_version)
    }
    lines = text.splitlines()
    seen: set[tuple[str, int, str]] = set()

    def add(code: str, line: int, message: str, key: str = "", **extra) -> None:
        """Report ``code`` at ``line``, once per ``key`` there (a variable set for several
        commands is reported once, with the first)."""
        if code not in codes or not 1 <= line <= len(lines) or (code, line, key) in seen:
            return
        seen.add((code, line, key))
        width = len(lines[line - 1].rstrip())
        indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
        result.diagnostics.append(
            Diagnostic(
                code,
                BY_CODE[code].name,
                message,
                path,
                line,
                indent + 1,
                line,
                max(width, indent) + 1,
                SEVERITY[code],
                **extra,
            )
        )

    version = settings.target_version
    for launch in launches:
        if launch.path != path:
            continue
        command = _command(launch)
        removed = REMOVED_MODULES.get(launch.runs) if launch.module else None
        if removed is not None and version >= removed.removed_in:
            release = ".".join(map(str, removed.removed_in))
            instead = removed.hint or f"use `{removed.use}`"
            add(
                "XLA013",
                launch.line,
                key=launch.runs,
                message=f"{command} runs `{launch.runs}`, which was removed in torch_xla {release} "
                f"(it fails with 'No module named {launch.runs}'); {instead}",
            )
        for name, value, where in () if _tool(launch) else launch.env:
            line = _line_of(where, path)
            if line is None:
                continue
            gone = XRT_REMOVED_IN if name.startswith("XRT_") else REMOVED_ENV.get(name)
            if gone is not None and version >= gone:
                add(
                    "XLA013",
                    line,
                    f"`{name}`, set for {_runs(launch)}, was removed in torch_xla "
                    f"{'.'.join(map(str, gone))} and does nothing: "
                    + (
                        "use `PJRT_DEVICE=TPU`"
                        if name.startswith("XRT_")
                        else "cast the model (`model.half()`) or use autocast"
                    ),
                    key=name,
                )
            if name in DEPRECATED_ENV:
                add(
                    "XLA304",
                    line,
                    f"`{name}={value}`, set for {_runs(launch)}, is deprecated; {DEPRECATED_ENV[name]}",
                    key=name,
                )
        if per_device(launch):
            add(
                "XLA007",
                launch.line,
                f"{command} starts {_processes(launch)}, but the program it runs uses SPMD, which "
                "runs one process per host; run the script with `python` (once per host)",
                key=launch.where,
                requires=(("spmd", True),),
                launch=launch.where,
            )
    return result, launches


# Modules run with `python -m` that are tools, never a program that imports torch_xla: a variable
# exported before `python -m pip install ...` is not "set for" pip.
TOOL_MODULES = frozenset({"pip", "venv", "ensurepip", "http.server", "json.tool", "site", "build"})


def _tool(launch: Launch) -> bool:
    """``python -m pip ...`` and the like (:data:`TOOL_MODULES`)."""
    return launch.module and (
        launch.runs in TOOL_MODULES or launch.runs.split(".", 1)[0] in TOOL_MODULES
    )


def per_device(launch: Launch) -> bool:
    """Whether ``launch`` starts several processes on each host: ``accelerate launch --tpu``
    (``xmp.spawn``: one per local device) or ``torchrun`` with ``--nproc-per-node`` other
    than 1 (its default)."""
    if launch.processes == "per-device":
        return True
    return launch.launcher == "torchrun" and launch.processes not in ("", "1")


def _processes(launch: Launch) -> str:
    if launch.processes == "per-device":
        return "one process per device (`xmp.spawn`)"
    return f"{launch.processes} processes per host"


def _command(launch: Launch) -> str:
    """How the finding names the command: ``accelerate launch --tpu``, ``python -m X``."""
    if launch.launcher == "accelerate":
        return f"`{launch.why.split(',', 1)[0]}`"
    if launch.launcher == "torchrun":
        return f"`torchrun --nproc-per-node={launch.processes}`"
    return f"`python -m {launch.runs}`" if launch.module else f"`python {launch.runs}`"


def _runs(launch: Launch) -> str:
    return f"`{launch.runs}` (line {launch.line})"


def _line_of(where: str, path: str) -> int | None:
    """The line of ``where`` (``run.sh:3``) when it is a line of ``path``."""
    file, _, line = where.rpartition(":")
    return int(line) if file == path and line.isdigit() else None
