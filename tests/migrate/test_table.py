"""The migration table's targets are real: every TorchTPU name a target suggests is a public,
non-internal name of torch-tpu 0.2.0 (the committed data file read from the wheel), every other
name exists in the installed torch, and no target suggests a raising ``torch.tpu`` call."""

from __future__ import annotations

import importlib
import re

import pytest

from xla_lint.migrate import table

ALL = [
    *table.APIS.values(),
    *table.MODULES.values(),
    *table.ENV.values(),
    table.UNMAPPED,
    table.IMPORT,
    table.ENV_UNMAPPED,
    table.DEVICE_STRING,
    table.DEVICE_INDEX,
]
NAMES = sorted({n for e in ALL for n in e.names})


def test_the_data_file_is_the_wheels_public_api():
    data = table.torchtpu_api()
    assert data["version"] == "0.2.0" and data["read_from"].endswith("public_api.py")
    assert len(data["names"]) == 71
    assert data["counts"] == {"deprecated": 1, "experimental": 54, "internal": 10, "stable": 6}
    # the raising device functions are internal there, with their torch.accelerator replacement
    for name, prefer in (
        ("torch.tpu.device_count", "torch.accelerator.device_count"),
        ("torch.tpu.is_available", "torch.accelerator.is_available"),
        ("torch.tpu.synchronize", "torch.accelerator.synchronize"),
    ):
        info = data["names"][name]
        assert info["stage"] == "internal" and info["prefer"] == prefer
        assert info["internal_from_torch"] == "2.11"
    assert data["names"]["torch.tpu.topology_aware_mesh"]["stage"] == "deprecated"


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("torch.tpu.")])
def test_suggested_torchtpu_names_are_public_and_callable(name):
    assert table.suggestable(name), f"{name} is not a public, non-internal torch-tpu 0.2.0 name"


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("torch.tpu.")])
def test_suggested_upstream_names_exist_in_torch(name):
    module, _, attr = name.rpartition(".")
    try:
        obj = importlib.import_module(name)
    except ImportError:
        obj = getattr(importlib.import_module(module), attr, None)
    assert obj is not None, f"{name} is not in the installed torch"


def test_every_torch_tpu_name_written_in_a_target_is_listed_and_suggestable():
    written = {m for e in ALL for m in re.findall(r"torch\.tpu(?:\.\w+)+", e.target)}
    assert written, "no target names TorchTPU: the check would check nothing"
    modules = set(table.torchtpu_api()["modules"])
    for name in written:
        parent, _, member = name.rpartition(".")
        if member.isupper() and parent[parent.rfind(".") + 1 :][:1].isupper():
            name = parent  # an enum member: torch.tpu.Precision.HIGHEST
        assert name in modules or table.suggestable(name), (
            f"a target writes {name}, not callable in 0.2.0"
        )


def test_suggestable_refuses_internal_deprecated_and_unknown_names():
    assert not table.suggestable("torch.tpu.device_count")
    assert not table.suggestable("torch.tpu.topology_aware_mesh")
    assert not table.suggestable("torch.tpu.mark_step")
    assert table.suggestable("torch.tpu.distributed.topology_aware_mesh")


def test_classes_phases_and_rewrites_are_known():
    from xla_lint.migrate.rewrites import REWRITES

    phases = {k for k, _ in table.PHASES}
    for e in ALL:
        assert e.cls in table.CLASSES and e.phase in phases
        assert e.rewrite is None or e.rewrite in REWRITES or e.rewrite == "delete_import"
        assert e.cls != table.DECISION or e.rewrite is None, "a decision is never rewritten"


def test_entry_for_resolves_rows_modules_and_the_rest():
    assert table.entry_for("torch_xla.core.xla_model.mark_step")[1].cls == table.BEHAVIOUR
    assert table.entry_for("torch_xla.debug.metrics.metrics_report")[1].row == 28
    assert table.entry_for("torch_xla.core.xla_model.no_such_name")[1] is table.UNMAPPED
    assert table.entry_for("torch.nn.Linear") is None
