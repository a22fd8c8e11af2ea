#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>

#include "data/batch_loader.hpp"

namespace ddpbench {
namespace {

// Batches are numbered in epoch order; worker threads claim numbers in order, at most
// workers * prefetch_per_worker ahead of the consumer, and the consumer takes them in order,
// as torch.utils.data.DataLoader does with worker processes.
class HostLoader final : public BatchLoader {
 public:
  HostLoader(const ImageSet& data, const LoaderOptions& options) : options_(options) {
    TORCH_CHECK(data.images.device().is_cpu(), "host loader: the dataset must be in host memory");
    images_ = data.images.contiguous();
    labels_ = data.labels.contiguous();
  }

  ~HostLoader() override { stop_workers(); }

  void start_epoch(EpochPlan plan) override {
    stop_workers();
    plan_ = std::move(plan);
    batches_ = batches_in_epoch(static_cast<int64_t>(plan_.indices.size()), options_);
    next_to_claim_ = 0;
    next_to_return_ = 0;
    ready_.clear();
    error_ = nullptr;
    stopping_ = false;
    for (int64_t w = 0; w < options_.workers; ++w) workers_.emplace_back([this] { work(); });
  }

  std::optional<Batch> next() override {
    if (next_to_return_ >= batches_) return std::nullopt;
    if (options_.workers == 0) return build(next_to_return_++);
    std::unique_lock lock(mutex_);
    batch_ready_.wait(lock, [&] { return error_ || ready_.count(next_to_return_) > 0; });
    if (error_) std::rethrow_exception(error_);
    auto node = ready_.extract(next_to_return_++);
    lock.unlock();
    slot_free_.notify_all();
    return std::move(node.mapped());
  }

  [[nodiscard]] LoaderKind kind() const override { return LoaderKind::host; }

 private:
  void work() {
    const int64_t window = options_.workers * options_.prefetch_per_worker;
    while (true) {
      int64_t number = 0;
      {
        std::unique_lock lock(mutex_);
        slot_free_.wait(lock, [&] {
          return stopping_ || next_to_claim_ >= batches_ || next_to_claim_ < next_to_return_ + window;
        });
        if (stopping_ || next_to_claim_ >= batches_) return;
        number = next_to_claim_++;
      }
      try {
        Batch batch = build(number);
        std::lock_guard lock(mutex_);
        ready_.emplace(number, std::move(batch));
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      batch_ready_.notify_all();
    }
  }

  Batch build(int64_t number) const {
    const int64_t first = number * options_.batch_size;
    const int64_t count =
        std::min<int64_t>(options_.batch_size, static_cast<int64_t>(plan_.indices.size()) - first);
    const auto options = at::TensorOptions().pinned_memory(options_.device.is_cuda());
    Batch batch{at::empty({count, kImageChannels, kImageSide, kImageSide}, options.dtype(at::kFloat)),
                at::empty({count}, options.dtype(at::kLong))};
    const auto* pixels = images_.data_ptr<uint8_t>();
    const auto* labels = labels_.data_ptr<int64_t>();
    auto* out = batch.images.data_ptr<float>();
    auto* out_labels = batch.labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t index = plan_.indices[static_cast<std::size_t>(first + i)];
      augment_image(pixels + index * kImageBytes, index, plan_.augmentation, out + i * kImageBytes);
      out_labels[i] = labels[index];
    }
    return batch;
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    slot_free_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  LoaderOptions options_;
  at::Tensor images_, labels_;
  EpochPlan plan_;
  int64_t batches_ = 0;

  std::mutex mutex_;
  std::condition_variable slot_free_, batch_ready_;
  int64_t next_to_claim_ = 0;
  int64_t next_to_return_ = 0;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

int64_t batches_in_epoch(int64_t samples, const LoaderOptions& options) {
  const int64_t full = (samples + options.batch_size - 1) / options.batch_size;
  return options.max_batches ? std::min(full, *options.max_batches) : full;
}

std::unique_ptr<BatchLoader> make_host_loader(const ImageSet& data, const LoaderOptions& options) {
  return std::make_unique<HostLoader>(data, options);
}

std::unique_ptr<BatchLoader> make_loader(LoaderKind kind, const ImageSet& data,
                                         const LoaderOptions& options) {
  TORCH_CHECK(options.batch_size > 0, "loader: batch size must be positive");
  return kind == LoaderKind::host ? make_host_loader(data, options) : make_device_loader(data, options);
}

}  // namespace ddpbench
