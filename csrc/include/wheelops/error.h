// WHEELOPS_CHECK(cond, parts...): throw std::runtime_error(parts...) unless cond.
//
// Like STD_TORCH_CHECK, but the message is only what the user needs (torch
// turns it into a Python RuntimeError), without the C++ function and file.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace wheelops::detail {

template <typename... Parts>
[[noreturn]] void throw_error(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw std::runtime_error(out.str());
}

} // namespace wheelops::detail

#define WHEELOPS_CHECK(cond, ...)                   \
  do {                                              \
    if (!(cond)) {                                  \
      ::wheelops::detail::throw_error(__VA_ARGS__); \
    }                                               \
  } while (0)
