"""XLA205 eval-loop-without-step-boundary, beyond the rule's own examples: each exemption
flipped on one base loop, the reads that do and do not end the accumulator's graph (as
measured in tests/runtime/test_eval_graph_growth.py), and the traps seen in real code
(diffusers' per-call loops over a few control images, tiles inside a synced denoising step,
a denoising loop in a nested function, a CPU accumulator, accelerate's device-map search)."""

from __future__ import annotations

import pytest
from helpers import lint_tree, write_tree

from xla_lint.rules.recompilation.eval_loop import EvalLoopWithoutStepBoundary

HEAD = "import torch\nimport torch_xla\ndevice = torch_xla.device()\n"
# The brief's plain evaluation loop: its `for` is on line 6.
BASE = (
    HEAD + "correct = 0\n"
    "with torch.no_grad():\n"
    "    for x, y in test_loader:\n"
    "        out = model(x.to(device))\n"
    "        correct += (out.argmax(1) == y.to(device)).sum()\n"
    "{extra}"
    "print(correct.item())\n"
)


def _found(tmp_path, code: str, name: str = "example.py", files=None) -> list[tuple[str, int]]:
    write_tree(tmp_path, {name: code, **(files or {})})
    result, _, _ = lint_tree(
        tmp_path,
        select=["XLA205"],
        preview=True,
        **({} if files else {"entry_points": {name: "single"}}),
    )
    return [(d.path, d.line) for d in result.diagnostics if d.code == "XLA205"]


def _lines(tmp_path, code: str) -> list[int]:
    return [line for _, line in _found(tmp_path, code)]


def test_the_base_loop_is_reported_once_with_its_accumulator(tmp_path):
    write_tree(tmp_path, {"example.py": BASE.format(extra="")})
    result, _, _ = lint_tree(
        tmp_path, select=["XLA205"], preview=True, entry_points={"example.py": "single"}
    )
    assert [(d.line, d.code) for d in result.diagnostics] == [(6, "XLA205")]
    assert "keeps `correct` on the device" in result.diagnostics[0].message
    assert EvalLoopWithoutStepBoundary.preview and EvalLoopWithoutStepBoundary.code == "XLA205"


@pytest.mark.parametrize(
    "extra",
    [
        "        torch_xla.sync()\n",
        "        import torch_xla.core.xla_model as xm\n        xm.mark_step()\n",
        "        correct.cpu()\n",  # materializes the accumulator itself (measured)
        "        print(correct)\n",
        "        print(f'{correct}')\n",
        "        correct = 0\n",  # reset every iteration: nothing is kept
    ],
)
def test_what_ends_the_accumulators_graph(tmp_path, extra):
    assert _lines(tmp_path, BASE.format(extra=extra)) == []


@pytest.mark.parametrize(
    "extra",
    [
        "        print(out.sum().item())\n",  # another tensor's read: measured not to cut
        "        preds.append(out.argmax(1).cpu())\n",
        "        loss = criterion(out, y.to(device))\n        print(loss)\n",
        "        if correct.item() > 10:\n            break\n",  # runs the graph, leaves it pending
    ],
)
def test_reads_of_other_tensors_do_not_end_it(tmp_path, extra):
    assert _lines(tmp_path, BASE.format(extra=extra)) == [6]


@pytest.mark.parametrize(
    "old,new",
    [
        ("with torch.no_grad():", "if True:"),  # not an evaluation any more
        ("correct += (out.argmax(1) == y.to(device)).sum()", "correct += out.size(0)"),
        ("correct += (out.argmax(1) == y.to(device)).sum()", "correct += y.sum()"),  # no forward
        ("out = model(x.to(device))", "out = tokenizer(x)"),  # no model
        ("for x, y in test_loader:", "for x, y in pl.MpDeviceLoader(test_loader, device):"),
        ("for x, y in test_loader:", "for x, y in [(a, b), (c, d)]:"),
        ("for x, y in test_loader:", "for x, y in zip(images, labels):"),  # a few items
        ("correct = 0", "torch_xla.experimental.eager_mode(True)"),
    ],
)
def test_each_exemption(tmp_path, old, new):
    code = BASE.format(extra="").replace(old, new)
    if "pl." in new:
        code = "import torch_xla.distributed.parallel_loader as pl\n" + code
    assert _lines(tmp_path, code) == []


