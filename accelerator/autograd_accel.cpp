// The optional autograd accelerator (DESIGN.md 13): the eager path of the ops that a
// training loop calls most, in C++ — argument unpacking, the choice between the
// differentiable and the inference op, and the autograd nodes — for one exact torch.
//
// Outside the stable ABI on purpose: torch's C++ autograd and Python bindings change
// between minors, so this file is built once per torch version and loaded only for that
// exact version (src/wheelops/ops/_accel.py). Where it is absent or refused, the stable-ABI
// layer (src/wheelops/ops/_autograd_fast.py) serves the same ops with the same formulas.
//
// The entries never check the ops' arguments: the kernels do (once, in one place), as on
// the Python path; where a kernel refuses, the op's Python path takes the call again and
// says what is wrong.

// The CPython limited API of 3.10: one build serves every CPython (python_tensor.cpp
// holds the one exception).
#define Py_LIMITED_API 0x030A0000
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "python_tensor.h"

namespace {

using at::Tensor;
using torch::autograd::variable_list;
using OptionalTensor = std::optional<Tensor>;
using wheelops::accel::plain_tensor;
using wheelops::accel::unpack_tensor;

// --- the ops, looked up once -------------------------------------------------------------

template <typename Signature>
c10::TypedOperatorHandle<Signature> lookup(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

#define WHEELOPS_OP(fn, name, ...)                          \
  const c10::TypedOperatorHandle<__VA_ARGS__>& fn() {       \
    static const auto handle = lookup<__VA_ARGS__>(name);   \
    return handle;                                          \
  }

using Tensors2 = std::tuple<Tensor, Tensor>;
using Tensors3 = std::tuple<Tensor, Tensor, Tensor>;

WHEELOPS_OP(add_op, "wheelops::add", Tensor(const Tensor&, const Tensor&))
WHEELOPS_OP(relu_scale_op, "wheelops::relu_scale", Tensor(const Tensor&, double))
WHEELOPS_OP(relu_scale_with_mask_op, "wheelops::relu_scale_with_mask",
            Tensors2(const Tensor&, double))
WHEELOPS_OP(relu_scale_backward_op, "wheelops::relu_scale_backward",
            Tensor(const Tensor&, const Tensor&, double))
WHEELOPS_OP(softmax_op, "wheelops::softmax", Tensor(const Tensor&, int64_t))
WHEELOPS_OP(softmax_backward_op, "wheelops::softmax_backward",
            Tensor(const Tensor&, const Tensor&, int64_t))
WHEELOPS_OP(layer_norm_op, "wheelops::layer_norm",
            Tensors3(const Tensor&, const OptionalTensor&, const OptionalTensor&, double))
WHEELOPS_OP(layer_norm_inference_op, "wheelops::layer_norm_inference",
            Tensor(const Tensor&, const OptionalTensor&, const OptionalTensor&, double))
WHEELOPS_OP(layer_norm_backward_op, "wheelops::layer_norm_backward",
            std::tuple<OptionalTensor, OptionalTensor, OptionalTensor>(
                const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const OptionalTensor&, bool, bool, bool))
WHEELOPS_OP(rms_norm_op, "wheelops::rms_norm",
            Tensors2(const Tensor&, const OptionalTensor&, double))
WHEELOPS_OP(rms_norm_inference_op, "wheelops::rms_norm_inference",
            Tensor(const Tensor&, const OptionalTensor&, double))
WHEELOPS_OP(rms_norm_backward_op, "wheelops::rms_norm_backward",
            std::tuple<OptionalTensor, OptionalTensor>(const Tensor&, const Tensor&, const Tensor&,
                                                       const OptionalTensor&, bool, bool))
WHEELOPS_OP(bias_gelu_op, "wheelops::bias_gelu",
            Tensor(const Tensor&, const Tensor&, c10::string_view))
WHEELOPS_OP(bias_gelu_backward_op, "wheelops::bias_gelu_backward",
            Tensors2(const Tensor&, const Tensor&, const Tensor&, c10::string_view))
WHEELOPS_OP(silu_and_mul_op, "wheelops::silu_and_mul", Tensor(const Tensor&))
WHEELOPS_OP(silu_and_mul_backward_op, "wheelops::silu_and_mul_backward",
            Tensor(const Tensor&, const Tensor&))
WHEELOPS_OP(fused_linear_gelu_op, "wheelops::fused_linear_gelu",
            Tensors2(const Tensor&, const Tensor&, const OptionalTensor&, c10::string_view, bool,
                     bool))
WHEELOPS_OP(fused_linear_gelu_backward_op, "wheelops::fused_linear_gelu_backward",
            std::tuple<OptionalTensor, OptionalTensor, OptionalTensor>(
                const Tensor&, const Tensor&, const Tensor&, const Tensor&, c10::string_view,
                bool, bool, bool, bool))

#undef WHEELOPS_OP

OptionalTensor as_optional(const Tensor& t) {
  return t.defined() ? OptionalTensor(t) : std::nullopt;
}

Tensor value_or_undefined(OptionalTensor&& t) {
  return t.has_value() ? std::move(*t) : Tensor();
}

// A backward op runs straight below autograd unless a graph of the backward is being
// built (create_graph): then its own Autograd kernel (Python) records it or refuses.
template <typename Call>
auto backward_call(Call&& call) {
  if (at::GradMode::is_enabled()) {
    return call();
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return call();
}

// A forward op, straight below autograd: its entry attaches the node itself.
template <typename Call>
auto below_autograd(Call&& call) {
  at::AutoDispatchBelowADInplaceOrView below;
  return call();
}

// --- the autograd nodes: the same formulas as the ops' Python modules -------------------
//
// Plain torch::autograd::Node subclasses, as torch's generated derivatives are, rather than
// torch::autograd::Function: its apply (context, saved-data map, output wrapping) cost
// about a microsecond of host time per call more. Each entry computes the outputs below
// autograd, then attaches the node to the one differentiable output (attach), saving what
// the backward reads as SavedVariables (saved_tensors_hooks apply; a version check on use).
// A node's edges are its tensor inputs in order, an absent optional one an invalid edge.

using torch::autograd::Node;
using torch::autograd::SavedVariable;

// torch's nodes are owned by std::shared_ptr up to 2.12, by c10::intrusive_ptr from 2.13.
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 13
template <typename T>
auto make_node() {
  return c10::make_intrusive<T>();
}
#else
template <typename T>
auto make_node() {
  return std::shared_ptr<T>(new T(), torch::autograd::deleteNode);
}
#endif

// `out`'s grad_fn: a new NodeT with edges to `inputs`.
template <typename NodeT, typename... Inputs>
auto attach(const Tensor& out, const Inputs&... inputs) {
  auto node = make_node<NodeT>();
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  torch::autograd::set_history(out, node);
  return node;
}

// The incoming gradient, or zeros where none flowed in (what a Function materializes).
Tensor materialized(const Node& node, const Tensor& grad) {
  return grad.defined() ? grad : node.input_metadata(0).zeros_like();
}

struct AddBackward : Node {
  std::string name() const override { return "WheelopsAddBackward"; }
  variable_list apply(variable_list&& grads) override {
    Tensor grad = materialized(*this, grads[0]);
    return {should_compute_output(0) ? grad : Tensor(), should_compute_output(1) ? grad : Tensor()};
  }
};

struct ReluScaleBackward : Node {
  SavedVariable mask_;
  double alpha_ = 0;
  std::string name() const override { return "WheelopsReluScaleBackward"; }
  void release_variables() override { mask_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined() || !should_compute_output(0)) {
      return {Tensor()};
    }
    auto mask = mask_.unpack(getptr());
    return {backward_call([&] { return relu_scale_backward_op().call(grads[0], mask, alpha_); })};
  }
};

struct SoftmaxBackward : Node {
  SavedVariable out_;
  int64_t dim_ = 0;
  std::string name() const override { return "WheelopsSoftmaxBackward"; }
  void release_variables() override { out_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    if (!should_compute_output(0)) {
      return {Tensor()};
    }
    auto out = out_.unpack(getptr());
    Tensor grad = materialized(*this, grads[0]);
    return {backward_call([&] { return softmax_backward_op().call(grad, out, dim_); })};
  }
};

struct LayerNormBackward : Node {
  SavedVariable x_, weight_, mean_, rstd_;
  bool has_bias_ = false;
  std::string name() const override { return "WheelopsLayerNormBackward"; }
  void release_variables() override {
    x_.reset_data();
    weight_.reset_data();
    mean_.reset_data();
    rstd_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) {
      return variable_list(3);
    }
    auto weight = weight_.unpack(getptr());
    bool x_grad = should_compute_output(0);
    bool weight_grad = weight.defined() && should_compute_output(1);
    bool bias_grad = has_bias_ && should_compute_output(2);
    auto [gx, gw, gb] = backward_call([&] {
      return layer_norm_backward_op().call(grads[0], x_.unpack(getptr()), mean_.unpack(getptr()),
                                           rstd_.unpack(getptr()), as_optional(weight), x_grad,
                                           weight_grad, bias_grad);
    });
    return {value_or_undefined(std::move(gx)), value_or_undefined(std::move(gw)),
            value_or_undefined(std::move(gb))};
  }
};

struct RmsNormBackward : Node {
  SavedVariable x_, weight_, rstd_;
  std::string name() const override { return "WheelopsRmsNormBackward"; }
  void release_variables() override {
    x_.reset_data();
    weight_.reset_data();
    rstd_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) {
      return variable_list(2);
    }
    auto weight = weight_.unpack(getptr());
    auto [gx, gw] = backward_call([&] {
      return rms_norm_backward_op().call(grads[0], x_.unpack(getptr()), rstd_.unpack(getptr()),
                                         as_optional(weight), should_compute_output(0),
                                         weight.defined() && should_compute_output(1));
    });
    return {value_or_undefined(std::move(gx)), value_or_undefined(std::move(gw))};
  }
};

