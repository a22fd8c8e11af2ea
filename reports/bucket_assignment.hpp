#pragma once
// DDP's gradient buckets for any cap, without LibTorch: c10d::compute_bucket_assignment_by_size
// (reducer.cpp, LibTorch 2.11) as the Reducer's rebuild calls it, over the gradients in the
// order backward made them ready, with DistributedDataParallel's limits (a first bucket of
// dist._DEFAULT_FIRST_BUCKET_BYTES under the default cap, of the cap otherwise). Checked byte
// for byte against the Reducer's own function and its rebuilt buckets (tests/strategies/test_ddp.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace ddpbench {

/// One gradient as the assignment sees it.
struct GradientSize {
  int64_t bytes = 0;
  std::string dtype = "float";  // gradients of different dtypes never share a bucket
};

/// The bucket_cap_mb DistributedDataParallel takes when none is given.
inline constexpr double kDefaultBucketCapMb = 25;
/// dist._DEFAULT_FIRST_BUCKET_BYTES.
inline constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;

/// The size limits DDP hands the rebuild for `bucket_mb`: {1 MiB, cap} under the default cap
/// (25), {cap, cap} under any other (distributed.py passes the cap as the first bucket's then).
std::vector<int64_t> ddp_bucket_limits(double bucket_mb);

/// The buckets, each a list of positions in `in_ready_order`, in the order they fill: a bucket
/// closes once its bytes reach its limit (the first limit for a dtype's first bucket, the next
/// for the next, the last one after that); what remains of each dtype closes last, dtypes in
/// the order they first appear (the Reducer takes them from a hash map: one dtype, as in every
/// model here, has one order). Throws std::invalid_argument for no limits or one below 1 byte.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<GradientSize>& in_ready_order,
                                                     const std::vector<int64_t>& size_limits);

}  // namespace ddpbench
