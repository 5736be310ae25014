"""--samples-from MODEL.py: sample inputs harvested from a model file, while it builds its
model (quantized weights are packed by custom ops at load time) and while its eager step
runs at each size. Every distinct call of an op of the checked namespaces is recorded by
the one call recorder (meta/recorder.py); a few per op become that op's samples. A sample
recorded on a draw that set state outside its arguments (vLLM's forward context) keeps
that state, put back before every run on it. Runs in check-meta's worker: a crashing
kernel takes only the worker down."""

from __future__ import annotations

import torch

from aclcap.draw_state import restorer
from aclcap.meta.observe import BUILD, STEP, RecordedCall
from aclcap.meta.recorder import CallRecorder
from aclcap.meta.sample_inputs import SampleInput, seed_all

MAX_PER_OP = 3


def harvest_recorder(namespaces: set[str]) -> CallRecorder:
    """A recorder for the ops of `namespaces`, keeping MAX_PER_OP distinct calls per op
    over every model file it runs."""
    return CallRecorder(lambda name: name.split("::", 1)[0] in namespaces,
                        max_per_op=MAX_PER_OP)


def harvest(model_path: str, shapes: list[int] | None, device: str, dtype: torch.dtype,
            recorder: CallRecorder) -> None:
    """Build the model file's model and run its eager step at each size under `recorder`."""
    from aclcap.loading.model_file import instantiate_model, load_model_file, make_step_inputs

    spec = load_model_file(model_path)
    # Every worker harvests the same calls, whatever its process drew before: the verifying
    # worker remakes the held-out calls by their keys, and `make_inputs` draws from Python's
    # `random` too (seeded anew in each worker server; the held-out calls went missing on a
    # warm result cache, issue 58)
    seed_all()
    recorder.site_file = str(spec.path.resolve())
    recorder.phase = BUILD
    with torch.no_grad(), recorder:
        model = instantiate_model(spec, device, dtype)
    recorder.phase = STEP
    for size in shapes or spec.shapes:
        args = make_step_inputs(spec, size, device, dtype)
        recorder.setup = restorer(args)  # the draw's forward context, for its samples
        with torch.no_grad(), recorder:
            model(*args)
    recorder.setup = None


def samples_of(records: list[RecordedCall], qualname: str) -> tuple[list[SampleInput], list[str]]:
    """The recorded samples of one op overload, and the model lines they came from."""
    mine = [r for r in records if r.call.op == qualname]
    return [r.sample for r in mine], list(dict.fromkeys(r.call.site for r in mine))