struct BiasGeluBackward : Node {
  SavedVariable x_, bias_;
  std::string approximate_;
  std::string name() const override { return "WheelopsBiasGeluBackward"; }
  void release_variables() override {
    x_.reset_data();
    bias_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    Tensor grad = materialized(*this, grads[0]);
    auto [gx, gb] = backward_call([&] {
      return bias_gelu_backward_op().call(grad, x_.unpack(getptr()), bias_.unpack(getptr()),
                                          approximate_);
    });
    return {gx, gb};
  }
};

struct SiluAndMulBackward : Node {
  SavedVariable x_;
  std::string name() const override { return "WheelopsSiluAndMulBackward"; }
  void release_variables() override { x_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    Tensor grad = materialized(*this, grads[0]);
    auto x = x_.unpack(getptr());
    return {backward_call([&] { return silu_and_mul_backward_op().call(grad, x); })};
  }
};

struct FusedLinearGeluBackward : Node {
  SavedVariable input_, weight_, bias_, pre_;
  std::string approximate_;
  bool allow_tf32_ = false;
  std::string name() const override { return "WheelopsFusedLinearGeluBackward"; }
  void release_variables() override {
    input_.reset_data();
    weight_.reset_data();
    bias_.reset_data();
    pre_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) {
      return variable_list(3);
    }
    bool has_bias = bias_.unpack(getptr()).defined();
    auto [gi, gw, gb] = backward_call([&] {
      return fused_linear_gelu_backward_op().call(
          grads[0], input_.unpack(getptr()), weight_.unpack(getptr()), pre_.unpack(getptr()),
          approximate_, allow_tf32_, should_compute_output(0), should_compute_output(1),
          has_bias && should_compute_output(2));
    });
    return {value_or_undefined(std::move(gi)), value_or_undefined(std::move(gw)),
            value_or_undefined(std::move(gb))};
  }
};

