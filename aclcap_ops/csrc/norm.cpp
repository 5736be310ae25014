// rms_norm and fused_add_rms_norm: per row, a pass that sums the squares (after adding the
// residual, in fused_add_rms_norm) and one that scales. The two are pipelined: one loop
// streams row r from memory for its sum while it scales row r - 1, in L1 since its own
// pass. Separate passes left the memory idle while a row was scaled: at bfloat16, 4096 x
// 4096, pipelining took fused_add_rms_norm from about 1.5x to 1.2x of its memory floor.
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

// Squares summed in float32, 32 lanes of partial sums.
struct SquareSum {
  fVec a{0.f}, b{0.f};

  void add(const fVec& x, const fVec& y) {
    a = at::vec::fmadd(x, x, a);
    b = at::vec::fmadd(y, y, b);
  }
#ifdef ACLCAP_AVX512_BF16
  // Straight from 32 packed bfloat16 (add_squares_bf16): one instruction where widening
  // them to float32 first takes six.
  void add(__m512i packed) { a = add_squares_bf16(a, packed); }
#endif
  float total() const { return at::vec::vec_reduce_all<float>(std::plus<fVec>(), a + b); }
};

// Add the squares of count elements at p.
template <typename T>
inline void add_squares(const T* p, int64_t count, SquareSum& sq) {
  fVec a, b;
  load_chunk(p, a, b, count);
  sq.add(a, b);
}

// Store a, b rounded to T at p; add the squares of the rounded values.
template <typename T>
inline void store_squared(T* p, const fVec& a, const fVec& b, int64_t count, SquareSum& sq) {
  store_chunk(p, a, b, count);
  if constexpr (std::is_same_v<T, float>) {
    sq.add(a, b);
  } else {
    add_squares(p, count, sq);
  }
}

#ifdef ACLCAP_AVX512_BF16
inline void add_squares(const at::BFloat16* p, int64_t count, SquareSum& sq) {
  sq.add(load_bf16(p, count));
}

inline void store_squared(at::BFloat16* p, const fVec& a, const fVec& b, int64_t count,
                          SquareSum& sq) {
  const __m512i packed = pack_bf16(a, b);
  store_bf16(p, packed, count);
  sq.add(packed);
}
#endif

// Rows [begin, end) of n elements: sum(r, i, count, sq) adds the squares of row r's chunk
// at i into sq (streaming it from memory); then out = x * rstd * w, row by row, one row
// behind (w in float32). The last iteration only scales, the first only sums.
template <typename T, typename Sum>
void norm_rows(int64_t begin, int64_t end, int64_t n, double eps, const T* x, const float* w,
               T* out, Sum&& sum) {
  fVec rstd;
  for (int64_t r = begin; r <= end; ++r) {
    const bool summing = r < end, scaling = r > begin;
    const int64_t prev = (r - 1) * n;  // the row scaled
    SquareSum sq;
    for_chunks(n, [&](int64_t i, int64_t count) {
      if (summing) {
        sum(r, i, count, sq);
      }
      if (scaling) {
        fVec xa, xb, wa, wb;
        load_chunk(x + prev + i, xa, xb, count);
        load_chunk(w + i, wa, wb, count);
        store_chunk(out + prev + i, xa * rstd * wa, xb * rstd * wb, count);
      }
    });
    rstd = fVec(1.f / std::sqrt(sq.total() / n + static_cast<float>(eps)));
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
      std::vector<float> buf;  // w in float32: converted once per task, not once per row
      norm_rows(begin, end, n, eps, xp, as_float(wp, n, buf), op,
                [&](int64_t r, int64_t i, int64_t count, SquareSum& sq) {
                  prefetch_ahead(xp + r * n + i);
                  add_squares(xp + r * n + i, count, sq);
                });
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
      std::vector<float> buf;
      // residual += input, rounded to the dtype; the norm then sums and scales the rounded
      // residual, so that the result equals rms_norm(residual) exactly.
      norm_rows(begin, end, n, eps, rp, as_float(wp, n, buf), ip,
                [&](int64_t r, int64_t i, int64_t count, SquareSum& sq) {
                  scalar_t* res = rp + r * n + i;
                  const scalar_t* in = ip + r * n + i;
                  prefetch_ahead(in);
                  prefetch_ahead(res);
                  fVec ia, ib, ra, rb;
                  load_chunk(in, ia, ib, count);
                  load_chunk(res, ra, rb, count);
                  store_squared(res, ia + ra, ib + rb, count, sq);
                });
    });
  });
}

}  // namespace aclcap
