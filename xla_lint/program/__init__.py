"""The cross-file program model (no LibCST in this folder).

- ``facts``: what one file contributes to its programs (:class:`~xla_lint.program.facts.FileFacts`:
  imports, entry point?, mode facts and where they are set).
- ``modules``: the import scan: a file's dotted name and its facts read from its bytes without
  parsing (for files the prefilter rules out).
- ``launchers``: the shell scripts, documentation shell blocks and ``[project.scripts]`` that run
  the tree's files, with their environment and options.
- ``model``: :class:`~xla_lint.program.model.ProgramModel`: entries, the import graph, programs and
  the modes each module runs in.
- ``flow``: :class:`~xla_lint.program.flow.LoaderFlows`: every file's device-loader value flow
  joined and closed (which parameters and returns may be a device loader).

Rules never build any of this: the pipeline does, once per run, and findings that rest on a
program fact are kept or dropped against it.
"""