// --- the Python entries ---------------------------------------------------------------
//
// Each op's entry is bound to its Python path (src/wheelops/ops/<op>.py) as `self`, and hands
// the call to it wherever the fast path declines: keyword arguments, an argument of a type
// other than the plain one the op takes, a torch.func transform or forward-mode AD level,
// a __torch_function__ mode or subclass, a GPU the guard has not yet checked, or any error
// (the Python path runs the call again and explains the error, naming the argument).

// Whether the Python layer must take this call: a torch.func transform or a forward-mode
// AD level is active (the C++ nodes have no JVP; the Python layer's Functions do), or a
// __torch_function__ mode.
bool transforms_active() {
  // A torch.func transform includes its front-mode key while any of its levels is active.
  return c10::impl::tls_is_dispatch_key_included(
             c10::DispatchKey::FuncTorchDynamicLayerFrontMode) ||
         torch::autograd::ForwardADLevel::try_get_by_idx(0) != nullptr ||
         at::impl::torch_function_mode_enabled();
}

bool optional_tensor(PyObject* obj) {
  return obj == Py_None || plain_tensor(obj);
}

Tensor unpack(PyObject* obj) {
  return obj == Py_None ? Tensor() : unpack_tensor(obj);
}

// The GPUs on which the Python path's first call passed the guard's checks
// (src/wheelops/ops/_checks.py runnable: kernels for this GPU, the CUDA library loaded). Its
// verdict is per device and final, so one passed call clears the device for good.
std::atomic<uint64_t> cleared_devices{0};

