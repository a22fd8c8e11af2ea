#pragma once
// What bad input a call refuses: the message of the InputError it throws.
#include <functional>
#include <string>

#include "harness/base/input_error.hpp"

namespace ddpbench::testing {

/// The message of the InputError `call` throws; "" where it throws none.
inline std::string input_error_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace ddpbench::testing
