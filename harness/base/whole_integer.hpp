#pragma once
// Text that must be one integer and nothing else (flags, list items, environment variables).
#include <charconv>
#include <optional>
#include <string_view>

namespace ddpbench {

/// `text` as an Int when all of it is one decimal integer in Int's range; nullopt when it is
/// empty, has anything else in it, or does not fit.
template <class Int>
std::optional<Int> whole_integer(std::string_view text) {
  Int value{};
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace ddpbench
