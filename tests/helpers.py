"""Shared test helpers: lint a small in-memory program through the real engine."""

from __future__ import annotations

import os
from pathlib import Path

from xla_lint.config import build_settings
from xla_lint.pipeline.discover import discover
from xla_lint.pipeline.fixes import fix_loop
from xla_lint.pipeline.run import finalize, lint_file, run

# XLA004 reports a print only where its output can be lost (xla_lint/rules/output.py). A test of
# something else (the command line, a reporter, an encoding, a fix) whose fixture is a plain script
# with module-level prints ends it with LOST: `os._exit` skips the interpreter's flush of
# sys.stdout, so the prints above it are lost when stdout is no terminal (XLA004's crash path, its
# preview behaviour: such a test lints in preview mode, see preview_args). The lines before it
# keep their numbers, and the message gains LOST_NOTE.
LOST = "import os\nos._exit(0)\n"
LOST_NOTE = ", and `os._exit` below ends the process without writing it"


# The command-line words that are not a lint run (a subcommand other than `check`).
_SUBCOMMANDS = frozenset({"rule", "server", "migrate", "runtime", "trace", "run"})


def preview_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """``args`` of ``python -m xla_lint`` with ``--preview`` added to a lint run that does not
    choose (``--preview``/``--no-preview``): the fixtures' XLA004 findings rest on LOST, which is
    XLA004's preview behaviour. Other subcommands' arguments are left alone."""
    if not args or args[0] in _SUBCOMMANDS or {"--preview", "--no-preview"} & set(args):
        return args
    if args[0] == "check":
        return ("check", "--preview", *args[1:])
    return ("--preview", *args)


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Create ``files`` (relative path -> text) under ``root``, with ``__init__.py`` left to the caller."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def lint_tree(root: Path, select: list[str] | None = None, **settings_kw):
    """Lint every file under ``root`` as xla-lint would; returns the RunResult and settings.

    Paths in the result are relative to ``root``.
    """
    old = os.getcwd()
    os.chdir(root)
    try:
        settings = build_settings(cwd=root, select=select, isolated=True, **settings_kw)
        launchers: list[str] = []
        targets = discover(["."], settings, launchers)
        return run(targets, settings, jobs=1, launchers=launchers, folders=["."]), settings, targets
    finally:
        os.chdir(old)


def fix_text(root: Path, rel: str, select: list[str], **settings_kw) -> str:
    """The text of ``rel`` after every round of the fixes --fix applies (safe ones; unsafe ones
    too with ``unsafe_fixes=True``); the file itself is not written."""
    old = os.getcwd()
    os.chdir(root)
    try:
        settings = build_settings(cwd=root, select=select, isolated=True, **settings_kw)
        launchers: list[
            str
        ] = []  # the tree's launch scripts give the program facts, as in lint_tree
        targets = discover(["."], settings, launchers)
        result = run(targets, settings, jobs=1, launchers=launchers, folders=["."])
        target = next(t for t in targets if t.path == rel)
        text = (root / rel).read_text(encoding="utf-8")
        outcome = fix_loop(
            rel,
            text,
            lambda t: finalize([lint_file(target, settings, text=t)], result.program, settings)[0],
            settings.unsafe_fixes,
        )
        return outcome.fixed
    finally:
        os.chdir(old)


def without_file_powers() -> list[str]:
    """A command prefix that runs a program without root's power to read and write any file
    (``setpriv`` dropping CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), so permission tests mean
    something under root too; empty when not root. Skips the test when it cannot be done."""
    import shutil
    import subprocess

    import pytest

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    caps = "-dac_override,-dac_read_search"
    prefix = [setpriv or "setpriv", "--bounding-set", caps, "--inh-caps", caps]
    if setpriv is None or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root, and setpriv cannot drop the file-access capabilities")
    return prefix


def run_cpu_script(
    script: str, drop_env: tuple[str, ...] = (), timeout: float = 300, cpu_devices: int | None = 8
) -> dict:
    """Run ``script`` (Python source) in a fresh interpreter on ``cpu_devices`` virtual CPU
    devices (``PJRT_DEVICE=CPU CPU_NUM_DEVICES=8``; None: the variable unset, torch_xla's
    default), with no ``XLA_FLAGS``/``TPU_NUM_DEVICES`` and none of ``drop_env``, and return
    the JSON object of the last line it prints that starts with ``RESULT ``. Fails the test,
    with the end of standard error, when it exits non-zero or prints none."""
    import json
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TPU_NUM_DEVICES", *drop_env)
    }
    env["PJRT_DEVICE"] = "CPU"
    env.pop("CPU_NUM_DEVICES", None)
    if cpu_devices is not None:
        env["CPU_NUM_DEVICES"] = str(cpu_devices)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])
