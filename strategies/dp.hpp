#pragma once
// `dp`: torch.nn.DataParallel's semantics, as the tutorial used it: one process, the batch
// scattered over several devices, replicas run forward, outputs gathered on the first
// device, gradients reduced onto it. Two implementations, reported by name:
//  - replicas: replicas kept across steps; parameters and buffers broadcast from the first
//    device each step and gradients reduced onto it, both coalesced into one flat buffer
//    per dtype; replica threads inherit autocast and grad mode.
//  - libtorch: torch::nn::parallel::data_parallel, the faithful LibTorch baseline, which
//    clones (and so re-initialises) the module on every call, timed as forward's replicate
//    part, and whose replicas' batch-norm statistics never reach the module. Its
//    parallel_apply runs the replicas one after another on the caller's thread (see
//    models/registry.cpp), so autocast reaches every replica and none overlaps another.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strategies/strategy.hpp"

namespace ddpbench {

std::unique_ptr<Strategy> make_dp_strategy(const StrategyOptions& options);

/// The devices --devices names: every visible CUDA device for "all", cuda:N or cpu entries
/// otherwise. Throws InputError for a CUDA device that is not there.
std::vector<c10::Device> dp_devices(const StrategyOptions& options);

/// Why a dp row cannot run here (fewer than two devices without --allow-single-device);
/// throws InputError when the batch does not divide over the devices.
std::optional<std::string> dp_preflight(const StrategyOptions& options);

/// torch-dp's: nn.DataParallel scatters over CUDA devices only.
std::optional<std::string> torch_dp_preflight(const StrategyOptions& options);

/// torch-ddp's: with --sync-bn on CPUs there is no like-for-like PyTorch row (PyTorch's
/// SyncBatchNorm runs on CUDA only).
std::optional<std::string> torch_ddp_preflight(const StrategyOptions& options);

}  // namespace ddpbench
