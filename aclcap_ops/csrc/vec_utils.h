// Shared helpers for the bundled CPU kernels: load/store a chunk of any supported dtype as
// float vectors, so that every kernel accumulates in float32 whatever it reads and writes.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

namespace aclcap {

using fVec = at::vec::Vectorized<float>;
// One chunk is two float vectors: the width of one vector of a 16-bit type.
constexpr int64_t kChunk = 2 * fVec::size();

// Load `count` (at most kChunk) elements from p as two float vectors; lanes past count are
// zero. A full chunk (count a constant kChunk once inlined) loads each half of a 16-bit
// chunk as 256 bits widened in place, without extracting halves of one 512-bit load.
template <typename T>
inline void load_chunk(const T* p, fVec& a, fVec& b, int64_t count = kChunk) {
  constexpr int64_t kHalf = fVec::size();
  if constexpr (std::is_same_v<T, float>) {
    if (count == kChunk) {
      a = fVec::loadu(p);
      b = fVec::loadu(p + kHalf);
    } else {
      a = fVec::loadu(p, std::min(count, kHalf));
      b = count > kHalf ? fVec::loadu(p + kHalf, count - kHalf) : fVec(0.f);
    }
  } else if (count == kChunk) {
    at::vec::load_to_float(p, a);
    at::vec::load_to_float(p + kHalf, b);
  } else {
    std::tie(a, b) = at::vec::convert_to_float<T>(at::vec::Vectorized<T>::loadu(p, count));
  }
}

// AVX512-BF16 (Zen 4, Sapphire Rapids on; build.py adds -mavx512bf16 where the CPU has it):
// float32 to bfloat16 in one instruction, and bfloat16 dot products into float32.
#if defined(CPU_CAPABILITY_AVX512) && defined(__AVX512BF16__)
#define ACLCAP_AVX512_BF16 1

inline __mmask32 first_lanes(int64_t count) {
  return static_cast<__mmask32>((uint64_t{1} << count) - 1);
}

// a then b rounded to nearest even, as one chunk of 32 bfloat16. Unlike at::vec's emulation
// (fourteen instructions) it flushes float32 denormals (below 1.2e-38) to zero, as oneDNN's
// bfloat16 kernels do.
inline __m512i pack_bf16(const fVec& a, const fVec& b) {
  return (__m512i)_mm512_cvtne2ps_pbh(b, a);
}

inline __m512i load_bf16(const at::BFloat16* p, int64_t count = kChunk) {
  return count == kChunk ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(first_lanes(count), p);
}

inline void store_bf16(at::BFloat16* p, __m512i v, int64_t count = kChunk) {
  if (count == kChunk) {
    _mm512_storeu_si512(p, v);
  } else {
    _mm512_mask_storeu_epi16(p, first_lanes(count), v);
  }
}

// acc + the squares of a chunk's 32 bfloat16, in float32: one instruction (two fused
// multiply-adds per lane; a product of two bfloat16 is exact in float32).
inline __m512 add_squares_bf16(__m512 acc, __m512i v) {
  return _mm512_dpbf16_ps(acc, (__m512bh)v, (__m512bh)v);
}
#endif

// Store the first `count` (at most kChunk) lanes of a then b to p, rounded to T.
template <typename T>
inline void store_chunk(T* p, const fVec& a, const fVec& b, int64_t count = kChunk) {
  constexpr int64_t kHalf = fVec::size();
  if constexpr (std::is_same_v<T, float>) {
    if (count == kChunk) {
      a.store(p);
      b.store(p + kHalf);
    } else {
      a.store(p, std::min(count, kHalf));
      if (count > kHalf) {
        b.store(p + kHalf, count - kHalf);
      }
    }
#ifdef ACLCAP_AVX512_BF16
  } else if constexpr (std::is_same_v<T, at::BFloat16>) {
    store_bf16(p, pack_bf16(a, b), count);
#endif
  } else {
    at::vec::convert_from_float<T>(a, b).store(p, count);
  }
}

// f(i, count) for each chunk of [0, n): the full chunks (count == kChunk), then the rest as
// one masked chunk, so a row's tail takes the same vector code as its body.
template <typename F>
inline void for_chunks(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    f(i, kChunk);
  }
  if (i < n) {
    f(i, n - i);
  }
}

// p as float32: itself, or converted into buf. For operands every row of a task reads (a
// norm's weight, a token's cos/sin), converted once instead of once per row.
template <typename T>
inline const float* as_float(const T* p, int64_t n, std::vector<float>& buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    buf.resize(n);
    for_chunks(n, [&](int64_t i, int64_t count) {
      fVec a, b;
      load_chunk(p + i, a, b, count);
      store_chunk(buf.data() + i, a, b, count);
    });
    return buf.data();
  }
}

// Ask for the cache lines of the chunk at p (kWrite: to be written, which starts the
// read-for-ownership a store would otherwise wait for).
template <bool kWrite = false, typename T>
inline void prefetch_chunk(const T* p) {
  const char* c = reinterpret_cast<const char*>(p);
  __builtin_prefetch(c, kWrite);
  if constexpr (sizeof(T) * kChunk > 64) {
    __builtin_prefetch(c + 64, kWrite);
  }
}

// Prefetch the data that one chunk read kPrefetchBytes further on will need. The kernels
// stream two or three arrays at once in rows of a few KiB, and the hardware prefetchers
// stop at every 4 KiB page boundary; this keeps the loads ahead across them. Prefetches
// past the end of an array are harmless (they never fault).
constexpr int64_t kPrefetchBytes = 2048;

template <typename T>
inline void prefetch_ahead(const T* p) {
  prefetch_chunk(p + kPrefetchBytes / static_cast<int64_t>(sizeof(T)));
}

// Rows per parallel task: enough work per task (about 64 KiB of elements) to amortize
// the OpenMP fork, at least one row.
inline int64_t grain_for_row(int64_t row_len) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(row_len, 1));
}

// float32, bfloat16 and float16: the dtypes inference runs in (no double).
#define ACLCAP_DISPATCH_FLOATS(TYPE, NAME, ...)               \
  AT_DISPATCH_SWITCH(TYPE, NAME,                              \
                     AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::kBFloat16, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::kHalf, __VA_ARGS__))

}  // namespace aclcap
