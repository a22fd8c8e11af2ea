#include "harness/base/gzip.hpp"

#include <zlib.h>

#include <algorithm>
#include <stdexcept>

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

// zlib counts in uInt: feed it at most this much at a time.
constexpr std::size_t kChunk = 1u << 20;
// Adding 16 to the window bits asks for gzip framing; adding 32 accepts zlib or gzip.
constexpr int kGzipWindow = 15 + 16;
constexpr int kAnyWindow = 15 + 32;

}  // namespace

std::string gzip_bytes(std::string_view content) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
  std::string out;
  std::string buffer(kChunk, '\0');
  std::size_t offset = 0;
  int status = Z_OK;
  do {
    const std::size_t take = std::min(kChunk, content.size() - offset);
    // zlib's input is not const, but deflate never writes to it.
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data() + offset));
    z.avail_in = static_cast<uInt>(take);
    offset += take;
    const int flush = offset == content.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buffer.data());
      z.avail_out = static_cast<uInt>(buffer.size());
      status = deflate(&z, flush);
      out.append(buffer.data(), buffer.size() - z.avail_out);
    } while (z.avail_out == 0);
  } while (status != Z_STREAM_END);
  deflateEnd(&z);
  return out;
}

std::uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t offset = 0; offset < bytes.size(); offset += kChunk) {
    const std::size_t take = std::min(kChunk, bytes.size() - offset);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + offset), static_cast<uInt>(take));
  }
  return static_cast<std::uint32_t>(crc);
}

std::string gunzip_if_gzip(std::string raw, std::string_view what) {
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b) {
    return raw;
  }
  z_stream z{};
  if (inflateInit2(&z, kAnyWindow) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  std::string out;
  std::string buffer(kChunk, '\0');
  std::size_t offset = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0) {
      const std::size_t take = std::min(kChunk, raw.size() - offset);
      if (take == 0) break;
      z.next_in = reinterpret_cast<Bytef*>(raw.data() + offset);
      z.avail_in = static_cast<uInt>(take);
      offset += take;
    }
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) break;
    out.append(buffer.data(), buffer.size() - z.avail_out);
  }
  inflateEnd(&z);
  if (status != Z_STREAM_END) {
    throw InputError(std::string(what) + ": a damaged or truncated gzip file");
  }
  return out;
}

}  // namespace ddpbench
