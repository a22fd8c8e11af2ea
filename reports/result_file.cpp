#include "reports/result_file.hpp"

#include <fstream>
#include <sstream>

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"

namespace ddpbench {

void write_result_file(const std::filesystem::path& path, const ResultDocument& document) {
  write_file_atomically(path, nlohmann::json(document).dump(2) + "\n");
}

ResultDocument read_result_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read result file '" + path.string() + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("'" + path.string() + "' is not valid JSON: " + e.what());
  }
  try {
    return j.get<ResultDocument>();
  } catch (const std::exception& e) {
    throw InputError("'" + path.string() + "' is not a ddpbench result file: " + e.what());
  }
}

}  // namespace ddpbench
