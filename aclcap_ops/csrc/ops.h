// Declarations of the bundled kernels; registration.cpp binds them to the dispatcher.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace aclcap {

at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double eps);
void fused_add_rms_norm(at::Tensor& input, at::Tensor& residual, const at::Tensor& weight,
                        double eps);
void rotary_embedding(const at::Tensor& positions, at::Tensor& query, at::Tensor& key,
                      int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox);
at::Tensor silu_and_mul(const at::Tensor& input);
at::Tensor silu_and_mul_meta(const at::Tensor& input);
std::tuple<at::Tensor, at::Tensor> get_masked_input_and_mask(
    const at::Tensor& input, int64_t org_vocab_start_index, int64_t org_vocab_end_index,
    int64_t num_org_vocab_padding, int64_t added_vocab_start_index,
    int64_t added_vocab_end_index);
void reshape_and_cache(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                       at::Tensor& value_cache, const at::Tensor& slot_mapping);

}  // namespace aclcap
