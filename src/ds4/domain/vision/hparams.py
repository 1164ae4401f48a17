"""Hyperparameters of a deepseek4v vision encoder, read from the `clip.*` keys of an
mmproj GGUF in llama.cpp's layout (docs/vision.md §1), each range-checked as it is read.

Like the main model's reader (ds4.domain.model.hparams) it collects every problem at
once, insists on the stored type of every key, and never hands out a value outside its
bounds. The aligner's hidden width has no key: it is read from the `mm.1.weight`
directory entry. `vision_metadata` is the one builder our writers use, so a file we
write carries exactly the keys llama.cpp's clip loader requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ds4.domain.gguf.records import FLOAT_TYPES, MetaValue, TensorInfo, ValueType
from ds4.domain.model.hparams import Bounds, MetadataReader, Problem, out_of_range

ARCH = "clip"
PROJECTOR = "deepseek4v"
FILE_TYPE = "mmproj"

# --- what llama.cpp fixes in code for deepseek4v (clip.cpp, not in the file)
ROPE_THETA = 10000.0
MAX_TOKENS = 384  # the whole token block, lead pads and sentinels included
MAX_WH_RATIO = 8  # wider images are cut to 8:1 and stretched, not padded
PAD_COLOR = (127, 127, 127)
BLOCK_ALIGN = 4  # the text model's compressor ratio; START sits at a multiple of it, minus 1

# --- keys (llama.cpp tools/mtmd/clip-impl.h)
K_PROJECTOR = "clip.projector_type"
K_HAS_VISION = "clip.has_vision_encoder"
K_USE_SILU = "clip.use_silu"
K_USE_GELU = "clip.use_gelu"
K_IMAGE_MEAN = "clip.vision.image_mean"
K_IMAGE_STD = "clip.vision.image_std"
K_HEAD_COUNT_KV = "clip.vision.attention.head_count_kv"
K_HEAD_DIM = "clip.vision.attention.head_dim"
K_EPS = "clip.vision.attention.layer_norm_epsilon"
ALIGNER_IN = "mm.1.weight"

# u32 key -> field; every one is required.
_U32_KEYS: dict[str, str] = {
    "clip.vision.block_count": "n_layer",
    "clip.vision.embedding_length": "n_embd",
    "clip.vision.attention.head_count": "n_head",
    "clip.vision.feed_forward_length": "n_ff",
    "clip.vision.patch_size": "patch_size",
    "clip.vision.projector.scale_factor": "n_merge",
    "clip.vision.projection_dim": "n_embd_out",
    "clip.vision.image_size": "image_size",
    "clip.vision.image_min_pixels": "image_min_pixels",
}

# Released encoder's values in the comments (docs/vision.md §1).
INT_BOUNDS: dict[str, Bounds] = {
    "n_layer": Bounds(1, 256),  # 32
    "n_embd": Bounds(4, 16384),  # 1024
    "n_head": Bounds(1, 1024),  # 16
    "n_ff": Bounds(1, 65536),  # vision_inter_dim
    "patch_size": Bounds(1, 256),  # 14
    "n_merge": Bounds(1, 16),  # 3
    "n_embd_out": Bounds(1, 65536),  # 4096, the text model's width
    "image_size": Bounds(1, 65536),  # warmup size only
    "image_min_pixels": Bounds(0, 1 << 28),
    "aligner_dim": Bounds(1, 65536),
}
EPS_BOUNDS = Bounds(1e-30, 1.0)  # 1e-6
STD_BOUNDS = Bounds(0.0, 1e6, low_exclusive=True)
MEAN_BOUNDS = Bounds(-1e6, 1e6)


@dataclass(frozen=True)
class VisionHParams:
    n_layer: int
    n_embd: int
    n_head: int
    n_ff: int
    patch_size: int
    n_merge: int
    n_embd_out: int  # the language model's embedding width
    image_size: int
    image_min_pixels: int
    aligner_dim: int  # hidden width of the aligner MLP (mm.1's outputs)
    eps: float
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def merged_dim(self) -> int:
        """Width of one merged token: n_merge x n_merge patches side by side."""
        return self.n_embd * self.n_merge * self.n_merge

    @property
    def cell(self) -> int:
        """Pixels per side of one language-model token (patch_size * n_merge)."""
        return self.patch_size * self.n_merge


class _Reader(MetadataReader):
    """The model's metadata reader, plus the RGB triples the preprocessor reads."""

    def triple(self, key: str, bounds: Bounds) -> tuple[float, float, float] | None:
        entry = self.metadata.get(key)
        if entry is None:
            self.fail(key, "missing")
            return None
        items = entry.items()
        if items is None or entry.item_type not in FLOAT_TYPES:
            self.fail(key, f"stored as {entry.describe_type()}, expected array[float32]")
            return None
        if len(items) < 3:
            self.fail(key, f"has {len(items)} entries, need 3 (R, G, B)")
            return None
        values = tuple(float(v) for v in items[:3])
        for channel, value in zip("RGB", values, strict=True):
            complaint = out_of_range(value, bounds)
            if complaint is not None:
                self.fail(key, f"channel {channel}: {complaint}")
                return None
        return (values[0], values[1], values[2])


