"""XLA026 torchax-with-torch-xla: the program fact "torchax" and where the finding lands."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.program.facts import FileFacts
from xla_lint.program.model import ProgramModel, own_facts


def _found(tmp_path, files, **kw):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA026"], preview=True, **kw)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


def _programs(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA026"], preview=True)
    return result.program


def test_torchax_and_torch_xla_programs_side_by_side_are_not_reported(tmp_path):
    # One repository, two programs (torchprime keeps torchax and torch_xla trainers apart).
    found = _found(
        tmp_path,
        {
            "common.py": "def batch_size():\n    return 8\n",
            "train_torchax.py": "import torchax\nimport common\nif __name__ == '__main__':\n"
            "    env = torchax.default_env()\n",
            "train_xla.py": "import torch_xla\nimport common\nif __name__ == '__main__':\n"
            "    dev = torch_xla.device()\n    torch_xla.sync()\n",
        },
    )
    assert found == []


def test_a_shared_module_that_imports_torchax_is_named_once_per_file(tmp_path):
    found = _found(
        tmp_path,
        {
            "kernels.py": "import torchax.interop as interop\n\ndef run(x):\n    return interop.jax_view(x)\n",
            "model.py": "import torch_xla.runtime as xr\nimport kernels\n\ndef shard():\n"
            "    return xr.global_runtime_device_count()\n",
            "train.py": "import torch_xla\nimport model\nif __name__ == '__main__':\n"
            "    dev = torch_xla.device()\n    torch_xla.sync()\n",
        },
    )
    assert [(p, line) for p, line, _ in found] == [("model.py", 5), ("train.py", 4)]
    assert found[0][2].endswith("(torchax is imported in kernels.py for the program train.py)")
    assert found[1][2].endswith("(torchax is imported in kernels.py)")


def test_imports_that_do_not_run_first_set_no_fact(tmp_path):
    files = {
        "typed.py": "from typing import TYPE_CHECKING\nimport torch_xla\nif TYPE_CHECKING:\n    import torchax\n"
        "dev = torch_xla.device()\n",
        "late.py": "import torch_xla\nimport torch_xla.core.xla_model as xm\ndev = xm.xla_device()\n"
        "import torchax\n",
        "inner.py": "import torch_xla\ndef f():\n    import torchax\n    return torchax.default_env()\n"
        "dev = torch_xla.device()\n",
    }
    assert _found(tmp_path, files) == []
    program = _programs(tmp_path, {})
    assert not any(program.files[p].imports_torchax for p in files)


def test_the_fact_comes_from_a_file_that_never_names_torch_xla(tmp_path):
    # jax_model.py is not parsed (it never names torch_xla): its imports alone carry the fact.
    program = _programs(
        tmp_path,
        {
            "jax_model.py": "from torchax import interop\n",
            "train.py": "import torch_xla\nimport jax_model\ndev = torch_xla.device()\n",
        },
    )
    assert program.holds("train.py", (("torchax", True),))
    assert (
        program.note("train.py", (("torchax", True),)) == " (torchax is imported in jax_model.py)"
    )
    assert "torchax (jax_model.py)" in program.describe()[0]


def test_torch_xla_and_torchax_modules_never_set_it():
    for module in ("torch_xla._internal.jax_workarounds", "torchax.tensor", "torchax"):
        f = FileFacts(module=module, imports=frozenset({"torchax", "jax"}), imports_torchax=True)
        assert own_facts(f)["torchax"] is False
    model = ProgramModel(
        {
            "train.py": FileFacts(
                module="train", imports=frozenset({"torch_xla"}), entry=True, imports_torch_xla=True
            ),
            "torch_xla/experimental/assume_pure.py": FileFacts(
                module="torch_xla.experimental.assume_pure", imports=frozenset({"torchax"})
            ),
        }
    )
    assert not model.holds("train.py", (("torchax", True),))


def test_file_facts_keep_the_flag_through_json():
    f = FileFacts(module="m", imports_torchax=True)
    assert FileFacts.from_json(f.to_json()).imports_torchax is True
    old = f.to_json()
    del old["imports_torchax"]  # a cache entry written before the fact existed
    assert FileFacts.from_json(old).imports_torchax is False
