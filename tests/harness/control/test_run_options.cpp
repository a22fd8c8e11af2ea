#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <set>

#include "harness/control/cli.hpp"
#include "harness/control/run_options.hpp"
#include "support/temp_dir.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

TEST(RunOptions, EveryKeyIsKebabCaseAndUnique) {
  std::set<std::string> seen;
  for (const auto& opt : run_options()) {
    EXPECT_TRUE(seen.insert(opt.key).second) << opt.key;
    for (char c : opt.key) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') << opt.key;
    EXPECT_FALSE(opt.help.empty()) << opt.key;
  }
  EXPECT_NE(find_run_option("batch-size"), nullptr);
  EXPECT_EQ(find_run_option("batch_size"), nullptr);
}

TEST(RunOptions, JsonRoundTripKeepsEveryField) {
  RunConfig c;
  c.name = "row-a";
  c.model = "tiny";
  c.dataset = DatasetKind::synthetic;
  c.loader = LoaderKind::device;
  c.test_transform = TestTransform::plain;
  c.batch_size = 32;
  c.lr = 0.25;
  c.max_steps = 7;
  c.seed = 123456789012345ULL;
  const json j = run_config_to_json(c);
  EXPECT_EQ(j.at("batch-size"), 32);
  EXPECT_EQ(j.at("dataset"), "synthetic");
  EXPECT_EQ(j.at("max-eval-batches"), nullptr);

  RunConfig back;
  apply_run_config_json(back, j, "test");
  EXPECT_EQ(run_config_to_json(back), j);
  EXPECT_EQ(back.seed, c.seed);
  EXPECT_EQ(back.loader, LoaderKind::device);
  EXPECT_EQ(back.max_steps, std::optional<int64_t>(7));
}

TEST(RunOptions, JsonOverridesOnlyTheKeysGiven) {
  RunConfig c;
  apply_run_config_json(c, json{{"batch-size", 64}, {"loader", "device"}}, "");
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.loader, LoaderKind::device);
  EXPECT_EQ(c.model, "resnet50");
  apply_run_config_json(c, json{{"max-steps", 3}}, "");
  apply_run_config_json(c, json{{"max-steps", nullptr}}, "");
  EXPECT_FALSE(c.max_steps.has_value());
}

TEST(RunOptions, JsonErrorsNameTheKeyAndWhere) {
  RunConfig c;
  try {
    apply_run_config_json(c, json{{"batch-sise", 64}}, "sweep.json, row 'a'");
    FAIL() << "unknown key accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "sweep.json, row 'a': unknown option 'batch-sise' (did you mean 'batch-size'?)");
  }
  EXPECT_THROW(apply_run_config_json(c, json{{"batch-size", 1.5}}, ""), InputError);
  EXPECT_THROW(apply_run_config_json(c, json{{"batch-size", json::array()}}, ""), InputError);
  EXPECT_THROW(apply_run_config_json(c, json{{"loader", "gpu"}}, ""), InputError);
  EXPECT_THROW(apply_run_config_json(c, json{{"amp", "fp8"}}, ""), InputError);
  EXPECT_THROW(apply_run_config_json(c, json::array(), ""), InputError);
}

TEST(RunOptions, ParsersRejectMalformedText) {
  RunConfig c;
  const RunOption* batch = find_run_option("batch-size");
  EXPECT_THROW(batch->set(c, "12abc"), InputError);
  EXPECT_THROW(batch->set(c, ""), InputError);
  EXPECT_THROW(batch->set(c, "99999999999999999999999"), InputError);
  const RunOption* lr = find_run_option("lr");
  EXPECT_THROW(lr->set(c, "fast"), InputError);
  lr->set(c, "1e-2");
  EXPECT_DOUBLE_EQ(c.lr, 0.01);
  try {
    find_run_option("dataset")->set(c, "imagenet");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--dataset: unknown value 'imagenet' (expected cifar10|synthetic|auto)");
  }
}

