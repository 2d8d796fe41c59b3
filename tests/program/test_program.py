"""The program model: entries, programs, modes per module, and what a finding's facts rest on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import lint_tree, write_tree

from xla_lint.program.facts import FileFacts, module_name
from xla_lint.program.model import Launch, ProgramModel, import_edges, is_test_file

SPMD = (("spmd", True),)
NO_SPMD = (("spmd", False),)
MP = (("multiprocess", True), ("spmd", False))


def F(module: str, *imports: str, **kw) -> FileFacts:
    return FileFacts(module=module, imports=frozenset(imports), **kw)


def test_module_name_walks_up_packages(tmp_path):
    (tmp_path / "src" / "mypkg" / "sub").mkdir(parents=True)
    for rel in (
        "src/mypkg/__init__.py",
        "src/mypkg/sub/__init__.py",
        "src/mypkg/sub/model.py",
        "src/run.py",
    ):
        (tmp_path / rel).write_text("")
    assert module_name(tmp_path / "src/mypkg/sub/model.py") == ("mypkg.sub.model", False)
    assert module_name(tmp_path / "src/mypkg/__init__.py") == ("mypkg", True)
    assert module_name(tmp_path / "src/run.py") == ("run", False)


@pytest.mark.parametrize(
    "path,expected",
    [
        ("tests/test_a.py", True),
        ("test_a.py", True),
        ("pkg/a_test.py", True),
        ("conftest.py", True),
        ("test/spmd/base.py", True),
        ("src/pkg/test_utils/scripts/run.py", True),
        ("train.py", False),
        ("pkg/testing_helpers.py", False),
        ("contest/x.py", False),
    ],
)
def test_test_files(path, expected):
    assert is_test_file(path) is expected


def test_entry_enables_spmd_for_what_it_reaches_and_library_code_has_no_mode():
    model = ProgramModel(
        {
            "main.py": F("main", "mypkg", "mypkg.model", entry=True, enables_spmd=True),
            "mypkg/__init__.py": F("mypkg"),
            "mypkg/model.py": F("mypkg.model", "mypkg.util", shards=True),
            "mypkg/util.py": F("mypkg.util"),
            "other.py": F("other"),
        }
    )
    assert model.holds("mypkg/util.py", SPMD)  # transitively
    assert model.holds(
        "main.py", (("shards", True),)
    )  # the entry's program shards through its import
    assert model.note("mypkg/util.py", SPMD) == " (SPMD is enabled in main.py)"
    # other.py: no program reaches it; a finding that needs a mode stays silent either way.
    assert not model.holds("other.py", SPMD) and not model.holds("other.py", NO_SPMD)
    # ... but a finding about print buffering is reported in library code as anywhere.
    assert model.holds("other.py", (("unbuffered", False),))


def test_a_test_is_a_program_of_its_own_and_its_mode_never_leaks():
    model = ProgramModel(
        {
            "main.py": F("main", "lib", "lib.dist", entry=True, multiprocess=True),
            "lib/__init__.py": F("lib"),
            "lib/dist.py": F("lib.dist"),
            "tests/test_spmd.py": F("test_spmd", "lib", "lib.dist", enables_spmd=True),
        }
    )
    assert not model.holds("lib/dist.py", SPMD)
    assert model.holds("lib/dist.py", MP)
    assert model.holds("tests/test_spmd.py", SPMD)  # in the test itself
    assert model.holds("tests/test_spmd.py", (("test", True),))
    assert not model.holds("main.py", SPMD)


def test_library_module_sets_its_own_mode():
    model = ProgramModel({"lib.py": F("lib", enables_spmd=True)})
    assert model.holds("lib.py", SPMD)
    assert model.note("lib.py", SPMD) == ""


def test_a_module_run_in_two_modes_names_the_other_program():
    model = ProgramModel(
        {
            "spmd_train.py": F(
                "spmd_train", "common", entry=True, enables_spmd=True, requires_torch_xla=True
            ),
            "mp_train.py": F(
                "mp_train", "common", entry=True, multiprocess=True, requires_torch_xla=True
            ),
            "common.py": F("common"),
        }
    )
    assert model.holds("common.py", SPMD) and model.holds("common.py", MP)
    assert (
        model.note("common.py", SPMD)
        == " (SPMD is enabled in spmd_train.py; mp_train.py runs this module in another mode)"
    )
    # A finding that says a fact is missing does not rest on a program that merely imports
    # the module while another program gives it the fact.
    assert not model.holds("common.py", NO_SPMD)
    assert model.holds("mp_train.py", NO_SPMD)  # its own entry lacks it: certain


def test_imports_resolve_through_namespace_packages_src_layouts_and_script_folders():
    files = {
        "proj/train.py": F(
            "train", "proj", "proj.models", "proj.models.sharding", entry=True, enables_spmd=True
        ),
        "proj/models/__init__.py": F("models"),  # proj/ has no __init__.py (PEP 420)
        "proj/models/sharding.py": F(
            "models.sharding", "models", "models.util"
        ),  # `from . import util`
        "proj/models/util.py": F("models.util"),
        "src/pkg/__init__.py": F("pkg"),
        "src/pkg/core.py": F("pkg.core"),
        "tests/test_core.py": F("test_core", "pkg", "pkg.core"),
        "test/spmd/test_mesh.py": F("test.spmd.test_mesh", "test_base"),
        "test/spmd/test_base.py": F("test.spmd.test_base"),
    }
    edges = import_edges(files)
    assert edges["proj/train.py"] == {"proj/models/__init__.py", "proj/models/sharding.py"}
    assert edges["proj/models/sharding.py"] == {"proj/models/__init__.py", "proj/models/util.py"}
    assert edges["tests/test_core.py"] == {"src/pkg/__init__.py", "src/pkg/core.py"}
    assert edges["test/spmd/test_mesh.py"] == {"test/spmd/test_base.py"}
    assert ProgramModel(files).holds("proj/models/util.py", SPMD)


def test_nearest_folder_wins_and_an_ambiguous_name_is_not_guessed():
    files = {
        "x/main.py": F("main", "utils", entry=True, enables_spmd=True),
        "x/utils.py": F("utils"),
        "y/utils.py": F("utils"),
        "z/run.py": F(
            "run", "utils", entry=True, enables_spmd=True
        ),  # no utils.py beside it: two candidates
    }
    edges = import_edges(files)
    assert edges["x/main.py"] == {"x/utils.py"}
    assert edges["z/run.py"] == set()
    assert not ProgramModel(files).holds("y/utils.py", SPMD)


# torchprime's layout: experimental/torchax_models/run.py runs as a script (`python run.py`) and
# does `from llama import model`, loading the namespace folder llama/ beside it (no __init__.py);
# torch_xla_models/llama/ is a regular package elsewhere in the tree that no folder above run.py holds.
TORCHPRIME = {
    "pkg/__init__.py": F("pkg"),
    "pkg/torch_xla_models/__init__.py": F("pkg.torch_xla_models"),
    "pkg/torch_xla_models/llama/__init__.py": F(
        "pkg.torch_xla_models.llama",
        "pkg",
        "pkg.torch_xla_models",
        "pkg.torch_xla_models.llama",
        "pkg.torch_xla_models.llama.model",
    ),
    "pkg/torch_xla_models/llama/model.py": F("pkg.torch_xla_models.llama.model", "torch_xla"),
    "pkg/torch_xla_models/llama/extra.py": F("pkg.torch_xla_models.llama.extra", "torch_xla"),
    "pkg/experimental/__init__.py": F("pkg.experimental"),
    "pkg/experimental/torchax_models/__init__.py": F("pkg.experimental.torchax_models"),
    "pkg/experimental/torchax_models/run.py": F(
        "pkg.experimental.torchax_models.run", "torchax", "llama", "llama.model", entry=True
    ),
    "pkg/experimental/torchax_models/llama/model.py": F("model", "torchax"),
}


def test_a_namespace_folder_beside_the_script_wins_over_a_path_tail_elsewhere():
    run = "pkg/experimental/torchax_models/run.py"
    edges = import_edges(TORCHPRIME)
    # `llama` is the namespace package (no file); `llama.model` its module, never the other tree's.
    assert edges[run] == {"pkg/experimental/torchax_models/llama/model.py"}
    # A name the namespace folder lacks is an attribute or missing: the other llama/extra.py is no guess.
    assert (
        import_edges({**TORCHPRIME, run: F("run", "llama", "llama.extra", entry=True)})[run]
        == set()
    )
    # The same for a namespace folder in a folder above the importer (Python's search from there).
    above = {p.replace("torchax_models/llama/", "llama/"): f for p, f in TORCHPRIME.items()}
    assert import_edges(above)[run] == {"pkg/experimental/llama/model.py"}
    # A module llama.py beside the script: `from llama import model` reads an attribute of it.
    module = {**TORCHPRIME, "pkg/experimental/torchax_models/llama.py": F("llama")}
    del module["pkg/experimental/torchax_models/llama/model.py"]
    assert import_edges(module)[run] == {"pkg/experimental/torchax_models/llama.py"}
    # Nothing named llama along the search: the only tail match would need pkg/torch_xla_models/
    # (a package inside a package) on sys.path; it is some installed llama, never guessed.
    alone = {p: f for p, f in TORCHPRIME.items() if "torchax_models/llama/" not in p}
    assert import_edges(alone)[run] == set()
    model = ProgramModel(TORCHPRIME)
    program = next(p for p in model.programs if p.entry == run)
    assert program.members == {run, "pkg/experimental/torchax_models/llama/model.py"}
    assert model.programs_of("pkg/torch_xla_models/llama/model.py") == []


def test_a_path_tail_is_guessed_only_for_what_a_sys_path_edit_explains():
    files = {
        # sys.path.append("../examples") in a test, PYTHONPATH=benchmarks/ in its launcher.
        "examples/decoder_only_model.py": F("decoder_only_model"),
        "benchmarks/__init__.py": F("benchmarks"),
        "benchmarks/benchmark_model.py": F("benchmark_model"),
        "server/tgs/__init__.py": F("tgs"),  # pip install -e server
        "server/tgs/generator.py": F("tgs.generator"),
        # Modules named like installed or standard packages, deep in a package of the tree.
        "src/acc/__init__.py": F("acc"),
        "src/acc/logging.py": F("acc.logging"),
        "src/acc/utils/__init__.py": F("acc.utils"),
        "src/acc/utils/deepspeed.py": F("acc.utils.deepspeed"),
        "src/acc/utils/torch_xla.py": F("acc.utils.torch_xla"),
        "test/test_models.py": F(
            "test_models",
            "decoder_only_model",
            "benchmark_model",
            "tgs",
            "tgs.generator",
            "deepspeed",
            "torch_xla",
            "torch_xla.core",
            "logging",
            entry=True,
        ),
    }
    assert import_edges(files)["test/test_models.py"] == {
        "examples/decoder_only_model.py",
        "benchmarks/benchmark_model.py",
        "server/tgs/__init__.py",
        "server/tgs/generator.py",
    }


def test_torchax_script_beside_a_namespace_folder_does_not_reach_the_torch_xla_models(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/torch_xla_models/__init__.py": "",
            "pkg/torch_xla_models/llama/__init__.py": "from .model import Llama\n",
            "pkg/torch_xla_models/llama/model.py": (
                "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
                "def build():\n    return xm.xla_device()\n"
            ),
            "pkg/experimental/__init__.py": "",
            "pkg/experimental/torchax_models/__init__.py": "",
            "pkg/experimental/torchax_models/run.py": (
                "import torchax\nfrom llama import model\n\n"
                "if __name__ == '__main__':\n    model.main()\n"
            ),
            "pkg/experimental/torchax_models/llama/model.py": "import torch\n\ndef main():\n    return torch.ones(2)\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA026"], preview=True)
    run = next(
        p for p in result.program.programs if p.entry == "pkg/experimental/torchax_models/run.py"
    )
    assert "pkg/experimental/torchax_models/llama/model.py" in run.members
    assert not any(m.startswith("pkg/torch_xla_models/") for m in run.members)
    assert [(d.code, d.path) for d in result.diagnostics] == []


def test_launcher_environment_and_declared_modes():
    files = {
        "train.py": F("train"),
        "scripts/job.py": F("job"),
        "tool.py": F("tool", requires_torch_xla=True),
    }
    launches = [
        Launch(
            "run.sh:3", "train.py", facts=frozenset({"spmd", "unbuffered"}), why="XLA_USE_SPMD=1"
        )
    ]
    model = ProgramModel(
        files, launches, declared={"scripts/job.py": {"multiprocess"}, "tool.py": {"single"}}
    )
    assert model.holds("train.py", SPMD)
    assert model.note("train.py", SPMD) == " (SPMD is enabled in run.sh:3 (XLA_USE_SPMD=1))"
    assert not model.holds("train.py", (("unbuffered", False),))
    assert model.holds("scripts/job.py", MP)
    assert model.holds("tool.py", NO_SPMD)  # declared an entry, in no mode


def test_documents_are_programs_of_their_own():
    model = ProgramModel(
        {"GUIDE.md": F("", "lib", group="GUIDE.md", enables_spmd=True), "lib.py": F("lib")}
    )
    assert model.holds("GUIDE.md", SPMD)
    assert not model.holds("lib.py", SPMD)


# ---- through the engine ----------------------------------------------------------------

SPMD_ONLY = "import torch_xla.runtime as xr\n\ndef rank():\n    return xr.global_ordinal()\n"


def test_entry_detection_from_code(tmp_path):
    write_tree(
        tmp_path,
        {
            "guarded.py": "import torch_xla.runtime as xr\nimport lib\n\nif __name__ == '__main__':\n    xr.use_spmd()\n",
            "toplevel.py": "import torch_xla.runtime as xr\nimport lib2\nxr.use_spmd()\n",
            "library.py": "import logging\nimport torch_xla.runtime as xr\nimport lib3\nlogger = logging.getLogger()\n"
            "logging.basicConfig()\nxr.use_spmd\nCONST = 3\n",
            "lib.py": SPMD_ONLY,
            "lib2.py": SPMD_ONLY,
            "lib3.py": SPMD_ONLY,
        },
    )
    write_tree(
        tmp_path,
        {
            # library idioms at import time: a registry loop, a cached device count
            "registry.py": "import torch_xla.runtime as xr\nimport lib4\nAXES = {}\n"
            "for name in ('data', 'fsdp'):\n    AXES[name] = len(AXES)\n"
            "DEVICES = xr.global_runtime_device_count()\n",
            "lib4.py": SPMD_ONLY,
            "loop.py": "import torch_xla.runtime as xr\nimport lib5\nxr.use_spmd\nfor step in range(3):\n"
            "    train(step)\n",
            "lib5.py": "import torch_xla.runtime as xr\nxr.use_spmd()\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005"])
    assert sorted(d.path for d in result.diagnostics) == ["lib.py", "lib2.py"]
    entries = {p.entry for p in result.program.programs}
    assert entries == {"guarded.py", "toplevel.py", "loop.py", "lib5.py"}


def test_entry_detection_in_files_without_torch_xla(tmp_path):
    # main.py never names torch_xla (it is not parsed), yet it is the program.
    write_tree(
        tmp_path,
        {
            "main.py": "import os\nfrom trainer import train\n\nif __name__ == '__main__':\n    train()\n",
            "trainer.py": "import torch_xla.runtime as xr\nimport model\n\ndef train():\n    xr.use_spmd()\n",
            "model.py": SPMD_ONLY,
            "helpers.py": "import model\nVALUE = 1\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005"])
    [d] = result.diagnostics
    assert d.path == "model.py" and d.message.endswith(
        "(SPMD is enabled in trainer.py for the program main.py)"
    )


def test_shell_launcher_sets_spmd_and_unbuffered(tmp_path):
    write_tree(
        tmp_path,
        {
            "scripts/run.sh": "#!/bin/bash\nexport XLA_USE_SPMD=1\ncd $ROOT && \\\n  python -u train.py --lr 1e-3\n",
            "train.py": "import torch_xla.runtime as xr\n\nif __name__ == '__main__':\n    print(xr.global_ordinal())\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005", "XLA004"])
    [d] = result.diagnostics
    # the python command starts on the continued line 4 (`cd $ROOT && \\` is line 3)
    assert d.code == "XLA005" and "scripts/run.sh:4 (python -u, XLA_USE_SPMD=1)" in d.message


def test_docs_shell_block_and_project_scripts_are_launchers(tmp_path):
    write_tree(
        tmp_path,
        {
            "README.md": "Run it:\n\n```bash\nXLA_USE_SPMD=1 python -m pkg.train\n```\n",
            "pyproject.toml": '[project]\nname = "x"\n[project.scripts]\nserve = "pkg.serve:main"\n',
            "pkg/__init__.py": "",
            "pkg/train.py": "import torch_xla.runtime as xr\n\ndef main():\n    return xr.global_ordinal()\n",
            "pkg/serve.py": "import torch_xla.distributed.spmd as xs\n\ndef main(mesh, t):\n"
            "    xs.mark_sharding(t, mesh, (0,))\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005", "XLA002"])
    found = sorted((d.path, d.code) for d in result.diagnostics)
    # pkg.train runs with SPMD from the README; pkg.serve is an installed script without it.
    assert found == [("pkg/serve.py", "XLA002"), ("pkg/train.py", "XLA005")]


def test_module_without_torch_xla_imported_by_an_xla_program_is_linted_for_loaders(tmp_path):
    data = (
        "import torch\nfrom torch.utils.data import DataLoader\n\n"
        "def loader(ds):\n    return DataLoader(ds, batch_size=64, shuffle=True)\n"
    )
    write_tree(
        tmp_path,
        {
            "train.py": "import torch_xla\nfrom data import loader\n\nfor x in loader(ds):\n    pass\n",
            "data.py": data,
            # A program that only reaches a library with an optional torch_xla import is no XLA program.
            "gpu.py": "import optlib\nfrom gpudata import loader\n\nfor x in loader(ds):\n    pass\n",
            "optlib.py": "try:\n    import torch_xla\nexcept ImportError:\n    torch_xla = None\n",
            "gpudata.py": data,
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA202"], preview=True)
    assert [(d.path, d.line) for d in result.diagnostics] == [("data.py", 5)]


def test_entry_points_configuration(tmp_path):
    write_tree(
        tmp_path,
        {
            "pyproject.toml": '[tool.xla-lint]\nentry-points = { "jobs/*.py" = "spmd" }\n',
            "jobs/a.py": "import torch_xla.runtime as xr\n\ndef main():\n    return xr.global_ordinal()\n",
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--output-format", "json", "--select", "XLA005", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    [d] = json.loads(proc.stdout)
    assert d["path"] == "jobs/a.py" and "configuration (entry-points)" in d["message"]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.xla-lint]\nentry-points = { "jobs/*.py" = "tpu" }\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and "unknown mode 'tpu'" in proc.stderr
        and len(proc.stderr.splitlines()) == 1
    )


def test_a_print_is_reported_when_one_program_running_the_module_is_buffered():
    model = ProgramModel(
        {
            "fast.py": F("fast", "lib", entry=True, unbuffered=True),
            "slow.py": F("slow", "lib", entry=True),
            "lib.py": F("lib"),
        }
    )
    assert model.holds("lib.py", (("unbuffered", False), ("test", False)))
    assert not model.holds("fast.py", (("unbuffered", False),))


def test_type_checking_imports_and_other_platform_branches_join_no_program(tmp_path):
    write_tree(
        tmp_path,
        {
            # transformers-style lazy package: the TYPE_CHECKING imports never run.
            "pkg/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .spmd import x\n",
            "pkg/spmd.py": "import torch_xla.runtime as xr\nxr.use_spmd()\n",
            "pkg/args.py": "import torch_xla.runtime as xr\nimport torch.distributed as dist\n"
            "if is_torch_neuroncore_available():\n    dist.init_process_group('xla')\n"
            "def rank():\n    return xr.global_ordinal()\n",
            "main.py": "import pkg\nimport pkg.args\nif __name__ == '__main__':\n    pkg.args.rank()\n",
            # the same lazy package, never parsed (no torch_xla in it): the line scan skips the block too
            "lazy/__init__.py": "import typing\nif typing.TYPE_CHECKING:\n    import lazy.spmd2\nX = 1\n",
            "lazy/spmd2.py": "import torch_xla.runtime as xr\nxr.use_spmd()\n",
            "run.py": "import lazy\nimport pkg.args\nif __name__ == '__main__':\n    pass\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005", "XLA008"])
    assert result.diagnostics == []
    main = next(p for p in result.program.programs if p.entry == "main.py")
    assert "spmd" not in main.sources and "multiprocess" not in main.sources
    run = next(p for p in result.program.programs if p.entry == "run.py")
    assert "lazy/spmd2.py" not in run.members


def test_line_scan_of_unparsed_files_reads_every_import_statement():
    from xla_lint.program.modules import import_facts

    f = import_facts(
        "glue.py",
        b"import os\nimport data2; import data3\nfrom data4 \\\n    import make_loader4\n"
        b"x = 1; from data5 import y\nif TYPE_CHECKING:\n    import data6\n"
        b"    from data7 import z\nimport data8\n",
    )
    assert {"data2", "data3", "data4.make_loader4", "data5.y", "data8"} <= f.imports
    assert not {"data6", "data7"} & f.imports
    assert not f.entry  # imports and a constant are no work
    assert import_facts("run.py", b"import os\nmain()\n").entry
    assert not import_facts("x_pb2.py", b"import os\n_sym_db.RegisterMessage(X)\nfoo()\n").entry


def test_python_m_package_runs_its_main_module():
    model = ProgramModel(
        {"pkg/__init__.py": F("pkg"), "pkg/__main__.py": F("pkg.__main__")},
        [Launch("run.sh:1", "pkg", module=True, facts=frozenset({"spmd"}), why="XLA_USE_SPMD=1")],
    )
    assert model.holds("pkg/__main__.py", SPMD) and not model.programs_of("pkg/__init__.py")


def test_a_bare_file_name_in_a_launcher_elsewhere_is_not_guessed():
    files = {"tools/train.py": F("train"), "examples/spmd/train.py": F("train")}
    launches = [
        Launch("docs/ddp.md:4", "train.py", folder="docs", facts=frozenset({"multiprocess"})),
        Launch("docs/ddp.md:9", "spmd/train.py", folder="docs", facts=frozenset({"spmd"})),
    ]
    model = ProgramModel(files, launches)
    assert not model.holds("tools/train.py", (("multiprocess", True),))
    assert model.holds("examples/spmd/train.py", SPMD)  # a path with a folder part: its one match


def test_conftest_mode_reaches_the_tests_below_it_and_test_helpers_are_no_programs():
    model = ProgramModel(
        {
            "tests/conftest.py": F(
                "conftest", fact_functions={"spmd": {"spmd_on"}}, enables_spmd=True
            ),
            "tests/helpers.py": F("helpers"),
            "tests/unit/test_shard.py": F("test_shard", "helpers"),
            "other/test_x.py": F("test_x"),
        }
    )
    assert model.holds("tests/unit/test_shard.py", SPMD)
    assert not model.holds("other/test_x.py", SPMD)
    assert model.programs_of("tests/helpers.py") == []  # library code of the tests: no mode
    assert not model.holds("tests/helpers.py", NO_SPMD)
    assert not model.holds(
        "tests/helpers.py", (("test", False),)
    )  # and it is test code (XLA004 silent)


def test_programs_of_a_large_test_suite_share_what_they_reach():
    files = {f"biglib/mod{i}.py": F(f"biglib.mod{i}", f"biglib.mod{i + 1}") for i in range(300)}
    files["biglib/mod300.py"] = F(
        "biglib.mod300", "biglib.mod0", enables_spmd=True
    )  # one import cycle
    files.update({f"tests/test_{i}.py": F(f"test_{i}", "biglib.mod0") for i in range(400)})
    model = ProgramModel(files)
    assert all(
        len(p.members) == 302 and p.sources["spmd"] == "biglib/mod300.py" for p in model.programs
    )
    assert (
        len(
            {
                id(model._closure.reach("biglib/mod0.py")),
                id(model._closure.reach("biglib/mod150.py")),
            }
        )
        == 1
    )


def test_show_programs_text_json_and_refusals(tmp_path):
    write_tree(
        tmp_path,
        {
            "run.sh": "XLA_USE_SPMD=1 python train.py\n",
            "train.py": "import torch_xla\nimport lib\nif __name__ == '__main__':\n    lib.go()\n",
            "lib.py": "import torch_xla\n",
        },
    )

    def xla(*args):
        return subprocess.run(
            [sys.executable, "-m", "xla_lint", "--isolated", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    text = xla("--show-programs", ".")
    assert (
        text.returncode == 0
        and text.stdout == "train.py: script, SPMD (run.sh:1 (XLA_USE_SPMD=1)), reaches 1 module\n"
    )
    data = json.loads(xla("--show-programs", "--output-format", "json", ".").stdout)
    assert data["programs"] == [
        {
            "entry": "train.py",
            "kind": "script",
            "facts": {
                "spmd": "run.sh:1 (XLA_USE_SPMD=1)",
                # an SPMD program runs one process per host, on a pod maybe started remotely: an
                # inference, with no launcher that pipes its output (XLA004's preview behaviour)
                "possibly_unattended": "it is SPMD (one process per host, started on every host of "
                "a pod remotely) in run.sh:1 (XLA_USE_SPMD=1)",
            },
            "reaches": ["lib.py"],
        }
    ]
    for bad in (["-"], ["--fix", "."], ["--output-format", "sarif", "."], ["--statistics", "."]):
        proc = xla("--show-programs", *bad)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, (bad, proc.stderr)


def test_entry_points_patterns_are_checked(tmp_path):
    from xla_lint.config import ConfigError, build_settings

    settings = build_settings(cwd=tmp_path, isolated=True, entry_points={"./jobs/train.py": "spmd"})
    assert settings.entry_points == (("jobs/train.py", frozenset({"spmd"})),)
    for bad in (
        {"": "spmd"},
        {"../x.py": "spmd"},
        {"a.py": ["spmd", "single"]},
        {"a.py": []},
        {"a.py": 3},
    ):
        with pytest.raises(ConfigError):
            build_settings(cwd=tmp_path, isolated=True, entry_points=bad)


def test_pytest_launcher_gives_its_environment_to_the_tests_it_runs(tmp_path):
    write_tree(
        tmp_path,
        {
            "ci.sh": "export PJRT_DEVICE=CPU XLA_USE_SPMD=1\npython -m pytest tests/unit -x\n",
            "tests/unit/test_mesh.py": "import numpy as np\nimport torch_xla.distributed.spmd as xs\n\n"
            "def test_mesh():\n    xs.Mesh(np.arange(8), (8,), ('data',))\n",
            "tests/other/test_plain.py": "import numpy as np\nimport torch_xla.distributed.spmd as xs\n\n"
            "def test_mesh():\n    xs.Mesh(np.arange(8), (8,), ('data',))\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA002"])
    assert [d.path for d in result.diagnostics] == ["tests/other/test_plain.py"]


def test_xla_use_spmd_written_in_code_follows_torch_xla_s_rule(tmp_path):
    body = "import torch_xla.runtime as xr\n\ndef rank():\n    return xr.global_ordinal()\n"
    write_tree(
        tmp_path,
        {
            "off.py": "import os\nos.environ['XLA_USE_SPMD'] = '0'\nos.environ.setdefault('XLA_USE_SPMD', 'True')\n"
            + body,
            "on.py": "import os\nos.environ['XLA_USE_SPMD'] = '1'\n" + body,
            "maybe.py": "import os\nos.environ['XLA_USE_SPMD'] = os.environ.get('MODE', '')\n"
            + body,
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005"])
    assert sorted(d.path for d in result.diagnostics) == ["maybe.py", "on.py"]


def test_absence_needs_an_xla_program_and_a_fact_in_an_uncalled_method_may_hold():
    model = ProgramModel(
        {
            # A GPU example importing one helper of a library that shards in its own methods.
            "gpu_example.py": F(
                "gpu_example", "trainer", entry=True, references={"EvalPrediction"}
            ),
            "trainer.py": F(
                "trainer",
                shards=True,
                sets_global_mesh=True,
                fact_functions={"shards": {"_wrap_model"}, "global_mesh": {"_wrap_model"}},
                references={"_wrap_model"},
            ),
            # An XLA script that calls the method that shards.
            "train.py": F(
                "train", "trainer", entry=True, requires_torch_xla=True, references={"_wrap_model"}
            ),
        }
    )
    gpu = next(p for p in model.programs if p.entry == "gpu_example.py")
    assert "shards" not in gpu.sources and "shards" in gpu.maybe and not gpu.xla
    assert model.holds("trainer.py", (("shards", True),))  # through train.py, which calls it
    assert model.witness("trainer.py", (("shards", True),)).entry == "train.py"
    only_gpu = ProgramModel({k: v for k, v in model.files.items() if k != "train.py"})
    assert not only_gpu.holds("trainer.py", (("shards", True),))
    assert not only_gpu.holds(
        "trainer.py", (("global_mesh", False),)
    )  # may hold; no XLA program anyway


def test_a_constructor_fact_counts_through_the_class_and_an_option_only_may_hold(tmp_path):
    trainer = (
        "import torch\nimport numpy as np\nimport torch_xla.distributed.spmd as xs\n\n"
        "class Trainer:\n    def __init__(self, cfg):\n        {guard}xs.set_global_mesh(xs.Mesh(np.arange(8), (8,), ('fsdp',)))\n\n"
        "    def save(self, model):\n        torch.save(model.state_dict(), 'm.pt')\n"
    )
    write_tree(
        tmp_path,
        {
            "train.py": "import torch_xla\nfrom lib.trainer import Trainer\n\nif __name__ == '__main__':\n    Trainer(cfg)\n",
            "lib/__init__.py": "",
            "lib/trainer.py": trainer.format(guard=""),
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA003"])
    assert [(d.path, d.line) for d in result.diagnostics] == [("lib/trainer.py", 10)]
    (tmp_path / "lib/trainer.py").write_text(trainer.format(guard="if cfg.fsdp_v2:\n            "))
    result, _, _ = lint_tree(tmp_path, select=["XLA003"])
    assert result.diagnostics == []
    program = next(p for p in result.program.programs if p.entry == "train.py")
    assert "shards" in program.maybe and "global_mesh" in program.maybe


_MODES_ENTRY = (
    "import argparse\n"
    "import torch_xla.distributed.xla_multiprocessing as xmp\n"
    "import tpu_setup\n"
    "from process.train_multi import train_and_val as train_multi\n"
    "from process.train_spmd import train_and_val as train_spmd\n\n"
    "if __name__ == '__main__':\n"
    "    config = argparse.ArgumentParser().parse_args()\n"
    "{setup}"
    "    if( config.tpu_cores == 'single' ):\n"
    "        pass\n"
    "    elif( config.tpu_cores == 'multi' ):\n"
    "        xmp.spawn(train_multi, args=({{}},))\n"
    "    elif( config.tpu_cores == 'spmd' ):\n"
    "        train_spmd(config)\n"
)
_MODES_TREE = {
    "tpu_setup.py": "def set_env_variables_for_TPU_SPMD():\n    from torch_xla import runtime as xr\n    xr.use_spmd()\n",
    "process/__init__.py": "",
    "process/train_multi.py": "import torch_xla.core.xla_model as xm\n\n"
    "def train_and_val(index, flags):\n    if xm.get_ordinal() == 0:\n        print('x', flush=True)\n"
    "    xm.rendezvous('start')\n    if xm.is_master_ordinal():\n        print('y', flush=True)\n"
    "    return xm.all_reduce(xm.REDUCE_SUM, 1.0)\n",
    "process/train_spmd.py": "import numpy as np\nimport torch_xla.distributed.spmd as xs\n\n"
    "def train_and_val(config):\n    xs.set_global_mesh(xs.Mesh(np.arange(8), (8,), ('data',)))\n",
}


def _modes(tmp_path, setup: str):
    write_tree(tmp_path, {"run_train.py": _MODES_ENTRY.format(setup=setup), **_MODES_TREE})
    result, _, _ = lint_tree(tmp_path, select=["XLA005", "XLA006", "XLA007", "XLA008"])
    program = next(p for p in result.program.programs if p.entry == "run_train.py")
    return sorted((d.code, d.path, d.line) for d in result.diagnostics), program


def test_modes_chosen_by_an_option_are_alternatives(tmp_path):
    # `if config.tpu_cores == 'spmd':` turns SPMD on through another module's function and the
    # `elif ... == 'multi':` branch spawns: the program runs one mode or the other, never both.
    found, program = _modes(
        tmp_path,
        "    if( config.tpu_cores == 'spmd' ):\n"
        "        tpu_setup.set_env_variables_for_TPU_SPMD()\n",
    )
    assert found == []
    assert program.alternative and {"spmd", "multiprocess"} <= program.maybe
    assert "spmd" not in program.sources and "multiprocess" not in program.sources
    # Directly in the entry, tested by separate `if` statements on the same subject.
    found, _ = _modes(
        tmp_path,
        "    if config.tpu_cores == 'spmd':\n        import torch_xla.runtime as xr\n"
        "        xr.use_spmd()\n",
    )
    assert found == []


@pytest.mark.parametrize(
    "setup",
    [
        "    import torch_xla.runtime as xr\n    xr.use_spmd()\n",  # unconditional
        "    tpu_setup.set_env_variables_for_TPU_SPMD()\n",  # an unconditional call of the function that sets it
        "    if config.tpu_cores != 'multi':\n        tpu_setup.set_env_variables_for_TPU_SPMD()\n",  # not an equality
        "    if config.tpu_cores == 'multi':\n        tpu_setup.set_env_variables_for_TPU_SPMD()\n",  # the same literal
        "    if config.mode == 'spmd':\n        tpu_setup.set_env_variables_for_TPU_SPMD()\n",  # another subject
    ],
)
def test_modes_not_exclusive_keep_both_facts(tmp_path, setup):
    found, program = _modes(tmp_path, setup)
    spawn = (
        _MODES_ENTRY.format(setup=setup)
        .splitlines()
        .index("        xmp.spawn(train_multi, args=({},))")
        + 1
    )
    assert ("XLA007", "run_train.py", spawn) in found
    assert ("XLA006", "process/train_multi.py", 6) in found and (
        "XLA005",
        "process/train_multi.py",
        7,
    ) in found
    assert not program.alternative and {"spmd", "multiprocess"} <= set(program.sources)


def test_one_conditional_mode_fact_keeps_today_s_behaviour(tmp_path):
    # `if args.spmd: xr.use_spmd()` (a flag, not an equality) with an unconditional spawn: both hold.
    write_tree(
        tmp_path,
        {
            "run.py": "import torch_xla.runtime as xr\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "import torch_xla.core.xla_model as xm\n\n"
            "def _mp_fn(index):\n    xm.rendezvous('x')\n\n"
            "if __name__ == '__main__':\n    args = parse()\n    if args.spmd:\n        xr.use_spmd()\n"
            "    xmp.spawn(_mp_fn)\n",
            # Only the spawn conditional: the SPMD module-level fact of a reached module still holds.
            "run2.py": "import torch_xla.distributed.xla_multiprocessing as xmp\nimport spmd_on\n"
            "import torch_xla.core.xla_model as xm\n\n"
            "def _mp_fn(index):\n    xm.rendezvous('x')\n\n"
            "if __name__ == '__main__':\n    args = parse()\n    if args.mode == 'multi':\n        xmp.spawn(_mp_fn)\n",
            "spmd_on.py": "import torch_xla.runtime as xr\nxr.use_spmd()\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA007"])
    assert sorted((d.path, d.line) for d in result.diagnostics) == [("run.py", 12), ("run2.py", 11)]
    for program in (p for p in result.program.programs if p.entry in ("run.py", "run2.py")):
        assert not program.alternative and {"spmd", "multiprocess"} <= set(program.sources)


def test_conditions_survive_the_cache_and_old_entries_load():
    f = F(
        "run",
        fact_conditions={"spmd": [(("config.mode", "'spmd'"),)]},
        call_conditions={"setup": [(), (("a.b", "1"), ("c", "'x'"))]},
    )
    assert FileFacts.from_json(json.loads(json.dumps(f.to_json()))) == f
    old = {k: v for k, v in f.to_json().items() if not k.endswith("_conditions")}
    assert FileFacts.from_json(old).fact_conditions == {}
    with pytest.raises(TypeError):
        FileFacts.from_json({**f.to_json(), "call_conditions": {"setup": [[["a"]]]}})


def test_a_file_named_like_a_test_that_defines_no_test_is_a_script_not_a_test(tmp_path):
    """Research code names evaluation scripts test_*.py; pytest collects nothing from them."""
    from helpers import lint_tree, write_tree

    write_tree(
        tmp_path,
        {
            "run_test.py": (
                "import torch_xla.runtime as xr\nfrom process import test_eval_spmd\n"
                "if __name__ == '__main__':\n    xr.use_spmd()\n    test_eval_spmd.evaluate()\n"
            ),
            "process/__init__.py": "",
            "process/test_eval_spmd.py": (
                "import torch_xla.distributed.spmd as xs\n"
                "def evaluate():\n    xs.mark_sharding(t, mesh, ('data', None))\n"
            ),
            "tests/test_real.py": "import torch_xla.distributed.spmd as xs\ndef test_x():\n    xs.mark_sharding(t, m, (0,))\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA002"])
    # The evaluation module runs in run_test.py's SPMD program; the real test has no use_spmd.
    assert [(d.path, d.code) for d in result.diagnostics] == [("tests/test_real.py", "XLA002")]
    kinds = {p.entry: p.kind for p in result.program.programs}
    assert kinds["run_test.py"] == "script" and kinds["tests/test_real.py"] == "test"
    assert "process/test_eval_spmd.py" not in kinds


def test_a_file_named_like_a_test_that_a_script_imports_is_a_module_of_the_script(tmp_path):
    """mfatih7/pre-trainedModelOnCPUorOnSPMD_TPU: process/test_1_1_TPU_spmd.py defines
    `def test(model, loader, ...)`, which run_test_TPU.py imports and calls under SPMD; it was
    a pytest program of its own, and XLA002 said SPMD was never enabled. A real test file
    that a script imports is rare; one in a test folder stays a test."""
    from helpers import lint_tree, write_tree

    write_tree(
        tmp_path,
        {
            "run_test_TPU.py": (
                "import torch_xla.runtime as xr\nfrom process.test_1_1_TPU_spmd import test\n"
                "if __name__ == '__main__':\n    xr.use_spmd()\n    test(model, loader, mesh)\n"
            ),
            "process/__init__.py": "",
            "process/test_1_1_TPU_spmd.py": (
                "import torch_xla.distributed.spmd as xs\n"
                "def test(model, loader, mesh):\n    xs.mark_sharding(t, mesh, ('data', None))\n"
            ),
            "process/test_alone.py": (
                "import torch_xla.distributed.spmd as xs\ndef test_x():\n    xs.mark_sharding(t, m, (0,))\n"
            ),
            "tests/test_real.py": "import torch_xla.distributed.spmd as xs\ndef test_x():\n    xs.mark_sharding(t, m, (0,))\n",
            "tests/test_uses_real.py": "from test_real import test_x\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA002"])
    assert sorted((d.path, d.code) for d in result.diagnostics) == [
        ("process/test_alone.py", "XLA002"),
        ("tests/test_real.py", "XLA002"),
    ]
    kinds = {p.entry: p.kind for p in result.program.programs}
    assert "process/test_1_1_TPU_spmd.py" not in kinds
    assert kinds["process/test_alone.py"] == "test" and kinds["tests/test_real.py"] == "test"


def test_spawn_and_torchrun_facts_say_who_sets_the_rank_variables(tmp_path):
    """``spawn``: the program's code calls xmp.spawn/torch_xla.launch (in a function the entry
    calls, too); ``torchrun``: a launcher runs it with torchrun. XLA031 needs the first without
    the second."""
    files = {
        "train.py": F("train", "lib", entry=True, references={"main"}),
        "lib.py": F("lib", spawns=True, multiprocess=True, fact_functions={"spawn": {"main"}}),
        "elastic.py": F("elastic", "lib", entry=True, references={"main"}),
    }
    launches = [
        Launch(
            "run.sh:2", "elastic.py", facts=frozenset({"multiprocess", "torchrun"}), why="torchrun"
        )
    ]
    model = ProgramModel(files, launches)
    needs = (("spawn", True), ("torchrun", False))
    assert model.witness("train.py", needs).entry == "train.py"
    assert model.witness("elastic.py", needs) is None
    assert model.holds("elastic.py", (("torchrun", True),))
    assert model.holds("lib.py", needs)  # through train.py, which spawns without torchrun
    assert FileFacts.from_json(files["lib.py"].to_json()).spawns
    write_tree(
        tmp_path,
        {
            "job.py": "import torch_xla\ndef _mp_fn(i):\n    pass\ntorch_xla.launch(_mp_fn)\n",
            "run.sh": "python -m torch.distributed.run --nproc_per_node 2 job.py\n",
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA031"])
    program = next(p for p in result.program.programs if p.entry == "job.py")
    # torch_xla.launch under torchrun calls the function in place: it spawns nothing
    assert program.sources["xla_launch"] == "job.py" and "spawn" not in program.sources
    assert program.sources["torchrun"].startswith("run.sh:1")
    (tmp_path / "run.sh").write_text("python job.py\n")  # plain python: it spawns
    result, _, _ = lint_tree(tmp_path, select=["XLA031"])
    program = next(p for p in result.program.programs if p.entry == "job.py")
    assert program.sources["spawn"].startswith("run.sh:1")
    (tmp_path / "run.sh").unlink()  # no launcher in the tree: not known to spawn
    result, _, _ = lint_tree(tmp_path, select=["XLA031"])
    program = next(p for p in result.program.programs if p.entry == "job.py")
    assert "spawn" not in program.sources


def test_a_module_no_script_reaches_has_no_lost_output_in_a_tree_with_scripts(tmp_path):
    """XLA004 in a module that no program reaches: alone in its tree (a library checked by
    itself, the case c06-print-flush) its launch is unknown and its print is reported in preview
    mode (an inference); beside scripts that never import it (a dead debugging module of a
    trainer's repository, judged wrong 15 times), it runs in no launch of the tree and is not."""
    module = "import torch_xla\n\n\ndef report(loss):\n    print(loss)\n"
    write_tree(tmp_path, {"debug_callbacks.py": module})
    assert lint_tree(tmp_path, select=["XLA004"])[0].diagnostics == []
    alone, _, _ = lint_tree(tmp_path, select=["XLA004"], preview=True)
    assert [(d.path, d.line) for d in alone.diagnostics] == [("debug_callbacks.py", 5)]
    train = "import torch_xla\nimport torch_xla.runtime as xr\nxr.use_spmd()\nprint('go')\n"
    write_tree(tmp_path, {"train.py": train + "if __name__ == '__main__':\n    pass\n"})
    beside, _, _ = lint_tree(tmp_path, select=["XLA004"], preview=True)
    assert [(d.path, d.line) for d in beside.diagnostics] == [("train.py", 4)]


def test_a_program_runs_a_function_of_a_module_it_imports_only_if_an_importer_names_it(
    tmp_path, monkeypatch
):
    """unseen6: `common.setup()` reads LOCAL_RANK for common's own torchrun main; spmd_train.py
    imports common for `helper` only, so it never runs setup() and is no witness for it; a
    star import or an importer that names `setup` (here in a dict) may run it."""
    monkeypatch.chdir(tmp_path)
    write_tree(
        tmp_path,
        {
            "common.py": "def setup(): ...\ndef helper(): ...\n",
            "spmd_train.py": "from common import helper\nhelper()\n",
            "star_train.py": "from common import *\n",
            "table_train.py": "import common\nSTEPS = {'s': common.setup}\n",
        },
    )
    files = {
        "common.py": F("common", entry=True, multiprocess=True),
        "spmd_train.py": F("spmd_train", "common", entry=True, enables_spmd=True),
        "star_train.py": F("star_train", "common", entry=True, enables_spmd=True),
        "table_train.py": F("table_train", "common", entry=True, enables_spmd=True),
    }
    model = ProgramModel(files)
    programs = {p.entry: p for p in model.programs}
    assert not model.runs_at(programs["spmd_train.py"], "common.py", ("setup",))
    assert model.runs_at(programs["spmd_train.py"], "common.py", ("helper",))
    assert model.runs_at(programs["star_train.py"], "common.py", ("setup",))
    assert model.runs_at(programs["table_train.py"], "common.py", ("setup",))
    assert model.runs_at(programs["common.py"], "common.py", ("setup",))  # its own entry
    assert model.runs_at(programs["spmd_train.py"], "common.py", ())  # module level
    # With the witnesses: setup() runs in common's own program and two SPMD ones, not spmd_train.
    assert model.witness("common.py", SPMD, ("setup",)).entry == "star_train.py"
    del files["star_train.py"], files["table_train.py"]
    model = ProgramModel(files)
    assert model.witness("common.py", SPMD) is not None  # the module as a whole
    assert model.witness("common.py", SPMD, ("setup",)) is None
    assert model.witness("common.py", MP, ("setup",)).entry == "common.py"
    # No program is seen to run the line: something outside the imports may (a YAML
    # `_target_`), so every program importing the file counts.
    files["common.py"] = F("common")
    model = ProgramModel(files)
    assert model.witness("common.py", SPMD, ("setup",)).entry == "spmd_train.py"
