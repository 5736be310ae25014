"""A step with four host values, as attention metadata carries them: `seq_lens` and
`temperature` change the result, `num_splits` only the order of a sum (rounding, ~1e-7),
`max_seq_len` only a bound the kernel checks. A replay on a draw that changes all four
differs from eager; only the two that cause it may be blamed."""

import random

import torch


@torch.library.custom_op("host_four::attend", mutates_args=())
def attend(x: torch.Tensor, seq_lens: list[int], max_seq_len: int, num_splits: int,
           temperature: float) -> torch.Tensor:
    if max(seq_lens) > max_seq_len:
        raise ValueError("a sequence is longer than max_seq_len")
    rows = []
    for i, n in enumerate(seq_lens):  # the first n entries of row i, summed in num_splits
        rows.append(sum(part.sum() for part in x[i, :n].chunk(num_splits)) / temperature)
    return torch.stack(rows)


@attend.register_fake
def _(x, seq_lens, max_seq_len, num_splits, temperature):
    return x.new_empty(x.shape[0])


class Step(torch.nn.Module):
    def forward(self, x, seq_lens, max_seq_len, num_splits, temperature):
        return attend(x * 2, seq_lens, max_seq_len, num_splits, temperature)


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),
            [random.randint(1, 16) for _ in range(size)], random.randint(16, 24),
            random.choice([1, 2, 4]), random.uniform(0.5, 2.0))
