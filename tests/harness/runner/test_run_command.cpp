#include <gtest/gtest.h>

#include "harness/base/input_error.hpp"
#include "harness/runner/commands.hpp"
#include "models/checkpoint.hpp"
#include "models/registry.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

std::string refusal(const RunConfig& config) {
  try {
    check_model_inputs(config);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// An --init-from that is no checkpoint, or another model's, was found by a rank: after the row's
// folders and the synthetic cache were made (exit 2, things left behind). Now before anything.
TEST(RunCommand, TheModelAndItsInitialWeightsAreProvenBeforeAnythingIsMade) {
  testing::TempDir dir;
  const torch::nn::AnyModule tiny = find_model("tiny").make(10);
  save_checkpoint(*tiny.ptr(), dir / "tiny.pt");
  testing::write_text(dir / "notes.txt", "a user's notes");
  RunConfig c;
  c.model = "tiny";
  c.num_classes = 10;
  c.init_from = (dir / "tiny.pt").string();
  EXPECT_EQ(refusal(c), "");
  c.num_classes = 12;
  EXPECT_NE(refusal(c).find("does not match the model"), std::string::npos) << refusal(c);
  c.num_classes = 10;
  c.model = "resnet18";
  EXPECT_NE(refusal(c).find("does not match the model"), std::string::npos);
  c.model = "tiny";
  c.init_from = (dir / "notes.txt").string();
  EXPECT_NE(refusal(c).find("not a PyTorch file of named tensors"), std::string::npos) << refusal(c);
  c.init_from.clear();
  c.model = "vgg";
  EXPECT_NE(refusal(c).find("--model"), std::string::npos) << refusal(c);
}

}  // namespace
}  // namespace ddpbench
