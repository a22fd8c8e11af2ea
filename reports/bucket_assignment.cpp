#include "reports/bucket_assignment.hpp"

#include <map>
#include <stdexcept>

namespace ddpbench {

std::vector<int64_t> ddp_bucket_limits(double bucket_mb) {
  const auto cap = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  return {bucket_mb == kDefaultBucketCapMb ? kDefaultFirstBucketBytes : cap, cap};
}

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<GradientSize>& in_ready_order,
                                                     const std::vector<int64_t>& size_limits) {
  if (size_limits.empty()) throw std::invalid_argument("assign_buckets: no bucket size limits");
  for (int64_t limit : size_limits) {
    if (limit < 1) throw std::invalid_argument("assign_buckets: a bucket size limit below 1 byte");
  }
  struct Open {
    std::vector<std::size_t> positions;
    int64_t bytes = 0;
    std::size_t limit = 0;  // which of size_limits this dtype's open bucket is held to
  };
  std::map<std::string, Open> open;
  std::vector<std::string> dtypes;  // in the order they first appear
  std::vector<std::vector<std::size_t>> buckets;
  for (std::size_t i = 0; i < in_ready_order.size(); ++i) {
    const GradientSize& g = in_ready_order[i];
    if (open.count(g.dtype) == 0) dtypes.push_back(g.dtype);
    Open& bucket = open[g.dtype];
    bucket.positions.push_back(i);
    bucket.bytes += g.bytes;
    // The Reducer closes a bucket once it has reached its limit (>=), the gradient that
    // crossed it included, and holds the dtype's next bucket to the next limit.
    if (bucket.bytes >= size_limits[bucket.limit]) {
      buckets.push_back(std::move(bucket.positions));
      const std::size_t next = std::min(bucket.limit + 1, size_limits.size() - 1);
      bucket = Open{};
      bucket.limit = next;
    }
  }
  for (const std::string& dtype : dtypes) {
    Open& bucket = open[dtype];
    if (!bucket.positions.empty()) buckets.push_back(std::move(bucket.positions));
  }
  return buckets;
}

}  // namespace ddpbench
