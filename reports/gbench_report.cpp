#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "reports/reporter.hpp"

namespace ddpbench {
namespace {

using nlohmann::json;

// Google Benchmark's JSON: one "iteration" entry per repetition of each row, named
// mode/row, real_time the epoch's train time in seconds and items_per_second its images/s;
// and one mode/row/step entry per repetition with the median step time. compare.py reads
// real_time and cpu_time (we measure wall time only, so both carry it) and groups entries
// by name, so repetitions feed its U test.
class GbenchReporter final : public Reporter {
  [[nodiscard]] std::string do_render(const ResultDocument& doc, const std::vector<RowSummary>&) const override {
    const Environment& e = doc.environment;
    json out;
    out["context"] = {{"date", doc.created_utc},
                      {"host_name", e.host},
                      {"executable", doc.argv.empty() ? "ddpbench" : doc.argv.front()},
                      {"num_cpus", e.cpu_cores},
                      {"mhz_per_cpu", 0},
                      {"cpu_scaling_enabled", false},
                      {"caches", json::array()},
                      {"load_avg", json::array()},
                      {"library_build_type", e.build_type == "Release" ? "release" : "debug"},
                      {"ddpbench_git_revision", e.git_revision},
                      {"libtorch_version", e.libtorch_version},
                      {"gpu", e.gpus.empty() ? "" : e.gpus.front().name}};
    json benchmarks = json::array();
    std::vector<std::string> families;
    for (const auto& r : doc.runs) {
      if (r.status != RunStatus::ok) continue;
      const std::string base = (r.mode.empty() ? "" : r.mode + "/") + r.name;
      auto add = [&](const std::string& name, double seconds, double items_per_second) {
        auto family = std::find(families.begin(), families.end(), name);
        if (family == families.end()) family = families.insert(families.end(), name);
        json b = {{"name", name},
                  {"family_index", family - families.begin()},
                  {"per_family_instance_index", 0},
                  {"run_name", name},
                  {"run_type", "iteration"},
                  {"repetitions", doc.sweep ? doc.sweep->repeat : 1},
                  {"repetition_index", r.repetition},
                  {"threads", 1},
                  {"iterations", r.steps},
                  {"real_time", seconds},
                  {"cpu_time", seconds},
                  {"time_unit", "s"}};
        if (std::isfinite(items_per_second)) b["items_per_second"] = items_per_second;
        benchmarks.push_back(std::move(b));
      };
      if (std::isfinite(r.train_time_s)) add(base, r.train_time_s, r.images_per_s);
      if (std::isfinite(r.step_time_s.p50)) add(base + "/step", r.step_time_s.p50, r.steady_images_per_s);
    }
    out["benchmarks"] = std::move(benchmarks);
    return out.dump(2) + "\n";
  }
  [[nodiscard]] std::string do_file_name() const override { return "results.gbench.json"; }
};

}  // namespace

std::unique_ptr<Reporter> make_gbench_reporter() { return std::make_unique<GbenchReporter>(); }

}  // namespace ddpbench
