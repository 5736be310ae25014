// get_masked_input_and_mask: vocab-parallel embedding masking, as vllm-ascend's kernel: ids
// in this rank's original or added vocab shard are shifted to local ids, all others become
// 0 and are flagged in the mask (true = not on this rank).
#include "ops.h"
#include "vec_utils.h"

namespace aclcap {

std::tuple<at::Tensor, at::Tensor> get_masked_input_and_mask(
    const at::Tensor& input, int64_t org_vocab_start_index, int64_t org_vocab_end_index,
    int64_t num_org_vocab_padding, int64_t added_vocab_start_index,
    int64_t added_vocab_end_index) {
  TORCH_CHECK(input.scalar_type() == at::kInt || input.scalar_type() == at::kLong,
              "get_masked_input_and_mask: input must be int32 or int64, got ",
              input.scalar_type());
  TORCH_CHECK(org_vocab_start_index <= org_vocab_end_index &&
                  added_vocab_start_index <= added_vocab_end_index,
              "get_masked_input_and_mask: each vocab range must have start <= end");
  const at::Tensor x = input.contiguous();
  at::Tensor masked = at::empty(input.sizes(), input.options());
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  const int64_t added_offset = added_vocab_start_index -
                               (org_vocab_end_index - org_vocab_start_index) -
                               num_org_vocab_padding;
  AT_DISPATCH_INDEX_TYPES(input.scalar_type(), "aclcap::get_masked_input_and_mask", [&] {
    const index_t* xp = x.const_data_ptr<index_t>();
    index_t* op = masked.mutable_data_ptr<index_t>();
    bool* mp = mask.mutable_data_ptr<bool>();
    at::parallel_for(0, x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      // Branch-free so the compiler vectorizes it.
      for (int64_t i = begin; i < end; ++i) {
        const int64_t v = xp[i];
        const bool in_org = v >= org_vocab_start_index && v < org_vocab_end_index;
        const bool in_added = v >= added_vocab_start_index && v < added_vocab_end_index;
        const int64_t offset = in_org * org_vocab_start_index + in_added * added_offset;
        const bool valid = in_org || in_added;
        op[i] = static_cast<index_t>(valid * (v - offset));
        mp[i] = !valid;
      }
    });
  });
  return {masked, mask};
}

}  // namespace aclcap
