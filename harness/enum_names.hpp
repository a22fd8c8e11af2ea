#pragma once
// Two-way tables between enums and their kebab-case names, used by the CLI, the JSON and
// the Markdown alike, so a value is spelled the same everywhere.
#include <span>
#include <string>
#include <string_view>

#include "harness/input_error.hpp"

namespace ddpbench {

template <class Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

template <class Enum>
std::string_view enum_name(std::span<const EnumName<Enum>> table, Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <class Enum>
std::string enum_choices(std::span<const EnumName<Enum>> table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += '|';
    out += entry.name;
  }
  return out;
}

/// Throws InputError naming `what` (a flag or key) and the accepted spellings.
template <class Enum>
Enum enum_from_name(std::span<const EnumName<Enum>> table, std::string_view text,
                    std::string_view what) {
  for (const auto& entry : table) {
    if (entry.name == text) return entry.value;
  }
  throw InputError(std::string(what) + ": unknown value '" + std::string(text) + "' (expected " +
                   enum_choices(table) + ")");
}

}  // namespace ddpbench
