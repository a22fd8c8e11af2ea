// libFuzzer target: the result-file reader and its proof that `compare` trusts, on arbitrary
// text, then compare itself on what it accepted (the file against itself, every metric). Bad input must
// be an InputError, never a crash, another exception or a sanitizer finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "harness/base/input_error.hpp"
#include "reports/compare.hpp"
#include "reports/result_file.hpp"
#include "reports/result_proof.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ddpbench::ProvenResults document =
        ddpbench::prove_results(ddpbench::parse_result_document(text, "fuzz.json"), "fuzz.json");
    ddpbench::CompareOptions options;
    const ddpbench::Comparison comparison = ddpbench::compare_results(document, document, options);
    (void)ddpbench::markdown_comparison(comparison, options);
  } catch (const ddpbench::InputError&) {
  }
  return 0;
}
