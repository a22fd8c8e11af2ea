#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/base/input_error.hpp"
#include "harness/control/cli.hpp"
#include "harness/control/run_options.hpp"
#include "support/temp_dir.hpp"

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
  // A repeat no sweep runs: its plan of 2^30 repetitions met the OOM killer (exit 137, no line).
  EXPECT_THROW(parse({"sweep", "--repeat", "1073741825"}), InputError);
  EXPECT_THROW(parse({"sweep", "--repeat", "99999999999999999999"}), InputError);
  EXPECT_NO_THROW(parse({"sweep", "--repeat", "1000"}));
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

// Each table of options in docs/options.md is what the declarations print: a flag added, or a
// default or a meaning changed, in the code and not on the page (or the other way) fails here.
TEST(Cli, TheReferenceTablesAreTheDeclarations) {
  const std::string reference = options_reference_markdown();
  for (const char* name : {"run", "list", "sweep", "compare", "project", "advise", "trace"}) {
    EXPECT_NE(reference.find(std::string("## `ddpbench ") + name + "`\n\n" + options_table_markdown(name)),
              std::string::npos)
        << name;
  }
  EXPECT_EQ(options_table_markdown("run"), run_options_markdown());
  EXPECT_NE(options_table_markdown("compare").find("| `--paired` | off |"), std::string::npos);
  EXPECT_EQ(options_table_markdown("sweep").find("`--lr"), std::string::npos) << "run's options are run's table";
  EXPECT_THROW((void)options_table_markdown("walk"), InputError);
  const char* source_dir = std::getenv("DDPBENCH_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const std::string doc = testing::read_text(std::filesystem::path(source_dir) / "docs" / "options.md");
  for (const char* name : {"run", "list", "sweep", "compare", "project", "advise", "trace"}) {
    const auto heading = doc.find(std::string("## `ddpbench ") + name + "`");
    ASSERT_NE(heading, std::string::npos) << "docs/options.md has no section for " << name;
    const auto begin = doc.find("| option | default | meaning |\n", heading);
    ASSERT_NE(begin, std::string::npos) << name;
    auto end = begin;
    while (end < doc.size() && doc[end] == '|') end = doc.find('\n', end) + 1;
    EXPECT_EQ(doc.substr(begin, end - begin), options_table_markdown(name))
        << "docs/options.md's table for " << name << " is not what `build/ddpbench list --options` prints";
  }
}

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
