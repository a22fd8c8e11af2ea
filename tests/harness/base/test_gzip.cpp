#include <gtest/gtest.h>

#include <string>

#include "harness/base/gzip.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

TEST(Gzip, WhatIsGzippedComesBackAndPlainTextPassesAsItIs) {
  std::string text;
  for (int i = 0; i < 300000; ++i) text += "{\"ts\": " + std::to_string(i) + "},";  // several zlib chunks
  const std::string packed = gzip_bytes(text);
  EXPECT_LT(packed.size(), text.size() / 4);
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);
  EXPECT_EQ(gunzip_if_gzip(packed, "t"), text);
  EXPECT_EQ(gunzip_if_gzip(text, "t"), text);
  EXPECT_EQ(gunzip_if_gzip(gzip_bytes(""), "t"), "");
}

TEST(Gzip, ATruncatedGzipIsBadInput) {
  const std::string packed = gzip_bytes(std::string(100000, 'x') + "tail");
  EXPECT_THROW(gunzip_if_gzip(packed.substr(0, packed.size() / 2), "trace 'a.gz'"), InputError);
}

TEST(Gzip, Crc32IsZlibs) {
  EXPECT_EQ(crc32_of("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32_of(""), 0u);
}

}  // namespace
}  // namespace ddpbench
