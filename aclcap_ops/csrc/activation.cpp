// silu_and_mul: out = silu(x[..., :d]) * x[..., d:], plus its C++ Meta kernel (the one meta
// impl registered in C++, written with symbolic sizes so dynamic shapes stay symbolic).
#include "ops.h"
#include "vec_utils.h"

namespace aclcap {
namespace {

#if defined(CPU_CAPABILITY_AVX512)
// silu(g) * u = g * u / (1 + exp(-g)), for a float32 output, in 23 AVX512 instructions per
// 16 lanes. It avoids the two costly parts of the generic path below: torch's exp_u20
// (range masks, two int conversions) and a vector division (about 10 cycles a vector).
//  - exp: n = round(x log2 e), r = x - n ln2 (Cody-Waite, two steps so r is exact to ~1
//    ulp), exp(r) by its degree-6 Taylor polynomial (|r| <= ln2/2: error < 2e-7), then
//    2^n by scalef, which needs no integer detour.
//  - 1 / (1 + e): rcp14 (14 bits) and one Newton step, ~1 ulp, three instructions.
//  - x = -g is clamped to [-80, 80]: exp stays finite and normal, so 1 + e never reaches
//    inf (rcp14 then Newton would give 0 * inf = NaN); lanes at the top clamp are then set
//    to 1 / (1 + e) = 0, see below. min_ps returns its second operand for NaN, so NaN lanes
//    land there too and come out NaN from the final multiply by g.
inline fVec silu_mul_f32(const fVec& gate, const fVec& up) {
  const __m512 g = gate;
  const __m512 x = _mm512_max_ps(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), g),
                                               _mm512_set1_ps(80.f)),
                                 _mm512_set1_ps(-80.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.f / 720), r, _mm512_set1_ps(1.f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  const __m512 d = _mm512_add_ps(_mm512_scalef_ps(p, n), _mm512_set1_ps(1.f));
  __m512 inv = _mm512_rcp14_ps(d);
  inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.f)));
  // Lanes clamped at the top (g <= -80, and NaN) take 1 / (1 + e) = 0 exactly, as torch's
  // silu does from g < -88 on: -0 for finite g, NaN for g = -inf or NaN.
  const __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(80.f), _CMP_LT_OQ);
  inv = _mm512_maskz_mov_ps(in_range, inv);
  return _mm512_mul_ps(_mm512_mul_ps(g, up), inv);
}

// The same for a 16-bit output, which keeps 8 (bfloat16) or 11 (float16) bits: 11 vector
// instructions instead of 23. At 2 bytes an element the memory traffic is small and this
// arithmetic bounds the op: on two cores at bfloat16 the change took it from 2.2-2.8x of
// its memory floor to about 1.1x. Relative error below 7e-5 (rcp14's 2^-14 and the
// polynomial's 3e-6), so a result is at most one ulp from the correctly rounded one.
//  - exp(-g) = 2^t with t = -g log2 e: 2^floor(t) by scalef (which floors its exponent
//    itself), 2^(t - floor(t)) by reduce (t - floor(t) in one instruction) and a degree-4
//    minimax polynomial on [0, 1).
//  - No clamp: t = +inf or past 128 (g < -88) makes 1 + e = inf and rcp14 gives 0, as
//    torch's silu does there (NaN for g = -inf, as torch); t = -inf gives e = 0 (reduce
//    maps infinities to 0). NaN propagates.
inline fVec silu_mul_16bit(const fVec& gate, const fVec& up) {
  const __m512 g = gate;
  const __m512 t = _mm512_mul_ps(g, _mm512_set1_ps(-1.44269504089f));
  const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.0134266894f), f, _mm512_set1_ps(0.0522424653f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.241280213f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693044841f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  const __m512 d = _mm512_add_ps(_mm512_scalef_ps(p, t), _mm512_set1_ps(1.f));
  return _mm512_mul_ps(_mm512_mul_ps(g, up), _mm512_rcp14_ps(d));
}

// silu(g) * u to be rounded to T.
template <typename T>
inline fVec silu_mul(const fVec& gate, const fVec& up) {
  if constexpr (std::is_same_v<T, float>) {
    return silu_mul_f32(gate, up);
  } else {
    return silu_mul_16bit(gate, up);
  }
}
#else
template <typename T>
inline fVec silu_mul(const fVec& gate, const fVec& up) {
  // exp_u20 is torch's own vectorized exp with 20 ulp error: ample for an activation.
  return gate / (fVec(1.f) + gate.neg().exp_u20()) * up;
}
#endif

template <typename T>
void silu_and_mul_row(const T* x, T* out, int64_t d) {
  for_chunks(d, [&](int64_t i, int64_t count) {
    prefetch_ahead(x + i);
    prefetch_ahead(x + d + i);
    fVec ga, gb, ua, ub;
    load_chunk(x + i, ga, gb, count);
    load_chunk(x + d + i, ua, ub, count);
    store_chunk(out + i, silu_mul<T>(ga, ua), silu_mul<T>(gb, ub), count);
  });
}

}  // namespace

void silu_and_mul_out(const at::Tensor& input, at::Tensor& out) {
  TORCH_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0,
              "silu_and_mul: last dimension must be even, got ", input.sizes());
  const at::Tensor x = input.contiguous();
  const int64_t d = input.size(-1) / 2;
  auto sizes = input.sizes().vec();
  sizes.back() = d;
  check_out(out, sizes, input, "silu_and_mul.out");
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
}

at::Tensor silu_and_mul(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0,
              "silu_and_mul: last dimension must be even, got ", input.sizes());
  auto sizes = input.sizes().vec();
  sizes.back() /= 2;
  at::Tensor out = at::empty(sizes, input.options());
  silu_and_mul_out(input, out);
  return out;
}

void silu_and_mul_out_meta(const at::Tensor& input, at::Tensor& out) {
  TORCH_SYM_CHECK((input.sym_size(-1) % 2).sym_eq(0),
                  "silu_and_mul.out: last dimension must be even, got ", input.sym_sizes());
  TORCH_SYM_CHECK(out.sym_size(-1).sym_eq(input.sym_size(-1) / 2),
                  "silu_and_mul.out: out's last dimension must be half of input's, got ",
                  out.sym_sizes());
}

at::Tensor silu_and_mul_meta(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 1, "silu_and_mul: input must have at least one dimension");
  // The same evenness check as the CPU kernel, so tracing rejects what running would.
  // TORCH_SYM_CHECK keeps the size symbolic: expect_true guards on a backed size and
  // records a runtime assert for an unbacked one, instead of specializing it via size().
  TORCH_SYM_CHECK((input.sym_size(-1) % 2).sym_eq(0),
                  "silu_and_mul: last dimension must be even, got ", input.sym_sizes());
  c10::SymDimVector sizes(input.sym_sizes().begin(), input.sym_sizes().end());
  sizes.back() = sizes.back() / 2;
  return at::empty_symint(sizes, input.options());
}

}  // namespace aclcap