// Whether `t` may run here; else `*device` is the GPU that the Python path must check.
bool cleared(const Tensor& t, int* device) {
  if (!t.is_cuda()) {
    return true;
  }
  int index = t.get_device();
  if (index >= 0 && index < 64 && (cleared_devices.load(std::memory_order_relaxed) >> index & 1)) {
    return true;
  }
  *device = index;
  return false;
}

bool wants_gradient(std::initializer_list<const Tensor*> tensors) {
  if (!at::GradMode::is_enabled()) {
    return false;
  }
  for (const Tensor* t : tensors) {
    if (t->defined() && t->requires_grad()) {
      return true;
    }
  }
  return false;
}

PyObject* wrap(Tensor t) {
  return wheelops::accel::wrap_tensor(std::move(t));
}

PyObject* wrap_pair(Tensor a, Tensor b) {
  PyObject* first = wrap(std::move(a));
  if (first == nullptr) {
    return nullptr;
  }
  PyObject* second = wrap(std::move(b));
  if (second == nullptr) {
    Py_DECREF(first);
    return nullptr;
  }
  PyObject* pair = PyTuple_Pack(2, first, second);
  Py_DECREF(first);
  Py_DECREF(second);
  return pair;
}

// A Python float or int (not bool) -> double; false for anything else, or an int beyond
// float64 (the Python path says which argument).
bool as_double(PyObject* obj, double* out) {
  if (PyFloat_CheckExact(obj)) {
    *out = PyFloat_AsDouble(obj);
    return true;
  }
  if (PyLong_CheckExact(obj)) {
    *out = PyLong_AsDouble(obj);
    return !(*out == -1.0 && PyErr_Occurred());
  }
  return false;
}

// eps as the norms take it: a non-negative number (the Python path refuses NaN and < 0).
bool as_eps(PyObject* obj, double* out) {
  return as_double(obj, out) && *out >= 0;
}

bool as_int(PyObject* obj, int64_t* out) {
  if (!PyLong_CheckExact(obj)) {
    return false;
  }
  int overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
  return overflow == 0 && !(*out == -1 && PyErr_Occurred());
}

bool as_string(PyObject* obj, std::string* out) {
  if (!PyUnicode_CheckExact(obj)) {
    return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj, &size);
  if (data == nullptr) {
    return false;
  }
  out->assign(data, static_cast<size_t>(size));
  return true;
}