TEST(RunOptions, ArgumentsReproduceTheConfig) {
  RunConfig c;
  c.strategy = "ddp";
  c.nproc = 4;
  c.overlap = false;
  c.amp = AmpMode::fp16;
  c.max_steps = 7;
  c.bucket_mb = 0.5;
  c.data_dir = "/data/cifar";
  const auto args = run_config_to_args(c);
  // Every option, defaults too, switches as --key / --no-key.
  EXPECT_NE(std::find(args.begin(), args.end(), "--no-overlap"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "--batch-size"), args.end());
  std::size_t expected = 0;
  for (const auto& opt : run_options()) expected += opt.is_switch ? 1 : 2;
  EXPECT_EQ(args.size(), expected);
  std::vector<const char*> argv = {"ddpbench", "run"};
  for (const auto& a : args) argv.push_back(a.c_str());
  const auto parsed = std::get<RunCommand>(parse_command_line(static_cast<int>(argv.size()), argv.data())).config;
  EXPECT_EQ(run_config_to_json(parsed), run_config_to_json(c));
}

// A value equal to its default that a preset would change survives the trip to the child:
// `sweep --preset fast --amp off` trains in fp32.
TEST(RunOptions, ArgumentsKeepADefaultValueAPresetWouldOverride) {
  RunConfig c;
  c.preset = Preset::fast;
  apply_preset(c, {"amp", "loader", "sync-every-step", "workers"});
  ASSERT_EQ(c.amp, AmpMode::off);
  ASSERT_EQ(c.loader, LoaderKind::host);
  std::vector<const char*> argv = {"ddpbench", "run"};
  const auto args = run_config_to_args(c);
  for (const auto& a : args) argv.push_back(a.c_str());
  const auto parsed = std::get<RunCommand>(parse_command_line(static_cast<int>(argv.size()), argv.data())).config;
  EXPECT_EQ(parsed.amp, AmpMode::off);
  EXPECT_EQ(parsed.loader, LoaderKind::host);
  EXPECT_TRUE(parsed.sync_every_step);
  EXPECT_EQ(parsed.workers, 10);
  EXPECT_EQ(run_config_to_json(parsed), run_config_to_json(c));
}

TEST(RunOptions, PresetFastSetsTheFastPathExceptWhatTheUserSet) {
  const char* argv[] = {"ddpbench", "run", "--amp", "off", "--preset", "fast"};
  const auto c = std::get<RunCommand>(parse_command_line(6, argv)).config;
  EXPECT_EQ(c.preset, Preset::fast);
  EXPECT_EQ(c.amp, AmpMode::off);  // given explicitly: kept
  EXPECT_TRUE(c.channels_last);
  EXPECT_TRUE(c.cudnn_benchmark);
  EXPECT_EQ(c.loader, LoaderKind::device);
  EXPECT_EQ(c.sgd, SgdImpl::fused);
  EXPECT_FALSE(c.sync_every_step);
  for (const auto& [key, value] : preset_options(Preset::fast)) EXPECT_NE(find_run_option(key), nullptr) << key;
}

// --trace-steps reads as --profile-steps does, and refuses a second profiler in the same run.
TEST(RunOptions, TraceStepsAreParsedAndRefuseAnotherProfiler) {
  RunConfig c;
  c.trace_steps = "4:7";
  EXPECT_EQ(trace_step_range(c), std::make_optional(std::make_pair<int64_t, int64_t>(4, 7)));
  EXPECT_NO_THROW(validate(c));
  for (const char* bad : {"4", "7:4", "x:1", "-1:2", "1:"}) {
    c.trace_steps = bad;
    EXPECT_THROW(validate(c), InputError) << bad;
  }
  c.trace_steps = "4:7";
  c.profile_steps = "4:7";
  EXPECT_THROW(validate(c), InputError);
  c.profile_steps.clear();
  c.nvtx = NvtxMode::ops;
  EXPECT_THROW(validate(c), InputError);
  c.nvtx = NvtxMode::on;
  c.strategy = "torch-ddp";
  EXPECT_TRUE(pytorch_lacks(c).has_value());  // the twins do not trace: the sweep skips them, saying so
  c.trace_steps.clear();
  EXPECT_FALSE(pytorch_lacks(c).has_value());
  c.inject_fault_kind = InjectedFault::kill_in_collective;  // no bucket hook to die in
  EXPECT_NE(pytorch_lacks(c).value_or("").find("kill-in-collective"), std::string::npos);
}

