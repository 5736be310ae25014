// The library's Meta kernels, in a file of their own as vllm-ascend keeps them: symbolic
// sizes throughout (sym_sizes, empty_symint), so a dynamic token count stays symbolic.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

at::Tensor rms_norm_meta(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor add_rms_norm_meta(const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& weight, double eps) {
  return at::empty_symint(residual.sym_sizes(), residual.options());
}

at::Tensor swiglu_meta(const at::Tensor& x) {
  std::vector<c10::SymInt> sizes = x.sym_sizes().vec();
  sizes.back() = sizes.back() / 2;
  return at::empty_symint(sizes, x.options());
}

void rope_meta(const at::Tensor& positions, const at::Tensor& query, const at::Tensor& key,
               int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox) {}

}  // namespace

TORCH_LIBRARY_IMPL(myacl, Meta, m) {
  m.impl("rms_norm", &rms_norm_meta);
  m.impl("add_rms_norm", &add_rms_norm_meta);
  m.impl("rope", &rope_meta);
  m.impl("swiglu", &swiglu_meta);
}
