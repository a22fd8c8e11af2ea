#include "harness/base/text_file.hpp"

#include <fstream>
#include <iterator>
#include <system_error>

#include "harness/base/input_error.hpp"

namespace ddpbench {

std::string read_text_file(const std::filesystem::path& path, std::string_view cannot_read) {
  const std::string named = std::string(cannot_read) + " '" + path.string() + "'";
  // What is not a regular file (after its links) is refused unread: a folder failed in the
  // middle of the read as a crash (exit 1), a FIFO or /dev/zero never ended.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status)) throw InputError(named + ": a folder, not a file");
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw InputError(named + ": not a regular file (a FIFO, a socket or a device)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(named);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw InputError(named + ": the read failed");
  return text;
}

}  // namespace ddpbench
