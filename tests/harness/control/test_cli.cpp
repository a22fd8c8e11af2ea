#include <gtest/gtest.h>

#include <vector>

#include "harness/control/cli.hpp"

namespace ddpbench {
namespace {

Command parse(std::vector<const char*> args) {
  args.insert(args.begin(), "ddpbench");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

TEST(Cli, RunTakesEveryDocumentedFlag) {
  const Command cmd = parse({"run", "--strategy", "single", "--model", "tiny", "--num-classes", "10",
                             "--dataset", "synthetic", "--data-dir", "/d", "--loader", "device", "--workers", "3",
                             "--epochs", "2", "--batch-size", "64", "--lr", "0.1", "--momentum", "0.5",
                             "--max-steps", "4", "--warmup-steps", "1", "--device", "cpu", "--seed", "9",
                             "--out", "x.json"});
  const auto* run = std::get_if<RunCommand>(&cmd);
  ASSERT_NE(run, nullptr);
  const RunConfig& c = run->config;
  EXPECT_EQ(c.model, "tiny");
  EXPECT_EQ(c.num_classes, 10);
  EXPECT_EQ(c.dataset, DatasetKind::synthetic);
  EXPECT_EQ(c.data_dir, "/d");
  EXPECT_EQ(c.loader, LoaderKind::device);
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.epochs, 2);
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_DOUBLE_EQ(c.lr, 0.1);
  EXPECT_DOUBLE_EQ(c.momentum, 0.5);
  EXPECT_EQ(c.max_steps, std::optional<int64_t>(4));
  EXPECT_EQ(c.warmup_steps, 1);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.seed, 9u);
  EXPECT_EQ(c.out, "x.json");
}

TEST(Cli, RunWithoutFlagsIsTheTutorial) {
  const Command cmd = parse({"run"});
  ASSERT_TRUE(std::holds_alternative<RunCommand>(cmd));
  EXPECT_EQ(std::get<RunCommand>(cmd).config.batch_size, 256);
}

TEST(Cli, BadInputBecomesInputError) {
  EXPECT_THROW(parse({"run", "--batch-size", "0"}), InputError);
  EXPECT_THROW(parse({"run", "--batch-size", "many"}), InputError);
  EXPECT_THROW(parse({"run", "--no-such-flag"}), InputError);
  EXPECT_THROW(parse({"run", "--lr"}), InputError);
  EXPECT_THROW(parse({"fly"}), InputError);
  EXPECT_THROW(parse({}), InputError);
  try {
    parse({"run", "--max-steps", "-3"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-steps"), std::string::npos) << e.what();
  }
}

TEST(Cli, HelpAndVersionAreRequestsNotErrors) {
  const Command help = parse({"run", "--help"});
  ASSERT_TRUE(std::holds_alternative<HelpRequest>(help));
  EXPECT_NE(std::get<HelpRequest>(help).text.find("--batch-size"), std::string::npos);
  const Command version = parse({"--version"});
  ASSERT_TRUE(std::holds_alternative<HelpRequest>(version));
  EXPECT_NE(std::get<HelpRequest>(version).text.find("ddpbench"), std::string::npos);
}

TEST(Cli, List) { EXPECT_TRUE(std::holds_alternative<ListCommand>(parse({"list"}))); }

TEST(Cli, ListOptionsAsksForTheReferenceTable) {
  EXPECT_FALSE(std::get<ListCommand>(parse({"list"})).options);
  EXPECT_TRUE(std::get<ListCommand>(parse({"list", "--options"})).options);
}

// sweep --project takes a fabric it knows; project takes rank counts and a fabric.
TEST(Cli, ProjectionsAreAskedForByFabric) {
  const auto sweep = std::get<SweepCommand>(parse({"sweep", "--project", "ndr-ib"}));
  EXPECT_EQ(sweep.project, "ndr-ib");
  EXPECT_THROW(parse({"sweep", "--project", "nowhere"}), InputError);
  const auto project = std::get<ProjectCommand>(parse({"project", "r.json", "--ranks", "8,64", "--ranks-per-node", "4",
                                                       "--inter-node-gbps", "200", "--latency-us", "5"}));
  EXPECT_EQ(project.results, "r.json");
  EXPECT_EQ(project.ranks, (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(project.ranks_per_node, 4);
  EXPECT_DOUBLE_EQ(project.inter_node_gbps, 200);
  EXPECT_DOUBLE_EQ(project.latency_us, 5);
  EXPECT_THROW(parse({"project", "r.json", "--ranks", "-2"}), InputError);
  EXPECT_THROW(parse({"project"}), InputError);
}

}  // namespace
}  // namespace ddpbench
