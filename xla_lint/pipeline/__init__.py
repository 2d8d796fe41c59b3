"""The pipeline: the stages run for a set of files, in order.

- ``discover``: which files a run lints (and the launchers read on the side).
- ``run``: read, prefilter, cache, worker pool, program model, the rules that need a program,
  findings kept against the program's facts, suppressions (:func:`~xla_lint.pipeline.run.run`).
- ``cache``: the per-file result cache; ``fixes``: applying fixes and writing files atomically;
  ``noqa``: ``--add-noqa``'s comments.
- ``workspace``: the one composition every entry point calls (``xla-lint PATH...``, standard
  input, ``--fix``, the editor server, the trace's static lint).

The linting of one source (parse, one traversal of every rule) is :mod:`xla_lint.linter`,
imported lazily by ``run`` so that a run that parses nothing never imports LibCST.
"""
