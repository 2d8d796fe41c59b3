"""``xla-lint migrate --to torchtpu``: every torch_xla use of a tree, what it becomes on TorchTPU
0.2.0, and the rewrites that are mechanical (docs/migrate.md).

A layer above the rules and the pipeline, below the command line: it runs the linter's one
composition (:func:`xla_lint.pipeline.workspace.lint_paths`: discovery, configuration, the
program model) and the linter's own traversal and name resolution, and applies its rewrites with
the pipeline's fix rounds and atomic writes. It never imports the linted code, nor TorchTPU.

- ``table``: the migration of each torch_xla API (class, target, the map's row, the step of the
  migration order) and the TorchTPU API data file (``xla_lint/data/torchtpu_api.json``, written
  by ``tools/torchtpu_api.py`` from the torch-tpu 0.2.0 wheel);
- ``rewrites``: the fixes, one function per kind of rewrite;
- ``sites``: one file's torch_xla uses (:class:`~xla_lint.migrate.sites.Site`);
- ``run``: a tree's sites placed in their programs, and ``--fix``/``--diff``;
- ``report``: text, JSON and Markdown.
"""
