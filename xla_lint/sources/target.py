"""A file to lint (:class:`Target`) and the suffixes that say what kind of source it is."""

from __future__ import annotations

from dataclasses import dataclass

DOC_SUFFIXES = (".md", ".markdown", ".rst")  # linted when documentation linting is on


NOTEBOOK_SUFFIX = ".ipynb"  # Jupyter notebooks: always linted (their code cells)


DOCUMENT_SUFFIXES = (
    *DOC_SUFFIXES,
    NOTEBOOK_SUFFIX,
)  # files whose code blocks are linted, never fixed


@dataclass(frozen=True)
class Target:
    """A file to lint: ``path`` as it will be shown, ``kind`` ``"python"`` or ``"doc"``.

    ``error`` (e.g. ``"cannot read folder: Permission denied"``) marks a path that could
    not be searched or looked at: it is reported as XLA000 instead of being linted.
    """

    path: str
    kind: str
    error: str | None = None
