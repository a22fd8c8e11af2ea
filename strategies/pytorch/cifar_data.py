"""CIFAR-10 in its binary record format, with ddpbench's augmentation plan, as PyTorch reads it.

Records are 1 label byte and 3072 pixel bytes (CHW). The augmentation plan (each sample's
crop offset and flip, drawn once per epoch from the seed) is ddpbench's
(data/augmentation.cpp), drawn here with the same counter-based generator, so both sides
transform sample i of epoch e identically; ToTensor and Normalize(0.5, 0.5) follow.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

RECORD_BYTES = 1 + 3 * 32 * 32
SIDE = 32
TRAIN_STREAM = 11  # AugmentationStream::train
TEST_STREAM = 12   # AugmentationStream::test
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass
class ImageSet:
    images: torch.Tensor  # uint8 [N, 3, 32, 32]
    labels: torch.Tensor  # int64 [N]


def read_records(files: list[str]) -> ImageSet:
    """Every record of `files`, in order."""
    chunks = []
    for name in files:
        raw = np.fromfile(name, dtype=np.uint8)
        if raw.size % RECORD_BYTES != 0:
            raise ValueError(f"{name}: {raw.size} bytes is not a whole number of {RECORD_BYTES}-byte records")
        chunks.append(raw.reshape(-1, RECORD_BYTES))
    records = np.concatenate(chunks)
    return ImageSet(torch.from_numpy(records[:, 1:].reshape(-1, 3, SIDE, SIDE).copy()),
                    torch.from_numpy(records[:, 0].astype(np.int64)))


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (data/random.hpp's mix64)."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


@dataclass
class AugmentationPlan:
    padding: int
    offset_y: np.ndarray  # crop origin in the padded image, per dataset index
    offset_x: np.ndarray
    flip: np.ndarray      # bool


def random_augmentation(seed: int, epoch: int, stream: int, samples: int, padding: int) -> AugmentationPlan:
    """ddpbench's random_augmentation(): three draws per sample from stream (seed, stream, epoch, i)."""
    scalar = _mix64(np.array([seed], dtype=np.uint64))
    scalar = _mix64(scalar ^ np.uint64(stream))
    scalar = _mix64(scalar ^ np.uint64(epoch))
    keys = _mix64(scalar ^ np.arange(samples, dtype=np.uint64))
    constant = np.uint64(0x2545F4914F6CDD1D)
    with np.errstate(over="ignore"):
        draws = [_mix64(((keys + np.uint64(k)) & _MASK) ^ constant) for k in range(3)]
    choices = np.uint64(2 * padding + 1)
    return AugmentationPlan(padding, (draws[0] % choices).astype(np.int64), (draws[1] % choices).astype(np.int64),
                            (draws[2] % np.uint64(2)).astype(bool))


def identity_augmentation(samples: int) -> AugmentationPlan:
    zeros = np.zeros(samples, dtype=np.int64)
    return AugmentationPlan(0, zeros, zeros.copy(), np.zeros(samples, dtype=bool))


def to_float(images: torch.Tensor) -> torch.Tensor:
    """ToTensor, then Normalize(mean 0.5, std 0.5) per channel."""
    return (images.to(torch.float32) / 255.0 - 0.5) / 0.5


def augment(images: torch.Tensor, indices: torch.Tensor, plan: AugmentationPlan) -> torch.Tensor:
    """RandomCrop(32, padding) and RandomHorizontalFlip as the plan says, for a uint8 batch
    [B, 3, 32, 32] of dataset indices `indices`, on the batch's device; then normalised."""
    flip = torch.from_numpy(plan.flip).to(images.device)[indices]
    if plan.padding == 0:
        crops = torch.where(flip.view(-1, 1, 1, 1), images.flip(3), images)
    else:
        p = plan.padding
        padded = torch.nn.functional.pad(images, (p, p, p, p))
        steps = torch.arange(SIDE, device=images.device)
        rows = torch.from_numpy(plan.offset_y).to(images.device)[indices].unsqueeze(1) + steps
        cols = torch.from_numpy(plan.offset_x).to(images.device)[indices].unsqueeze(1) + torch.where(
            flip.unsqueeze(1), (SIDE - 1) - steps, steps)
        sample = torch.arange(images.size(0), device=images.device).view(-1, 1, 1)
        crops = padded.permute(0, 2, 3, 1)[sample, rows.unsqueeze(2), cols.unsqueeze(1)].permute(0, 3, 1, 2)
    return to_float(crops)


class PlannedCifar(Dataset):
    """One split whose samples are transformed by the current epoch's plan (set_epoch)."""

    def __init__(self, data: ImageSet, plan_for_epoch) -> None:
        self.data = data
        self.plan_for_epoch = plan_for_epoch
        self.plan = plan_for_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        self.plan = self.plan_for_epoch(epoch)

    def __len__(self) -> int:
        return int(self.data.labels.numel())

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = augment(self.data.images[index:index + 1], torch.tensor([index]), self.plan)[0]
        return image, self.data.labels[index]


class ShardSampler(torch.utils.data.Sampler[int]):
    """Evaluation order: rank, rank + world, ...: every test image exactly once over all ranks."""

    def __init__(self, size: int, rank: int, world: int) -> None:
        self.indices = list(range(rank, size, world))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def exists(files: list[str]) -> bool:
    return all(Path(f).is_file() for f in files)
