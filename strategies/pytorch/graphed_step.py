"""--cuda-graphs as PyTorch's documentation captures a whole network (torch.cuda.graphs,
"Whole-network capture"): eager warm-up steps, then forward, loss, backward and
optimizer.step() captured in one CUDA graph at the row's last warm-up step, and replayed per
batch with the batch copied into the graph's static inputs. A batch of another shape (an
epoch's last, partial one) runs eagerly and is counted. ddpbench's C++ counterpart is
strategies/cuda_graph_step.cpp."""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol

import torch

from step_clock import StepClock

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Graph(Protocol):
    def capture(self, step: Callable[[], torch.Tensor]) -> torch.Tensor: ...
    def replay(self) -> None: ...


class CudaGraph:
    """torch.cuda.graph around the step: it records the work without running it."""

    def __init__(self) -> None:
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, step: Callable[[], torch.Tensor]) -> torch.Tensor:
        # thread_local: DataLoader's pin-memory thread allocates while the step is captured.
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            return step()

    def replay(self) -> None:
        self.graph.replay()


class RerunGraph:
    """Test only: records the step and runs it again on each replay, on any device."""

    def __init__(self) -> None:
        self.step: Callable[[], torch.Tensor] | None = None
        self.loss = torch.full((), float("nan"))

    def capture(self, step: Callable[[], torch.Tensor]) -> torch.Tensor:
        self.step = step
        return self.loss

    def replay(self) -> None:
        assert self.step is not None
        loss = self.step()
        self.loss.copy_(loss.to(self.loss.device, self.loss.dtype))


class GraphedStep:
    def __init__(self, eager_step: Step, clock: StepClock, capture_step: int, batch_size: int,
                 make_graph: Callable[[], Graph] = CudaGraph) -> None:
        self.eager_step = eager_step
        self.clock = clock
        self.capture_step = capture_step
        self.batch_size = batch_size
        self.make_graph = make_graph
        self.graph: Graph | None = None
        self.static: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # images, labels, loss
        self.calls = 0
        self.captured_at: int | None = None
        self.capture_s: float | None = None
        self.replayed_steps = 0
        self.eager_steps = 0

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        step, self.calls = self.calls, self.calls + 1
        if self.static is not None and images.shape == self.static[0].shape and labels.shape == self.static[1].shape:
            return self._replay(images, labels)
        if self.static is None and step >= self.capture_step and labels.numel() == self.batch_size:
            return self._capture(images, labels, step)
        self.eager_steps += 1
        return self.eager_step(images, labels)

    def details(self) -> dict[str, Any]:
        return {"capture_step": self.captured_at, "capture_s": self.capture_s,
                "replayed_steps": self.replayed_steps, "eager_steps": self.eager_steps}

    def _capture(self, images: torch.Tensor, labels: torch.Tensor, step: int) -> torch.Tensor:
        start = time.perf_counter()
        static_images, static_labels = images.clone(), labels.clone()  # clone keeps channels-last
        self.graph = self.make_graph()
        with self.clock.muted():
            static_loss = self.graph.capture(lambda: self.eager_step(static_images, static_labels))
        self.static = (static_images, static_labels, static_loss)
        self.captured_at, self.capture_s = step, time.perf_counter() - start
        return self._replay(images, labels)  # the capture ran nothing: the batch trains by a replay

    def _replay(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        assert self.static is not None and self.graph is not None
        static_images, static_labels, static_loss = self.static
        static_images.copy_(images, non_blocking=True)
        static_labels.copy_(labels, non_blocking=True)
        self.graph.replay()
        self.replayed_steps += 1
        self.clock.not_measured("forward", "backward", "optimizer")  # one launch: no phases inside
        return static_loss.clone()
