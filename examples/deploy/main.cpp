// Runs an AOTInductor package that calls wheelops ops, and checks its outputs against the
// ones Python saved (export_model.py): no Python in this process.
//
//   run_package MODEL.pt2 INPUTS.pt EXPECTED.pt [--device cpu|cuda] [--without-wheelops]
//
// --without-wheelops skips wheelops::load_libraries(), to show what LibTorch says then.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <wheelops/load_libraries.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<torch::Tensor> load_tensors(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw std::runtime_error("cannot read " + path);
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // (tensor, view) pairs: export_model.py's save_for_cpp sends uint16 as its int16 bits.
  const c10::IValue saved = torch::pickle_load(bytes);  // outlives the loop below
  std::vector<torch::Tensor> tensors;
  for (const auto& pair : saved.toTupleRef().elements()) {
    const auto& items = pair.toTupleRef().elements();
    torch::Tensor tensor = items[0].toTensor();
    tensors.push_back(items[1].toStringRef() == "uint16" ? tensor.view(torch::kUInt16) : tensor);
  }
  return tensors;
}

// The op tests' tolerance for float32; integer outputs must be equal.
bool matches(const torch::Tensor& got, const torch::Tensor& want) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype()) {
    return false;
  }
  if (!want.is_floating_point()) {
    return torch::equal(got.to(torch::kInt64), want.to(torch::kInt64));
  }
  return torch::allclose(got, want, /*rtol=*/1.3e-6, /*atol=*/1e-5);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0]
              << " MODEL.pt2 INPUTS.pt EXPECTED.pt [--device cpu|cuda] [--without-wheelops]\n";
    return 2;
  }
  std::string device = "cpu";
  bool load_wheelops = true;
  for (int i = 4; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else if (arg == "--without-wheelops") {
      load_wheelops = false;
    } else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  try {
    if (load_wheelops) {
      wheelops::load_libraries();
      for (const auto& path : wheelops::library_paths()) {
        std::cout << "loaded " << path << "\n";
      }
    }
    torch::inductor::AOTIModelPackageLoader package(argv[1]);
    std::vector<torch::Tensor> inputs;
    for (const auto& t : load_tensors(argv[2])) {
      inputs.push_back(t.to(torch::Device(device)));
    }
    std::vector<torch::Tensor> outputs = package.run(inputs);
    std::vector<torch::Tensor> expected = load_tensors(argv[3]);
    if (outputs.size() != expected.size()) {
      std::cerr << "the package returned " << outputs.size() << " outputs, Python saved "
                << expected.size() << "\n";
      return 1;
    }
    bool all_match = true;
    for (size_t i = 0; i < outputs.size(); ++i) {
      torch::Tensor got = outputs[i].cpu();
      bool ok = matches(got, expected[i]);
      double diff = (got.to(torch::kDouble) - expected[i].to(torch::kDouble)).abs().max().item<double>();
      std::printf("output %zu: %s %s, max |C++ - Python| = %.3g: %s\n", i,
                  c10::toString(got.scalar_type()), c10::str(got.sizes()).c_str(), diff,
                  ok ? "match" : "MISMATCH");
      all_match = all_match && ok;
    }
    std::cout << (all_match ? "C++ outputs equal Python's\n" : "C++ outputs differ from Python's\n");
    return all_match ? 0 : 1;
  } catch (const c10::Error& err) {
    std::cerr << "error: " << err.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& err) {
    std::cerr << "error: " << err.what() << "\n";
    return 1;
  }
}