def test_what_says_it_evaluates(tmp_path):
    body = "    for x, y in loader:\n        outs.append(model(x))\n    return outs\n"
    assert _lines(tmp_path, HEAD + "def evaluate(model, loader):\n    outs = []\n" + body) == [6]
    assert _lines(
        tmp_path, HEAD + "def run_validation(model, loader):\n    outs = []\n" + body
    ) == [6]
    assert _lines(
        tmp_path, HEAD + "@torch.inference_mode()\ndef run(model, loader):\n    outs = []\n" + body
    ) == [7]
    assert _lines(
        tmp_path,
        HEAD + "def run(model, loader):\n    outs = []\n    with torch.set_grad_enabled(False):\n"
        "        for x, y in loader:\n            outs.append(model(x))\n",
    ) == [7]
    # `infer_...` is not an evaluation (accelerate's infer_auto_device_map), nor a plain loop.
    assert _lines(tmp_path, HEAD + "def infer_map(model, loader):\n    outs = []\n" + body) == []
    assert _lines(tmp_path, HEAD + "def collect(model, loader):\n    outs = []\n" + body) == []


def test_accumulators(tmp_path):
    loop = (
        HEAD + "with torch.no_grad():\n    for x, y in val_loader:\n        out = self.net(x)\n{}"
    )
    for kept in [
        "        total = total + criterion(out, y)\n",
        "        all_preds = torch.cat([all_preds, out.argmax(1)])\n",
        "        self.stats['loss'] += criterion(out, y)\n",
        "        metric.update(out, y)\n",
        "        outputs.extend([out, y])\n",
        "        logits = out.logits\n        history.append(logits)\n",
    ]:
        assert _lines(tmp_path, loop.format(kept)) == [5], kept
    for not_kept in [
        "        total += criterion(out, y).item()\n",
        "        texts.extend(tokenizer.batch_decode(out.argmax(-1)))\n",
        "        outputs.append(out.tolist())\n",
        "        n += out.shape[0]\n",
        "        outputs.append(out)\n        out.cpu()\n",  # the kept tensor itself is materialized
        "        self.cache = out\n",  # replaced, not accumulated
    ]:
        assert _lines(tmp_path, loop.format(not_kept)) == [], not_kept


def test_a_cpu_accumulator_is_not_an_xla_graph(tmp_path):
    # GolamRabby45/Pytorch-XLA_Benchmarking renet_XLA.py: RENet.test returns a CPU tensor
    # (built from .item() values); adding an XLA tensor to this one in place would raise.
    code = (
        HEAD + "def test(loader):\n    result = torch.tensor([0, 0, 0, 0], dtype=torch.float)\n"
        "    for data in loader:\n        data = data.to(device)\n        with torch.no_grad():\n"
        "            log_prob = model(data)\n        result += model.test(log_prob, data.obj)\n"
        "    return result.tolist()\n"
    )
    assert _lines(tmp_path, code) == []
    assert _lines(tmp_path, code.replace("dtype=torch.float)", "device=device)")) == [6]


def test_sampling_loops_that_feed_their_output_back(tmp_path):
    # diffusers community pipelines: an inversion loop without the mark_step its denoising loop has.
    code = (
        HEAD + "@torch.no_grad()\ndef invert(self, latents, timesteps):\n"
        "    for i, t in enumerate(reversed(timesteps)):\n        model_inputs = latents\n"
        "        noise_pred = self.unet(model_inputs, t).sample\n"
        "        latents, pred_x0 = self.next_step(noise_pred, t, latents)\n"
        "    return latents\n"
    )
    assert _lines(tmp_path, code) == [6]
    assert (
        _lines(
            tmp_path,
            ("import torch_xla.core.xla_model as xm\n" + code).replace(
                "    return latents\n", "        xm.mark_step()\n"
            ),
        )
        == []
    )
    # greedy decoding in a while loop
    decode = (
        HEAD + "@torch.no_grad()\ndef generate(model, ids):\n    while ids.shape[1] < 64:\n"
        "        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)\n    return ids\n"
    )
    assert _lines(tmp_path, decode) == [6]


