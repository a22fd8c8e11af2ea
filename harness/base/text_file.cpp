#include "harness/base/text_file.hpp"

#include <fstream>
#include <iterator>

#include "harness/base/input_error.hpp"

namespace ddpbench {

std::string read_text_file(const std::filesystem::path& path, std::string_view cannot_read) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(std::string(cannot_read) + " '" + path.string() + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace ddpbench
