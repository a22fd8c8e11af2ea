#pragma once
// Reading and writing result files (schema ddpbench/result/v1).
#include <filesystem>
#include <string>
#include <string_view>

#include "reports/run_result.hpp"

namespace ddpbench {

/// Pretty-printed JSON, written atomically.
void write_result_file(const std::filesystem::path& path, const ResultDocument& document);

/// Throws InputError naming the file and what is wrong (missing, not JSON, wrong schema,
/// a field missing or of the wrong type).
ResultDocument read_result_file(const std::filesystem::path& path);
/// The same from a result file's text; `source` names it in errors.
ResultDocument parse_result_document(std::string_view text, const std::string& source);
/// Whether `text` is a result document (a JSON object of schema ddpbench/result/v1), as an
/// output the output rule lets a command replace (harness/base/output_rule.hpp); not a proof.
bool is_result_document(std::string_view text);

/// A result file of one row's run (`run --out`, a sweep's row file): one with no sweep section. A
/// run replaces only such a file, never a sweep's results.json or a stored baseline.
bool is_row_result_document(std::string_view text);

}  // namespace ddpbench
