// Load the wheelops libraries that find_package(wheelops) chose for this program's Torch,
// so that the wheelops:: ops are registered with the dispatcher before a model calls them.
// Call it once, after LibTorch is loaded (link the program with it), before loading a model.
//
// WHEELOPS_LIBRARY_DIR, if set when the program runs, is where the same files are looked
// for instead (a deployment that copied them next to the program).
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef WHEELOPS_LIBRARIES
#error "WHEELOPS_LIBRARIES is not defined: link the target wheelops::wheelops from find_package(wheelops)"
#endif

namespace wheelops {

// The paths to load, in order: the CPU library (every op schema) first.
inline std::vector<std::string> library_paths() {
  std::vector<std::string> paths;
  std::stringstream chosen(WHEELOPS_LIBRARIES);
  const char* relocated = std::getenv("WHEELOPS_LIBRARY_DIR");
  for (std::string path; std::getline(chosen, path, ':');) {
    if (relocated != nullptr && *relocated != '\0') {
      path = std::string(relocated) + "/" + path.substr(path.find_last_of('/') + 1);
    }
    paths.push_back(path);
  }
  return paths;
}

// RTLD_GLOBAL is not needed by the ops, which register through the dispatcher; RTLD_NOW
// makes a missing symbol fail here, with the loader's words, and not at the first call.
inline void load_libraries() {
  for (const std::string& path : library_paths()) {
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
      const char* why = dlerror();
      throw std::runtime_error(
          "wheelops: cannot load " + path + ": " + (why ? why : "unknown loader error") +
          ". It was chosen by find_package(wheelops) for the Torch this program was built "
          "against; run the program with that LibTorch, or reconfigure and rebuild it. "
          "`python -m wheelops` explains the install.");
    }
  }
}

}  // namespace wheelops
