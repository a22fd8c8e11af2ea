#include "harness/launch/slurm_hostlist.hpp"

#include <string>

#include "harness/base/input_error.hpp"
#include "harness/base/whole_integer.hpp"

namespace ddpbench {
namespace {

struct Fault {
  std::string_view variable;
  std::string_view list;
  [[noreturn]] void operator()(const std::string& what) const {
    throw InputError("environment variable " + std::string(variable) + "='" + std::string(list) +
                     "' is not a SLURM host list: " + what);
  }
};

// "01-04,07" -> 01 02 03 04 07, each as wide as written.
std::vector<std::string> expand_ranges(std::string_view ranges, const Fault& fault, std::size_t max_hosts) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= ranges.size()) {
    const std::size_t comma = ranges.find(',', start);
    const std::string_view item = ranges.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::size_t dash = item.find('-');
    const std::string_view low_text = item.substr(0, dash);
    const std::string_view high_text = dash == std::string_view::npos ? low_text : item.substr(dash + 1);
    const auto low = whole_integer<int64_t>(std::string(low_text));
    const auto high = whole_integer<int64_t>(std::string(high_text));
    if (low_text.empty() || high_text.empty() || !low || !high || *low < 0 || *high < 0 ||
        low_text.find_first_not_of("0123456789") != std::string_view::npos ||
        high_text.find_first_not_of("0123456789") != std::string_view::npos) {
      fault("'[" + std::string(ranges) + "]' holds '" + std::string(item) + "', not a number or a range of numbers");
    }
    if (*high < *low) fault("the range '" + std::string(item) + "' runs backwards");
    if (static_cast<std::size_t>(*high - *low) >= max_hosts) {
      fault("more than " + std::to_string(max_hosts) + " hosts");
    }
    // SLURM pads to the width of the range's first number ("01-10": 01 ... 10).
    const std::size_t width = low_text.size();
    for (int64_t n = *low; n <= *high; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One name with any number of bracket groups: "rack[1-2]-n[1-3]" -> rack1-n1 ... rack2-n3.
void expand_name(std::string_view name, const Fault& fault, std::size_t max_hosts, std::vector<std::string>& out) {
  std::vector<std::string> partial = {""};
  std::size_t at = 0;
  while (at < name.size()) {
    const std::size_t open = name.find('[', at);
    const std::string_view literal = name.substr(at, open == std::string_view::npos ? std::string_view::npos : open - at);
    if (literal.find(']') != std::string_view::npos) fault("a ']' without its '['");
    if (open == std::string_view::npos && at > 0) {
      fault("'" + std::string(name) + "' has text after its last ']', which SLURM does not allow");
    }
    for (auto& p : partial) p += literal;
    if (open == std::string_view::npos) break;
    const std::size_t close = name.find(']', open);
    if (close == std::string_view::npos) fault("a '[' without its ']'");
    const std::string_view inner = name.substr(open + 1, close - open - 1);
    if (inner.find('[') != std::string_view::npos) fault("brackets inside brackets");
    const auto values = expand_ranges(inner, fault, max_hosts);
    if (partial.size() * values.size() > max_hosts) fault("more than " + std::to_string(max_hosts) + " hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * values.size());
    for (const auto& p : partial) {
      for (const auto& v : values) next.push_back(p + v);
    }
    partial = std::move(next);
    at = close + 1;
  }
  if (out.size() + partial.size() > max_hosts) fault("more than " + std::to_string(max_hosts) + " hosts");
  out.insert(out.end(), partial.begin(), partial.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view variable, std::size_t max_hosts) {
  const Fault fault{variable, list};
  if (list.find_first_of(" \t\n\r") != std::string_view::npos) fault("it holds white space");
  std::vector<std::string> hosts;
  // Names are separated by the commas outside brackets.
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0) fault("a ']' without its '['");
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      const std::string_view name = list.substr(start, i - start);
      if (name.empty()) fault(list.empty() ? "it is empty" : "an empty name");
      expand_name(name, fault, max_hosts, hosts);
      start = i + 1;
    }
  }
  if (depth != 0) fault("a '[' without its ']'");
  return hosts;
}

std::vector<int64_t> expand_tasks_per_node(std::string_view layout, std::string_view variable) {
  const auto fault = [&](const std::string& what) {
    throw InputError("environment variable " + std::string(variable) + "='" + std::string(layout) +
                     "' is not a SLURM task layout: " + what);
  };
  std::vector<int64_t> tasks;
  std::size_t start = 0;
  while (start <= layout.size()) {
    const std::size_t comma = layout.find(',', start);
    const std::string item(layout.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    // "2(x3)": 2 tasks on each of 3 nodes.
    const std::size_t paren = item.find("(x");
    const auto count = whole_integer<int64_t>(item.substr(0, paren));
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') fault("'" + item + "' opens '(x' without closing it");
      const auto parsed = whole_integer<int64_t>(item.substr(paren + 2, item.size() - paren - 3));
      if (!parsed || *parsed < 1) fault("'" + item + "' repeats a count other than a positive number of times");
      repeat = *parsed;
    }
    if (!count || *count < 1) fault("'" + item + "' is not a positive number of tasks");
    if (repeat > 65536 || static_cast<int64_t>(tasks.size()) + repeat > 65536) fault("more than 65536 nodes");
    tasks.insert(tasks.end(), static_cast<std::size_t>(repeat), *count);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return tasks;
}

}  // namespace ddpbench
