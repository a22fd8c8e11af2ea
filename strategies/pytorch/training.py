"""The tutorial's training loop as PyTorch users write it, timed as ddpbench's runner times it
(harness/runner/runner.cpp): epochs of steps (data, forward, backward, optimizer), the loss
read back every step or every log interval, then the evaluation over every test image."""
from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn

import cifar_data
from graphed_step import GraphedStep
from lockstep_turns import LockstepTurns
from progress_record import ProgressRecord
from step_clock import StepClock, StepTiming


@dataclass
class Row:
    """What the loop needs of the row's configuration (the C++ side passes it whole)."""

    config: dict[str, Any]
    device: torch.device
    rank: int = 0
    world_size: int = 1

    def __getitem__(self, key: str) -> Any:
        return self.config[key]


class StopRequest:
    """SIGINT or SIGTERM: stop at the next step and keep the finished ones, as ddpbench's runner does."""

    signal: int = 0

    @classmethod
    def install(cls) -> None:
        def handler(number: int, _frame: object) -> None:
            cls.signal = cls.signal or number

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)


@dataclass
class Measured:
    steps: list[dict[str, Any]] = field(default_factory=list)
    train_time_s: float = 0.0
    steps_per_epoch: int = 0
    full_steps_per_epoch: int = 0
    train_images: int = 0  # the training set's images the sampler divides
    images: int = 0
    correct: int = 0
    seen: int = 0
    eval_cut: bool = False
    interrupted_by: str = ""
    lockstep_wait_s: float | None = None  # a lockstep run's waits for the other build, not in train_time_s


def _batches(count: int, batch_size: int, limit: int | None) -> int:
    full = (count + batch_size - 1) // batch_size
    return min(full, limit) if limit is not None else full


class DeviceBatches:
    """--loader device: the uint8 split lives on the device; each batch is gathered and
    augmented there with batched tensor ops (a GPU-resident loader written in PyTorch)."""

    def __init__(self, data: cifar_data.ImageSet, device: torch.device, batch_size: int) -> None:
        self.images = data.images.to(device)
        self.labels = data.labels.to(device)
        self.batch_size = batch_size

    def epoch(self, indices: list[int], plan: cifar_data.AugmentationPlan) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = torch.tensor(indices, dtype=torch.int64, device=self.images.device)
        for first in range(0, len(indices), self.batch_size):
            chosen = order[first:first + self.batch_size]
            yield cifar_data.augment(self.images.index_select(0, chosen), chosen, plan), self.labels.index_select(0, chosen)


def train_plan(row: Row, size: int) -> Callable[[int], cifar_data.AugmentationPlan]:
    return lambda epoch: cifar_data.random_augmentation(row["seed"], epoch, cifar_data.TRAIN_STREAM, size,
                                                        row["crop-padding"])


def test_plan(row: Row, size: int) -> cifar_data.AugmentationPlan:
    if row["test-transform"] == "train":
        return cifar_data.random_augmentation(row["seed"], 0, cifar_data.TEST_STREAM, size, row["crop-padding"])
    return cifar_data.identity_augmentation(size)


