"""Random weights for a tiny model, scaled so activations stay in a sane range.

Projections are N(0, 1/fan_in) so a matmul keeps the scale of its input; norms are
near 1; HC mixing, sinks, biases and positional terms are small, so no path starts
saturated. Each tensor draws from its own generator seeded by (seed, name), so the
bytes do not depend on the order tensors are produced in.
"""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.quant_formats import Role
from ds4.domain.model.catalog import TensorSpec
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> F32:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def _vector(spec: TensorSpec, rng: np.random.Generator, shape: tuple[int, ...]) -> F32:
    name = spec.name
    if name.endswith("norm.weight"):
        return (1.0 + _normal(rng, shape, 0.1)).astype(np.float32)
    if "_scale" in name:  # HC scales: modest gain on the mixing logits
        return (0.5 + _normal(rng, shape, 0.05)).astype(np.float32)
    if "attn_sinks" in name:
        return _normal(rng, shape, 0.5)
    return _normal(rng, shape, 0.02)  # HC bases, router bias


def _tid2eid(hp: DeepSeekV4HParams, rng: np.random.Generator) -> npt.NDArray[np.int32]:
    """Each token routes to n_expert_used distinct experts."""
    keys = rng.random((hp.n_vocab, hp.n_expert), dtype=np.float32)
    return np.argsort(keys, axis=1)[:, : hp.n_expert_used].astype(np.int32)


def init_tensor(spec: TensorSpec, hp: DeepSeekV4HParams, seed: int) -> F32 | npt.NDArray[np.int32]:
    """Values of one tensor in numpy orientation (reversed GGUF dims)."""
    rng = tensor_rng(seed, spec.name)
    shape = tuple(reversed(spec.dims))
    if spec.role is Role.INDEX:
        return _tid2eid(hp, rng)
    if spec.role is Role.VECTOR:
        return _vector(spec, rng, shape)
    fan_in = spec.dims[0]
    if spec.name == "token_embd.weight":
        return _normal(rng, shape, 1.0)
    if "hc_" in spec.name:  # HC mixing projections read a 4*D wide state
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))
    if "compressor_ape" in spec.name:
        return _normal(rng, shape, 0.1)
    if "attn_output_b" in spec.name or "down" in spec.name:
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))  # residual branches start small
    return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
