#pragma once
// Where the synthetic set's cache keeps its files: one folder per version, seed and sizes, holding
// train.bin, test.bin and crc32.txt. The cache's files are outputs of every command that reads the
// set through it (the output rule: no input may be one of them). No LibTorch.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>

namespace ddpbench {

// Bumped whenever data/synthetic.cpp draws other images for the same seed, so an old cache is
// never read as the new data.
inline constexpr const char* kSyntheticCacheVersion = "v1";
inline constexpr std::array<const char*, 3> kSyntheticCacheFiles = {"train.bin", "test.bin", "crc32.txt"};

inline std::filesystem::path synthetic_cache_folder(const std::filesystem::path& cache_dir, int64_t seed,
                                                    int64_t train_images, int64_t test_images) {
  return cache_dir / "synthetic" /
         (std::string(kSyntheticCacheVersion) + "-seed" + std::to_string(seed) + "-train" + std::to_string(train_images) +
          "-test" + std::to_string(test_images));
}

}  // namespace ddpbench
