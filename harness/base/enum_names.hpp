#pragma once
// Names: two-way tables between enums and their kebab-case spellings, used by the CLI, the
// JSON and the Markdown alike, and lookups of registry entries by name.
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "harness/base/input_error.hpp"

namespace ddpbench {

template <class Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

// Enum is deduced from `value` alone, so a table may be passed as a plain array.
template <class Enum>
std::string_view enum_name(std::span<const EnumName<std::type_identity_t<Enum>>> table, Enum value) {
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

/// The entry of a registry (anything with a `name`) called `name`; throws InputError
/// naming `flag` and the known names otherwise.
template <class Entry>
const Entry& find_named(std::span<const Entry> registry, std::string_view name, std::string_view flag,
                        std::string_view what) {
  std::string known;
  for (const auto& entry : registry) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : "|") + entry.name;
  }
  throw InputError(std::string(flag) + ": unknown " + std::string(what) + " '" + std::string(name) + "' (expected " +
                   known + ")");
}

}  // namespace ddpbench
