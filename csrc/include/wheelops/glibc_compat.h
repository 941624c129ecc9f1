// Force-included into every translation unit (build_tools/compile/flags.py) so that the
// libraries need nothing newer than glibc 2.28 (manylinux_2_28) even when built
// on a newer system, such as a developer's machine or CI outside the images.
//
// A newer glibc gives a few functions new symbol versions (exp in 2.29, dlopen
// and dlsym in 2.34) and links against those by default; the older versions
// are still exported and behave the same for us, so bind to them. auditwheel
// checks the result: anything missed here makes `nox -s repair` fail.
#pragma once

#if defined(__linux__)
#include <features.h>
#endif

#if defined(__GLIBC__) && !defined(__CUDA_ARCH__)

#if defined(__x86_64__)
#define WHEELOPS_GLIBC_BASE_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define WHEELOPS_GLIBC_BASE_VERSION "GLIBC_2.17"
#endif

#ifdef WHEELOPS_GLIBC_BASE_VERSION
__asm__(".symver exp,exp@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver log,log@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver pow,pow@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver dlopen,dlopen@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver dlsym,dlsym@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver dlclose,dlclose@" WHEELOPS_GLIBC_BASE_VERSION);
__asm__(".symver dlerror,dlerror@" WHEELOPS_GLIBC_BASE_VERSION);
#endif

// libstdc++'s headers (GCC >= 11) read glibc 2.32's __libc_single_threaded to
// skip atomics in shared_ptr and friends. A private copy that always says
// "several threads" keeps the atomics (always correct, as before glibc 2.32)
// and drops the dependency.
#ifdef __cplusplus
extern "C" {
#endif
__attribute__((weak, visibility("hidden"))) char __libc_single_threaded = 0;
#ifdef __cplusplus
}
#endif

#endif
