#include "data/cifar10_records.hpp"

#include "harness/base/input_error.hpp"
#include "harness/base/units.hpp"

namespace ddpbench {
void parse_cifar10_records(std::span<const uint8_t> bytes, int64_t records, const std::string& file,
                           const std::function<void(int64_t, uint8_t, const uint8_t*)>& each) {
  if (records < 0) throw InputError("CIFAR-10 file '" + file + "': a negative record count was asked for");
  const auto size = static_cast<int64_t>(bytes.size());
  // Compared as counts of records, never as records * 3073, which could overflow.
  const int64_t whole = size / kCifar10RecordBytes;
  const int64_t partial = size % kCifar10RecordBytes;
  if (whole != records || partial != 0) {
    std::string detail = format_rate(size) + " bytes hold " + format_rate(whole) + " whole records";
    if (partial != 0) detail += " and " + format_rate(partial) + " bytes of record " + std::to_string(whole);
    const bool short_of = whole < records;
    throw InputError("CIFAR-10 file '" + file + "' is " + (short_of ? "truncated" : "too long") + ": " + detail +
                     "; expected " + format_rate(records) + " records (" +
                     (records <= INT64_MAX / kCifar10RecordBytes ? format_rate(records * kCifar10RecordBytes)
                                                                 : std::string("too many")) +
                     " bytes)");
  }
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t label = bytes[static_cast<std::size_t>(r * kCifar10RecordBytes)];
    if (label >= kCifar10Classes) {
      throw InputError("CIFAR-10 file '" + file + "': record " + std::to_string(r) + " (byte offset " +
                       format_rate(r * kCifar10RecordBytes) + ") has label " + std::to_string(label) +
                       ", expected 0-9");
    }
  }
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* record = bytes.data() + r * kCifar10RecordBytes;
    each(r, record[0], record + 1);
  }
}

}  // namespace ddpbench
