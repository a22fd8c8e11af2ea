#pragma once
// Loaders turn an epoch plan (indices in order, and their augmentation) into normalised
// float batches. `host`: worker threads build batches in (pinned) host memory, as a
// DataLoader with workers does. `device`: the uint8 dataset lives on the device and each
// batch is gathered and augmented there with batched tensor ops. Same plan, same batches.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "data/augmentation.hpp"
#include "data/data_options.hpp"
#include "data/image_set.hpp"

namespace ddpbench {

struct Batch {
  at::Tensor images;  // float32 [B, 3, 32, 32], normalised
  at::Tensor labels;  // int64 [B]
  [[nodiscard]] int64_t size() const { return labels.size(0); }
};

struct EpochPlan {
  std::vector<int64_t> indices;  // dataset indices in the order they are loaded
  AugmentationPlan augmentation; // indexed by dataset index
};

struct LoaderOptions {
  int64_t batch_size = 256;
  int64_t workers = 0;              // host loader: 0 builds batches on the calling thread
  int64_t prefetch_per_worker = 2;  // host loader: batches each worker may run ahead
  c10::Device device = c10::Device(c10::kCPU);  // where the training consumes batches
  std::optional<int64_t> max_batches;           // stop the epoch early (a cut epoch)
};

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  /// Begins an epoch; batches come in plan order, the last one possibly smaller.
  virtual void start_epoch(EpochPlan plan) = 0;
  /// The epoch's next batch, nullopt after its last. The host loader returns host tensors
  /// (pinned when `device` is CUDA); the device loader returns tensors on `device`.
  virtual std::optional<Batch> next() = 0;
  [[nodiscard]] virtual LoaderKind kind() const = 0;
};

std::unique_ptr<BatchLoader> make_host_loader(const ImageSet& data, const LoaderOptions& options);
std::unique_ptr<BatchLoader> make_device_loader(const ImageSet& data, const LoaderOptions& options);
std::unique_ptr<BatchLoader> make_loader(LoaderKind kind, const ImageSet& data,
                                         const LoaderOptions& options);

/// Batches in an epoch of `samples` indices (the last batch may be partial).
int64_t batches_in_epoch(int64_t samples, const LoaderOptions& options);

}  // namespace ddpbench
