#pragma once
// Long texts kept out of table cells: a cell carries a short mark ("skipped [1]") and the text
// is the numbered note under the table, so that a reason never makes a row many lines tall.
#include <string>
#include <vector>

namespace ddpbench {

class TableNotes {
 public:
  /// The note's number for `text`, in order of first use; the same text keeps its number.
  std::size_t number(const std::string& text);
  /// "[n]" for `text`.
  std::string mark(const std::string& text) { return "[" + std::to_string(number(text)) + "]"; }
  /// The notes in number order (the first is note 1).
  [[nodiscard]] const std::vector<std::string>& texts() const { return texts_; }
  [[nodiscard]] bool empty() const { return texts_.empty(); }

 private:
  std::vector<std::string> texts_;
};

}  // namespace ddpbench
