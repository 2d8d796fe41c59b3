"""``>>>`` examples in docstrings are linted when docs linting is on, at the file's positions."""

from __future__ import annotations

from helpers import lint_tree, write_tree

# Shaped like torch_xla 2.9.0's own HybridMesh docstring (torch_xla/distributed/spmd/xla_sharding.py),
# including its output line written with a prompt (`>>> >> OrderedDict(...)`), which does not parse.
SHARDING = '''\
import torch_xla


class HybridMesh:
  """Creates a hybrid device mesh.

  Example:
    >>> ici_mesh_shape = (1, 4, 1)
    >>> dcn_mesh_shape = (2, 1, 1)
    >>> mesh = HybridMesh(ici_mesh_shape, dcn_mesh_shape, ('data','fsdp','tensor'))
    >>> print(mesh.shape())
    >>> >> OrderedDict([('data', 2), ('fsdp', 4), ('tensor', 1)])
  """

  def __init__(self, *, ici_mesh_shape, dcn_mesh_shape=None, axis_names=None):
    pass


def get_mesh():
  """
  >>> import torch_xla.distributed.spmd as xs
  >>> xs.HybridMesh(
  ...     (1, 4), (2, 1))
  """
'''
FILES = {
    "torch_xla/__init__.py": "",
    "torch_xla/distributed/__init__.py": "",
    "torch_xla/distributed/spmd/__init__.py": "",
    "torch_xla/distributed/spmd/xla_sharding.py": SHARDING,
}


def test_docstring_examples_are_linted_with_the_module_globals(tmp_path):
    write_tree(tmp_path, FILES)
    result, _, _ = lint_tree(tmp_path, select=["XLA001"], docs=True)
    found = [(d.path, d.line, d.column) for d in result.diagnostics]
    assert found == [
        ("torch_xla/distributed/spmd/xla_sharding.py", 10, 16),
        ("torch_xla/distributed/spmd/xla_sharding.py", 22, 7),
    ]
    assert all(d.fix is None for d in result.diagnostics)  # never rewrite inside docstrings


def test_docstrings_are_not_linted_without_docs(tmp_path):
    write_tree(tmp_path, FILES)
    result, _, _ = lint_tree(tmp_path, select=["XLA001"])
    assert result.diagnostics == []


def test_program_level_findings_are_dropped_in_fragments(tmp_path):
    # The example omits set-up (use_spmd); XLA002 would be about the fragment, not the code.
    write_tree(
        tmp_path,
        {
            "m.py": 'import torch_xla\n\ndef f():\n    """\n'
            "    >>> import torch_xla.distributed.spmd as xs\n"
            '    >>> mesh = xs.get_1d_mesh("data")\n    """\n'
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA002"], docs=True)
    assert result.diagnostics == []
