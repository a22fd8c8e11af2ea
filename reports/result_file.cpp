#include "reports/result_file.hpp"

#include <fstream>
#include <iterator>
#include <sstream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {

void write_result_file(const std::filesystem::path& path, const ResultDocument& document) {
  write_file_atomically(path, nlohmann::json(document).dump(2) + "\n");
}

ResultDocument read_result_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read result file '" + path.string() + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_result_document(text, path.string());
}

ResultDocument parse_result_document(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("'" + source + "' is not valid JSON: " + e.what());
  }
  try {
    return j.get<ResultDocument>();
  } catch (const std::exception& e) {
    throw InputError("'" + source + "' is not a ddpbench result file: " + e.what());
  }
}

}  // namespace ddpbench
