"""xla-lint: a linter and runtime sanity checker for PyTorch/XLA (torch_xla) training code."""

__version__ = "0.1.0"
