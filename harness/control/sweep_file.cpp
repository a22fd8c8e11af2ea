#include "harness/control/sweep_file.hpp"

#include <algorithm>
#include <initializer_list>

#include "harness/base/closest_name.hpp"
#include "harness/base/input_error.hpp"
#include "harness/base/text_file.hpp"
#include "harness/control/run_options.hpp"

namespace ddpbench {

using nlohmann::json;

bool sweep_sets_itself(std::string_view option_key) { return option_key == "out" || option_key == "name"; }

std::string sweep_row_where(const std::string& origin, const std::string& row) { return origin + ", row '" + row + "'"; }

SweepDefinition tutorial_sweep() {
  SweepDefinition d;
  d.name = "tutorial";
  d.baseline_row = "single";
  d.rows = {
      {"single", 1, 13.2, {{"strategy", "single"}}, json::object()},
      // The published DataParallel row used a global batch of 1024 and 20 workers.
      {"dp-4gpu", 4, 19.1, {{"strategy", "dp"}, {"devices", "0,1,2,3"}},
       {{"faithful", {{"batch-size", 1024}, {"workers", 20}}}}},
      {"ddp-2gpu", 2, 9.8, {{"strategy", "ddp"}, {"nproc", 2}}, json::object()},
      {"ddp-4gpu", 4, 6.1, {{"strategy", "ddp"}, {"nproc", 4}}, json::object()},
      {"ddp-4gpu-amp", 4, 6.5, {{"strategy", "ddp"}, {"nproc", 4}, {"amp", "fp16"}}, json::object()},
  };
  return d;
}

namespace {

// A sweep file is checked in full before anything runs: every key known, every value of its
// type, row names unique, row options valid exactly as on the command line.
void expect_known_keys(const json& object, std::initializer_list<const char*> keys, const std::string& where) {
  const std::vector<std::string> known(keys.begin(), keys.end());
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw InputError(where + ": unknown key '" + key + "'" + did_you_mean(key, known));
    }
  }
}

const json& field(const json& object, const char* key, json::value_t type, const char* type_name,
                  const std::string& where) {
  const json& value = object.at(key);
  const bool number_ok = type == json::value_t::number_float && value.is_number();
  const bool integer_ok = type == json::value_t::number_integer && value.is_number_integer();
  if (value.type() != type && !number_ok && !integer_ok) {
    throw InputError(where + ": '" + key + "' must be " + type_name + ", not " + value.type_name() + " " + value.dump());
  }
  return value;
}

json object_field(const json& object, const char* key, const std::string& where) {
  return object.contains(key) ? field(object, key, json::value_t::object, "an object", where) : json::object();
}

// Row options, checked as the command line checks them.
void check_options(const json& options, const std::string& where) {
  RunConfig scratch;
  apply_run_config_json(scratch, options, where);
  for (const auto& [key, value] : options.items()) {
    if (sweep_sets_itself(key)) throw InputError(where + ": '" + key + "': " + kSweepSetsItself);
  }
}

int64_t positive_integer_field(const json& object, const char* key, const std::string& where) {
  const auto value = field(object, key, json::value_t::number_integer, "an integer", where).get<int64_t>();
  if (value <= 0) throw InputError(where + ": '" + key + "' must be positive");
  return value;
}

// A row's name is its result file's name under --out-dir: nothing that could leave it.
std::string row_name(const json& r, const std::string& row_where) {
  if (!r.contains("name")) throw InputError(row_where + ": no 'name'");
  const auto name = field(r, "name", json::value_t::string, "a string", row_where).get<std::string>();
  if (name.empty()) throw InputError(row_where + ": empty 'name'");
  const bool safe = name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                        std::string::npos &&
                    name.front() != '.';
  if (!safe) {
    throw InputError(row_where + ": name '" + name +
                     "' must be letters, digits, '.', '_' or '-', not starting with '.' (it names a result file)");
  }
  // Every trace file beside the rows ends in .trace.json: a row named so would be written over one.
  if (name.ends_with(".trace")) {
    throw InputError(row_where + ": name '" + name + "' ends in '.trace': its result file '" + name +
                     ".json' would be another row's trace (ROW.rankN.trace.json, ROW.merged.trace.json)");
  }
  return name;
}

