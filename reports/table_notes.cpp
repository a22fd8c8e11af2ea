#include "reports/table_notes.hpp"

#include <algorithm>

namespace ddpbench {

std::size_t TableNotes::number(const std::string& text) {
  const auto it = std::find(texts_.begin(), texts_.end(), text);
  if (it != texts_.end()) return static_cast<std::size_t>(it - texts_.begin()) + 1;
  texts_.push_back(text);
  return texts_.size();
}

}  // namespace ddpbench
