#pragma once
// The command line: CLI11 subcommands parsed into plain command structs. No LibTorch here,
// so parsing and its errors are tested without building a model.
#include <string>
#include <variant>
#include <vector>

#include "harness/run_config.hpp"

namespace ddpbench {

struct HelpRequest {  // --help or --version: print `text` and exit 0
  std::string text;
};
struct RunCommand {
  RunConfig config;
};
struct ListCommand {};
struct CompareCommand {
  std::string baseline;
  std::string current;
  double threshold = 0.10;
  std::vector<std::string> metrics = {"train_time_s", "steady_images_per_s"};
  bool allow_env_mismatch = false;
  std::string normalize_by;  // empty: absolute values
  double alpha = 0.05;
  std::string out;           // also write the Markdown table here
};

using Command = std::variant<HelpRequest, RunCommand, ListCommand, CompareCommand>;

/// Parses argv (argv[0] included). Throws InputError on any bad flag or value; the
/// returned RunConfig has passed validate().
Command parse_command_line(int argc, const char* const* argv);

}  // namespace ddpbench
