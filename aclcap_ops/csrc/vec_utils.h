// Shared helpers for the bundled CPU kernels: load/store a chunk of any supported dtype as
// float vectors, so that every kernel accumulates in float32 whatever it reads and writes.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <tuple>
#include <type_traits>

namespace aclcap {

using fVec = at::vec::Vectorized<float>;
// One chunk is two float vectors: the width of one vector of a 16-bit type.
constexpr int64_t kChunk = 2 * fVec::size();

template <typename T>
inline void load_chunk(const T* p, fVec& a, fVec& b) {
  if constexpr (std::is_same_v<T, float>) {
    a = fVec::loadu(p);
    b = fVec::loadu(p + fVec::size());
  } else {
    std::tie(a, b) = at::vec::convert_to_float<T>(at::vec::Vectorized<T>::loadu(p));
  }
}

template <typename T>
inline void store_chunk(T* p, const fVec& a, const fVec& b) {
  if constexpr (std::is_same_v<T, float>) {
    a.store(p);
    b.store(p + fVec::size());
#if defined(CPU_CAPABILITY_AVX512) && defined(__AVX512BF16__)
  } else if constexpr (std::is_same_v<T, at::BFloat16>) {
    // Round to nearest even in one instruction (build.py adds -mavx512bf16 where the CPU
    // has it). Unlike at::vec's emulation it flushes float32 denormals (below 1.2e-38)
    // to zero, as oneDNN's bfloat16 kernels do.
    _mm512_storeu_si512(p, (__m512i)_mm512_cvtne2ps_pbh(b, a));
#endif
  } else {
    at::vec::convert_from_float<T>(a, b).store(p);
  }
}

// Prefetch the data that one chunk read kPrefetchBytes further on will need. The kernels
// stream two or three arrays at once in rows of a few KiB, and the hardware prefetchers
// stop at every 4 KiB page boundary; this keeps the loads ahead across them. Prefetches
// past the end of an array are harmless (they never fault).
constexpr int64_t kPrefetchBytes = 2048;

template <typename T>
inline void prefetch_ahead(const T* p) {
  const char* c = reinterpret_cast<const char*>(p) + kPrefetchBytes;
  __builtin_prefetch(c);
  if constexpr (sizeof(T) * kChunk > 64) {
    __builtin_prefetch(c + 64);
  }
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
