"""The per-file semantic model that rules ask (LibCST).

- ``context``: :class:`~xla_lint.analysis.context.FileContext` (what a name resolves to, which
  ``is_spmd()`` branch a node is in, the facts collector) and the rule dispatcher.
- ``walk``: the one traversal and the shared node list; ``positions``: line and column of
  reported nodes; ``names``: name resolution through imports; ``apis``: torch_xla's canonical
  names and its removed modules and attributes.
- ``guards``: which code runs on the target version and on XLA; ``values``: what a name or an
  argparse option holds; ``holds``: whether a value may hold XLA tensors.
- ``functions``: the file's own functions, which of them a call (``helper()``,
  ``self._clip()``) runs, the calls each body runs in order and the ``if`` arms around them.
- ``loops``: loops and steps (:class:`~xla_lint.analysis.loops.LoopFacts`: training,
  evaluation or setup; what ends a step); ``loaders``: device loaders followed through the
  file's value flow (:class:`~xla_lint.analysis.loaders.LoaderFlow`), recorded for the program.
- ``torchtpu``: whose ``torch_tpu`` a file uses (Google's TorchTPU, SOPHGO's, or undecided:
  :func:`~xla_lint.analysis.torchtpu.flavour`), where TorchTPU code runs, and the committed data
  file of the torch-tpu 0.2.0 wheel's API (also read by :mod:`xla_lint.migrate`).
- ``seeds``: seeds, the model built after them and launched functions (shared by the seed and
  multi-process rules).

An analysis that two or more rule families use lives here, not inside one family.
"""
