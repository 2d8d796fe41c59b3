"""Program facts: joined along imports between linted files, per document for code blocks."""

from __future__ import annotations

from xla_lint.facts import FileFacts, compute_program_facts, module_name


def test_module_name_walks_up_packages(tmp_path):
    (tmp_path / "src" / "mypkg" / "sub").mkdir(parents=True)
    for rel in ("src/mypkg/__init__.py", "src/mypkg/sub/__init__.py", "src/mypkg/sub/model.py", "src/run.py"):
        (tmp_path / rel).write_text("")
    assert module_name(tmp_path / "src/mypkg/sub/model.py") == ("mypkg.sub.model", False)
    assert module_name(tmp_path / "src/mypkg/__init__.py") == ("mypkg", True)
    assert module_name(tmp_path / "src/run.py") == ("run", False)


def test_entry_script_enables_spmd_for_what_it_imports():
    files = {
        "main.py": FileFacts(module="main", imports=frozenset({"mypkg", "mypkg.model"}), enables_spmd=True),
        "mypkg/model.py": FileFacts(module="mypkg.model", shards=True),
        "other.py": FileFacts(module="other"),
    }
    facts = compute_program_facts(files)
    assert facts.per_file["mypkg/model.py"]["spmd"] is True
    assert facts.per_file["main.py"]["shards"] is True  # the entry's program shards through its import
    assert facts.per_file["other.py"] == {"spmd": False, "shards": False, "multiprocess": False}


def test_facts_flow_transitively_but_not_between_siblings():
    files = {
        "a.py": FileFacts(module="a", imports=frozenset({"b"}), enables_spmd=True),
        "b.py": FileFacts(module="b", imports=frozenset({"c"})),
        "c.py": FileFacts(module="c"),
        "d.py": FileFacts(module="d", imports=frozenset({"c"}), multiprocess=True),
    }
    facts = compute_program_facts(files)
    assert facts.per_file["c.py"]["spmd"] and facts.per_file["c.py"]["multiprocess"]
    assert facts.per_file["b.py"]["spmd"] and not facts.per_file["b.py"]["multiprocess"]
    assert not facts.per_file["d.py"]["spmd"]


def test_same_folder_module_is_preferred_on_name_clash():
    files = {
        "x/main.py": FileFacts(module="main", imports=frozenset({"utils"}), enables_spmd=True),
        "x/utils.py": FileFacts(module="utils"),
        "y/utils.py": FileFacts(module="utils"),
    }
    facts = compute_program_facts(files)
    assert facts.per_file["x/utils.py"]["spmd"] is True
    assert facts.per_file["y/utils.py"]["spmd"] is False


def test_requires_checks_every_fact():
    facts = compute_program_facts({"a.py": FileFacts(module="a", enables_spmd=True)})
    assert facts.holds("a.py", (("spmd", True),))
    assert not facts.holds("a.py", (("spmd", False),))
    assert not facts.holds("a.py", (("spmd", True), ("shards", True)))
    assert facts.holds("unknown.py", (("spmd", False),))
    assert not facts.holds("unknown.py", (("spmd", True),))


def test_script_style_import_reaches_a_module_inside_a_package_folder():
    # test/spmd/__init__.py exists, yet the tests import their base as `import test_base`.
    files = {
        "test/spmd/test_base.py": FileFacts(module="test.spmd.test_base", enables_spmd=True),
        "test/spmd/test_mesh.py": FileFacts(module="test.spmd.test_mesh", imports=frozenset({"test_base"}), shards=True),
    }
    facts = compute_program_facts(files)
    assert facts.per_file["test/spmd/test_mesh.py"]["spmd"] is True
    assert facts.source_of("test/spmd/test_mesh.py", "spmd") == "test/spmd/test_base.py"
    assert facts.source_of("test/spmd/test_base.py", "spmd") is None  # true on its own


def test_finding_names_the_file_that_enables_spmd(tmp_path):
    from helpers import lint_tree, write_tree

    write_tree(tmp_path, {
        "main.py": "import torch_xla.runtime as xr\nimport common\nxr.use_spmd()\n",
        "common.py": "import torch_xla.runtime as xr\nrank = xr.global_ordinal()\n",
    })
    result, _, _ = lint_tree(tmp_path, select=["XLA005"])
    [diag] = result.diagnostics
    assert diag.path == "common.py" and diag.message.endswith("(SPMD is enabled in main.py)")
