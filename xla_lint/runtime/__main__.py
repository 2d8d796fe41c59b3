"""``python -m xla_lint.runtime``: the runtime sanity checker's entry point (see cli.py)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
