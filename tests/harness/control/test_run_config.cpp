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

}  // namespace
}  // namespace ddpbench
