"""The demo model in torch: transformers' DeepseekV4 layers with a compact vocabulary,
plus the MTP block (next-next token head) that transformers does not build.

Only tokens that occur in the training data get embedding and output rows ("rows");
every other token's rows are exact zeros in the exported model, so its logit is exactly
0. `full_vocab_nll` accounts for those V - rows zero logits in the softmax, so the loss
trained here is the full-vocabulary cross-entropy the engine's logits imply.

The forward pass is DeepseekV4Model.forward written out (embedding -> N hyper-connection
streams -> layers -> output HC head -> norm), so the final HC state the MTP block reads is
at hand. The MTP block follows the release's layout (docs/reference/formats.md §3.4): a
ratio-0, top-k routed layer fed `e_proj(enorm(embed(t+1))) + h_proj(hnorm(H_t))`, where
H_t is the main model's final HC state at t, then its own HC head, `norm`, and the shared
output head; it predicts token t+2 (docs/reference/model.md §3.12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

from tools.demo.shape import DEMO

INIT_STD = 0.02  # transformers' initializer_range, used for the compact rows too


def main_config() -> DeepseekV4Config:
    cfg = DeepseekV4Config(**DEMO.hf_config_kwargs())
    cfg._attn_implementation = "eager"
    return cfg


def mtp_config() -> DeepseekV4Config:
    """One sliding-window (ratio 0), top-k routed layer with the main model's widths."""
    kwargs = DEMO.hf_config_kwargs()
    kwargs.update(
        num_hidden_layers=1,
        layer_types=["sliding_attention"],
        mlp_layer_types=["moe"],
    )
    cfg = DeepseekV4Config(**kwargs)
    cfg._attn_implementation = "eager"
    return cfg


def window_mask(length: int, window: int) -> torch.Tensor:
    """Additive [1, 1, S, S] mask: query q sees keys q-window+1 .. q (the raw window)."""
    q = torch.arange(length).view(-1, 1)
    k = torch.arange(length).view(1, -1)
    allowed = (k <= q) & (q - k < window)
    mask = torch.zeros(length, length).masked_fill(~allowed, float("-inf"))
    return mask.view(1, 1, length, length)


@dataclass
class Positions:
    ids: torch.Tensor  # [1, S]
    rope: dict[str, tuple[torch.Tensor, torch.Tensor]]
    mask: torch.Tensor


class MtpBlock(nn.Module):
    def __init__(self, cfg: DeepseekV4Config) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.layer = hf.DeepseekV4DecoderLayer(cfg, 0)
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.enorm = hf.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hnorm = hf.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.norm = hf.DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hc_head = hf.DeepseekV4HyperHead(cfg)

    def forward(
        self, hc_state: torch.Tensor, next_embed: torch.Tensor, pos: Positions
    ) -> torch.Tensor:
        """hc_state [B, S, N, D] (main model, final), next_embed [B, S, D] -> [B, S, D]."""
        x = self.h_proj(self.hnorm(hc_state)) + self.e_proj(self.enorm(next_embed)).unsqueeze(2)
        mask = pos.mask.expand(x.shape[0], -1, -1, -1)
        x = self.layer(x, position_embeddings=pos.rope, position_ids=pos.ids, attention_mask=mask)
        out: torch.Tensor = self.norm(self.hc_head(x))
        return out


class DemoModel(nn.Module):
    """transformers' model (for its layers and export) with compact embedding/head rows."""

    def __init__(self, rows: int, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.cfg = main_config()
        self.hf = DeepseekV4ForCausalLM(self.cfg)
        self.mtp = MtpBlock(mtp_config())
        self.mtp.apply(self.hf._init_weights)
        d = self.cfg.hidden_size
        self.embed = nn.Parameter(torch.randn(rows, d) * INIT_STD)
        self.head = nn.Parameter(torch.randn(rows, d) * INIT_STD)
        self.zero_rows = self.cfg.vocab_size - rows

    def positions(self, length: int) -> Positions:
        ids = torch.arange(length).unsqueeze(0)
        probe = self.embed[:1].unsqueeze(0)
        rotary = self.hf.model.rotary_emb
        rope = {
            kind: rotary(probe, position_ids=ids, layer_type=kind) for kind in ("main", "compress")
        }
        return Positions(ids, rope, window_mask(length, self.cfg.sliding_window))

    def trunk(
        self, token_ids: torch.Tensor, rows: torch.Tensor, pos: Positions
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(final hidden [B, S, D] before the head, final HC state [B, S, N, D])."""
        x = self.embed[rows]
        h = x.unsqueeze(2).expand(-1, -1, self.cfg.hc_mult, -1).contiguous()
        mask = pos.mask.expand(x.shape[0], -1, -1, -1)  # the compressors append per-batch rows
        for layer in self.hf.model.layers:
            h = layer(
                h,
                position_embeddings=pos.rope,
                position_ids=pos.ids,
                attention_mask=mask,
                input_ids=token_ids,
            )
        model = self.hf.model
        return model.norm(model.hc_head(h)), h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of the compact rows; every other token's logit is exactly 0."""
        return torch.nn.functional.linear(hidden, self.head)

    def full_vocab_nll(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """-log p(target) over all V tokens, the zero-row tokens included ([...] -> [...])."""
        lse = torch.logsumexp(logits, dim=-1)
        if self.zero_rows:
            lse = torch.logaddexp(lse, torch.full_like(lse, math.log(self.zero_rows)))
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return lse - picked
