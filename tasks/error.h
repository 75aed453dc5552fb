// The one exception type: its message names what is wrong and, where there is one, the file,
// tensor, field or task involved. The CLI prints it and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace spindle {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace spindle