def _check_identity(r: _Reader) -> None:
    """A clip file whose projector is deepseek4v, with a vision encoder and SwiGLU."""
    string, boolean = frozenset({ValueType.STRING}), frozenset({ValueType.BOOL})
    arch = r.get("general.architecture", string)
    if arch is not None and arch != ARCH:
        r.fail("general.architecture", f"is {arch!r}, expected {ARCH!r} (an mmproj file)")
    projector = r.get(K_PROJECTOR, string)
    if projector is not None and projector != PROJECTOR:
        r.fail(K_PROJECTOR, f"is {projector!r}; only {PROJECTOR!r} is supported")
    if r.get(K_HAS_VISION, boolean) is False:
        r.fail(K_HAS_VISION, "is false: the file holds no vision encoder")
    if r.get(K_USE_SILU, boolean) is False:
        r.fail(K_USE_SILU, "is false; the deepseek4v ViT blocks are SwiGLU")
    if r.get(K_USE_GELU, boolean, optional=True) is True:
        r.fail(K_USE_GELU, "is true; the deepseek4v ViT blocks are SwiGLU, not GELU")


def read_vision_hparams(
    metadata: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]
) -> tuple[VisionHParams | None, list[Problem]]:
    """Every key read and checked; the hyperparameters only when nothing is wrong."""
    r = _Reader(metadata)
    _check_identity(r)
    u32 = frozenset({ValueType.UINT32})
    values: dict[str, object] = {}
    for key, name in _U32_KEYS.items():
        values[name] = r.bounded(key, r.get(key, u32), INT_BOUNDS[name])
    eps = r.get(K_EPS, frozenset({ValueType.FLOAT32}))
    values["eps"] = r.bounded(K_EPS, eps, EPS_BOUNDS)
    values["image_mean"] = r.triple(K_IMAGE_MEAN, MEAN_BOUNDS)
    values["image_std"] = r.triple(K_IMAGE_STD, STD_BOUNDS)
    aligner = tensors.get(ALIGNER_IN)
    if aligner is None:
        r.fail(ALIGNER_IN, "missing (its outputs size the aligner)")
        values["aligner_dim"] = None
    elif len(aligner.dims) != 2:
        r.fail(ALIGNER_IN, f"dims {list(aligner.dims)}, expected 2 dims")
        values["aligner_dim"] = None
    else:
        values["aligner_dim"] = r.bounded(ALIGNER_IN, aligner.dims[1], INT_BOUNDS["aligner_dim"])
    _check_heads(r, values)
    if r.problems or any(v is None for v in values.values()):
        return None, r.problems
    return VisionHParams(**values), []  # type: ignore[arg-type]


def _check_heads(r: _Reader, values: dict[str, object]) -> None:
    """Head width n_embd / n_head, a multiple of 4 (2-D RoPE: a quarter per axis and
    half of each head rotates); no grouped heads and no other head width."""
    n_embd, n_head = values.get("n_embd"), values.get("n_head")
    u32 = frozenset({ValueType.UINT32})
    kv = r.get(K_HEAD_COUNT_KV, u32, optional=True)
    if kv is not None and kv != n_head:
        r.fail(K_HEAD_COUNT_KV, f"is {kv}; grouped heads are not part of deepseek4v")
    if not isinstance(n_embd, int) or not isinstance(n_head, int):
        return
    if n_embd % n_head != 0 or (n_embd // n_head) % 4 != 0:
        r.fail("clip.vision.attention.head_count",
               f"{n_head} heads do not split embedding_length {n_embd} into widths "
               "divisible by 4")  # fmt: skip
        values["n_head"] = None
        return
    head_dim = r.get(K_HEAD_DIM, u32, optional=True)
    if head_dim is not None and head_dim != n_embd // n_head:
        r.fail(K_HEAD_DIM, f"is {head_dim}, expected embedding_length / head_count = "
               f"{n_embd // n_head}")  # fmt: skip


def vision_metadata(hp: VisionHParams) -> dict[str, MetaValue]:
    """The records describing hp: every key llama.cpp's clip loader reads for deepseek4v."""
    field_values = {
        "n_layer": hp.n_layer, "n_embd": hp.n_embd, "n_head": hp.n_head, "n_ff": hp.n_ff,
        "patch_size": hp.patch_size, "n_merge": hp.n_merge, "n_embd_out": hp.n_embd_out,
        "image_size": hp.image_size, "image_min_pixels": hp.image_min_pixels,
    }  # fmt: skip
    out: dict[str, MetaValue] = {
        "general.architecture": MetaValue(ValueType.STRING, ARCH),
        "general.type": MetaValue(ValueType.STRING, FILE_TYPE),
        K_PROJECTOR: MetaValue(ValueType.STRING, PROJECTOR),
        K_HAS_VISION: MetaValue(ValueType.BOOL, True),
        K_USE_SILU: MetaValue(ValueType.BOOL, True),
        K_EPS: MetaValue(ValueType.FLOAT32, hp.eps),
        K_IMAGE_MEAN: MetaValue(ValueType.ARRAY, list(hp.image_mean), ValueType.FLOAT32),
        K_IMAGE_STD: MetaValue(ValueType.ARRAY, list(hp.image_std), ValueType.FLOAT32),
    }
    for key, name in _U32_KEYS.items():
        out[key] = MetaValue(ValueType.UINT32, field_values[name])
    return out
