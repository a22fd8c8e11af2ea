#pragma once
// The one reader every verdict reads through (compare in both modes, project, advise, sweep
// --resume, ci-bench --update-baseline by way of compare): a result document proven once, so
// that no verdict decides for itself what it trusts. What it proves, each a rule of its own in
// result_proof.cpp: names that fit a line and a cell; each repetition once, numbered within the
// sweep's repeat; a row's repetitions of one configuration; every figure a time or a rate a run
// measures; and, where a row says ok, every figure a verdict may use measured and the work
// done the work its configuration and data ask (configured_work; a row that did not is failed,
// with the reason). Configurations are completed through the option
// table's defaults, so an option absent on one side at its default is the same setting.
// A ProvenResults is made only by prove_results. No LibTorch.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/run_result.hpp"

namespace ddpbench {

/// The reader's proof of one row's configuration (prove_results below); `ran`: the row trained
/// (ok, failed or interrupted), so its options held together, not only each its own value.
using ConfigProof = std::function<void(const nlohmann::json& config, bool ran)>;

class ProvenResults {
 public:
  [[nodiscard]] const ResultDocument& document() const { return document_; }
  /// How messages name the file: "the baseline", "the candidate's file".
  [[nodiscard]] const std::string& side() const { return side_; }
  /// The option table's defaults this file is read with: its writer's, and the reader's for
  /// options its writer did not know.
  [[nodiscard]] const nlohmann::json& option_defaults() const { return option_defaults_; }
  /// Rows the proof failed ("ddp-2 (faithful) repetition 1: trained 98 of 196 configured
  /// steps"): each is in the document as failed, with the reason.
  [[nodiscard]] const std::vector<std::string>& failed_by_proof() const { return failed_by_proof_; }

 private:
  friend ProvenResults prove_results(ResultDocument document, std::string side, const nlohmann::json& reader_defaults,
                                     const ConfigProof& prove_config);
  ResultDocument document_;
  std::string side_;
  nlohmann::json option_defaults_ = nlohmann::json::object();
  std::vector<std::string> failed_by_proof_;
};

/// Proves `document` (see the top of this file) or throws InputError naming `side`, the row and
/// what is wrong. `reader_defaults` (run_config_to_json(RunConfig{}) of the reading binary)
/// completes configurations where the file does not say its own writer's defaults.
/// `prove_config`, where given, is the reader's proof of each row's configuration (completed
/// with the defaults): it throws InputError for a value or combination no run of the reader's
/// option table could have had.
ProvenResults prove_results(ResultDocument document, std::string side,
                            const nlohmann::json& reader_defaults = nlohmann::json::object(),
                            const ConfigProof& prove_config = {});

/// The rows the proofs of both files failed, each "SIDE: ROW repetition N: reason", the
/// baseline's first: what a verdict lists beside its table.
std::vector<std::string> failed_by_proofs(const ProvenResults& baseline, const ProvenResults& current);

/// read_result_file, then prove_results; `side` names the file ("the baseline 'a.json'").
ProvenResults read_proven_results(const std::filesystem::path& path, const std::string& side,
                                  const nlohmann::json& reader_defaults = nlohmann::json::object(),
                                  const ConfigProof& prove_config = {});

/// The work a row's configuration and data ask of it, never read from the row's own figures: the
/// training set's images (the count its loader recorded; in files from before, the synthetic
/// set's configured size or CIFAR-10's 50,000), each rank's shard as DistributedSampler pads it
/// (ceil(images / ranks)), a full epoch's steps (ceil(shard / batch-size)), cut by max-steps, times
/// the epochs, and the images those steps train (each rank's whole shard in a full epoch).
struct ConfiguredWork {
  std::string dataset;        // what it trained on: its configuration's, or under "auto" what it found
  std::string dataset_asked;  // "synthetic" or "cifar10" where its configuration names one, else empty
  int64_t train_images = 0;
  int64_t steps_per_epoch = 0;  // a full epoch
  int64_t steps = 0;            // every epoch, each cut by max-steps
  int64_t images = 0;           // all ranks, every epoch
  std::string data;             // how the work was reckoned, for a reason ("4096 synthetic images over 2 ranks ...")
  std::string unknown;          // why the file does not say enough to reckon it; empty where it does
};
/// `run`'s configured work, from its own settings, else `writer_defaults` (its writer's table).
ConfiguredWork configured_work(const RunResult& run, const nlohmann::json& writer_defaults = nlohmann::json::object());

/// How two rows' settings differ, option by option ("amp \"bf16\" vs \"off\""); empty when the
/// same. An option one side does not have is that side's default, by its file's table.
std::string settings_difference(const RunResult& a, const ProvenResults& a_file, const RunResult& b,
                                const ProvenResults& b_file);

/// The same of two configurations and the option defaults each is read with.
std::string settings_difference_of(const nlohmann::json& a, const nlohmann::json& a_defaults, const nlohmann::json& b,
                                   const nlohmann::json& b_defaults);

}  // namespace ddpbench
