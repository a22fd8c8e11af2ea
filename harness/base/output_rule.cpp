#include "harness/base/output_rule.hpp"

#include <fstream>
#include <iterator>
#include <system_error>

#include "harness/base/input_error.hpp"

namespace ddpbench {
namespace {

namespace fs = std::filesystem;

// Where a write to `path` lands, resolved part by part as the kernel does: a link followed by its
// text, whether or not where it leads exists yet (a link through a folder another output makes
// leads there once it is made), a missing part as the folder a writer would make, ".." the parent
// of what is resolved so far. (weakly_canonical drops "x/.." by text once a part is missing, so
// that "missing/../link/../input" resolved elsewhere than the write lands; canonical fails on a
// link through a missing folder, and such a link was taken for a place of its own.)
constexpr int kMostLinks = 40;  // the kernel's ELOOP bound

fs::path resolved_from(fs::path out, const fs::path& relative, int& links, const fs::path& named) {
  for (const fs::path& part : relative) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      out = out.parent_path();
      continue;
    }
    std::error_code error;
    const fs::path next = out / part;
    if (!fs::is_symlink(fs::symlink_status(next, error))) {
      out = next;
      continue;
    }
    if (++links > kMostLinks) throw InputError("'" + named.string() + "': too many links to follow (a loop)");
    const fs::path target = fs::read_symlink(next, error);
    if (error) throw InputError("'" + named.string() + "': cannot read the link '" + next.string() + "' (" + error.message() + ")");
    out = resolved_from(target.is_absolute() ? target.root_path() : out, target.relative_path(), links, named);
  }
  return out;
}

fs::path resolved(const fs::path& path) {
  const fs::path absolute = fs::absolute(path);
  int links = 0;
  return resolved_from(absolute.root_path(), absolute.relative_path(), links, path);
}

// One file under two paths: the same place, or (hard links) the same inode.
bool same_file(const fs::path& a, const fs::path& b) {
  const fs::path ra = resolved(a), rb = resolved(b);
  if (ra == rb) return true;
  std::error_code error;
  if (fs::equivalent(ra, rb, error) && !error) return true;
  // Neither written yet: one folder under two paths (a bind mount, a second mount of it) with the
  // same name in it is one file once either is written.
  error.clear();
  return ra.filename() == rb.filename() && fs::equivalent(ra.parent_path(), rb.parent_path(), error) && !error;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// Whether `inner` lies under `outer`, both resolved: a file output one write makes a folder of
// for another (`--reports-dir` at a row's result file: its results written into it, the row
// failed, exit 1).
bool lies_under(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return i != inner.end();
}

}  // namespace

void check_command_files(const std::vector<CommandInput>& inputs, const std::vector<CommandOutput>& outputs) {
  std::vector<fs::path> lands;  // where each output's write lands, resolved once (a sweep has hundreds)
  lands.reserve(outputs.size());
  for (const CommandOutput& out : outputs) lands.push_back(out.path.empty() ? fs::path() : resolved(out.path));
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
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      if (j != i && !outputs[j].path.empty() && lies_under(lands[i], lands[j])) {
        throw InputError(named + " lies under the file " + outputs[j].name + " " + quoted(outputs[j].path) +
                         " writes: one output would be made a folder of for the other (give another path)");
      }
    }
    // What is there where the write lands (through links and ".."), not only at the spelling.
    std::error_code error;
    const fs::file_status status = fs::symlink_status(out.path, error);
    if (!fs::exists(status) && !fs::exists(fs::symlink_status(lands[i], error))) continue;
    if (out.own_kind && out.own_kind(fs::exists(status) ? out.path : lands[i])) continue;
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
