#!/usr/bin/env python3
"""One rank of a PyTorch reference row (torch-single, torch-dp, torch-ddp): PyTorch's own
implementation of the strategy, on the data, initial weights and configuration ddpbench
hands over, timed as ddpbench times its own rows. ddpbench starts it (one per rank, with
torchrun's variables) and turns what it writes into the usual result row.

Usage: reference_rank.py SPEC.json
SPEC: {"strategy", "config" (the row's options by name), "device", "train_files",
"test_files", "initial_weights", "records", and where a launcher serves the run's store
"progress": where this rank keeps its progress record (progress_record.py)}. Writes the records JSON at spec["records"]
(rank 0: with every rank's timings); exits 1 with a traceback on failure.
"""
from __future__ import annotations

import gc
import json
import os
import resource
import sys
import tempfile
import time
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar_data  # noqa: E402
import models  # noqa: E402
from graphed_step import GraphedStep  # noqa: E402
from lockstep_turns import LockstepTurns  # noqa: E402
from progress_record import ProgressRecord  # noqa: E402
from step_clock import StepClock  # noqa: E402
from training import Row, StopRequest, Trainer  # noqa: E402

DEFAULT_BUCKET_CAP_MB = 25


def apply_device_settings(row: Row) -> None:
    if row["threads"] > 0:
        torch.set_num_threads(row["threads"])
    torch.backends.cudnn.benchmark = row["cudnn-benchmark"]
    torch.backends.cudnn.allow_tf32 = row["tf32"]
    torch.backends.cuda.matmul.allow_tf32 = row["tf32"]


def make_optimizer(row: Row, model: nn.Module) -> torch.optim.Optimizer:
    implementation = row["sgd"]
    return torch.optim.SGD(model.parameters(), lr=row["lr"], momentum=row["momentum"],
                           foreach=implementation == "foreach", fused=True if implementation == "fused" else None)


def dp_devices(row: Row) -> list[int]:
    listed = row["devices"]
    if listed == "all":
        return list(range(torch.cuda.device_count()))
    return [int(d) for d in listed.split(",")]


def register_comm_hook(hook: str, ddp: nn.parallel.DistributedDataParallel, details: dict[str, Any]) -> None:
    """--comm-hook as a PyTorch user writes it: the default allreduce, the compression hooks of
    torch.distributed.algorithms.ddp_comm_hooks.default_hooks, or the built-in C++ one."""
    if hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif hook == "builtin-fp16":
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    details["comm_hook"] = hook


def wrap(strategy: str, row: Row, model: nn.Module, details: dict[str, Any]) -> nn.Module:
    """The strategy as the tutorial writes it around the model."""
    if strategy == "torch-dp":
        devices = dp_devices(row)
        details["implementation_class"] = "torch.nn.DataParallel"
        details["devices"] = [f"cuda:{d}" for d in devices]
        return nn.DataParallel(model, device_ids=devices)
    if strategy == "torch-ddp":
        if row["sync-bn"]:  # ddpbench skips the row on CPUs, where PyTorch has no SyncBatchNorm
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
            details["sync_bn"] = "nn.SyncBatchNorm.convert_sync_batchnorm"
        bucket = row["bucket-mb"]
        details["implementation_class"] = "torch.nn.parallel.DistributedDataParallel"
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[row.device.index] if row.device.type == "cuda" else None,
            bucket_cap_mb=None if bucket == DEFAULT_BUCKET_CAP_MB else bucket,
            find_unused_parameters=row["find-unused-parameters"],
            gradient_as_bucket_view=row["gradient-as-bucket-view"])
        register_comm_hook(row["comm-hook"], ddp, details)
        return ddp
    details["implementation_class"] = "plain module"
    return model


def peak_memory(device: torch.device, devices: list[int]) -> tuple[int, str]:
    """The largest allocator peak over the rank's CUDA devices (torch-dp: every replica's),
    else the process's peak resident set."""
    if device.type == "cuda":
        return max(int(torch.cuda.max_memory_allocated(d)) for d in devices or [device.index]), "cuda-allocator"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "host-rss"


def interrupted_records(measured: Any, device: torch.device, details: dict[str, Any]) -> dict[str, Any]:
    """The finished steps of a row stopped by a signal: no evaluation, no collective (the other
    ranks may be gone)."""
    memory, source = peak_memory(device, [])
    return {"implementation": details["implementation"], "details": details, "steps": measured.steps,
            "train_time_s": measured.train_time_s, "steps_per_epoch": measured.steps_per_epoch,
            "full_steps_per_epoch": measured.full_steps_per_epoch, "images": measured.images,
            "train_images": measured.train_images, "correct": 0,
            "seen": 0, "eval_cut": False, "peak_memory_bytes": memory, "peak_memory_source": source,
            "ranks": [], "interrupted": True, "interrupted_by": measured.interrupted_by}


def save_checkpoint(model: torch.nn.Module, path: str) -> None:
    """The weights as ddpbench's checkpoints are (models/checkpoint.hpp): torch.save of a plain
    dict, marked by the record ddpbench_checkpoint in the archive's folder, so that the next
    --save-checkpoint knows the file for its own (and a user's own archive for not)."""
    torch.save(dict(model.state_dict()), path)
    with zipfile.ZipFile(path, "a") as archive:
        folder = archive.namelist()[0].split("/")[0]
        archive.writestr(f"{folder}/ddpbench_checkpoint", "written by ddpbench --save-checkpoint\n")


