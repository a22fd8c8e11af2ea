"""strategies/pytorch/graphed_step.py, the PyTorch twin's --cuda-graphs: on a CPU through the
stand-in graph that runs the recorded step again (what the wrapper owns: the captured step,
the copy into static inputs, the partial batch run eagerly, the counts, the unmeasured
phases); on a GPU through torch.cuda.graph itself (skipped without one)."""
from __future__ import annotations

import math
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "strategies" / "pytorch"))

import models  # noqa: E402
from graphed_step import GraphedStep, RerunGraph  # noqa: E402
from step_clock import StepClock  # noqa: E402
from training import Row, Trainer  # noqa: E402

SIZES = (8, 8, 8, 8, 8, 8, 5, 8, 8)  # the 5: an epoch's partial last batch
CONFIG = {"amp": "off", "channels-last": False, "cuda-graphs": False, "warmup-steps": 4, "batch-size": 8}


def batches(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(sum(SIZES), 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (sum(SIZES),), generator=generator)
    out, first = [], 0
    for size in SIZES:
        out.append((images[first:first + size].to(device), labels[first:first + size].to(device)))
        first += size
    return out


def train(device: torch.device, graphed: bool, make_graph=RerunGraph):
    torch.manual_seed(0)
    model = models.build_model("tiny", 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    clock = StepClock(device, nvtx=False)
    trainer = Trainer(Row(CONFIG, device), model, optimizer, clock)
    step = (GraphedStep(trainer.step, clock, CONFIG["warmup-steps"] - 1, CONFIG["batch-size"], make_graph)
            if graphed else trainer.step)
    losses, phases = [], []
    clock.mark_epoch_start()
    for images, labels in batches(device):
        losses.append(float(step(images, labels)))
        phases.append(clock.finish_step()().phases)
    return losses, phases, [p.detach().cpu() for p in model.parameters()], step


class GraphedStepTest(unittest.TestCase):
    def test_replays_train_as_eager_steps_and_a_partial_batch_runs_eagerly(self) -> None:
        cpu = torch.device("cpu")
        eager_losses, _, eager_weights, _ = train(cpu, graphed=False)
        losses, phases, weights, step = train(cpu, graphed=True)
        self.assertEqual(losses, eager_losses)
        for ours, theirs in zip(weights, eager_weights):
            self.assertTrue(torch.equal(ours, theirs))
        self.assertEqual(step.details()["capture_step"], 3)
        self.assertEqual(step.details()["replayed_steps"], 5)  # steps 3, 4, 5, 7, 8
        self.assertEqual(step.details()["eager_steps"], 4)  # steps 0, 1, 2 and the partial 6
        for number, measured in enumerate(phases):
            replayed = number >= 3 and number != 6
            for name in ("forward", "backward", "optimizer"):
                self.assertEqual(math.isnan(measured[name]), replayed, f"step {number} {name}")

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_gpu_replays_match_eager_steps(self) -> None:
        from graphed_step import CudaGraph

        gpu = torch.device("cuda", 0)
        eager_losses, _, eager_weights, _ = train(gpu, graphed=False)
        losses, _, weights, step = train(gpu, graphed=True, make_graph=CudaGraph)
        for ours, theirs in zip(losses, eager_losses):
            self.assertAlmostEqual(ours, theirs, delta=1e-4)
        for ours, theirs in zip(weights, eager_weights):
            self.assertTrue(torch.allclose(ours, theirs, rtol=1e-4, atol=1e-5))
        self.assertEqual(step.details()["replayed_steps"], 5)


if __name__ == "__main__":
    unittest.main()
