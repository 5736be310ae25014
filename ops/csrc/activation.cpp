// silu_and_mul: out = silu(x[..., :d]) * x[..., d:], plus its C++ Meta kernel (the one meta
// impl registered in C++, written with symbolic sizes so dynamic shapes stay symbolic).
#include "ops.h"
#include "vec_utils.h"

namespace aclcap {
namespace {

inline fVec silu(const fVec& x) {
  // exp_u20 is torch's own AVX exp with 20 ulp error: ample for an activation.
  return x / (fVec(1.f) + x.neg().exp_u20());
}

template <typename T>
void silu_and_mul_row(const T* x, T* out, int64_t d) {
  int64_t i = 0;
  for (; i + kChunk <= d; i += kChunk) {
    fVec ga, gb, ua, ub;
    load_chunk(x + i, ga, gb);
    load_chunk(x + d + i, ua, ub);
    store_chunk(out + i, silu(ga) * ua, silu(gb) * ub);
  }
  for (; i < d; ++i) {
    const float g = static_cast<float>(x[i]);
    out[i] = static_cast<T>(g / (1.f + std::exp(-g)) * static_cast<float>(x[d + i]));
  }
}

}  // namespace

at::Tensor silu_and_mul(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0,
              "silu_and_mul: last dimension must be even, got ", input.sizes());
  const at::Tensor x = input.contiguous();
  const int64_t d = input.size(-1) / 2;
  auto sizes = input.sizes().vec();
  sizes.back() = d;
  at::Tensor out = at::empty(sizes, input.options());
  const int64_t rows = d == 0 ? 0 : out.numel() / d;
  ACLCAP_DISPATCH_FLOATS(input.scalar_type(), "aclcap::silu_and_mul", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_for_row(2 * d), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        silu_and_mul_row(xp + r * 2 * d, op + r * d, d);
      }
    });
  });
  return out;
}

at::Tensor silu_and_mul_meta(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 1, "silu_and_mul: input must have at least one dimension");
  c10::SymDimVector sizes(input.sym_sizes().begin(), input.sym_sizes().end());
  sizes.back() = sizes.back() / 2;
  return at::empty_symint(sizes, input.options());
}

}  // namespace aclcap
