#pragma once
// `ddpbench project`: a result file's DDP rows projected to another cluster
// (reports/projection.hpp). No LibTorch.
#include "harness/control/cli.hpp"
#include "reports/projection.hpp"

namespace ddpbench {

/// The command line's choices as the projection's options (the calibration file read).
ProjectionOptions projection_options(const ProjectCommand& command);

/// What `project` or `advise` writes into --out-dir: `stem`.json ({source, options, calibration,
/// `key`: the body}) and `stem`.md, whose first line is `marker` (an HTML comment, hidden where
/// the page is rendered: what marks the file as the command's own, where a heading a person could
/// write would not), then `heading` and the result file's name.
struct ProjectionFiles {
  const char* stem;
  const char* key;
  const char* heading;
  const char* marker;
};
inline constexpr ProjectionFiles kProjectionFiles{
    "projection", "projections", "# ddpbench projection of ",
    "<!-- ddpbench project --out-dir: replaced by the next project that writes here -->\n"};
inline constexpr ProjectionFiles kAdviceFiles{"advice", "advice", "# ddpbench advice for ",
                                              "<!-- ddpbench advise --out-dir: replaced by the next advise that writes "
                                              "here -->\n"};

/// The output rule (harness/base/output_rule.hpp) for those files, before any work: RESULTS and
/// --calibrate are read; each file replaces only an earlier one of its kind. Throws InputError.
void check_projection_files(const ProjectCommand& command, const ProjectionFiles& files);

/// `files.heading` and the result file's name: the Markdown's first line.
std::string projection_heading(const ProjectCommand& command, const ProjectionFiles& files);

/// Writes both files into the command's --out-dir, each atomically, once it is found writable
/// (InputError, nothing made, where it is not): called after every input is read.
void write_projection_outputs(const ProjectCommand& command, const ProjectionOptions& options,
                              const ProjectionFiles& files, nlohmann::json body, const std::string& markdown);

/// Prints the projection as Markdown (and writes projection.json and projection.md into
/// --out-dir); 0, 1 when a row's model is more than kModelTolerance off its own measured step
/// (unless --force), or InputError (2) for an unreadable file or one without DDP rows.
int project_command(const ProjectCommand& command);

}  // namespace ddpbench
