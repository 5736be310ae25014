// rms_norm and fused_add_rms_norm: one pass over each row for the sum of squares, one to
// scale; a row of up to a few thousand elements stays in L1 between the two passes.
#include "ops.h"
#include "vec_utils.h"

namespace aclcap {
namespace {

void check_norm_args(const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK(input.dim() >= 1, "rms_norm: input must have at least one dimension");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == input.size(-1),
              "rms_norm: weight must be 1-D of size ", input.size(-1), ", got ",
              weight.sizes());
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(),
              "rms_norm: weight dtype ", weight.scalar_type(), " differs from input dtype ",
              input.scalar_type());
}

// kPrefetch: whether this pass is the first over the row (it streams from memory, so
// software prefetch pays) or a later one (the row is in L1/L2 already).
template <bool kPrefetch, typename T>
float sum_of_squares(const T* x, int64_t n) {
  fVec acc0(0.f), acc1(0.f);
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    if constexpr (kPrefetch) {
      prefetch_ahead(x + i);
    }
    fVec a, b;
    load_chunk(x + i, a, b);
    acc0 = at::vec::fmadd(a, a, acc0);
    acc1 = at::vec::fmadd(b, b, acc1);
  }
  float sum = at::vec::vec_reduce_all<float>(std::plus<fVec>(), acc0 + acc1);
  for (; i < n; ++i) {
    const float v = static_cast<float>(x[i]);
    sum += v * v;
  }
  return sum;
}

template <typename T>
void scale_row(const T* x, const T* w, T* out, int64_t n, float rstd) {
  const fVec r(rstd);
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    fVec xa, xb, wa, wb;
    load_chunk(x + i, xa, xb);
    load_chunk(w + i, wa, wb);
    store_chunk(out + i, xa * r * wa, xb * r * wb);
  }
  for (; i < n; ++i) {
    out[i] = static_cast<T>(static_cast<float>(x[i]) * rstd * static_cast<float>(w[i]));
  }
}

// residual = residual + input, rounded to T; the norm then reads the rounded residual so
// that the result equals rms_norm(residual) exactly.
template <typename T>
void add_into(const T* in, T* res, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    prefetch_ahead(in + i);
    prefetch_ahead(res + i);
    fVec ia, ib, ra, rb;
    load_chunk(in + i, ia, ib);
    load_chunk(res + i, ra, rb);
    store_chunk(res + i, ia + ra, ib + rb);
  }
  for (; i < n; ++i) {
    res[i] = static_cast<T>(static_cast<float>(in[i]) + static_cast<float>(res[i]));
  }
}

}  // namespace

void rms_norm_out(const at::Tensor& input, const at::Tensor& weight, double eps,
                         at::Tensor& out) {
  check_norm_args(input, weight);
  check_out(out, input.sizes(), input, "rms_norm.out");
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.contiguous();
  const int64_t n = input.size(-1);
  const int64_t rows = n == 0 ? 0 : input.numel() / n;
  ACLCAP_DISPATCH_FLOATS(input.scalar_type(), "aclcap::rms_norm", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_for_row(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float rstd = 1.f / std::sqrt(sum_of_squares<true>(xp + r * n, n) / n + float(eps));
        scale_row(xp + r * n, wp, op + r * n, n, rstd);
      }
    });
  });
}

at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double eps) {
  at::Tensor out = at::empty(input.sizes(), input.options());
  rms_norm_out(input, weight, eps, out);
  return out;
}

void rms_norm_out_meta(const at::Tensor& input, const at::Tensor& weight, double eps,
                              at::Tensor& out) {
  TORCH_CHECK(input.dim() >= 1, "rms_norm.out: input must have at least one dimension");
  TORCH_SYM_CHECK(out.sym_numel().sym_eq(input.sym_numel()),
                  "rms_norm.out: out must have the shape of input, got ", out.sym_sizes());
}

void fused_add_rms_norm(at::Tensor& input, at::Tensor& residual, const at::Tensor& weight,
                        double eps) {
  check_norm_args(input, weight);
  TORCH_CHECK(residual.sizes() == input.sizes() && residual.scalar_type() == input.scalar_type(),
              "fused_add_rms_norm: residual must match input in shape and dtype");
  TORCH_CHECK(input.is_contiguous() && residual.is_contiguous(),
              "fused_add_rms_norm: input and residual are written in place and must be "
              "contiguous");
  const at::Tensor w = weight.contiguous();
  const int64_t n = input.size(-1);
  const int64_t rows = n == 0 ? 0 : input.numel() / n;
  ACLCAP_DISPATCH_FLOATS(input.scalar_type(), "aclcap::fused_add_rms_norm", [&] {
    scalar_t* ip = input.mutable_data_ptr<scalar_t>();
    scalar_t* rp = residual.mutable_data_ptr<scalar_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_for_row(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        add_into(ip + r * n, rp + r * n, n);
        const float rstd = 1.f / std::sqrt(sum_of_squares<false>(rp + r * n, n) / n + float(eps));
        scale_row(rp + r * n, wp, ip + r * n, n, rstd);
      }
    });
  });
}

}  // namespace aclcap
