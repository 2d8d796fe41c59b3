"""``python -m xla_lint``: the same as the ``xla-lint`` command."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="xla-lint")
