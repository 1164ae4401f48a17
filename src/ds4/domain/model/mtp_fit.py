"""Whether an MTP GGUF belongs to a main model (docs/mtp.md).

The MTP block shares the main model's embedding table and output matrix and reads its
final HC state, so every width it is built from must be the main model's. The block
itself is fixed by the release: ratio 0 (sliding window only), biased top-k routing,
the main model's SwiGLU clamp (every Flash layer has the same, 10).
"""

from __future__ import annotations

from ds4.domain.model.hparams import DeepSeekV4HParams

# The hyperparameters that shape the MTP block or its two interfaces to the main model.
MTP_SHAPE_FIELDS = (
    "n_embd", "n_vocab", "n_head", "head_dim", "n_rot", "q_lora_rank", "o_lora_rank",
    "n_out_group", "n_expert", "n_expert_used", "n_ff_exp", "n_swa", "n_hc",
    "sinkhorn_iters", "rope_freq_base", "expert_weights_scale", "rms_eps", "hc_eps",
    "expert_weights_norm",
)  # fmt: skip


def mtp_mismatches(main: DeepSeekV4HParams, mtp: DeepSeekV4HParams) -> list[str]:
    """'field: mtp X, model Y' for every shaping hyperparameter that differs."""
    out = []
    for name in MTP_SHAPE_FIELDS:
        a, b = getattr(mtp, name), getattr(main, name)
        if a != b:
            out.append(f"{name}: mtp {a}, model {b}")
    return out


def mtp_clamp(main: DeepSeekV4HParams) -> float:
    """The MTP block's SwiGLU clamp: the last main layer's."""
    return main.swiglu_clamp[-1]
