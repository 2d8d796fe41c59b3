"""Option checks that need the file system or the user's code, run before any device work.

Each raises :class:`~xla_lint.runtime.options.OptionsError` (the CLI prints it as a
one-line usage error, exit status 2), so a wrong option costs seconds, not a training run:

* ``--checkpoint-dir``: must be a folder this process can write, or creatable; missing
  folders are created here and removed at the end (:func:`remove_created`);
* ``--mesh-shape``/``--dcn-mesh-shape``: must multiply to the device count when it is
  known before the runtime starts (on CPU: ``--cpu-devices`` / ``CPU_NUM_DEVICES``; on
  TPU the job checks it right after PJRT starts, before building the mesh);
* ``--model module:function``: the module must import, the function exist, and calling
  it must return a ``torch.nn.Module`` (it is called once here, on the CPU; the host
  then trains that very model, so it is built once per process).

This module is torch-free; :func:`check_user_model` imports torch through model.py.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from .options import OptionsError, RuntimeOptions, mesh_device_problem


def check_checkpoint_dir(path: str, option: str = "--checkpoint-dir") -> list[str]:
    """Make sure ``path`` is a writable folder, creating missing folders.

    Returns the folders created, outermost first (pass them to :func:`remove_created`).
    Writability is probed by creating and deleting a temporary file, which also works
    for root and read-only file systems, where ``os.access`` says yes.
    """
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise OptionsError(
            f"{option} {path} is a file; it must be a folder (it is created if missing)"
        )
    missing, parent = [], full
    while not os.path.exists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OptionsError(f"{option} {path}: {parent} is a file, so the folder cannot be created")
    created = list(reversed(missing))
    try:
        for folder in list(created):
            try:
                os.mkdir(folder)
            except FileExistsError:  # another host on the same storage made it first
                created.remove(folder)
        with tempfile.TemporaryFile(dir=full):
            pass
    except OSError as exc:
        remove_created([c for c in created if os.path.isdir(c)])
        raise OptionsError(
            f"{option} {path} is not a writable folder ({exc.strerror or exc})"
        ) from None
    return created


def remove_created(created: list[str]) -> None:
    """Remove the folders :func:`check_checkpoint_dir` created, innermost first, if empty."""
    for folder in reversed(created):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def check_mesh(opts: RuntimeOptions, device_env: dict) -> None:
    """On CPU, where the device count is known before PJRT starts, the mesh shape must hold it."""
    devices = device_env.get("cpu_devices")
    if devices is None:
        return
    source = device_env.get("cpu_devices_from") or "--cpu-devices"
    per_host = (
        " per host (each simulated host is its own SPMD world)"
        if opts.simulate_hosts or opts.simulated
        else ""
    )
    problem = mesh_device_problem(opts, devices, f"CPU devices{per_host} ({source})")
    if problem:
        raise OptionsError(problem)


def check_user_model(opts: RuntimeOptions, seed: int) -> Any:
    """Import and call the ``--model`` builder after ``torch.manual_seed(seed)``; return the
    ``nn.Module`` it built (None without ``--model``)."""
    if not opts.model:
        return None
    from .model import load_user_model

    return load_user_model(opts.model, seed)


def preflight(opts: RuntimeOptions, device_env: dict, seed: int) -> tuple[list[str], Any]:
    """All checks above, in order of cost. Returns ``(created folders, user model or None)``."""
    check_mesh(opts, device_env)
    created = check_checkpoint_dir(opts.checkpoint_dir) if opts.checkpoint_dir else []
    if opts.compile_cache:
        try:
            created += check_checkpoint_dir(opts.compile_cache, "--compile-cache")
        except BaseException:
            remove_created(created)
            raise
    try:
        model = check_user_model(opts, seed)
    except BaseException:
        remove_created(created)
        raise
    return created, model
