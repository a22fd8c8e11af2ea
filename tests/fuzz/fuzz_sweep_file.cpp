// libFuzzer target: the sweep-file parser on arbitrary text. Bad input must be an InputError
// (exit 2 with one line), never a crash, another exception or a sanitizer finding; a file it
// accepts yields rows with safe names and a baseline among them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "harness/base/input_error.hpp"
#include "harness/control/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ddpbench::SweepDefinition sweep = ddpbench::parse_sweep_file(text, "fuzz.json");
    if (sweep.rows.empty()) std::abort();
    const bool baseline_known = std::any_of(sweep.rows.begin(), sweep.rows.end(),
                                            [&](const auto& row) { return row.name == sweep.baseline_row; });
    if (!baseline_known) std::abort();
    for (const auto& row : sweep.rows) {
      if (row.name.empty() || row.name.front() == '.' || row.name.find('/') != std::string::npos) std::abort();
    }
  } catch (const ddpbench::InputError&) {
  }
  return 0;
}