// One entry of "rows"; `earlier` are the rows before it, whose names it must not repeat.
SweepRowSpec parse_row(const json& r, const std::vector<SweepRowSpec>& earlier, const std::string& where) {
  const std::string row_where = where + ", row " + std::to_string(earlier.size() + 1);
  if (!r.is_object()) throw InputError(row_where + ": expected an object, got " + std::string(r.type_name()));
  expect_known_keys(r, {"name", "devices", "nodes", "tutorial_seconds", "no_twin", "options", "faithful", "controlled"},
                    row_where);
  SweepRowSpec row;
  row.name = row_name(r, row_where);
  const std::string named = sweep_row_where(where, row.name);
  for (const auto& other : earlier) {
    if (other.name == row.name) throw InputError(named + ": a second row of that name");
  }
  if (r.contains("devices")) row.devices = positive_integer_field(r, "devices", named);
  if (r.contains("nodes")) row.nodes = positive_integer_field(r, "nodes", named);
  if (r.contains("no_twin")) {
    row.no_twin = field(r, "no_twin", json::value_t::string, "a string (why the row has no PyTorch twin)", named)
                      .get<std::string>();
    if (row.no_twin.empty()) throw InputError(named + ": 'no_twin' must say why");
  }
  if (r.contains("tutorial_seconds")) {
    row.tutorial_seconds = field(r, "tutorial_seconds", json::value_t::number_float, "a number", named).get<double>();
  }
  row.options = object_field(r, "options", named);
  check_options(row.options, named);
  for (const char* mode : {"faithful", "controlled"}) {
    if (!r.contains(mode)) continue;
    row.mode_options[mode] = object_field(r, mode, named);
    check_options(row.mode_options[mode], named + " (" + mode + ")");
  }
  return row;
}

}  // namespace

SweepDefinition read_sweep_file(const std::filesystem::path& path) {
  return parse_sweep_file(read_text_file(path, "--file: cannot read sweep file"), path.string());
}

SweepDefinition parse_sweep_file(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError("--file '" + source + "' is not valid JSON: " + e.what());
  }
  const std::string where = "sweep file '" + source + "'";
  if (!j.is_object()) throw InputError(where + ": expected a JSON object, got " + std::string(j.type_name()));
  expect_known_keys(j, {"name", "baseline", "controlled_global_batch", "defaults", "rows"}, where);
  SweepDefinition d;
  d.name = j.contains("name") ? field(j, "name", json::value_t::string, "a string", where).get<std::string>()
                              : source;
  d.defaults = object_field(j, "defaults", where);
  check_options(d.defaults, where + ", defaults");
  if (j.contains("controlled_global_batch")) {
    d.controlled_global_batch = positive_integer_field(j, "controlled_global_batch", where);
  }
  if (!j.contains("rows")) throw InputError(where + ": no 'rows'");
  for (const auto& r : field(j, "rows", json::value_t::array, "an array", where)) d.rows.push_back(parse_row(r, d.rows, where));
  if (d.rows.empty()) throw InputError(where + ": no rows");
  d.baseline_row = d.rows.front().name;
  if (j.contains("baseline")) {
    d.baseline_row = field(j, "baseline", json::value_t::string, "a string", where).get<std::string>();
    const bool known = std::any_of(d.rows.begin(), d.rows.end(), [&](const SweepRowSpec& r) { return r.name == d.baseline_row; });
    if (!known) throw InputError(where + ": 'baseline' names no row ('" + d.baseline_row + "')");
  }
  return d;
}

}  // namespace ddpbench