def test_diffusers_per_call_loops_are_not_datasets(tmp_path):
    # pipeline_hunyuandit_controlnet.py: a few control images, encoded before denoising.
    images = (
        HEAD + "class Pipe:\n    @torch.no_grad()\n    def __call__(self, control_image):\n"
        "        control_images = []\n        for control_image_ in control_image:\n"
        "            control_image_ = self.prepare_image(image=control_image_)\n"
        "            control_image_ = self.vae.encode(control_image_).latent_dist.sample()\n"
        "            control_images.append(control_image_)\n"
    )
    assert _lines(tmp_path, images) == []
    # mixture_tiling_sdxl.py: the tiles of one denoising step, which marks the step.
    tiles = (
        HEAD + "import torch_xla.core.xla_model as xm\n@torch.no_grad()\n"
        "def call(self, timesteps, latents, data_tiles):\n"
        "    for i, t in enumerate(timesteps):\n        noise_preds = []\n"
        "        for tile in data_tiles:\n            noise_preds.append(self.unet(tile, t))\n"
        "        latents = self.scheduler.step(torch.cat(noise_preds), t, latents)\n"
        "        xm.mark_step()\n"
    )
    assert _lines(tmp_path, tiles) == []
    # rerender_a_video.py: each frame runs a nested denoising function that marks every step.
    frames = (
        HEAD + "import torch_xla.core.xla_model as xm\n@torch.no_grad()\n"
        "def call(self, frames_data, timesteps):\n    outputs = []\n"
        "    def denoising_loop(latents):\n        for t in timesteps:\n"
        "            latents = self.unet(latents, t)\n            xm.mark_step()\n"
        "        return latents\n"
        "    for frame in frames_data:\n        latents = denoising_loop(self.vae.encode(frame))\n"
        "        outputs.append(self.vae.decode(latents))\n    return outputs\n"
    )
    assert _lines(tmp_path, frames) == []


def test_nested_loops_are_reported_at_the_one_that_keeps(tmp_path):
    code = (
        HEAD + "def fit(model, train_loader, val_loader):\n    for epoch in range(10):\n"
        "        for x, y in train_loader:\n            criterion(model(x), y).backward()\n"
        "            optimizer.step()\n            torch_xla.sync()\n"
        "        with torch.no_grad():\n            correct = 0\n"
        "            for x, y in val_loader:\n"
        "                correct += (model(x).argmax(1) == y).sum()\n"
        "        print(correct.item())\n"
    )
    assert _lines(tmp_path, code) == [12]
    # a batch loop whose per-key inner loop accumulates: reported at the batch loop
    keys = (
        HEAD
        + "with torch.no_grad():\n    for batch in eval_loader:\n        out = model(**batch)\n"
        "        for k in KEYS:\n            sums[k] += out[k]\n"
    )
    assert _lines(tmp_path, keys) == [5]


def test_while_loops_over_an_iterator(tmp_path):
    code = (
        HEAD + "with torch.no_grad():\n    it = iter(loader)\n    while True:\n"
        "        x, y = next(it)\n        correct += (model(x).argmax(1) == y).sum()\n"
    )
    assert _lines(tmp_path, code) == [6]
    search = code.replace("next(it)", "next(p for p in pool if p)")
    assert _lines(tmp_path, search) == []


def test_a_device_loader_handed_to_the_function(tmp_path):
    # XLA203's logic, shared: a parameter loop in a module that builds a device loader.
    code = (
        "import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n"
        "@torch.no_grad()\ndef evaluate(model, loader):\n    correct = 0\n"
        "    for x, y in loader:\n        correct += (model(x).argmax(1) == y).sum()\n"
        "    return correct\n"
        "evaluate(model, pl.MpDeviceLoader(test_loader, torch_xla.device()))\n"
    )
    assert _lines(tmp_path, code) == []
    assert _lines(
        tmp_path, code.replace("pl.MpDeviceLoader(test_loader, torch_xla.device())", "test_loader")
    ) == [7]


def test_only_in_modules_that_import_torch_xla_and_not_in_tests(tmp_path):
    lib = (
        "import torch\n@torch.no_grad()\ndef evaluate(model, loader):\n    outs = []\n"
        "    for x, y in loader:\n        outs.append(model(x))\n    return outs\n"
    )
    script = "import torch_xla\nfrom evaluation import evaluate\nevaluate(model, loader)\n"
    assert _found(tmp_path / "a", script, "train.py", {"evaluation.py": lib}) == []
    tests = tmp_path / "b"
    found = _found(
        tests,
        "",
        "tests/__init__.py",
        {"tests/test_eval.py": "import torch_xla\n" + lib + "def test_it():\n    evaluate(m, l)\n"},
    )
    assert found == []
