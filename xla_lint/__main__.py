"""``python -m xla_lint`` and the ``xla-lint`` command (``[project.scripts]``)."""

import gc
import os
import sys

# The collector's first generation runs every 700 allocations by default; a lint run makes
# objects that live to its end (imported modules, cached results, the program model, LibCST
# trees), so those passes find little to free: a warm run over an unchanged tree (synthetic
# 2,401 files) spent 0.16-0.18 s after its imports, 0.135 s with this, and JSON and pickles of
# cached results load 3x faster; a cold run's LibCST trees are as long-lived per file (pytorch/xla's
# 274 torch_xla files, -j 1: 8.6 -> 7.0 s of CPU, peak memory 186 -> 196 MB; with no collection at
# all it was 7.5 s and 365 MB: parses do leave cycles). Collections still run, rarely (as mypy
# raises its threshold): a cycle of garbage is freed within GC_THRESHOLD[0] allocations.
GC_THRESHOLD = (50_000, 20, 20)


def main() -> None:
    """Run the command line of :mod:`xla_lint.cli`. A Ctrl-C while its modules are still being
    imported (the first half second of a run, longer on a loaded machine) is one line and exit
    130, as everywhere else, not a traceback of the import."""
    gc.set_threshold(*GC_THRESHOLD)
    try:
        from .cli import main as command
    except KeyboardInterrupt:
        sys.stderr.write("xla-lint: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    try:
        command(prog_name="xla-lint")
    except SystemExit as exc:
        from . import cli

        # Without the interpreter's teardown (freeing every object, as mypy skips it too), only
        # after a finished lint run (cli.FINISHED): its files are written and its workers
        # stopped; the other commands (server, trace, runtime checker) keep their exit handlers.
        if cli.FINISHED and (exc.code is None or isinstance(exc.code, int)):
            cli.exit_at_once(exc.code or 0)
        raise


if __name__ == "__main__":
    # `python -m xla_lint` puts the current folder first on sys.path, where a checkout's own
    # copy.py or typing.py would shadow the standard library's (unseen8 tz_kaggle: a crash).
    # xla-lint never imports the code it checks: the folder is taken off again (as -P does).
    if sys.path and not sys.flags.safe_path and os.path.abspath(sys.path[0] or ".") == os.getcwd():
        del sys.path[0]
    main()
