#pragma once
// gzip in memory (zlib): large traces are written gzipped, and read whether gzipped or not;
// and the CRC-32 that proves a trace file is the one its run saved.
#include <cstdint>
#include <string>
#include <string_view>

namespace ddpbench {

/// `content` in the gzip format; throws std::runtime_error if zlib fails.
std::string gzip_bytes(std::string_view content);

/// `raw` decompressed when it is gzip (its first two bytes say so), else as it is; throws
/// InputError naming `what` when it is a damaged or truncated gzip.
std::string gunzip_if_gzip(std::string raw, std::string_view what);

/// zlib's CRC-32 of `bytes`: what proves a file is the one a run wrote.
std::uint32_t crc32_of(std::string_view bytes);

}  // namespace ddpbench
