// The accelerator's one file on torch's Python headers (full CPython API): it reads the
// type and the tensor field of a torch.Tensor object, whose offsets (PyObject_HEAD, then
// torch's own fields) are the same in every CPython from 3.10 on, so the library built
// with it serves all of them, as the limited API of autograd_accel.cpp does.
#include "python_tensor.h"

#include <torch/csrc/autograd/python_variable.h>

namespace wheelops::accel {

bool plain_tensor(PyObject* obj) {
  return THPVariable_CheckExact(obj);
}

const at::Tensor& unpack_tensor(PyObject* obj) {
  return THPVariable_Unpack(obj);
}

PyObject* wrap_tensor(at::Tensor t) {
  return THPVariable_Wrap(std::move(t));
}

}  // namespace wheelops::accel
