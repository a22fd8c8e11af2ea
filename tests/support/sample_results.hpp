#pragma once
// Result documents with fixed numbers, for the reporters' golden files and compare.
#include <algorithm>

#include "reports/run_result.hpp"

namespace ddpbench::testing {

/// Rank 0's step records of `r` as a run writes them: one a step it trained, each a whole batch
/// a rank but the last of its images (`images_trained` over its ranks); the first two slower (the
/// warm-up), the rest `steady_s`. Call again after changing a row's steps or images.
inline void record_steps(RunResult& r, double steady_s = 0.065) {
  r.step_records.clear();
  const int64_t world = std::max<int64_t>(1, r.world_size);
  const int64_t per_step = std::max<int64_t>(1, r.global_batch / world);
  int64_t left = r.images_trained / world;
  const int64_t per_epoch = std::max<int64_t>(1, r.steps_per_epoch);
  for (int64_t i = 0; i < r.steps; ++i) {
    const int64_t images = i + 1 == r.steps ? left : std::min(per_step, left);
    left -= images;
    // Each repetition's first step its own, as two runs never time alike.
    const double first_s = 0.9 + 1e-3 * static_cast<double>(r.repetition);
    r.step_records.push_back({i / per_epoch, i % per_epoch, images, i == 0 ? first_s : i == 1 ? 0.12 : steady_s, 2.3, {}});
  }
}

inline RunResult sample_run(const std::string& name, const std::string& mode, int64_t world, double train_time_s,
                            double images_per_s, int64_t repetition = 0) {
  RunResult r;
  r.name = name;
  r.mode = mode;
  r.repetition = repetition;
  r.strategy = world > 1 ? "ddp" : "single";
  r.world_size = world;
  r.device = "cuda:0";
  r.dataset = "cifar10";
  r.train_time_s = train_time_s;
  r.total_time_s = train_time_s + 40;
  r.images_per_s = images_per_s;
  r.steady_images_per_s = images_per_s * 1.1;
  r.step_time_s = {0.064, 0.07, 0.2};
  // 40 ms of backward, of which the allreduce hid 15 ms (2 ranks and more); 3 ms left exposed.
  r.mean_phase_s = {0.004, 0.018, 0.040, world > 1 ? 0.003 : 0.0, 0.002, world > 1 ? 0.018 : 0.0};
  r.warmup_steps = 2;
  // A round 1 GFLOP per image: achieved FLOP/s is then 1e9 x the steady images/s.
  r.train_flops_per_image = 1.0e9;
  r.achieved_flops_per_s = r.train_flops_per_image * r.steady_images_per_s;
  r.test_accuracy = 0.27;
  r.eval_images = 10000;
  r.final_loss = 1.9;
  // Faithful rows keep 256 a process; controlled ones split one global batch of 256.
  const int64_t per_process = mode == "controlled" ? 256 / world : 256;
  r.epochs = 1;
  r.global_batch = per_process * world;
  const int64_t shard = (50000 + world - 1) / world;  // DistributedSampler's, padded
  r.steps = (shard + per_process - 1) / per_process;
  r.steps_per_epoch = r.steps;
  r.images_trained = 50000;
  r.peak_memory_bytes = 5LL << 30;
  r.config = {{"strategy", r.strategy}, {"batch-size", per_process}, {"nproc", world}, {"loader", mode == "controlled" ? "device" : "host"},
              {"num-classes", mode == "controlled" ? 10 : 1000}, {"sync-bn", true},
              {"amp", world > 1 ? "fp16" : "off"}, {"tf32", false}, {"warmup-steps", r.warmup_steps}};
  record_steps(r);
  return r;
}

inline ResultDocument sample_sweep_document() {
  ResultDocument doc;
  doc.tool_version = "0.1.0";
  doc.created_utc = "2026-12-01T12:00:00Z";
  doc.argv = {"ddpbench", "sweep"};
  doc.environment.host = "gpu-host";
  doc.environment.cpu_model = "AMD EPYC";
  doc.environment.cpu_cores = 64;
  doc.environment.gpus = {{"NVIDIA A100-SXM4-40GB", 40LL << 30, "8.0"}};
  doc.environment.driver_version = "570.86.10";
  doc.environment.cuda_runtime_version = "13.0";
  doc.environment.cudnn_version = "9.19.0";
  doc.environment.nccl_version = "2.28.9";
  doc.environment.libtorch_version = "2.11.0";
  doc.environment.git_revision = "abc123def456";
  // Every planned repetition (the sweep's repeat, 2) of every row: the controlled ones alike.
  doc.runs = {sample_run("single", "faithful", 1, 13.0, 3846.0, 0),   sample_run("single", "faithful", 1, 13.4, 3731.0, 1),
              sample_run("ddp-2gpu", "faithful", 2, 9.7, 5154.0, 0), sample_run("ddp-2gpu", "faithful", 2, 9.9, 5050.0, 1),
              sample_run("single", "controlled", 1, 11.0, 4545.0, 0), sample_run("single", "controlled", 1, 11.0, 4545.0, 1),
              sample_run("ddp-2gpu", "controlled", 2, 6.0, 8333.0, 0), sample_run("ddp-2gpu", "controlled", 2, 6.0, 8333.0, 1)};
  for (const int64_t repetition : {0, 1}) {
    RunResult skipped;
    skipped.name = "ddp-4gpu";
    skipped.mode = "faithful";
    skipped.repetition = repetition;
    skipped.strategy = "ddp";
    skipped.world_size = 4;
    skipped.status = RunStatus::skipped;
    skipped.reason = "needs 4 CUDA devices, 2 visible";
    doc.runs.push_back(skipped);
  }
  SweepInfo sweep;
  sweep.preset = "tutorial";
  sweep.baseline_row = "single";
  sweep.repeat = 2;
  sweep.rows = {{"single", "faithful", 13.2, 1, ""},    {"ddp-2gpu", "faithful", 9.8, 2, ""},
                {"ddp-4gpu", "faithful", 6.1, 4, ""},  {"single", "controlled", 13.2, 1, ""},
                {"ddp-2gpu", "controlled", 9.8, 2, ""}};
  doc.sweep = sweep;
  return doc;
}

// A sweep file's two rows under the CPU preset, three repetitions each: `single`, and `ddp-2`, a
// DDP row of 2 ranks whose file gives no "devices", whose second repetition was killed (SIGKILL, as
// the OOM killer does); every row cut by the preset, its changes recorded row by row, its test
// accuracy over the first 4 of 1,024 images.
inline ResultDocument cpu_sweep_document() {
  ResultDocument doc;
  doc.tool_version = "0.1.0";
  doc.created_utc = "2026-12-07T12:00:00Z";
  doc.argv = {"ddpbench", "sweep", "--file", "my-sweep.json", "--table", "cpu", "--repeat", "3"};
  doc.environment.host = "cpu-host";
  doc.environment.cpu_model = "Intel(R) Xeon(R) Processor";
  doc.environment.cpu_cores = 2;
  doc.environment.libtorch_version = "2.11.0";
  doc.environment.git_revision = "abc123def456";
  const auto run = [](const std::string& name, int64_t world, int64_t repetition, double train_time_s) {
    RunResult r = sample_run(name, "faithful", world, train_time_s, 128.0 * world / train_time_s * 4, repetition);
    r.device = "cpu";
    r.dataset = "synthetic";
    r.epoch_cut = true;
    r.steps = 4;
    r.steps_per_epoch = 8192 / world / 32;
    r.global_batch = 32 * world;
    r.images_trained = 4 * r.global_batch;
    r.warmup_steps = 1;
    r.eval_cut = true;
    r.eval_images = 2 * 32 * world;  // 2 batches of 32 a rank
    r.config = {{"strategy", r.strategy}, {"batch-size", 32},          {"nproc", world},
                {"device", "cpu"},        {"num-classes", 10},         {"loader", "host"},
                {"max-steps", 4},         {"max-eval-batches", 2},     {"synthetic-test-images", 1024},
                {"warmup-steps", 1},      {"amp", "off"},              {"sync-bn", true}};
    record_steps(r);
    return r;
  };
  doc.runs = {run("single", 1, 0, 2.0), run("ddp-2", 2, 0, 2.5), run("single", 1, 1, 2.1),
              run("ddp-2", 2, 1, kNotMeasured), run("single", 1, 2, 2.2), run("ddp-2", 2, 2, 2.7)};
  RunResult& killed = doc.runs[3];
  killed.status = RunStatus::failed;
  killed.reason = "rank 1: killed by signal 9 (SIGKILL); its stderr ended: (nothing)";
  SweepInfo sweep;
  sweep.preset = "my-sweep.json";
  sweep.note = "No GPU on this machine: the CPU preset. The rows run as Gloo ranks and CPU replicas sharing 2 cores, "
               "cut short (what the preset changed in each row is listed under \"the CPU preset's changes\"): times "
               "compare rows with each other, not with the tutorial's GPUs.";
  sweep.baseline_row = "single";
  sweep.repeat = 3;
  const std::vector<std::string> changes = {"batch-size 256 → 32", "device cuda → cpu", "max-eval-batches unset → 2",
                                            "max-steps 100 → 4",   "warmup-steps 5 → 1"};
  sweep.rows = {{"single", "faithful", 13.2, 1, "", "", "", changes}, {"ddp-2", "faithful", kNotMeasured, 1, "", "", "", changes}};
  doc.sweep = sweep;
  return doc;
}

// The work of a row of 10 steps of 64 images, so that a row built by hand proves as done
// (reports/result_proof.hpp): 640 training images over its ranks in batches of 64 / ranks, as its
// configuration (where it does not say otherwise) and its loader's count say.
inline RunResult with_ten_steps(RunResult r) {
  r.epochs = 1;
  r.steps = 10;
  r.steps_per_epoch = 10;
  r.warmup_steps = 2;
  r.global_batch = 64;
  r.images_trained = 640;
  r.train_images = 640;
  if (!r.config.is_object()) r.config = nlohmann::json::object();
  if (!r.config.contains("batch-size")) r.config["batch-size"] = 64 / std::max<int64_t>(1, r.world_size);
  if (!r.config.contains("dataset")) r.config["dataset"] = "synthetic";
  if (!r.config.contains("synthetic-train-images")) r.config["synthetic-train-images"] = 640;
  r.step_time_s = {r.train_time_s / 10, r.train_time_s / 10, r.train_time_s / 10};
  return r;
}

// A sweep of one row, `ddp`, and its PyTorch twin `ddp.torch`, repetition i of each with
// the given steady images/s (and epoch times 1000 / that).
inline ResultDocument twin_document(const std::vector<double>& ours, const std::vector<double>& theirs) {
  ResultDocument doc;
  SweepInfo sweep;
  sweep.baseline_row = "ddp";
  sweep.rows = {{"ddp", "faithful", kNotMeasured, 2, ""}, {"ddp.torch", "faithful", kNotMeasured, 2, "ddp"}};
  sweep.repeat = std::max<int64_t>(1, static_cast<int64_t>(ours.size()));
  doc.sweep = sweep;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    for (const auto& [name, images] : {std::pair{"ddp", ours[i]}, std::pair{"ddp.torch", theirs[i]}}) {
      RunResult r;
      r.name = name;
      r.mode = "faithful";
      r.repetition = static_cast<int64_t>(i);
      r.steady_images_per_s = images;
      r.train_time_s = 1000 / images;
      r.images_per_s = images;
      doc.runs.push_back(with_ten_steps(r));
    }
  }
  return doc;
}

}  // namespace ddpbench::testing
