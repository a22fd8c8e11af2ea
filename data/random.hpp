#pragma once
// Counter-based random numbers: value i of a stream depends only on (key, i), so any thread
// can draw any sample's numbers in any order and get the same data. SplitMix64 mixing.
#include <cstdint>

namespace ddpbench {

constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A key for one stream, from a seed and up to three labels (split, epoch, purpose).
constexpr uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

/// Sequential draws from one keyed stream.
class StreamRng {
 public:
  explicit constexpr StreamRng(uint64_t key) : state_(key) {}
  constexpr uint64_t next() { return mix64(state_++ ^ 0x2545f4914f6cdd1dULL); }
  /// Uniform in [0, bound) (bound > 0); the modulo bias is below 2^-40 for our bounds.
  constexpr uint64_t below(uint64_t bound) { return next() % bound; }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace ddpbench
