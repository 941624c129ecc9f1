// Local copies of the few C++ runtime and C library symbols that this machine's GCC 12
// headers reach for and that the wheels' manylinux_2_28 floor (glibc 2.28, libstdc++ of
// GCC 8: GLIBCXX_3.4.25) does not promise. torch itself is built so (gcc-toolset's
// libstdc++_nonshared.a supplies the same symbols statically); without these, the
// accelerator would load only where the C++ runtime is newer than torch needs.
// The link's version script (build_tools/compile/accelerator.py) keeps every definition
// here local to the library, so nothing in the process binds to them but the accelerator.
//
// Each one has the semantics of the newer runtime's own:
// - __libc_single_threaded (glibc 2.32) lets libstdc++'s inline reference counting skip
//   atomics in a single-threaded process; 0, "maybe several threads", always takes the
//   atomic path, which is correct everywhere.
// - std::__throw_bad_array_new_length (GLIBCXX_3.4.29) throws what its name says.
// - basic_ostringstream's default constructor (GLIBCXX_3.4.26) and basic_stringbuf's str()
//   const& and str() && (GLIBCXX_3.4.29; torch 2.14's headers call the latter): the
//   header's own definitions, instantiated here instead of taken from the shared runtime.

#include <new>
#include <sstream>
#include <string>

extern "C" {
char __libc_single_threaded = 0;
}

namespace std {
[[noreturn]] void __throw_bad_array_new_length() { throw std::bad_array_new_length(); }
}  // namespace std

template std::__cxx11::basic_ostringstream<char>::basic_ostringstream();
// The ref-qualified str() exists in C++20 only, which every build of this file compiles
// (build_tools/compile/accelerator.py, wheel and dev mode); compiled as C++17, the file
// still builds, and the unqualified str() const it would call is GLIBCXX_3.4's.
#if __cplusplus > 201703L && _GLIBCXX_USE_CXX11_ABI
template std::__cxx11::basic_string<char> std::__cxx11::basic_stringbuf<char>::str() const&;
template std::__cxx11::basic_string<char> std::__cxx11::basic_stringbuf<char>::str() &&;
#endif
