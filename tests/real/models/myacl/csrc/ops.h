// The signatures both dispatch keys register: a Meta kernel must take the same C++ types as
// the CPU kernel of its op, or loading aborts ("Mismatch in kernel C++ signatures").
#pragma once
#include <ATen/ATen.h>

namespace myacl {
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                        const at::Tensor& weight, double eps);
at::Tensor swiglu(const at::Tensor& x);
void rope(const at::Tensor& positions, const at::Tensor& query, const at::Tensor& key,
          int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox);
}  // namespace myacl
