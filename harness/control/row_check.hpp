#pragma once
// The one check of a row's whole configuration before any work, in every path: `run` (the
// process a user starts, each rank it starts with --nproc, each rank of torchrun, srun or mpirun)
// and `sweep` (each planned row, --dry-run too). Each rule is a function of its own; check_row
// runs them all and throws InputError (exit 2) naming the flag and what is wrong. No LibTorch.
#include <cstdint>
#include <string>

#include "harness/control/run_config.hpp"

namespace ddpbench {

/// How a row starts and what of the machine it starts on the check needs.
struct RowStart {
  bool distributed = false;  // the strategy runs one process per rank (ddp, torch-ddp)
  int64_t world_size = 1;    // the ranks the row runs as: its --nproc here, or its launcher's world
  std::string world_source = "--nproc";  // who made the world, for errors: "torchrun (WORLD_SIZE=2)"
  int64_t local_ranks = 1;   // of those, the processes on this machine
  int64_t memory_bytes = 0;  // this machine's memory; 0: unknown (no check)
  bool check_data = true;    // the data lie where this process looks (not on another node of srun's)
};

/// A LibTorch process's own memory is at least this (a rank of a tiny row held 180 MiB), beside
/// the dataset it holds: what --nproc ranks on one machine need at the least.
inline constexpr int64_t kRankMemoryFloorBytes = int64_t{128} << 20;
/// The widest classifier head's inputs of the models (ResNet-50's 2,048 features, and its bias):
/// a head of --num-classes outputs holds this many parameters an output.
inline constexpr int64_t kWidestHeadParametersPerClass = 2048 + 1;
/// Of each parameter a rank holds four fp32 copies at the least: the weight, its gradient, SGD's
/// momentum and the reducer's bucket.
inline constexpr int64_t kHeadBytesPerParameter = 4 * 4;

/// This machine's memory (/proc/meminfo's MemTotal); 0 where it does not say.
int64_t machine_memory_bytes();

/// Every rule below, in order. Throws InputError naming the flag.
void check_row(const RunConfig& config, const RowStart& start);

// The rules, each tested on its own.

/// A one-process strategy in a world of more than one process (torchrun --nproc_per_node 2
/// ddpbench run --strategy single: every process would train the whole row and write --out), and
/// --nproc for it.
void check_world(const RunConfig& config, const RowStart& start);
/// --backend nccl is for CUDA devices: on --device cpu it cannot run.
void check_backend(const RunConfig& config);
/// The model's head against the data: its --num-classes outputs hold every label (0-9).
void check_classes(const RunConfig& config);
/// DataParallel's replicas (--devices given as a list): the batch divides over them.
void check_replicas(const RunConfig& config);
/// The steps the row runs after every preset and cut (CIFAR-10's 50,000 images, or the synthetic
/// set's, over the ranks in batches): a fault, slowdown or trace aimed at a rank or step the row
/// does not have tests nothing; and --trace-steps needs --out to write beside.
void check_steps_and_ranks(const RunConfig& config, const RowStart& start);
/// --trace-steps within the row's `row_steps` steps, leaving a steady step untraced (traced steps
/// leave the steady figures), or the row has none past warm-up to leave. Also the runner's, once
/// the row's data are read.
void check_trace_steps(const RunConfig& config, int64_t row_steps);
/// The data present and whole: CIFAR-10's files where --dataset cifar10 (or auto finds any),
/// --init-from a file.
void check_inputs_present(const RunConfig& config, const RowStart& start);
/// The ranks on this machine fit in its memory: each holds its dataset, its classifier head's
/// copies and a LibTorch process's own.
void check_memory(const RunConfig& config, const RowStart& start);

/// The training set's images a row reads: the synthetic set's size, or CIFAR-10's 50,000 where it
/// reads CIFAR-10 (--dataset cifar10, or auto finding it under --data-dir).
int64_t training_images(const RunConfig& config);
/// The optimizer steps a row runs over `world` ranks: its epochs of (images over the ranks, padded
/// as DistributedSampler pads them, in batches), each cut by --max-steps.
int64_t row_steps(const RunConfig& config, int64_t world);

}  // namespace ddpbench
