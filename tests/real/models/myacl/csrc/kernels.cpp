// An out-of-tree op library of the tests' own, shaped as vllm-ascend's: schemas and kernels
// in one file (TORCH_LIBRARY + the CPU kernels), Meta kernels in another (meta.cpp), loaded
// by the plugin's import. CPU kernels vectorized with at::vec and split over tokens with
// at::parallel_for; float32 runs the vector path, other float types compute in float32.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <cmath>

#include "ops.h"

namespace myacl {
namespace {

using Vec = at::vec::Vectorized<float>;

// out[row] = x[row] * rsqrt(mean(x[row]^2) + eps) * w, over `rows` rows of `d` floats.
void rms_rows(const float* x, const float* w, float* out, int64_t rows, int64_t d,
              double eps) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * d;
      float* dst = out + r * d;
      float squares = at::vec::map_reduce_all<float>(
          [](Vec v) { return v * v; }, [](Vec a, Vec b) { return a + b; }, row, d);
      const float scale = 1.0f / std::sqrt(squares / static_cast<float>(d) +
                                           static_cast<float>(eps));
      at::vec::map2<float>([scale](Vec a, Vec g) { return a * Vec(scale) * g; }, dst, row, w,
                           d);
    }
  });
}

at::Tensor as_float(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.size(-1) == weight.numel(), "myacl::rms_norm: x's last dim ", x.size(-1),
              " differs from weight's ", weight.numel());
  const int64_t d = x.size(-1);
  at::Tensor xf = as_float(x), wf = as_float(weight);
  at::Tensor out = at::empty_like(xf);
  rms_rows(xf.data_ptr<float>(), wf.data_ptr<float>(), out.data_ptr<float>(), xf.numel() / d,
           d, eps);
  return out.to(x.scalar_type());
}

at::Tensor add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                        const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.sizes() == residual.sizes(), "myacl::add_rms_norm: x ", x.sizes(),
              " and residual ", residual.sizes(), " differ");
  TORCH_CHECK(residual.is_contiguous(), "myacl::add_rms_norm: residual must be contiguous");
  // residual += x in place (the next layer's residual), then the norm of the sum
  residual.add_(x);
  return rms_norm(residual, weight, eps);
}

at::Tensor swiglu(const at::Tensor& x) {
  const int64_t d = x.size(-1) / 2;
  TORCH_CHECK(x.size(-1) == 2 * d, "myacl::swiglu: last dim ", x.size(-1), " is odd");
  at::Tensor xf = as_float(x);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = d;
  at::Tensor out = at::empty(sizes, xf.options());
  const int64_t rows = xf.numel() / (2 * d);
  const float* src = xf.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gate = src + r * 2 * d;
      at::vec::map2<float>(
          [](Vec a, Vec b) { return a / (Vec(1.0f) + a.neg().exp()) * b; }, dst + r * d, gate,
          gate + d, d);
    }
  });
  return out.to(x.scalar_type());
}

namespace {

// Rotates the first `rot` dims of each head of one token's row in place: neox halves
// ([x1, x2] -> [x1 c - x2 s, x2 c + x1 s]) or interleaved pairs (GPT-J).
template <typename T>
void rotate_heads(T* row, int64_t heads, int64_t head_size, const float* cos, const float* sin,
                  int64_t rot, bool neox) {
  const int64_t half = rot / 2;
  for (int64_t h = 0; h < heads; ++h) {
    T* x = row + h * head_size;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const float x1 = static_cast<float>(x[a]), x2 = static_cast<float>(x[b]);
      x[a] = static_cast<T>(x1 * cos[i] - x2 * sin[i]);
      x[b] = static_cast<T>(x2 * cos[i] + x1 * sin[i]);
    }
  }
}

}  // namespace

void rope(const at::Tensor& positions, const at::Tensor& query, const at::Tensor& key,
          int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox) {
  const int64_t tokens = positions.numel();
  TORCH_CHECK(query.stride(-1) == 1 && key.stride(-1) == 1,
              "myacl::rope: query and key need a contiguous last dim");
  TORCH_CHECK(query.size(0) == tokens && key.size(0) == tokens,
              "myacl::rope: query and key need a row per position");
  TORCH_CHECK(query.numel() % (tokens * head_size) == 0 && key.numel() % (tokens * head_size) == 0,
              "myacl::rope: query and key must hold whole heads of ", head_size);
  const int64_t q_heads = query.numel() / tokens / head_size;
  const int64_t k_heads = key.numel() / tokens / head_size;
  const int64_t rot = cos_sin_cache.size(1);
  TORCH_CHECK(rot <= head_size && rot % 2 == 0, "myacl::rope: rotary dim ", rot,
              " must be even and at most head_size ", head_size);
  at::Tensor cache = as_float(cos_sin_cache);
  at::Tensor pos = positions.to(at::kLong).contiguous();
  const int64_t* p = pos.data_ptr<int64_t>();
  const float* table = cache.data_ptr<float>();
  const int64_t q_row = query.stride(0), k_row = key.stride(0);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, query.scalar_type(), "rope", [&] {
    scalar_t* q = query.data_ptr<scalar_t>();
    scalar_t* k = key.data_ptr<scalar_t>();
    at::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const float* cos = table + p[t] * rot;
        rotate_heads(q + t * q_row, q_heads, head_size, cos, cos + rot / 2, rot, is_neox);
        rotate_heads(k + t * k_row, k_heads, head_size, cos, cos + rot / 2, rot, is_neox);
      }
    });
  });
}

}  // namespace myacl

TORCH_LIBRARY(myacl, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor x, Tensor(a!) residual, Tensor weight, float eps) -> Tensor");
  m.def("rope(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
        "Tensor cos_sin_cache, bool is_neox) -> ()");
  m.def("swiglu(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(myacl, CPU, m) {
  m.impl("rms_norm", &myacl::rms_norm);
  m.impl("add_rms_norm", &myacl::add_rms_norm);
  m.impl("rope", &myacl::rope);
  m.impl("swiglu", &myacl::swiglu);
}
