#pragma once
// `ddpbench project`: a result file's DDP rows projected to another cluster
// (reports/projection.hpp). No LibTorch.
#include "harness/control/cli.hpp"
#include "reports/projection.hpp"

namespace ddpbench {

/// The command line's choices as the projection's options (the calibration file read).
ProjectionOptions projection_options(const ProjectCommand& command);

/// Writes `stem`.json ({source, options, calibration, `key`: `body`}) and `stem`.md (`markdown`)
/// into the command's --out-dir, each atomically.
void write_projection_outputs(const ProjectCommand& command, const ProjectionOptions& options, const std::string& stem,
                              const char* key, nlohmann::json body, const std::string& markdown);

/// Prints the projection as Markdown (and writes projection.json and projection.md into
/// --out-dir); 0, 1 when a row's model is more than kModelTolerance off its own measured step
/// (unless --force), or InputError (2) for an unreadable file or one without DDP rows.
int project_command(const ProjectCommand& command);

}  // namespace ddpbench
