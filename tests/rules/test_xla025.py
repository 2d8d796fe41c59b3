"""XLA025 fsdpv2-tuple-output: FSDPv2 around a Hugging Face model without shard_output, beyond the rule's examples."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity
from xla_lint.rules.fsdp import transformers_model_class

FSDP = (
    "import torch_xla.experimental.spmd_fully_sharded_data_parallel as spmd_fsdp\n"
    "from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2\n"
)


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA025"], preview=True)
    return [(d.path, d.line, d.severity, d.message) for d in result.diagnostics]


def test_model_classes_and_their_builders_are_models_other_exports_are_not():
    assert (
        transformers_model_class(frozenset({"transformers.AutoModelForCausalLM.from_pretrained"}))
        == "AutoModelForCausalLM"
    )
    assert (
        transformers_model_class(
            frozenset({"transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel"})
        )
        == "GPT2LMHeadModel"
    )
    assert (
        transformers_model_class(frozenset({"transformers.T5ForConditionalGeneration.from_config"}))
        == "T5ForConditionalGeneration"
    )
    for other in (
        "transformers.AutoTokenizer.from_pretrained",
        "transformers.AutoConfig.from_pretrained",
        "transformers.pipeline",
        "transformers.TrainingArguments",
        "mypkg.AutoModel.from_pretrained",
    ):
        assert transformers_model_class(frozenset({other})) is None, other


def test_module_alias_of_fsdpv2_and_submodule_imports_of_transformers_resolve(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": FSDP
            + (
                "from transformers.models.auto import AutoModelForSequenceClassification as Auto\n"
                "def build(name, mesh):\n"
                "    model = Auto.from_pretrained(name, num_labels=2)\n"
                "    model = model.to('xla')\n"
                "    return spmd_fsdp.SpmdFullyShardedDataParallel(module=model, mesh=mesh)\n"
                "def build_too(name, mesh):\n"
                "    return FSDPv2(Auto.from_pretrained(name).bfloat16(), mesh=mesh)\n"
            )
        },
    )
    assert [(line, severity) for _, line, severity, _ in found] == [
        (7, Severity.ERROR),
        (9, Severity.ERROR),
    ]
    assert "(`AutoModelForSequenceClassification`)" in found[0][3]
    assert "'The output type is not supported'" in found[0][3]


def test_return_dict_false_is_a_warning_about_the_first_element(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": FSDP
            + (
                "from transformers import GPT2LMHeadModel\n"
                "model = GPT2LMHeadModel.from_pretrained('gpt2', return_dict=False)\n"
                "model = FSDPv2(model, mesh=mesh)\n"
            )
        },
    )
    assert [(line, severity) for _, line, severity, _ in found] == [(5, Severity.WARNING)]
    assert "scalar loss" in found[0][3]


def test_shard_output_given_in_any_form_is_trusted(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": FSDP
            + (
                "from transformers import AutoModelForCausalLM\n"
                "model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
                "a = FSDPv2(model, mesh=mesh, shard_output=None if plain else shard_logits)\n"
                "b = FSDPv2(model, mesh=mesh, shard_output=lambda out, mesh: None)\n"
                "c = FSDPv2(model, *extra)\n"
            )
        },
    )
    assert found == []


def test_a_model_whose_origin_the_file_does_not_fix_is_not_reported(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": FSDP
            + (
                "from transformers import AutoModelForCausalLM\n"
                "import torch\n"
                "if use_hf:\n    model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
                "else:\n    model = torch.nn.Linear(4, 4)\n"
                "a = FSDPv2(model, mesh=mesh)\n"
                "def wrap(model: torch.nn.Module, mesh):\n    return FSDPv2(model, mesh=mesh)\n"
                "b = FSDPv2(self.model, mesh=mesh)\n"
                "c = FSDPv2(load_model(), mesh=mesh)\n"
            )
        },
    )
    assert found == []


def test_a_test_that_expects_the_error_is_not_reported(tmp_path):
    found = _found(
        tmp_path,
        {
            "test_fsdp.py": FSDP
            + (
                "import pytest\nfrom transformers import AutoModel\n"
                "def test_model_output_is_rejected(mesh):\n"
                "    with pytest.raises(RuntimeError):\n"
                "        FSDPv2(AutoModel.from_pretrained('bert-base-uncased'), mesh=mesh)(x)\n"
            )
        },
    )
    assert found == []
