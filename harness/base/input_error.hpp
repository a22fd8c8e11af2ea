#pragma once
// Bad input from the user (a flag, a file, the environment): the process prints the message,
// writes no result file and exits with code 2. Thrown where the input is read.
#include <stdexcept>

namespace ddpbench {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ddpbench
