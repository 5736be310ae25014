// Declarations of the bundled kernels; registration.cpp binds them to the dispatcher.
#pragma once

// The core Tensor and the one ATen function the kernels call, not <ATen/ATen.h>: that
// header declares every ATen op and took most of each file's 20 s compile.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <tuple>

namespace aclcap {

// An out= argument must be what the kernel would allocate: its shape, dtype and device,
// contiguous, and apart from the input (the kernel reads the input while it writes out).
inline void check_out(const at::Tensor& out, at::IntArrayRef sizes, const at::Tensor& input,
                      const char* op) {
  TORCH_CHECK(out.sizes() == sizes, op, ": out must have shape ", sizes, ", got ",
              out.sizes());
  TORCH_CHECK(out.scalar_type() == input.scalar_type() && out.device() == input.device(), op,
              ": out must be ", input.scalar_type(), " on ", input.device(), ", got ",
              out.scalar_type(), " on ", out.device());
  TORCH_CHECK(out.is_contiguous(), op, ": out must be contiguous");
  at::assert_no_overlap(out, input);
}

at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double eps);
void rms_norm_out(const at::Tensor& input, const at::Tensor& weight, double eps,
                         at::Tensor& out);
void rms_norm_out_meta(const at::Tensor& input, const at::Tensor& weight, double eps,
                              at::Tensor& out);
void fused_add_rms_norm(at::Tensor& input, at::Tensor& residual, const at::Tensor& weight,
                        double eps);
void rotary_embedding(const at::Tensor& positions, at::Tensor& query, at::Tensor& key,
                      int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox);
at::Tensor silu_and_mul(const at::Tensor& input);
void silu_and_mul_out(const at::Tensor& input, at::Tensor& out);
void silu_and_mul_out_meta(const at::Tensor& input, at::Tensor& out);
at::Tensor silu_and_mul_meta(const at::Tensor& input);
std::tuple<at::Tensor, at::Tensor> get_masked_input_and_mask(
    const at::Tensor& input, int64_t org_vocab_start_index, int64_t org_vocab_end_index,
    int64_t num_org_vocab_padding, int64_t added_vocab_start_index,
    int64_t added_vocab_end_index);
void reshape_and_cache(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                       at::Tensor& value_cache, const at::Tensor& slot_mapping);
at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache,
                           const at::Tensor& value_cache, double scale,
                           const at::Tensor& block_tables, const at::Tensor& seq_lens);

}  // namespace aclcap
