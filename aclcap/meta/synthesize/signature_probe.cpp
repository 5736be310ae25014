// The C++ signature an op library registered its kernels with, which a Meta kernel of the
// same op must repeat exactly: `at::Tensor` by value, `at::Tensor&` and `const at::Tensor&`
// are different signatures to the dispatcher, and a mismatch aborts the process that loads
// the second one. The dispatcher keeps that signature private; the only way to read it is
// to register a kernel of a signature no library uses and read the mismatch it reports.
// aclcap loads this library only in a throwaway child process: a probe that does not
// mismatch leaves its kernel registered there.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

namespace {

void aclcap_signature_probe() {}

// "ns::name.overload" -> the library's kernel signature as the dispatcher prints it
// ("at::Tensor (at::Tensor const&, long)"), or "" where the op has no typed kernel.
std::string cpp_signature(c10::string_view qualified) {
  const std::string full(qualified);
  const auto sep = full.find("::");
  const auto dot = full.find('.', sep);
  const std::string ns = full.substr(0, sep);
  const std::string name = full.substr(sep + 2, dot == std::string::npos ? dot : dot - sep - 2);
  const std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
  const std::string target = overload.empty() || overload == "default"
      ? name : name + "." + overload;
  try {
    torch::Library lib(torch::Library::IMPL, ns, c10::DispatchKey::Meta, __FILE__, __LINE__);
    lib.impl(target.c_str(), TORCH_FN(aclcap_signature_probe));
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    const std::string mark = "kernel 1: ";
    const auto at = what.find(mark);
    if (what.find("Mismatch in kernel C++ signatures") == std::string::npos ||
        at == std::string::npos) {
      return "";
    }
    const auto end = what.find('\n', at);
    return what.substr(at + mark.size(), end == std::string::npos ? end : end - at - mark.size());
  }
  return "";
}

}  // namespace

TORCH_LIBRARY(aclcap_probe, m) {
  m.def("cpp_signature(str op) -> str", &cpp_signature);
}
