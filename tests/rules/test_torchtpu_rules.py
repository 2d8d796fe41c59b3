"""The TorchTPU rules (XLA4xx) against the facts of the torch-tpu 0.2.0 wheel they rest on
(``xla_lint/data/torchtpu_api.json``), and on files of a real-looking TorchTPU program."""

from __future__ import annotations

from helpers import lint_tree

from xla_lint.analysis.torchtpu import torchtpu_api
from xla_lint.rules import torchtpu as rules


def test_the_data_file_records_what_the_rules_read():
    data = torchtpu_api()
    # XLA405: splash_sdpa's is_causal is keyword-only and defaults to True
    params = {p["name"]: p for p in data["signatures"]["torch.tpu.ops.splash_sdpa"]}
    assert params["is_causal"] == {"name": "is_causal", "kind": "keyword_only", "default": "True"}
    assert [p["name"] for p in data["signatures"]["torch.tpu.ops.splash_sdpa"][:3]] == [
        "q",
        "k",
        "v",
    ]
    assert rules.splash_is_causal_default() == "True"
    # XLA402: the ten internal names, with what to use instead
    internal = rules._internal_names()
    assert len(internal) == 10
    assert {n.rsplit(".", 1)[1] for n in internal} >= {"device_count", "is_available", "set_device"}
    assert all(i["prefer"].startswith("torch.accelerator.") for i in internal.values())
    # XLA403: the deprecated names and what the wheel says to use
    deprecated = rules._deprecated()
    assert deprecated["torch.tpu.topology_aware_mesh"] == (
        "Use torch.tpu.distributed.topology_aware_mesh instead."
    )
    assert "jax_op" in deprecated["torch_tpu._internal.pallas.pallas.custom_jax_kernel"]
    assert (
        "torch.tpu.pallas.get_pallas_mesh"
        in deprecated["torch_tpu._internal.pallas.pallas.get_pallas_mesh"]
    )
    # the public get_pallas_mesh is not the deprecated one
    assert "torch.tpu.pallas.get_pallas_mesh" not in deprecated


def test_renamed_variables_are_read_under_their_new_name_only():
    spelled = set(torchtpu_api()["environment"])
    assert "TORCH_TPU_LAUNCH_BLOCKING" in spelled  # read from the compiled libraries too
    for old, new in rules.RENAMED_ENV.items():
        assert old not in spelled, old
        assert new in spelled, new


def test_missing_modules_and_package_names():
    assert rules._not_a_module("torch_tpu.api")
    assert rules._not_a_module("torch_tpu._internal.distributed.launchers.singlehost_wrapper")
    assert not rules._not_a_module("torch_tpu._internal.pallas.pallas")
    assert rules._not_in_package("tpu_device") and rules._not_in_package("api")
    assert not rules._not_in_package("_internal") and not rules._not_in_package("_loader")


def test_a_ported_program_across_files(tmp_path):
    """A TorchTPU trainer whose helper still imports torch_xla: only the file that uses TorchTPU
    is judged (the helper names nothing of TorchTPU, so it is undecided and silent)."""
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch.distributed as dist\nimport torch_xla.runtime as xr\n"
        "from helper import log\n\n"
        "dist.init_process_group('tpu')\n"
        "n = torch.tpu.device_count()\n"
        "model = torch.compile(torch.nn.Linear(2, 2), backend='inductor')\n"
        "out = torch.tpu.ops.splash_sdpa(q, k, v)\n"
    )
    (tmp_path / "helper.py").write_text(
        "import torch_xla.core.xla_model as xm\ndef log(x):\n    xm.master_print(x)\n"
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA4"], preview=True)
    found = sorted((d.path, d.line, d.code) for d in result.diagnostics)
    assert found == [
        ("train.py", 3, "XLA401"),
        ("train.py", 7, "XLA402"),
        ("train.py", 8, "XLA404"),
        ("train.py", 9, "XLA405"),
    ]
