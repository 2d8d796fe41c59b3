"""The run's stages do each piece of work once: the prefilter once per file, and the program a
kept finding rests on found once (its note made from it), with the same findings."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.pipeline import run as engine
from xla_lint.program.model import ProgramModel

SPMD_ENTRY = (
    "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\nimport model\n"
    "xr.use_spmd()\nxs.mark_sharding(model.W, None, (0, 1))\nmodel.save(model.W)\n"
)
MODEL = (
    "import torch_xla.core.xla_model as xm\nW = None\n"
    "def save(t):\n    xm.save(t, 'a.pt')\n    xm.save(t, 'b.pt')\n"
)


def test_the_prefilter_runs_once_per_file(tmp_path, monkeypatch):
    write_tree(
        tmp_path,
        {"train.py": SPMD_ENTRY, "model.py": MODEL, "plain.py": "import os\nprint(1)\n"},
    )
    calls: list[bytes] = []
    real = engine.needs_parse

    def counted(data: bytes) -> bool:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(engine, "needs_parse", counted)
    result, _, targets = lint_tree(tmp_path)
    assert len(calls) == len(targets) == 3
    assert {d.code for d in result.diagnostics} >= {"XLA003"}


def test_the_witness_is_found_once_per_kept_finding_and_notes_are_unchanged(tmp_path, monkeypatch):
    write_tree(tmp_path, {"train.py": SPMD_ENTRY, "model.py": MODEL})
    expected, _, _ = lint_tree(tmp_path)
    saves = [d for d in expected.diagnostics if d.code == "XLA003"]
    assert len(saves) == 2 and all("train.py" in d.message for d in saves)  # the note
    asked: list[str] = []
    real = ProgramModel.witness

    def counted(self, path, requires, reach=()):
        asked.append(path)
        return real(self, path, requires, reach)

    monkeypatch.setattr(ProgramModel, "witness", counted)
    result, _, _ = lint_tree(tmp_path)
    assert result.diagnostics == expected.diagnostics
    needing = [d for r in result.files for d in r.diagnostics if d.requires and not d.launch]
    assert len(needing) >= 2 and len(asked) == len(needing)