// python_path(*args, **kwargs) from a vectorcall's arguments (PyObject_Vectorcall is not
// in the limited API of 3.10; this is the path of the calls the accelerator declines).
PyObject* call(PyObject* python_path, PyObject* const* args, Py_ssize_t nargs,
               PyObject* kwnames) {
  PyObject* positional = PyTuple_New(nargs);
  if (positional == nullptr) {
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SetItem(positional, i, args[i]);
  }
  PyObject* keywords = nullptr;
  if (kwnames != nullptr) {
    keywords = PyDict_New();
    for (Py_ssize_t i = 0; keywords != nullptr && i < PyTuple_Size(kwnames); ++i) {
      if (PyDict_SetItem(keywords, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0) {
        Py_CLEAR(keywords);
      }
    }
    if (keywords == nullptr) {
      Py_DECREF(positional);
      return nullptr;
    }
  }
  PyObject* result = PyObject_Call(python_path, positional, keywords);
  Py_DECREF(positional);
  Py_XDECREF(keywords);
  return result;
}

// Each fast path returns the result, or nullptr to decline (any Python error it left is
// cleared); `device`: a GPU to clear once the Python path has run on it.
using FastPath = PyObject* (*)(PyObject* const* args, Py_ssize_t nargs, int* device);

template <FastPath fast>
PyObject* entry(PyObject* python_path, PyObject* const* args, Py_ssize_t nargs,
                PyObject* kwnames) {
  int device = -1;
  if (kwnames == nullptr && !transforms_active()) {
    PyObject* result = nullptr;
    try {
      result = fast(args, nargs, &device);
    } catch (...) {
      result = nullptr;  // the Python path runs the call again and says what is wrong
    }
    if (result != nullptr) {
      return result;
    }
    PyErr_Clear();
  }
  PyObject* result = call(python_path, args, nargs, kwnames);
  if (result != nullptr && device >= 0 && device < 64) {
    cleared_devices.fetch_or(uint64_t{1} << device, std::memory_order_relaxed);
  }
  return result;
}

PyObject* add_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  if (nargs != 2 || !plain_tensor(args[0]) || !plain_tensor(args[1])) {
    return nullptr;
  }
  const Tensor& a = unpack_tensor(args[0]);
  const Tensor& b = unpack_tensor(args[1]);
  if (!cleared(a, device)) {
    return nullptr;
  }
  if (wants_gradient({&a, &b})) {
    Tensor out = below_autograd([&] { return add_op().call(a, b); });
    attach<AddBackward>(out, a, b);
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(add_op().call(a, b));
}

PyObject* relu_scale_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  double alpha = 0;
  if (nargs != 2 || !plain_tensor(args[0]) || !as_double(args[1], &alpha)) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x})) {
    auto [out, mask] = below_autograd([&] { return relu_scale_with_mask_op().call(x, alpha); });
    auto node = attach<ReluScaleBackward>(out, x);
    node->mask_ = SavedVariable(mask, false);
    node->alpha_ = alpha;
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(relu_scale_op().call(x, alpha));
}

PyObject* softmax_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  int64_t dim = 0;
  if (nargs != 2 || !plain_tensor(args[0]) || !as_int(args[1], &dim)) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x})) {
    Tensor out = below_autograd([&] { return softmax_op().call(x, dim); });
    auto node = attach<SoftmaxBackward>(out, x);
    node->out_ = SavedVariable(out, true);
    node->dim_ = dim;
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(softmax_op().call(x, dim));
}

PyObject* layer_norm_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  double eps = 0;
  if (nargs != 4 || !plain_tensor(args[0]) || !optional_tensor(args[1]) ||
      !optional_tensor(args[2]) || !as_eps(args[3], &eps)) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  Tensor weight = unpack(args[1]);
  Tensor bias = unpack(args[2]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x, &weight, &bias})) {
    auto [out, mean, rstd] = below_autograd(
        [&] { return layer_norm_op().call(x, as_optional(weight), as_optional(bias), eps); });
    auto node = attach<LayerNormBackward>(out, x, weight, bias);
    node->x_ = SavedVariable(x, false);
    node->weight_ = SavedVariable(weight, false);
    node->mean_ = SavedVariable(mean, false);
    node->rstd_ = SavedVariable(rstd, false);
    node->has_bias_ = bias.defined();
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(layer_norm_inference_op().call(x, as_optional(weight), as_optional(bias), eps));
}

PyObject* rms_norm_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  if (nargs != 3 || !plain_tensor(args[0]) || !optional_tensor(args[1])) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  double eps = 0;
  if (args[2] == Py_None) {
    // F.rms_norm's eps=None (src/wheelops/ops/rms_norm.py default_eps): the epsilon of the
    // float32 or float64 compute dtype.
    eps = x.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                         : std::numeric_limits<float>::epsilon();
  } else if (!as_eps(args[2], &eps)) {
    return nullptr;
  }
  Tensor weight = unpack(args[1]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x, &weight})) {
    auto [out, rstd] =
        below_autograd([&] { return rms_norm_op().call(x, as_optional(weight), eps); });
    auto node = attach<RmsNormBackward>(out, x, weight);
    node->x_ = SavedVariable(x, false);
    node->weight_ = SavedVariable(weight, false);
    node->rstd_ = SavedVariable(rstd, false);
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(rms_norm_inference_op().call(x, as_optional(weight), eps));
}

PyObject* bias_gelu_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  std::string approximate;
  if (nargs != 3 || !plain_tensor(args[0]) || !plain_tensor(args[1]) ||
      !as_string(args[2], &approximate)) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  const Tensor& bias = unpack_tensor(args[1]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x, &bias})) {
    Tensor out = below_autograd([&] { return bias_gelu_op().call(x, bias, approximate); });
    auto node = attach<BiasGeluBackward>(out, x, bias);
    node->x_ = SavedVariable(x, false);
    node->bias_ = SavedVariable(bias, false);
    node->approximate_ = std::move(approximate);
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(bias_gelu_op().call(x, bias, approximate));
}