TEST(RunOptions, CudaGraphsRefuseWhatAReplayWouldNotRun) {
  RunConfig c;
  c.cuda_graphs = true;
  EXPECT_NO_THROW(validate(c));
  c.amp = AmpMode::bf16;
  EXPECT_NO_THROW(validate(c));
  const auto refused = [](RunConfig bad, const std::string& said) {
    try {
      validate(bad);
      ADD_FAILURE() << "validated: " << said;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  for (const char* strategy : {"dp", "ddp", "torch-ddp", "torch-dp"}) {
    RunConfig bad = c;
    bad.strategy = strategy;
    refused(bad, std::string("--strategy ") + strategy);
  }
  RunConfig bad = c;
  bad.device = "cpu";
  refused(bad, "--device cpu");
  bad = c;
  bad.amp = AmpMode::fp16;
  bad.sgd = SgdImpl::fused;
  refused(bad, "--amp fp16");
  bad = c;
  bad.inject_slowdown = 0.1;
  refused(bad, "--inject-slowdown");
  bad = c;
  bad.warmup_steps = 3;
  refused(bad, "--warmup-steps 3");
  c.strategy = "torch-single";
  c.warmup_steps = 4;
  EXPECT_NO_THROW(validate(c));
  // Without the switch none of these is refused for it.
  c.cuda_graphs = false;
  c.warmup_steps = 0;
  c.amp = AmpMode::fp16;
  EXPECT_NO_THROW(validate(c));
}

// A result file's row configuration is read as this build writes one: each value of its JSON
// type, ranges as `run` checks them, a graphed row that ran only of a strategy a graph captures;
// a launcher's placement (nodes beside nproc) and a graphed row skipped on a CPU are as recorded.
TEST(RunOptions, RecordedConfigurationsAreProvenByTheOptionTable) {
  nlohmann::json config = run_config_to_json(RunConfig{});
  EXPECT_NO_THROW(prove_run_config(config, true));
  config["nodes"] = 2;
  config["nproc"] = 2;
  config["strategy"] = "ddp";
  EXPECT_NO_THROW(prove_run_config(config, true));
  config["a-newer-option"] = nlohmann::json::object();  // a newer writer's, left to it
  EXPECT_NO_THROW(prove_run_config(config, true));
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"nproc", "2"}, {"strategy", 5}, {"sync-bn", 1}, {"lr", -1.0}, {"max-steps", 1.5}, {"amp", 0}}) {
    nlohmann::json bad = config;
    bad[key] = value;
    EXPECT_THROW(prove_run_config(bad, true), InputError) << key << " " << value.dump();
  }
  config["cuda-graphs"] = true;
  EXPECT_THROW(prove_run_config(config, true), InputError);  // a graphed DDP row that ran
  nlohmann::json skipped = run_config_to_json(RunConfig{});
  skipped["cuda-graphs"] = true;
  skipped["device"] = "cpu";
  skipped["warmup-steps"] = 1;
  EXPECT_NO_THROW(prove_run_config(skipped, false));
  EXPECT_THROW(prove_run_config(skipped, true), InputError);
}

TEST(RunOptions, ProfileStepsAndDevicesAreParsed) {
  RunConfig c;
  c.profile_steps = "10:20";
  EXPECT_EQ(profile_step_range(c), std::make_optional(std::make_pair<int64_t, int64_t>(10, 20)));
  for (const char* bad : {"10", "20:10", "a:b", ":3", "-1:2"}) {
    c.profile_steps = bad;
    EXPECT_THROW(profile_step_range(c), InputError) << bad;
  }
  c.profile_steps.clear();
  EXPECT_FALSE(profile_step_range(c).has_value());
  c.devices = "0,1,3";
  EXPECT_EQ(device_list(c), (std::vector<int64_t>{0, 1, 3}));
  c.devices = "cpu,cpu";
  EXPECT_EQ(device_list(c), (std::vector<int64_t>{-1, -1}));
  c.devices = "all";
  EXPECT_TRUE(device_list(c).empty());
  for (const char* bad : {"", "0,,1", "gpu0", "cpu,1", "-1"}) {
    c.devices = bad;
    EXPECT_THROW(device_list(c), InputError) << bad;
  }
}