class Trainer:
    def __init__(self, row: Row, model: nn.Module, optimizer: torch.optim.Optimizer, clock: StepClock) -> None:
        self.row = row
        self.model = model
        self.optimizer = optimizer
        self.clock = clock
        self.criterion = nn.CrossEntropyLoss()
        amp = row["amp"]
        self.amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(amp)
        self.scaler = torch.amp.GradScaler(row.device.type) if amp == "fp16" else None
        self.memory_format = torch.channels_last if row["channels-last"] else torch.contiguous_format
        # --cuda-graphs: the step captured at the last warm-up step and replayed (graphed_step.py).
        self.train_step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = self.step
        if row["cuda-graphs"]:
            self.train_step = GraphedStep(self.step, clock, row["warmup-steps"] - 1, row["batch-size"])

    def to_device(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        images = images.to(self.row.device, non_blocking=True).contiguous(memory_format=self.memory_format)
        return images, labels.to(self.row.device, non_blocking=True)

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self.clock.phase("forward"):
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast(self.row.device.type, dtype=self.amp_dtype or torch.float32,
                                enabled=self.amp_dtype is not None):
                loss = self.criterion(self.model(images), labels)
        with self.clock.phase("backward"):
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        with self.clock.phase("optimizer"):
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        return loss.detach()

    def train(self, train: cifar_data.ImageSet, sampler: torch.utils.data.DistributedSampler,
              turns: LockstepTurns | None = None, progress: ProgressRecord | None = None) -> Measured:
        row, out = self.row, Measured()
        limit = row["max-steps"]
        out.train_images = int(train.labels.numel())
        out.full_steps_per_epoch = _batches(len(sampler), row["batch-size"], None)
        out.steps_per_epoch = _batches(len(sampler), row["batch-size"], limit)
        dataset = cifar_data.PlannedCifar(train, train_plan(row, train.labels.numel()))
        device_batches = DeviceBatches(train, row.device, row["batch-size"]) if row["loader"] == "device" else None
        loader = None
        if device_batches is None:
            loader = torch.utils.data.DataLoader(dataset, batch_size=row["batch-size"], sampler=sampler,
                                                 num_workers=row["workers"], pin_memory=row.device.type == "cuda")
        profile = _profile_range(row["profile-steps"])
        global_step = 0
        pending: list[tuple[dict[str, Any], torch.Tensor, Callable[[], StepTiming]]] = []

        def resolve() -> None:
            for record, loss, timing in pending:
                measured = timing()
                record["time_s"] = measured.time_s
                # JSON has no NaN: a phase this implementation cannot see is null.
                record["phases"] = {f"{name}_s": None if math.isnan(value) else value
                                    for name, value in measured.phases.items()}
                record["loss"] = loss.item()
                out.steps.append(record)
            pending.clear()

        for epoch in range(row["epochs"]):
            with self.clock.range("epoch"):
                epoch_start = time.perf_counter()
                waited_before_s = turns.waited_s if turns else 0.0
                self.clock.mark_epoch_start()
                sampler.set_epoch(epoch)
                dataset.set_epoch(epoch)
                batches = (device_batches.epoch(list(sampler), dataset.plan) if device_batches
                           else iter(loader))  # type: ignore[arg-type]
                for step in range(out.steps_per_epoch):
                    if StopRequest.signal:
                        out.interrupted_by = signal.Signals(StopRequest.signal).name
                        break
                    if row["inject-fault-rank"] == row.rank and row["inject-fault-step"] == global_step:
                        if row["inject-fault-kind"] == "kill":
                            os.kill(os.getpid(), signal.SIGKILL)
                        while not StopRequest.signal:  # hang: alive, before the step's collectives
                            time.sleep(0.05)
                        continue
                    if turns:
                        if not turns.wait_for_turn():
                            if StopRequest.signal:
                                out.interrupted_by = signal.Signals(StopRequest.signal).name
                                break
                            raise RuntimeError("lockstep (DDPBENCH_LOCKSTEP_SOCKET): the coordinator hung up "
                                               "before this build's turn")
                        self.clock.mark_epoch_start()  # the step's time starts with its turn
                    if progress:
                        progress.enter(f"training step {global_step}")
                    with self.clock.range("step"):
                        with self.clock.phase("data"):
                            images, labels = self.to_device(*next(batches))
                        if profile and global_step == profile[0] and row.device.type == "cuda":
                            torch.cuda.profiler.start()
                        loss = self.train_step(images, labels)
                        timing = self.clock.finish_step()
                        if profile and global_step == profile[1] and row.device.type == "cuda":
                            torch.cuda.profiler.stop()
                    if progress:
                        progress.leave()
                    pending.append(({"epoch": epoch, "step": step, "images": int(labels.numel())}, loss, timing))
                    out.images += int(labels.numel())
                    if row["sync-every-step"] or (global_step + 1) % row["log-interval-steps"] == 0:
                        resolve()
                    if turns:
                        if row.device.type == "cuda":
                            torch.cuda.synchronize(row.device)  # the turn passes when the device is done
                        turns.release(global_step)
                    global_step += 1
                resolve()
                if row.device.type == "cuda":
                    torch.cuda.synchronize(row.device)
                out.train_time_s += time.perf_counter() - epoch_start - (turns.waited_s - waited_before_s if turns else 0)
                del batches
            if out.interrupted_by:
                break
        if turns:
            turns.end()
            out.lockstep_wait_s = turns.waited_s
        return out

    def evaluate(self, test: cifar_data.ImageSet, eval_model: nn.Module, out: Measured) -> None:
        row = self.row
        plan = test_plan(row, test.labels.numel())
        sampler = cifar_data.ShardSampler(test.labels.numel(), row.rank, row.world_size)
        dataset = cifar_data.PlannedCifar(test, lambda epoch: plan)
        limit = row["max-eval-batches"]
        full = _batches(len(sampler), row["batch-size"], None)
        out.eval_cut = limit is not None and limit < full
        correct = torch.zeros((), dtype=torch.int64, device=row.device)
        seen = 0
        eval_model.eval()
        with self.clock.range("evaluation"), torch.no_grad():
            if row["loader"] == "device":
                batches = DeviceBatches(test, row.device, row["batch-size"]).epoch(list(sampler), plan)
            else:
                batches = iter(torch.utils.data.DataLoader(dataset, batch_size=row["batch-size"], sampler=sampler,
                                                           num_workers=row["workers"],
                                                           pin_memory=row.device.type == "cuda"))
            for number, (images, labels) in enumerate(batches):
                if limit is not None and number >= limit:
                    break
                images, labels = self.to_device(images, labels)
                correct += (eval_model(images).argmax(1) == labels).sum()
                seen += int(labels.numel())
        counts = torch.stack([correct, torch.tensor(seen, device=row.device)])
        if row.world_size > 1:
            dist.all_reduce(counts)
        out.correct, out.seen = int(counts[0].item()), int(counts[1].item())


def _profile_range(text: str) -> tuple[int, int] | None:
    if not text:
        return None
    first, last = text.split(":")
    return int(first), int(last)