def write_records(path: str, records: dict[str, Any]) -> None:
    """Whole or not at all: the C++ rank reads the file once this process has exited."""
    out = Path(path)
    # A name made afresh beside it: never a file or link that was already there.
    fd, scratch = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(records))
    os.replace(scratch, out)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    strategy = spec["strategy"]
    device = torch.device(spec["device"])
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    row = Row(spec["config"], device, rank, world)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    apply_device_settings(row)
    if strategy == "torch-ddp":
        backend = row["backend"] if row["backend"] != "auto" else ("nccl" if device.type == "cuda" else "gloo")
        dist.init_process_group(backend, timeout=timedelta(seconds=row["timeout-s"]))

    model = models.build_model(row["model"], row["num-classes"])
    models.load_initial_weights(model, spec["initial_weights"])
    model = model.to(device, memory_format=torch.channels_last if row["channels-last"] else torch.contiguous_format)
    details: dict[str, Any] = {"implementation": f"PyTorch {torch.__version__}", "torch_version": torch.__version__,
                               "optimizer": row["sgd"]}
    wrapped = wrap(strategy, row, model, details)
    optimizer = make_optimizer(row, wrapped)
    unmeasured = ("comm", "allreduce") if strategy != "torch-single" else ()
    clock = StepClock(device, nvtx=row["nvtx"] != "off", unmeasured=unmeasured)
    trainer = Trainer(row, wrapped, optimizer, clock)
    turns = LockstepTurns.from_environment(spec.get("row_name", strategy), rank, world)
    if turns and row["workers"] > 0:
        raise RuntimeError(f"--workers {row['workers']}: in a lockstep run a loader's workers would run while the other "
                           "build has the turn; lockstep needs --workers 0")

    train = cifar_data.read_records(spec["train_files"])
    test = cifar_data.read_records(spec["test_files"])
    sampler = torch.utils.data.DistributedSampler(range(train.labels.numel()), num_replicas=world, rank=rank,
                                                  shuffle=True, seed=row["seed"], drop_last=False)
    # Start-up: from ddpbench starting this rank to its first step (Python, imports, data, model).
    details["python"] = ("forked from the sweep's preloaded Python" if os.environ.get("DDPBENCH_PYTORCH_FORKED") == "1"
                         else "a Python of its own")
    if os.environ.get("DDPBENCH_RANK_SPAWNED_AT"):
        details["start_up_s"] = time.time() - float(os.environ["DDPBENCH_RANK_SPAWNED_AT"])
    emit_nvtx = torch.autograd.profiler.emit_nvtx() if row["nvtx"] == "ops" and device.type == "cuda" else None
    progress = ProgressRecord(spec.get("progress"))  # ddpbench's launcher reads it when a rank hangs
    with clock.range(f"row {row['name'] or strategy}"):
        if emit_nvtx:
            with emit_nvtx:
                measured = trainer.train(train, sampler, turns, progress)
        else:
            measured = trainer.train(train, sampler, turns, progress)
        if measured.interrupted_by:
            records = interrupted_records(measured, device, details)
            write_records(spec["records"], records)
            return records
        trainer.evaluate(test, wrapped, measured)
    if trainer.scaler is not None:
        details["loss_scale"] = float(trainer.scaler.get_scale())
    if isinstance(trainer.train_step, GraphedStep):
        details["cuda_graphs"] = trainer.train_step.details()
    if rank == 0 and row["save-checkpoint"]:
        save_checkpoint(model, row["save-checkpoint"])

    warmup = row["warmup-steps"]
    memory, source = peak_memory(device, dp_devices(row) if strategy == "torch-dp" else [])
    own = {"rank": rank, "train_time_s": measured.train_time_s,
           "steady_step_times": [s["time_s"] for s in measured.steps[warmup:]], "peak_memory_bytes": memory}
    ranks = [own]
    if world > 1:
        ranks = [None] * world
        dist.all_gather_object(ranks, own)
    records = {"implementation": details["implementation"], "details": details, "steps": measured.steps,
               "train_time_s": measured.train_time_s, "steps_per_epoch": measured.steps_per_epoch,
               "full_steps_per_epoch": measured.full_steps_per_epoch, "images": measured.images,
               "train_images": measured.train_images, "intra_op_threads": torch.get_num_threads(),
               "correct": measured.correct, "seen": measured.seen, "eval_cut": measured.eval_cut,
               "peak_memory_bytes": memory, "peak_memory_source": source, "ranks": ranks}
    if measured.lockstep_wait_s is not None:
        records["lockstep_wait_s"] = measured.lockstep_wait_s
    write_records(spec["records"], records)
    if world > 1:
        # DistributedDataParallel must go before its process group, or the process aborts at exit.
        del trainer, wrapped, optimizer
        gc.collect()
        dist.destroy_process_group()
    return records


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    StopRequest.install()
    records = run(spec)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without the interpreter's finalization: C++ threads that torch.distributed leaves
    # behind (Gloo's, the store's) can abort the process there ("terminate called without an
    # active exception", seen once in CI under torchrun) after the row has ended well. An
    # interrupted row leaves at once too: a process group or DataLoader workers could hold
    # the exit up.
    os._exit(128 + StopRequest.signal if records.get("interrupted") else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
