// The CIFAR-10 record format without LibTorch: what the reader accepts, and how it names
// what it rejects. (The file-level tests, through LibTorch, are in test_cifar10.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "data/cifar10_records.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

std::vector<uint8_t> records_with_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> bytes;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    bytes.push_back(labels[r]);
    for (int64_t p = 0; p < kCifar10PixelBytes; ++p) bytes.push_back(static_cast<uint8_t>((r * 7 + p) % 251));
  }
  return bytes;
}

std::string error_of(const std::vector<uint8_t>& bytes, int64_t records) {
  try {
    parse_cifar10_records(bytes, records, "f.bin", [](int64_t, uint8_t, const uint8_t*) {});
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Cifar10Records, EveryRecordIsHandedOverInOrderWithItsPixels) {
  const auto bytes = records_with_labels({3, 0, 9});
  std::vector<uint8_t> labels;
  std::vector<uint8_t> first_pixels;
  parse_cifar10_records(bytes, 3, "f.bin", [&](int64_t index, uint8_t label, const uint8_t* pixels) {
    EXPECT_EQ(index, static_cast<int64_t>(labels.size()));
    labels.push_back(label);
    first_pixels.push_back(pixels[0]);
    EXPECT_EQ(pixels[kCifar10PixelBytes - 1], static_cast<uint8_t>((index * 7 + kCifar10PixelBytes - 1) % 251));
  });
  EXPECT_EQ(labels, (std::vector<uint8_t>{3, 0, 9}));
  EXPECT_EQ(first_pixels, (std::vector<uint8_t>{0, 7, 14}));
}

TEST(Cifar10Records, SizesThatAreNotTheLayoutsAreNamed) {
  auto bytes = records_with_labels({1, 2});
  EXPECT_EQ(error_of(bytes, 3), "CIFAR-10 file 'f.bin' is truncated: 6,146 bytes hold 2 whole records; expected 3 "
                                "records (9,219 bytes)");
  EXPECT_EQ(error_of(bytes, 1), "CIFAR-10 file 'f.bin' is too long: 6,146 bytes hold 2 whole records; expected 1 "
                                "records (3,073 bytes)");
  bytes.resize(bytes.size() - 10);
  EXPECT_EQ(error_of(bytes, 2), "CIFAR-10 file 'f.bin' is truncated: 6,136 bytes hold 1 whole records and 3,063 "
                                "bytes of record 1; expected 2 records (6,146 bytes)");
  // A count whose byte size would overflow is still a plain error, not an overflow.
  EXPECT_NE(error_of(bytes, INT64_MAX / 2).find("is truncated"), std::string::npos);
  EXPECT_NE(error_of(bytes, -1).find("negative record count"), std::string::npos);
}

TEST(Cifar10Records, ABadLabelIsNamedAndNothingIsHandedOver) {
  const auto bytes = records_with_labels({1, 10, 2});
  int64_t handed = 0;
  try {
    parse_cifar10_records(bytes, 3, "f.bin", [&](int64_t, uint8_t, const uint8_t*) { ++handed; });
    FAIL() << "accepted a label of 10";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "CIFAR-10 file 'f.bin': record 1 (byte offset 3,073) has label 10, expected 0-9");
  }
  EXPECT_EQ(handed, 0);
}

}  // namespace
}  // namespace ddpbench