// A flag that is not documented does not exist for its users: every option is in the
// options reference (docs/options.md).
TEST(RunOptions, EveryOptionIsInTheOptionsReference) {
  const char* source_dir = std::getenv("DDPBENCH_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const std::string options = testing::read_text(std::filesystem::path(source_dir) / "docs" / "options.md");
  ASSERT_FALSE(options.empty());
  for (const auto& opt : run_options()) {
    EXPECT_NE(options.find("`--" + opt.key), std::string::npos) << "--" << opt.key << " is missing from docs/options.md";
  }
}

// The reference's table of run options is the option table printed, one row per option, each
// with its default and its line (docs/options.md holds it: Cli.TheReferenceTablesAreTheDeclarations).
TEST(RunOptions, TheReferenceTableIsTheOptionTable) {
  const std::string table = run_options_markdown();
  std::size_t rows = 0;
  for (const auto& opt : run_options()) {
    EXPECT_FALSE(opt.doc.empty()) << "--" << opt.key << " has no line in the reference";
    EXPECT_NE(table.find("| `--" + opt.key), std::string::npos) << "--" << opt.key;
    ++rows;
  }
  EXPECT_EQ(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')), rows + 2) << table;
  EXPECT_NE(table.find("| `--bucket-mb X` | `25` | ddp: DDP's `bucket_cap_mb`"), std::string::npos) << table;
  EXPECT_NE(table.find("| `--sync-bn`, `--no-sync-bn` | on |"), std::string::npos) << table;
  EXPECT_NE(table.find("| `--max-steps N` | unset |"), std::string::npos) << table;
  EXPECT_NE(table.find("| `--dataset cifar10\\|synthetic\\|auto` | `auto` |"), std::string::npos) << table;
}

// The table of bad input (docs/options.md): at least 17 classes, each naming tests that exist.
TEST(RunOptions, EveryBadInputClassInTheOptionsReferenceHasATest) {
  const char* source_dir = std::getenv("DDPBENCH_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "DDPBENCH_SOURCE_DIR not set";
  const std::filesystem::path root(source_dir);
  const std::string readme = testing::read_text(root / "docs" / "options.md");
  const auto table = readme.find("| bad input | example | test |");
  ASSERT_NE(table, std::string::npos) << "docs/options.md has no table of bad input";
  std::string tests_text;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "tests")) {
    if (entry.path().extension() == ".cpp") tests_text += testing::read_text(entry.path());
  }
  int classes = 0;
  std::size_t line_start = readme.find('\n', readme.find('\n', table) + 1) + 1;  // after the separator
  while (line_start < readme.size() && readme.compare(line_start, 2, "| ") == 0) {
    const std::string line = readme.substr(line_start, readme.find('\n', line_start) - line_start);
    const std::string tests = line.substr(line.rfind("| ", line.size() - 3));
    int named = 0;
    for (std::size_t at = tests.find('`'); at != std::string::npos; at = tests.find('`', tests.find('`', at + 1) + 1)) {
      const std::string name = tests.substr(at + 1, tests.find('`', at + 1) - at - 1);
      const auto dot = name.find('.');
      ASSERT_NE(dot, std::string::npos) << line;
      const std::string suite = name.substr(0, dot), test = name.substr(dot + 1);
      const bool exists = tests_text.find("TEST(" + suite + ", " + test + ")") != std::string::npos ||
                          tests_text.find("TEST_F(" + suite + ", " + test + ")") != std::string::npos;
      EXPECT_TRUE(exists) << name << " (docs/options.md, bad input) is not a test";
      ++named;
    }
    EXPECT_GT(named, 0) << "no test for: " << line;
    ++classes;
    line_start = readme.find('\n', line_start) + 1;
  }
  EXPECT_GE(classes, 17);
}

}  // namespace
}  // namespace ddpbench
