#pragma once
// The one output rule every command checks before any work (scripts/lib/output_rule.py is its
// Python twin): an output never resolves to an input or to another output (by path, or as the
// same file through a link), and anything existing at an output path (a file, a folder, a link)
// is replaced only where it is of the command's own kind, which the output's recogniser knows. Otherwise bad input
// (InputError) naming both paths. No LibTorch.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

/// A file a command reads, named as the user gave it ("BASELINE", "--init-from").
struct CommandInput {
  std::string name;
  std::filesystem::path path;
};

/// Whether what exists at an output path is the command's own (an earlier result file, an earlier
/// merged trace): it is replaced; anything else (a folder too) is refused.
using OwnKind = std::function<bool(const std::filesystem::path&)>;

/// A file a command writes: its flag, its path, what it is ("a result file") and its recogniser.
struct CommandOutput {
  std::string name;
  std::filesystem::path path;
  std::string kind;
  OwnKind own_kind;
};

/// Throws InputError where an output is an input or another output, or names something existing
/// (a folder too) that is not of its own kind; inputs and outputs with an empty path are not given
/// and are left out. Reads nothing but the existing outputs its recognisers look at.
void check_command_files(const std::vector<CommandInput>& inputs, const std::vector<CommandOutput>& outputs);

/// A recogniser that reads a regular file whole (at most `max_bytes`: a larger file is not the
/// kind) and asks `text_is_own_kind` of its text; a folder or anything else is not the kind.
OwnKind own_kind_by_text(std::function<bool(std::string_view)> text_is_own_kind, std::uintmax_t max_bytes = 1U << 30);

}  // namespace ddpbench
