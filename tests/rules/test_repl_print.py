"""XLA004 is silent in examples written as an interactive session (`>>>`): docstring examples
and Markdown/reST blocks in REPL form; ordinary code blocks and the module's code are checked.
Every example ends with `os._exit`, which loses what it printed (XLA004's crash path, its preview
behaviour: linted with preview on), so that only the REPL form keeps a print silent."""

from __future__ import annotations

from helpers import lint_tree, write_tree

MODULE = '''\
import torch_xla


def device():
    """The device.

    >>> import os, torch_xla
    >>> print(torch_xla.device())
    xla:0
    >>> os._exit(0)
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
>>> import os
>>> print(out_tensor.shape)
torch.Size([<=25, 2])
>>> os._exit(0)
```

```pycon
>>> import os
>>> print(torch_xla.device())
>>> os._exit(0)
```

```python
import os
import torch_xla
print(torch_xla.device())
os._exit(0)
```
"""

RST = """\
Title
=====

.. code-block:: python

   >>> import os, torch_xla
   >>> print(torch_xla.device())
   >>> os._exit(0)

.. code-block:: python

   import os
   import torch_xla
   print(torch_xla.device())
   os._exit(0)
"""


def test_print_in_repl_examples_is_not_reported(tmp_path):
    write_tree(tmp_path, {"lib.py": MODULE, "docs/shapes.md": MARKDOWN, "docs/index.rst": RST})
    result, _, _ = lint_tree(tmp_path, select=["XLA004"], docs=True, preview=True)
    assert sorted((d.path, d.line) for d in result.diagnostics) == [
        ("docs/index.rst", 14),
        ("docs/shapes.md", 24),
        ("lib.py", 13),
    ]
