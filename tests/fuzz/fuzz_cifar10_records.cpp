// libFuzzer target: the CIFAR-10 record reader on arbitrary bytes. The first byte picks the
// record count asked for (as a batch file's layout does); the rest is the file. A file is
// either rejected with InputError or every record is handed over, each label in 0..9.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "data/cifar10_records.hpp"
#include "harness/base/input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int64_t records = data[0] % 8;
  const std::span<const uint8_t> file(data + 1, size - 1);
  int64_t handed = 0;
  try {
    ddpbench::parse_cifar10_records(file, records, "fuzz.bin", [&](int64_t index, uint8_t label, const uint8_t* pixels) {
      if (index != handed || label >= ddpbench::kCifar10Classes) std::abort();
      volatile uint8_t last = pixels[ddpbench::kCifar10PixelBytes - 1];  // in bounds (ASan checks)
      (void)last;
      ++handed;
    });
  } catch (const ddpbench::InputError&) {
    if (handed != 0) std::abort();  // a bad file hands nothing over
    return 0;
  }
  if (handed != records) std::abort();
  return 0;
}
