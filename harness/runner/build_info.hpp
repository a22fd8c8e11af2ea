#pragma once
// What this binary was built from; the definition is generated at build time.
namespace ddpbench {

struct BuildInfo {
  const char* version;
  const char* git_revision;  // short hash, "-dirty-" and a hash of the uncommitted changes where any, or "unknown"
  const char* build_type;
  const char* compiler;
};

const BuildInfo& build_info();

}  // namespace ddpbench
