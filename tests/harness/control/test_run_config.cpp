#include <gtest/gtest.h>

#include "harness/control/run_config.hpp"

namespace ddpbench {
namespace {

// Runs validate() on a default config changed by `edit`, and returns the error text.
template <class Edit>
std::string rejection(Edit edit) {
  RunConfig config;
  edit(config);
  try {
    validate(config);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, DefaultsAreTheTutorialsSettings) {
  const RunConfig c;
  EXPECT_EQ(c.strategy, "single");
  EXPECT_EQ(c.model, "resnet50");
  EXPECT_EQ(c.num_classes, 1000);
  EXPECT_EQ(c.batch_size, 256);
  EXPECT_DOUBLE_EQ(c.lr, 0.001);
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);
  EXPECT_EQ(c.epochs, 1);
  EXPECT_EQ(c.workers, 10);
  EXPECT_EQ(c.crop_padding, 0);
  EXPECT_EQ(c.loader, LoaderKind::host);
  EXPECT_EQ(c.test_transform, TestTransform::train);
  EXPECT_FALSE(c.max_steps.has_value());
  EXPECT_NO_THROW(validate(c));
}

TEST(RunConfig, RowNameFallsBackToTheStrategy) {
  RunConfig c;
  EXPECT_EQ(c.row_name(), "single");
  c.name = "baseline";
  EXPECT_EQ(c.row_name(), "baseline");
}

TEST(RunConfig, RejectsBadValuesNamingTheFlag) {
  EXPECT_NE(rejection([](RunConfig& c) { c.batch_size = 0; }).find("--batch-size must be positive"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.batch_size = -4; }).find("--batch-size"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.epochs = 0; }).find("--epochs"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.lr = 0; }).find("--lr must be a positive number"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.lr = -0.1; }).find("--lr"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.momentum = 1.0; }).find("--momentum"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.max_steps = 0; }).find("--max-steps must be positive"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.max_eval_batches = -1; }).find("--max-eval-batches"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.warmup_steps = -1; }).find("--warmup-steps must not be negative"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.workers = -2; }).find("--workers"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.num_classes = 0; }).find("--num-classes"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.strategy.clear(); }).find("--strategy"), std::string::npos);
}

TEST(RunConfig, AcceptsTheEdgesOfEachRange) {
  EXPECT_EQ(rejection([](RunConfig& c) {
              c.batch_size = 1;
              c.max_steps = 1;
              c.warmup_steps = 0;
              c.workers = 0;
              c.momentum = 0;
            }),
            "");
}

// A count, a timeout or a bucket cap no run has is bad input, named: it used to overflow into a
// c10 stack trace (--synthetic-train-images 9223372036854775807), a rendezvous that never timed out
// (--timeout-s 99999999999) or a cap recorded as -9223372036854775808 bytes (--bucket-mb 1e300).
TEST(RunConfig, ValuesPastWhatAnyRunHasAreRefusedBeforeTheyOverflow) {
  EXPECT_NE(rejection([](RunConfig& c) { c.synthetic_train_images = INT64_MAX; })
                .find("--synthetic-train-images 9223372036854775807 is more than 1073741824"),
            std::string::npos);
  EXPECT_NE(
      rejection([](RunConfig& c) { c.timeout_s = 99999999999; }).find("--timeout-s 99999999999 is more than 604800"),
      std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.bucket_mb = 1e300; }).find("--bucket-mb 1e+300 is not a bucket cap"),
            std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.bucket_mb = 1e-7; }).find("--bucket-mb 1e-07 is not a bucket cap (a byte to"),
            std::string::npos);
  EXPECT_EQ(rejection([](RunConfig& c) { c.bucket_mb = 0.0001; }), "") << "104 bytes: many small buckets, a cap";
  EXPECT_NE(rejection([](RunConfig& c) { c.nproc = int64_t{1} << 31; }).find("--nproc"), std::string::npos);
  EXPECT_NE(rejection([](RunConfig& c) { c.workers = 5000; }).find("--workers 5000 is more than 4096"),
            std::string::npos);
  EXPECT_EQ(rejection([](RunConfig& c) {
              c.synthetic_train_images = kMostOfACount;
              c.timeout_s = kMostTimeoutS;
              c.bucket_mb = kMostBucketMb;
              c.threads = kMostThreads;
            }),
            "")
      << "the bounds themselves are runs";
}

}  // namespace
}  // namespace ddpbench
