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

using Command = std::variant<HelpRequest, RunCommand, ListCommand>;

/// Parses argv (argv[0] included). Throws InputError on any bad flag or value; the
/// returned RunConfig has passed validate().
Command parse_command_line(int argc, const char* const* argv);

}  // namespace ddpbench
