"""``python -m xla_lint`` and the ``xla-lint`` command (``[project.scripts]``)."""

import os
import sys


def main() -> None:
    """Run the command line of :mod:`xla_lint.cli`. A Ctrl-C while its modules are still being
    imported (the first half second of a run, longer on a loaded machine) is one line and exit
    130, as everywhere else, not a traceback of the import."""
    try:
        from .cli import main as command
    except KeyboardInterrupt:
        sys.stderr.write("xla-lint: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    command(prog_name="xla-lint")


if __name__ == "__main__":
    # `python -m xla_lint` puts the current folder first on sys.path, where a checkout's own
    # copy.py or typing.py would shadow the standard library's (unseen8 tz_kaggle: a crash).
    # xla-lint never imports the code it checks: the folder is taken off again (as -P does).
    if sys.path and not sys.flags.safe_path and os.path.abspath(sys.path[0] or ".") == os.getcwd():
        del sys.path[0]
    main()
