"""The exported main model as a plain transformers `DeepseekV4ForCausalLM` (full vocabulary).

Loaded from the checkpoint directory the converter read, so it computes with exactly
the weights in the GGUF (export.py snaps them to their GGML grid first). This is the
torch side of every comparison: logits, held-out cross-entropy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from safetensors.numpy import load_file
from transformers import DeepseekV4ForCausalLM

from tools.demo.torch_model import main_config
from tools.oracle.naming import official_to_hf


def load_reference(checkpoint: Path) -> DeepseekV4ForCausalLM:
    hub = load_file(str(checkpoint / "model.safetensors"))
    main = {k: v for k, v in hub.items() if not k.startswith("mtp.")}
    state = {k: torch.from_numpy(np.array(v)) for k, v in official_to_hf(main).items()}
    model = DeepseekV4ForCausalLM(main_config())
    model.load_state_dict(state, strict=True)
    model.train(False)
    return model


@torch.no_grad()
def all_logits(model: DeepseekV4ForCausalLM, ids: list[int]) -> npt.NDArray[np.float32]:
    """[len(ids), V] float32: the logits after every position (one uncached forward)."""
    out = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    return np.asarray(out.float().numpy(), np.float32)
