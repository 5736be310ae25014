"""A decode step whose op splits its fused K/V: at one token the library's fast path
returns views of its input, elsewhere fresh tensors, and its schema declares no alias (a
user's `split_kv`, issue 50). Its fake gives fresh tensors, which is all the schema can
say; the compiled graph then differs from eager at one token only. capture must name the
undeclared view at the size it happens, not only `output 0 differs`."""
import torch

_lib = torch.library.Library("onetokenview", "DEF")
_lib.define("split_kv(Tensor kv) -> (Tensor, Tensor)")


def _split_kv(kv):
    half = kv.shape[-1] // 2
    k, v = kv[..., :half], kv[..., half:]
    if kv.shape[0] == 1:  # one token: views
        return k, v
    return k.contiguous(), v.contiguous()


_lib.impl("split_kv", _split_kv, "CPU")
torch.library.register_fake(
    "onetokenview::split_kv",
    lambda kv: (kv.new_empty(*kv.shape[:-1], kv.shape[-1] // 2),
                kv.new_empty(*kv.shape[:-1], kv.shape[-1] // 2)), lib=_lib)


class Step(torch.nn.Module):
    def forward(self, kv):
        k, v = torch.ops.onetokenview.split_kv(kv * 2)
        k.mul_(3)  # through a view, eager also changes the fused buffer
        return k + v


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),)
