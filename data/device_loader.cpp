#include <ATen/ATen.h>

#include "data/batch_loader.hpp"

namespace ddpbench {
namespace {

// The whole uint8 split is copied to the device once (150 MB for CIFAR-10's train set);
// each batch is then an index_select, the batched crop/flip and a table lookup, all queued
// on the device's current stream with no host work per sample.
class DeviceLoader final : public BatchLoader {
 public:
  DeviceLoader(const ImageSet& data, const LoaderOptions& options)
      : options_(options),
        images_(data.images.to(options.device)),
        labels_(data.labels.to(options.device)) {}

  void start_epoch(EpochPlan plan) override {
    const auto n = static_cast<int64_t>(plan.indices.size());
    indices_ = at::from_blob(plan.indices.data(), {n}, at::kLong).clone().to(options_.device);
    augmentation_ = to_device(plan.augmentation, options_.device);
    batches_ = batches_in_epoch(n, options_);
    next_ = 0;
  }

  std::optional<Batch> next() override {
    if (next_ >= batches_) return std::nullopt;
    const int64_t first = next_ * options_.batch_size;
    const int64_t count = std::min(options_.batch_size, indices_.size(0) - first);
    ++next_;
    const auto indices = indices_.narrow(0, first, count);
    return Batch{augment_batch(images_.index_select(0, indices), indices, augmentation_),
                 labels_.index_select(0, indices)};
  }

  [[nodiscard]] LoaderKind kind() const override { return LoaderKind::device; }

 private:
  LoaderOptions options_;
  at::Tensor images_, labels_;
  at::Tensor indices_;
  DeviceAugmentation augmentation_;
  int64_t batches_ = 0;
  int64_t next_ = 0;
};

}  // namespace

std::unique_ptr<BatchLoader> make_device_loader(const ImageSet& data, const LoaderOptions& options) {
  return std::make_unique<DeviceLoader>(data, options);
}

}  // namespace ddpbench
