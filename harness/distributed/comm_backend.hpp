#pragma once
// The c10d backends a run can use, by name. LibTorch-free, so the command line can name them.
#include <string_view>

#include "harness/base/enum_names.hpp"

namespace ddpbench {

enum class CommBackend { auto_select, gloo, nccl };

inline constexpr EnumName<CommBackend> kCommBackendNames[] = {
    {CommBackend::auto_select, "auto"},
    {CommBackend::gloo, "gloo"},
    {CommBackend::nccl, "nccl"},
};

}  // namespace ddpbench
