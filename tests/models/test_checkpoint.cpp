#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <cstdlib>

#include <ATen/ATen.h>

#include "harness/base/input_error.hpp"
#include "models/checkpoint.hpp"
#include "models/registry.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using testing::TempDir;

std::string load_error(torch::nn::Module& m, const std::filesystem::path& path) {
  try {
    load_checkpoint(m, path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, SaveThenLoadRestoresEveryTensor) {
  TempDir dir;
  torch::manual_seed(1);
  auto a = find_model("tiny").make(10);
  a.forward<at::Tensor>(at::randn({8, 3, 32, 32}));  // moves the running statistics
  save_checkpoint(*a.ptr(), dir / "w.pt");
  torch::manual_seed(2);
  auto b = find_model("tiny").make(10);
  ASSERT_EQ(load_error(*b.ptr(), dir / "w.pt"), "");
  const auto sa = state_dict(*a.ptr());
  const auto sb = state_dict(*b.ptr());
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(at::equal(sa[i].second, sb[i].second)) << sa[i].first;
}

TEST(Checkpoint, MismatchesAndJunkAreInputErrors) {
  TempDir dir;
  auto tiny10 = find_model("tiny").make(10);
  auto tiny3 = find_model("tiny").make(3);
  save_checkpoint(*tiny10.ptr(), dir / "w.pt");
  const std::string shape = load_error(*tiny3.ptr(), dir / "w.pt");
  EXPECT_NE(shape.find("'fc.weight' has shape [10, 16], the model [3, 16]"), std::string::npos) << shape;
  auto resnet = find_model("resnet18").make(10);
  const std::string names = load_error(*resnet.ptr(), dir / "w.pt");
  EXPECT_NE(names.find("missing 'layer1.0.conv1.weight'"), std::string::npos) << names;
  EXPECT_NE(names.find("unexpected 'conv2.weight'"), std::string::npos) << names;
  testing::write_text(dir / "junk.pt", "not a checkpoint");
  EXPECT_NE(load_error(*tiny10.ptr(), dir / "junk.pt").find("not a PyTorch file of named tensors"), std::string::npos);
  EXPECT_NE(load_error(*tiny10.ptr(), dir / "absent.pt").find("cannot open"), std::string::npos);
}

// What --save-checkpoint may replace (the output rule): a checkpoint it wrote, known by its
// marker record, never another zip, a user's own PyTorch archive (it was replaced: any zip whose
// first entry was "X/data.pkl", what torch.save writes) or any other file.
TEST(Checkpoint, OnlyACheckpointItWroteIsRecognised) {
  TempDir dir;
  save_checkpoint(*find_model("tiny").make(10).ptr(), dir / "w.pt");
  EXPECT_TRUE(is_checkpoint_file(dir / "w.pt"));
  const auto zip_with = [&](const std::string& name) {
    std::string header("PK\x03\x04", 4);
    header += std::string(22, '\0');
    header += static_cast<char>(name.size());
    header += std::string(3, '\0');
    testing::write_text(dir / "z.zip", header + name + "rest of the archive");
    return is_checkpoint_file(dir / "z.zip");
  };
  EXPECT_FALSE(zip_with("archive/data.pkl")) << "a torch.save archive's first entry is no marker";
  EXPECT_FALSE(zip_with("weights/data/12"));
  EXPECT_FALSE(zip_with("photos/cat.jpg"));
  // A real PyTorch archive without the marker: a user's own weights.
  caffe2::serialize::PyTorchStreamWriter writer((dir / "mine.pt").string());
  writer.writeRecord("data.pkl", "x", 1);
  writer.writeEndOfFile();
  EXPECT_FALSE(is_checkpoint_file(dir / "mine.pt"));
  testing::write_text(dir / "notes.txt", "a user's notes");
  EXPECT_FALSE(is_checkpoint_file(dir / "notes.txt"));
  EXPECT_FALSE(is_checkpoint_file(dir / "absent.pt"));
  EXPECT_FALSE(is_checkpoint_file(dir.path()));
}

// With a Python that has torch (DDPBENCH_TEST_PYTHON), check both directions for real:
// torch.load (weights_only, its default) reads our file as a state dict, torch.save of a
// plain dict loads here, and an OrderedDict gets an error that says what to do.
TEST(Checkpoint, PythonTorchReadsAndWritesTheFormat) {
  const char* python = std::getenv("DDPBENCH_TEST_PYTHON");
  if (python == nullptr || std::system((std::string(python) + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no Python with torch (set DDPBENCH_TEST_PYTHON)";
  }
  TempDir dir;
  auto model = find_model("tiny").make(10);
  save_checkpoint(*model.ptr(), dir / "ours.pt");
  const std::string script =
      "import torch, collections\n"
      "sd = torch.load('" + (dir / "ours.pt").string() + "')\n"
      "assert list(sd)[:6] == ['conv1.weight', 'bn1.weight', 'bn1.bias', 'bn1.running_mean',\n"
      "                        'bn1.running_var', 'bn1.num_batches_tracked'], list(sd)[:6]\n"
      "assert sd['fc.weight'].shape == (10, 16) and sd['bn2.num_batches_tracked'].dtype == torch.int64\n"
      "out = {k: torch.full_like(v, 3) if v.is_floating_point() else v for k, v in sd.items()}\n"
      "torch.save(out, '" + (dir / "theirs.pt").string() + "')\n"
      "torch.save(collections.OrderedDict(out), '" + (dir / "ordered.pt").string() + "')\n"
      // The PyTorch twin's checkpoint (strategies/pytorch/reference_rank.py: save_checkpoint).
      "import sys; sys.path.insert(0, '" + (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "strategies" / "pytorch").string() + "')\n"
      "from reference_rank import save_checkpoint\n"
      "m = torch.nn.Linear(2, 2)\n"
      "save_checkpoint(m, '" + (dir / "twin.pt").string() + "')\n"
      "assert sorted(torch.load('" + (dir / "twin.pt").string() + "')) == ['bias', 'weight']\n";
  testing::write_text(dir / "check.py", script);
  ASSERT_EQ(std::system((std::string(python) + " " + (dir / "check.py").string() + " 2>&1").c_str()), 0);
  ASSERT_EQ(load_error(*model.ptr(), dir / "theirs.pt"), "");
  EXPECT_FALSE(is_checkpoint_file(dir / "theirs.pt")) << "a user's torch.save archive is not --save-checkpoint's";
  EXPECT_TRUE(is_checkpoint_file(dir / "twin.pt")) << "the twin's checkpoint carries the marker";
  for (const auto& p : model.ptr()->parameters()) EXPECT_TRUE(at::all(p == 3).item<bool>());
  EXPECT_NE(load_error(*model.ptr(), dir / "ordered.pt").find("save a plain dict: torch.save(dict(model.state_dict())"),
            std::string::npos);
}

}  // namespace
}  // namespace ddpbench
