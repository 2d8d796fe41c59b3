"""Host syncs, graph breaks and shape changes: what makes a lazy-tensor training loop slow.

The rules here look at *training loops*: ``for``/``while`` loops whose body runs a step
(``loss.backward()``, an optimizer step, ``torch_xla.step()``, ``torch_xla.sync()``,
``xm.mark_step()``, a call of a ``torch_xla.compile``d function), directly or through a
function of the same module that does so outside its own loops. :class:`LoopFacts` is the
per-module analysis both loop rules share. XLA204 is about a graph that changes once, late:
torch's Adam/AdamW passing a host-side bias correction that becomes the special scalar 1.0."""
