#include "data/synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "data/random.hpp"

namespace ddpbench {
namespace {

// Stream labels, so train and test images and the class patterns never share numbers.
enum : uint64_t { kPatternStream = 1, kTrainStream = 2, kTestStream = 3 };

constexpr int kWaves = 3;
constexpr int kMaxShift = 4;           // pixels, each way, cyclic
constexpr double kNoiseAmplitude = 56; // uniform pixel noise, each way
constexpr double kWaveAmplitude = 38;

using Pattern = std::array<float, kImageBytes>;

// Sums of waves with whole numbers of periods across the image, so that a cyclic shift of a
// pattern is again a smooth pattern: shifts then cost no trigonometry per image.
std::array<Pattern, kCifar10Classes> class_patterns(uint64_t seed) {
  std::array<Pattern, kCifar10Classes> patterns{};
  for (int64_t c = 0; c < kCifar10Classes; ++c) {
    StreamRng rng(stream_key(seed, kPatternStream, static_cast<uint64_t>(c)));
    std::array<double, kImageChannels> base{};
    for (auto& b : base) b = 70.0 + 115.0 * rng.uniform();
    struct Wave { double fx, fy, phase; std::array<double, kImageChannels> gain; };
    std::array<Wave, kWaves> waves{};
    for (auto& w : waves) {
      w.fx = static_cast<double>(rng.below(4));
      w.fy = static_cast<double>(rng.below(4)) + (w.fx == 0 ? 1 : 0);
      w.phase = 2 * std::numbers::pi * rng.uniform();
      for (auto& g : w.gain) g = kWaveAmplitude * (2 * rng.uniform() - 1);
    }
    for (int64_t ch = 0; ch < kImageChannels; ++ch) {
      for (int64_t y = 0; y < kImageSide; ++y) {
        for (int64_t x = 0; x < kImageSide; ++x) {
          double v = base[ch];
          for (const auto& w : waves) {
            v += w.gain[ch] * std::sin(2 * std::numbers::pi * (w.fx * x + w.fy * y) / kImageSide + w.phase);
          }
          patterns[c][(ch * kImageSide + y) * kImageSide + x] = static_cast<float>(v);
        }
      }
    }
  }
  return patterns;
}

ImageSet render(const std::array<Pattern, kCifar10Classes>& patterns, uint64_t seed, uint64_t stream,
                int64_t count) {
  ImageSet set{at::empty({count, kImageChannels, kImageSide, kImageSide}, at::kByte),
               at::empty({count}, at::kLong)};
  auto* pixels = set.images.data_ptr<uint8_t>();
  auto* labels = set.labels.data_ptr<int64_t>();
  at::parallel_for(0, count, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      StreamRng rng(stream_key(seed, stream, static_cast<uint64_t>(i)));
      const auto label = static_cast<int64_t>(rng.below(kCifar10Classes));
      const auto shift_y = static_cast<int64_t>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
      const auto shift_x = static_cast<int64_t>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
      const double contrast = 0.75 + 0.5 * rng.uniform();
      const double brightness = 40 * (rng.uniform() - 0.5);
      const Pattern& p = patterns[label];
      uint8_t* out = pixels + i * kImageBytes;
      for (int64_t ch = 0; ch < kImageChannels; ++ch) {
        for (int64_t y = 0; y < kImageSide; ++y) {
          const int64_t sy = (y + shift_y + kImageSide) % kImageSide;
          for (int64_t x = 0; x < kImageSide; ++x) {
            const int64_t sx = (x + shift_x + kImageSide) % kImageSide;
            const double noise = kNoiseAmplitude * (2 * rng.uniform() - 1);
            const double v = 128 + contrast * (p[(ch * kImageSide + sy) * kImageSide + sx] - 128) +
                             brightness + noise;
            out[(ch * kImageSide + y) * kImageSide + x] =
                static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
          }
        }
      }
      labels[i] = label;
    }
  });
  return set;
}

}  // namespace

DatasetSplits make_synthetic(const SyntheticOptions& options) {
  const auto patterns = class_patterns(options.seed);
  DatasetSplits splits;
  splits.train = render(patterns, options.seed, kTrainStream, options.train_images);
  splits.test = render(patterns, options.seed, kTestStream, options.test_images);
  splits.kind = "synthetic";
  splits.origin = make_synthetic_origin(options);
  return splits;
}

std::string make_synthetic_origin(const SyntheticOptions& options) {
  return "synthetic seed=" + std::to_string(options.seed) + " train=" + std::to_string(options.train_images) +
         " test=" + std::to_string(options.test_images);
}

}  // namespace ddpbench
