#pragma once
// `ddpbench advise`: the DDP settings to use at other rank counts, from a result file's DDP rows
// (reports/tuning_advice.hpp). No LibTorch.
#include "harness/control/cli.hpp"

namespace ddpbench {

/// Prints the advice as Markdown, every setting's projected step included (and writes
/// advice.json and advice.md into --out-dir); 0, 1 when a row's model is more than
/// kModelTolerance off its own measured step (unless --force), or InputError (2) for an
/// unreadable file or one without DDP rows.
int advise_command(const AdviseCommand& command);

}  // namespace ddpbench
