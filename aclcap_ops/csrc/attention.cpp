// paged_attention: decode attention over a paged KV cache, one query token per sequence.
// Sequence s reads its seq_lens[s] cached tokens through its row of block_tables (token t
// is in block block_tables[s][t / block_size] at offset t % block_size), as vLLM's paged
// attention does; the cache layout is reshape_and_cache's [blocks, block_size, kv_heads,
// head_dim]. Query heads share KV heads in groups (GQA): head h reads KV head
// h / (num_heads / num_kv_heads).
#include "ops.h"
#include "vec_utils.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace aclcap {
namespace {

// q . k over one head, q already in float32 (it is read once per cached token).
template <typename T>
float dot(const float* q, const T* k, int64_t n) {
  fVec acc0(0.f), acc1(0.f);
  for_chunks(n, [&](int64_t i, int64_t count) {
    fVec qa, qb, ka, kb;
    load_chunk(q + i, qa, qb, count);
    load_chunk(k + i, ka, kb, count);
    acc0 = at::vec::fmadd(qa, ka, acc0);
    acc1 = at::vec::fmadd(qb, kb, acc1);
  });
  return at::vec::vec_reduce_all<float>(std::plus<fVec>(), acc0 + acc1);
}

// acc += p * v over one head.
template <typename T>
void axpy(float* acc, float p, const T* v, int64_t n) {
  const fVec pv(p);
  for_chunks(n, [&](int64_t i, int64_t count) {
    fVec va, vb, aa, ab;
    load_chunk(v + i, va, vb, count);
    load_chunk(acc + i, aa, ab, count);
    store_chunk(acc + i, at::vec::fmadd(pv, va, aa), at::vec::fmadd(pv, vb, ab), count);
  });
}

// out = acc * scale, rounded to T.
template <typename T>
void store_scaled(T* out, const float* acc, float scale, int64_t n) {
  const fVec s(scale);
  for_chunks(n, [&](int64_t i, int64_t count) {
    fVec a, b;
    load_chunk(acc + i, a, b, count);
    store_chunk(out + i, a * s, b * s, count);
  });
}

void check_attention_args(const at::Tensor& query, const at::Tensor& key_cache,
                          const at::Tensor& value_cache, const at::Tensor& block_tables,
                          const at::Tensor& seq_lens) {
  TORCH_CHECK(query.dim() == 3, "paged_attention: query must be [num_tokens, num_heads, "
              "head_dim], got ", query.sizes());
  TORCH_CHECK(key_cache.dim() == 4 && key_cache.sizes() == value_cache.sizes(),
              "paged_attention: key_cache and value_cache must be [num_blocks, block_size, "
              "num_kv_heads, head_dim] alike, got ", key_cache.sizes(), " and ",
              value_cache.sizes());
  TORCH_CHECK(key_cache.size(3) == query.size(2), "paged_attention: cache head_dim ",
              key_cache.size(3), " differs from query head_dim ", query.size(2));
  TORCH_CHECK(key_cache.size(2) > 0 && query.size(1) % key_cache.size(2) == 0,
              "paged_attention: num_heads ", query.size(1),
              " must be a multiple of num_kv_heads ", key_cache.size(2));
  TORCH_CHECK(key_cache.scalar_type() == query.scalar_type() &&
                  value_cache.scalar_type() == query.scalar_type(),
              "paged_attention: caches must have query's dtype ", query.scalar_type());
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.scalar_type() == at::kInt,
              "paged_attention: block_tables must be int32 [num_seqs, max_blocks], got ",
              block_tables.scalar_type(), " ", block_tables.sizes());
  TORCH_CHECK(seq_lens.dim() == 1 && seq_lens.scalar_type() == at::kInt,
              "paged_attention: seq_lens must be int32 [num_seqs], got ",
              seq_lens.scalar_type(), " ", seq_lens.sizes());
  TORCH_CHECK(block_tables.size(0) == query.size(0) && seq_lens.size(0) == query.size(0),
              "paged_attention: decode takes one query token per sequence: num_tokens ",
              query.size(0), ", block_tables rows ", block_tables.size(0), ", seq_lens ",
              seq_lens.size(0));
}

}  // namespace

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache,
                           const at::Tensor& value_cache, double scale,
                           const at::Tensor& block_tables, const at::Tensor& seq_lens) {
  check_attention_args(query, key_cache, value_cache, block_tables, seq_lens);
  const int64_t num_seqs = query.size(0), num_heads = query.size(1), dim = query.size(2);
  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const int64_t num_kv_heads = key_cache.size(2), max_blocks = block_tables.size(1);
  const int64_t group = num_heads / num_kv_heads;
  const at::Tensor q = query.contiguous();
  const at::Tensor kc = key_cache.contiguous();
  const at::Tensor vc = value_cache.contiguous();
  const at::Tensor tables = block_tables.contiguous();
  const at::Tensor lens = seq_lens.contiguous();
  const int32_t* bt = tables.const_data_ptr<int32_t>();
  const int32_t* sl = lens.const_data_ptr<int32_t>();
  // Every length and every block a sequence reads is checked before any work: a bad block
  // id would read outside the cache.
  for (int64_t s = 0; s < num_seqs; ++s) {
    TORCH_CHECK(sl[s] >= 0 && sl[s] <= max_blocks * block_size, "paged_attention: seq_lens[",
                s, "] = ", sl[s], " is outside [0, ", max_blocks * block_size,
                "] (max_blocks x block_size)");
    for (int64_t b = 0; b < (sl[s] + block_size - 1) / block_size; ++b) {
      const int32_t block = bt[s * max_blocks + b];
      TORCH_CHECK(block >= 0 && block < num_blocks, "paged_attention: block_tables[", s, "][",
                  b, "] = ", block, " is outside the cache of ", num_blocks, " blocks");
    }
  }
  at::Tensor out = at::empty(q.sizes(), q.options());
  const int64_t token_stride = num_kv_heads * dim;  // between tokens of one block
  ACLCAP_DISPATCH_FLOATS(query.scalar_type(), "aclcap::paged_attention", [&] {
    const scalar_t* qp = q.const_data_ptr<scalar_t>();
    const scalar_t* kp = kc.const_data_ptr<scalar_t>();
    const scalar_t* vp = vc.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    // One task per (sequence, head): each reads its sequence's whole context once.
    at::parallel_for(0, num_seqs * num_heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> qbuf, acc(dim), logits;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t s = task / num_heads, h = task % num_heads, kv = h / group;
        const int64_t len = sl[s];
        const float* qf = as_float(qp + task * dim, dim, qbuf);
        // The address of token t's head kv in either cache.
        auto offset = [&](int64_t t) {
          const int64_t block = bt[s * max_blocks + t / block_size];
          return (block * block_size + t % block_size) * token_stride + kv * dim;
        };
        logits.resize(len);
        float max_logit = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < len; ++t) {
          logits[t] = dot(qf, kp + offset(t), dim) * static_cast<float>(scale);
          max_logit = std::max(max_logit, logits[t]);
        }
        std::fill(acc.begin(), acc.end(), 0.f);
        float sum = 0.f;
        for (int64_t t = 0; t < len; ++t) {
          const float p = std::exp(logits[t] - max_logit);
          sum += p;
          axpy(acc.data(), p, vp + offset(t), dim);
        }
        // An empty sequence (a padded slot of the batch) attends to nothing: zeros.
        store_scaled(op + task * dim, acc.data(), len > 0 ? 1.f / sum : 0.f, dim);
      }
    });
  });
  return out;
}

}  // namespace aclcap