PyObject* silu_and_mul_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  if (nargs != 1 || !plain_tensor(args[0])) {
    return nullptr;
  }
  const Tensor& x = unpack_tensor(args[0]);
  if (!cleared(x, device)) {
    return nullptr;
  }
  if (wants_gradient({&x})) {
    Tensor out = below_autograd([&] { return silu_and_mul_op().call(x); });
    auto node = attach<SiluAndMulBackward>(out, x);
    node->x_ = SavedVariable(x, false);
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(silu_and_mul_op().call(x));
}

// wheelops.fused_linear_gelu(input, weight, bias, approximate) -> output.
PyObject* fused_linear_gelu_fast(PyObject* const* args, Py_ssize_t nargs, int* device) {
  std::string approximate;
  if (nargs != 4 || !plain_tensor(args[0]) || !plain_tensor(args[1]) ||
      !optional_tensor(args[2]) || !as_string(args[3], &approximate)) {
    return nullptr;
  }
  const Tensor& input = unpack_tensor(args[0]);
  const Tensor& weight = unpack_tensor(args[1]);
  Tensor bias = unpack(args[2]);
  if (!cleared(input, device)) {
    return nullptr;
  }
  // F.linear's rule (src/wheelops/ops/fused_linear_gelu.py allows_tf32): a float32 CUDA GEMM
  // may use TF32 where torch.backends.cuda.matmul.allow_tf32 says so.
  bool allow_tf32 = input.is_cuda() && input.scalar_type() == at::kFloat &&
                    at::globalContext().allowTF32CuBLAS();
  if (wants_gradient({&input, &weight, &bias})) {
    // The pre-activation is kept for the backward (keeps_pre_activation).
    auto [out, pre] = below_autograd([&] {
      return fused_linear_gelu_op().call(input, weight, as_optional(bias), approximate,
                                         allow_tf32, true);
    });
    auto node = attach<FusedLinearGeluBackward>(out, input, weight, bias);
    node->input_ = SavedVariable(input, false);
    node->weight_ = SavedVariable(weight, false);
    node->bias_ = SavedVariable(bias, false);
    node->pre_ = SavedVariable(pre, false);
    node->approximate_ = std::move(approximate);
    node->allow_tf32_ = allow_tf32;
    return wrap(std::move(out));
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return wrap(std::get<0>(fused_linear_gelu_op().call(input, weight, as_optional(bias),
                                                      approximate, allow_tf32, false)));
}

#define ENTRY(name)                                                                     \
  PyMethodDef {                                                                         \
    #name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&entry<name##_fast>)), \
        METH_FASTCALL | METH_KEYWORDS, nullptr                                          \
  }

// One definition per op: bind() makes a function of it with the op's Python path as self.
PyMethodDef entries[] = {
    ENTRY(add),      ENTRY(relu_scale), ENTRY(softmax),      ENTRY(layer_norm),
    ENTRY(rms_norm), ENTRY(bias_gelu),  ENTRY(silu_and_mul), ENTRY(fused_linear_gelu),
};

#undef ENTRY

// bind(op, python_path): wheelops.<op>'s accelerated entry, falling back to python_path;
// None where this build has no entry for `op`.
PyObject* bind(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "bind(op: str, python_path: callable)");
    return nullptr;
  }
  const char* op = PyUnicode_AsUTF8AndSize(args[0], nullptr);
  if (op == nullptr) {
    return nullptr;
  }
  for (PyMethodDef& def : entries) {
    if (std::strcmp(def.ml_name, op) == 0) {
      return PyCFunction_NewEx(&def, args[1], nullptr);
    }
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bind)), METH_FASTCALL,
     "bind(op, python_path): the op's accelerated entry, or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "wheelops_accel", "wheelops' autograd accelerator", -1, methods,
};

}  // namespace

// The module's name is the file's (src/wheelops/ops/_accel.py loads it by path).
PyMODINIT_FUNC PyInit_wheelops_accel() {
  PyObject* module = PyModule_Create(&module_def);
  if (module != nullptr && PyModule_AddStringConstant(module, "TORCH_VERSION", TORCH_VERSION) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
