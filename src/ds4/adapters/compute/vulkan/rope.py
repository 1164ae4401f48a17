"""RoPE / YaRN on the GPU (native/vulkan/rope.comp; docs/vulkan.md#kernels).

The angles and their cos/sin come from the engine's own rope_angles (f32 iteration, YaRN
blend) and are rounded to f32 once on the host, as the reference does; the device only
rotates. GPU sin/cos have no accuracy guarantee for large angles (positions in the tens
of thousands), so computing them there would break agreement with the cpu backend.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.submission import MAX_GROUPS, Recorder
from ds4.domain.engine_math.layers import RopeParams, rope_angles
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
WG = 64


def rope_tables(positions: npt.ArrayLike, rp: RopeParams, *, iterated: bool) -> tuple[F32, F32]:
    """cos and sin (n_pos, n_rot/2) in f32, exactly as the reference rounds them."""
    angles = rope_angles(np.asarray(positions, dtype=np.int64), rp, iterated=iterated)
    cos: F32 = np.cos(angles.astype(np.float64)).astype(np.float32)
    sin: F32 = np.sin(angles.astype(np.float64)).astype(np.float32)
    return cos, sin


def apply_rope(
    x: npt.ArrayLike, positions: npt.ArrayLike, rp: RopeParams, *, iterated: bool = True,
    inverse: bool = False, rt: VulkanRuntime | None = None,
) -> F32:  # fmt: skip
    """Rotate the last n_rot dims of x (n_tok, n_head, dim) by each token's position."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    if xs.ndim != 3 or xs.shape[0] != pos.size:
        raise Ds4Error(f"rope: x {xs.shape} must be (n_tok, n_head, dim) with one position each")
    n_tok, n_head, dim = xs.shape
    if rp.n_rot <= 0 or rp.n_rot % 2 or rp.n_rot > dim:
        raise Ds4Error(f"rope: n_rot {rp.n_rot} must be even and within the head dim {dim}")
    cos, sin = rope_tables(pos, rp, iterated=iterated)
    rt = rt or runtime()
    xb, cb, sb = (rt.scratch("rope.x", xs.nbytes), rt.scratch("rope.cos", cos.nbytes),
                  rt.scratch("rope.sin", sin.nbytes))  # fmt: skip
    xb.write(xs)
    cb.write(cos)
    sb.write(sin)
    rt.run(lambda rec: record_rope(rec, xb, cb, sb, (n_tok, n_head, dim), rp.n_rot, inverse))
    out: F32 = xb.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_rope(
    rec: Recorder, x: Buffer, cos: Buffer, sin: Buffer, shape: tuple[int, int, int],
    n_rot: int, inverse: bool,
) -> None:  # fmt: skip
    """Record the in-place rotation of x (n_tok, n_head, dim) by rope_tables' cos/sin."""
    n_tok, n_head, dim = shape
    groups = -(-(n_tok * n_head * (n_rot // 2)) // WG)
    gx = min(groups, MAX_GROUPS)
    push = struct.pack("<5I", n_tok, n_head, dim, n_rot, int(inverse))
    rec.dispatch("rope", [x, cos, sin], push, (gx, -(-groups // gx), 1))
