"""Known torch_xla errors get their real cause, not the generic stage hint."""

from xla_lint.runtime.checks import _hint, _known_error


def test_padded_shard_checkpoint_error_is_explained():
    err = {
        "stage": "checkpoint",
        "error": "CheckpointException ... TypeError: 'ellipsis' object is not iterable",
    }
    assert "not a multiple of the fsdp axis size" in _hint(err)
    assert _known_error(err) is not None


def test_other_checkpoint_errors_keep_the_stage_hint():
    err = {"stage": "checkpoint", "error": "PermissionError: /ckpt"}
    assert _known_error(err) is None
    # A failing save is not XLA003's pitfall (torch.save of sharded state): the hint is about the folder.
    assert "--checkpoint-dir" in _hint(err) and "XLA003" not in _hint(err)
