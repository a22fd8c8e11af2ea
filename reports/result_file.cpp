#include "reports/result_file.hpp"

#include "harness/base/atomic_file.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/text_file.hpp"

namespace ddpbench {

void write_result_file(const std::filesystem::path& path, const ResultDocument& document) {
  write_file_atomically(path, nlohmann::json(document).dump(2) + "\n");
}

ResultDocument read_result_file(const std::filesystem::path& path) {
  return parse_result_document(read_text_file(path, "cannot read result file"), path.string());
}

bool is_result_document(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() && j.contains("schema") && j.at("schema") == kResultSchema;
}

bool is_row_result_document(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() && j.contains("schema") && j.at("schema") == kResultSchema && !j.contains("sweep");
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
