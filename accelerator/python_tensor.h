// Tensors to and from Python for the autograd accelerator, kept apart from it: the only
// code that reads torch's Python objects directly (src/wheelops/ops/_accel.py says why the
// accelerator is one library for every CPython).
#pragma once

#include <ATen/core/Tensor.h>

struct _object;
using PyObject = _object;

namespace wheelops::accel {

// A torch.Tensor or nn.Parameter, no subclass (a subclass may override __torch_function__).
bool plain_tensor(PyObject* obj);
// The tensor of a plain_tensor object.
const at::Tensor& unpack_tensor(PyObject* obj);
// A new reference to `t` as a Python tensor, or nullptr with a Python error set.
PyObject* wrap_tensor(at::Tensor t);

}  // namespace wheelops::accel
