#pragma once
// "Did you mean": the known name closest to a mistyped one, for error messages.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddpbench {

/// Levenshtein distance between two names.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// " (did you mean 'key'?)" for the closest of `known` within a third of the name's length
/// (at least 2 edits), else "".
inline std::string did_you_mean(std::string_view name, std::span<const std::string> known) {
  const std::string* best = nullptr;
  std::size_t best_distance = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const auto& candidate : known) {
    const std::size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = &candidate;
    }
  }
  return best != nullptr ? " (did you mean '" + *best + "'?)" : "";
}

}  // namespace ddpbench
