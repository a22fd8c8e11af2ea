#pragma once
// The CIFAR-10 binary record format, without LibTorch (the fuzzer reads files through it):
// records of 1 label byte (0-9) and 3072 pixel bytes (CHW), nothing before or after.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace ddpbench {

inline constexpr int64_t kCifar10Classes = 10;
inline constexpr int64_t kCifar10PixelBytes = 3 * 32 * 32;
inline constexpr int64_t kCifar10RecordBytes = 1 + kCifar10PixelBytes;  // 3073

/// Checks that `bytes` (the content of `file`) are exactly `records` records with labels in
/// 0..9, then calls `each(index, label, pixels)` for every record. Throws InputError naming
/// the file: truncated or too long (with the whole records and the partial one it holds), or
/// the record and byte offset of a bad label. Nothing is handed over from a bad file.
void parse_cifar10_records(std::span<const uint8_t> bytes, int64_t records, const std::string& file,
                           const std::function<void(int64_t index, uint8_t label, const uint8_t* pixels)>& each);

}  // namespace ddpbench
