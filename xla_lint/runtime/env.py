"""Device environment set up BEFORE torch_xla is imported (torch-free).

torch_xla reads ``PJRT_DEVICE`` and ``CPU_NUM_DEVICES`` when its PJRT client is
created; without ``PJRT_DEVICE`` it picks TPU only if libtpu and a TPU PCI device
are present and otherwise defaults to CPU with ONE device
(``_maybe_select_default_device`` in torch_xla/runtime.py). So the checker decides
first: an explicit ``PJRT_DEVICE`` or ``--device`` wins; otherwise a TPU found on the
PCI bus (Google vendor id 0x1ae0, as torch_xla/_internal/tpu.py looks for it) is left
to PJRT, and anything else becomes ``PJRT_DEVICE=CPU`` with ``--cpu-devices``
(default 8) virtual devices so the same command runs on a laptop and in CI.
"""

from __future__ import annotations

import glob
import os
import pathlib

from .options import RuntimeOptions

GOOGLE_PCI_VENDOR_ID = "0x1ae0"
DEFAULT_CPU_DEVICES = 8
#: Added to XLA_FLAGS on CPU unless XLA_FLAGS already sets an optimization level.
CPU_XLA_FLAGS = "--xla_backend_optimization_level=0"

#: Variables a simulated host must not inherit: they would make torch_xla or
#: torch.distributed believe in a different process layout.
HOST_LAYOUT_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PJRT_LOCAL_PROCESS_COUNT",
    "PJRT_LOCAL_PROCESS_RANK",
    "TPU_PROCESS_BOUNDS",
    "TPU_VISIBLE_CHIPS",
)


def tpu_on_pci_bus() -> bool:
    """True when a Google (TPU) PCI device is present; never raises."""
    try:
        for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
            if pathlib.Path(vendor).read_text().strip() == GOOGLE_PCI_VENDOR_ID:
                return True
    except OSError:
        return False
    return False


def configure_device_env(opts: RuntimeOptions, environ: dict | None = None) -> dict:
    """Set ``PJRT_DEVICE`` / ``CPU_NUM_DEVICES`` (and quiet XLA's C++ warnings) in ``environ``.

    On CPU it also adds ``--xla_backend_optimization_level=0`` to ``XLA_FLAGS`` unless
    an optimization level is already set there. Must run before ``import torch_xla``.
    Returns ``{"pjrt_device", "cpu_devices", "cpu_devices_from", "source", "xla_flags_added"}``
    describing the choice (``source`` is ``"--device"``, ``"PJRT_DEVICE"``, ``"tpu-detected"``,
    ``"no-accelerator"`` or ``"simulated-hosts"``; ``cpu_devices_from`` is ``"--cpu-devices"``,
    ``"CPU_NUM_DEVICES"`` or the default). Simulated hosts are always CPU. Also sets
    ``TF_CPP_MIN_LOG_LEVEL=2`` and ``TORCH_CPP_LOG_LEVEL=ERROR`` unless already set.
    """
    env = os.environ if environ is None else environ
    cpu_devices = opts.cpu_devices or int(env.get("CPU_NUM_DEVICES") or DEFAULT_CPU_DEVICES)
    cpu_from = (
        "--cpu-devices"
        if opts.cpu_devices
        else "CPU_NUM_DEVICES"
        if env.get("CPU_NUM_DEVICES")
        else "the default; --cpu-devices sets it"
    )
    if opts.simulated or opts.simulate_hosts:
        device, source = "CPU", "simulated-hosts"
    elif opts.device != "auto":
        device, source = opts.device.upper(), "--device"
    elif env.get("PJRT_DEVICE"):
        device, source = env["PJRT_DEVICE"], "PJRT_DEVICE"
    elif tpu_on_pci_bus():
        device, source = None, "tpu-detected"
    else:
        device, source = "CPU", "no-accelerator"
    if device is not None:
        env["PJRT_DEVICE"] = device
    if device is not None and device.upper().startswith("CPU"):
        env["CPU_NUM_DEVICES"] = str(cpu_devices)
    # XLA's C++ logging (e.g. the GSPMD deprecation notice) would drown the report, and
    # c10d's warnings print a C++ stack when a peer host's connection breaks (the report
    # names the host instead).
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    on_cpu = device is not None and device.upper().startswith("CPU")
    xla_flags_added = None
    if on_cpu and "xla_backend_optimization_level" not in env.get("XLA_FLAGS", ""):
        # On CPU the checks are about sharding, compilation counts and agreement, not
        # code quality: LLVM at -O0 compiles the job's graphs ~2-3x faster.
        xla_flags_added = CPU_XLA_FLAGS
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {CPU_XLA_FLAGS}".strip()
    return {
        "pjrt_device": device or "(chosen by PJRT)",
        "cpu_devices": cpu_devices if on_cpu else None,
        "cpu_devices_from": cpu_from if on_cpu else None,
        "source": source,
        "xla_flags_added": xla_flags_added,
    }
