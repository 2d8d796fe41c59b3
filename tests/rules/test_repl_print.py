"""XLA004 is silent in examples written as an interactive session (`>>>`): docstring examples
and Markdown/reST blocks in REPL form; ordinary code blocks and the module's code are checked."""

from __future__ import annotations

from helpers import lint_tree, write_tree

MODULE = '''\
import torch_xla


def device():
    """The device.

    >>> import torch_xla
    >>> print(torch_xla.device())
    xla:0
    """
    print("device", flush=False)
    print("device")
'''

# Shaped like pytorch/xla docs/source/learn/dynamic_shape.md: a ```python block in REPL form.
MARKDOWN = """\
# Dynamic shapes

```python
>>> import torch, torch_xla
>>> out_tensor = torch.nonzero(in_tensor)
```

```python
>>> print(out_tensor.shape)
torch.Size([<=25, 2])
```

```pycon
>>> print(torch_xla.device())
```

```python
import torch_xla
print(torch_xla.device())
```
"""

RST = """\
Title
=====

.. code-block:: python

   >>> import torch_xla
   >>> print(torch_xla.device())

.. code-block:: python

   import torch_xla
   print(torch_xla.device())
"""


def test_print_in_repl_examples_is_not_reported(tmp_path):
    write_tree(tmp_path, {"lib.py": MODULE, "docs/shapes.md": MARKDOWN, "docs/index.rst": RST})
    result, _, _ = lint_tree(tmp_path, select=["XLA004"], docs=True)
    assert sorted((d.path, d.line) for d in result.diagnostics) == [
        ("docs/index.rst", 12),
        ("docs/shapes.md", 19),
        ("lib.py", 12),
    ]
