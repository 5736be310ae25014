// rotary_embedding: rotates query and key in place, NeoX (split halves) or GPT-J
// (interleaved pairs) layout, for the first rot_dim = cos_sin_cache.size(1) channels of each
// head (partial rotary leaves the rest alone), as vLLM's kernel does.
#include "ops.h"
#include "vec_utils.h"

namespace aclcap {
namespace {

// cos and sin: the token's table row in float32 (as_float), converted once per token rather
// than once per head: all of a token's query and key heads share it.

// NeoX: x = head[i], y = head[i + half]; contiguous halves.
template <typename T>
void rotate_neox(T* head, const float* cos, const float* sin, int64_t half) {
  for_chunks(half, [&](int64_t i, int64_t count) {
    prefetch_ahead(head + i);  // heads follow each other: this runs a few heads ahead
    prefetch_ahead(head + half + i);
    fVec xa, xb, ya, yb, ca, cb, sa, sb;
    load_chunk(head + i, xa, xb, count);
    load_chunk(head + half + i, ya, yb, count);
    load_chunk(cos + i, ca, cb, count);
    load_chunk(sin + i, sa, sb, count);
    store_chunk(head + i, xa * ca - ya * sa, xb * cb - yb * sb, count);
    store_chunk(head + half + i, ya * ca + xa * sa, yb * cb + xb * sb, count);
  });
}

// GPT-J: x = head[2i], y = head[2i + 1]; a chunk holds kChunk / 2 pairs, split into x and y
// vectors (deinterleave2) and joined again (interleave2) around the same arithmetic.
template <typename T>
void rotate_gptj(T* head, const float* cos, const float* sin, int64_t half) {
  for_chunks(2 * half, [&](int64_t i, int64_t count) {
    prefetch_ahead(head + i);
    fVec a, b;
    load_chunk(head + i, a, b, count);
    const fVec c = fVec::loadu(cos + i / 2, count / 2), s = fVec::loadu(sin + i / 2, count / 2);
    const auto [x, y] = at::vec::deinterleave2(a, b);
    const auto [ra, rb] = at::vec::interleave2(x * c - y * s, y * c + x * s);
    store_chunk(head + i, ra, rb, count);
  });
}

void check_qk(const at::Tensor& t, const char* name, int64_t tokens, int64_t head_size,
              const at::Tensor& cache) {
  TORCH_CHECK(t.is_contiguous(), "rotary_embedding: ", name,
              " is rotated in place and must be contiguous");
  TORCH_CHECK(t.dim() >= 2 && t.size(0) == tokens, "rotary_embedding: ", name,
              " must be [tokens, heads * head_size] with ", tokens, " tokens, got ", t.sizes());
  TORCH_CHECK(t.numel() % (tokens * head_size) == 0 || tokens == 0, "rotary_embedding: ",
              name, " size ", t.sizes(), " is not a multiple of head_size ", head_size);
  TORCH_CHECK(t.scalar_type() == cache.scalar_type(), "rotary_embedding: ", name, " dtype ",
              t.scalar_type(), " differs from cos_sin_cache dtype ", cache.scalar_type());
}

}  // namespace

void rotary_embedding(const at::Tensor& positions, at::Tensor& query, at::Tensor& key,
                      int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox) {
  const int64_t tokens = positions.numel();
  TORCH_CHECK(cos_sin_cache.dim() == 2, "rotary_embedding: cos_sin_cache must be 2-D");
  const int64_t rot_dim = cos_sin_cache.size(1);
  TORCH_CHECK(rot_dim % 2 == 0 && rot_dim <= head_size,
              "rotary_embedding: cos_sin_cache width ", rot_dim,
              " must be even and at most head_size ", head_size);
  check_qk(query, "query", tokens, head_size, cos_sin_cache);
  check_qk(key, "key", tokens, head_size, cos_sin_cache);
  if (tokens == 0) {
    return;
  }
  const int64_t half = rot_dim / 2;
  const int64_t q_heads = query.numel() / (tokens * head_size);
  const int64_t k_heads = key.numel() / (tokens * head_size);
  const at::Tensor pos = positions.to(at::kLong).contiguous();
  const at::Tensor table = cos_sin_cache.contiguous();
  const int64_t max_pos = table.size(0);
  // Validate every position before rotating anything: query and key are updated in place,
  // so a check inside the parallel loop would throw after earlier rows were already rotated
  // and leave them half-updated. One pass for the min and max is cheap next to the rotation.
  const int64_t* pp = pos.const_data_ptr<int64_t>();
  int64_t lo = pp[0], hi = pp[0];
  for (int64_t t = 1; t < tokens; ++t) {
    lo = std::min(lo, pp[t]);
    hi = std::max(hi, pp[t]);
  }
  const int64_t bad = lo < 0 ? lo : hi;
  TORCH_CHECK(bad >= 0 && bad < max_pos, "rotary_embedding: position ", bad,
              " is outside cos_sin_cache of ", max_pos, " positions");
  ACLCAP_DISPATCH_FLOATS(query.scalar_type(), "aclcap::rotary_embedding", [&] {
    const scalar_t* tp = table.const_data_ptr<scalar_t>();
    scalar_t* qp = query.mutable_data_ptr<scalar_t>();
    scalar_t* kp = key.mutable_data_ptr<scalar_t>();
    const int64_t grain = grain_for_row((q_heads + k_heads) * head_size);
    at::parallel_for(0, tokens, grain, [&](int64_t begin, int64_t end) {
      std::vector<float> buf;
      for (int64_t t = begin; t < end; ++t) {
        const int64_t p = pp[t];  // in [0, max_pos): checked above
        const float* cos = as_float(tp + p * rot_dim, rot_dim, buf);
        const float* sin = cos + half;
        auto rotate = [&](scalar_t* base, int64_t heads) {
          for (int64_t h = 0; h < heads; ++h) {
            scalar_t* head = base + (t * heads + h) * head_size;
            if (is_neox) {
              rotate_neox(head, cos, sin, half);
            } else {
              rotate_gptj(head, cos, sin, half);
            }
          }
        };
        rotate(qp, q_heads);
        rotate(kp, k_heads);
      }
    });
  });
}

}  // namespace aclcap
