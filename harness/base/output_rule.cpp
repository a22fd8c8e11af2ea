#include "harness/base/output_rule.hpp"

#include <fstream>
#include <iterator>
#include <system_error>

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

namespace fs = std::filesystem;

// The path with every link and ".." resolved as far as it exists: two spellings of one place,
// or a link to it, resolve alike.
fs::path resolved(const fs::path& path) {
  std::error_code error;
  fs::path out = fs::weakly_canonical(fs::absolute(path), error);
  return error ? fs::absolute(path).lexically_normal() : out;
}

// One file under two paths: the same place, or (hard links) the same inode.
bool same_file(const fs::path& a, const fs::path& b) {
  if (resolved(a) == resolved(b)) return true;
  std::error_code error;
  return fs::equivalent(a, b, error) && !error;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

}  // namespace

void check_command_files(const std::vector<CommandInput>& inputs, const std::vector<CommandOutput>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const CommandOutput& out = outputs[i];
    if (out.path.empty()) continue;
    const std::string named = out.name + " " + quoted(out.path);
    for (const CommandInput& in : inputs) {
      if (!in.path.empty() && same_file(out.path, in.path)) {
        throw InputError(named + " is the file " + in.name + " " + quoted(in.path) +
                         " reads: an output never replaces an input (give another path)");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path)) {
        throw InputError(named + " is the file " + outputs[j].name + " " + quoted(outputs[j].path) +
                         " writes too: each output is a file of its own (give another path)");
      }
    }
    std::error_code error;
    const fs::file_status status = fs::symlink_status(out.path, error);
    if (!fs::exists(status) || (out.own_kind && out.own_kind(out.path))) continue;
    throw InputError(named + " exists and is not " + out.kind + " (what " + out.name +
                     " writes): it replaces only what is of its own kind (give a new path, or remove what is there)");
  }
}

OwnKind own_kind_by_text(std::function<bool(std::string_view)> text_is_own_kind, std::uintmax_t max_bytes) {
  return [text_is_own_kind = std::move(text_is_own_kind), max_bytes](const fs::path& path) {
    std::error_code error;
    const std::uintmax_t size = fs::file_size(path, error);
    if (error || size > max_bytes) return false;
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text_is_own_kind(text);
  };
}

}  // namespace ddpbench
