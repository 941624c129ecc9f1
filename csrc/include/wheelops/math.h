// The float and double overloads of the C math functions the kernels use, for CPU and
// CUDA alike: one name per function, so a kernel templated on its compute type calls
// expf for float and exp for double without spelling either.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cmath>
#include <math.h>

namespace wheelops::math {

C10_HOST_DEVICE inline float erf_(float x) { return ::erff(x); }
C10_HOST_DEVICE inline double erf_(double x) { return ::erf(x); }
C10_HOST_DEVICE inline float exp_(float x) { return ::expf(x); }
C10_HOST_DEVICE inline double exp_(double x) { return ::exp(x); }
C10_HOST_DEVICE inline float expm1_(float x) { return ::expm1f(x); }
C10_HOST_DEVICE inline double expm1_(double x) { return ::expm1(x); }
C10_HOST_DEVICE inline float tanh_(float x) { return ::tanhf(x); }
C10_HOST_DEVICE inline double tanh_(double x) { return ::tanh(x); }

} // namespace wheelops::math
