"""Tensor-parallel sharding of checkpoint-layout weights for the b12x linear and MoE ops.

A serving engine that shards a model over ``W`` GPUs gives every rank ``r`` a slice of each
weight and sums the partial results of row-parallel layers with an all-reduce (vLLM:
``ColumnParallelLinear`` / ``MergedColumnParallelLinear`` / ``RowParallelLinear`` and the
tensor-parallel ``FusedMoE``). These helpers cut the checkpoint tensors exactly as vLLM does, and
refuse shards that a b12x kernel cannot run, naming the layer kind, the dimension, the per-rank
value and the rule::

    col = shard_column_parallel("fp8_block", w13, s13, rank, world, output_sizes=[I, I])
    row = shard_row_parallel("fp8_block", w2, s2, rank, world, bias=b2)   # bias on rank 0 only
    moe = shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, rank, world, w13_layout="w31")
    experts = fused_moe.prepare_weights(plan=moe.weights_plan("mxfp4"), **moe.prepare_kwargs())

Inputs are numpy arrays or torch tensors (CPU or CUDA; shards are contiguous copies of the same
kind). Layouts (the checkpoint layout, i.e. *linear* block scales, never the 128x4 swizzle: a
swizzled grid cannot be cut by rows/columns; shard first, swizzle per rank):

==============  ============================  =========================================  =======
linear format   weight [N, ...]               weight_scale                               K rule
==============  ============================  =========================================  =======
fp8_tensor      e4m3 [N, K]                   none (per-tensor scales are shared)        K % 32
fp8_block       e4m3 [N, K]                   fp32 [ceil(N/128), ceil(K/128)]            K % 128
mxfp8           e4m3 [N, K]                   e8m0 [N, >=K/32]                           K % 32
nvfp4(_w4a16)   u8 [N, K/2]                   ue4m3 [N, K/16]                            K % 32
mxfp4(_w4a*)    u8 [N, K/2]                   e8m0 [N, K/32]                             K % 32
q8_0            u8 [N, K/32*34]               none (in the blocks)                       K % 32
iq2_xxs/iq2_xs  u8 [N, K/256*66 or *74]       none (in the blocks)                       K % 256
==============  ============================  =========================================  =======

Rules per rank (``include/b12x/gemm.h``, ``src/gemm/linear_pack.cc``, ``include/b12x/moe.h``,
``src/moe/moe.cc``; the kernel rules are re-checked here so that a bad shard fails before any
device memory is touched):

* every split dimension must divide evenly by ``world_size`` (vLLM's ``divide``);
* column-parallel (N split): N/W > 0; block FP8 needs N/W % 128 == 0 (a 128-row scale block may
  not straddle two ranks; vLLM's ``output_size_per_partition % block_n``), for every sub-output
  of a merged layer (``output_sizes``);
* row-parallel (K split): K/W % (the kernel's K granule: 32, 128 for block FP8, 256 for IQ2),
  which also keeps whole 16/32-value scale blocks and whole GGML blocks on each rank;
* MoE: I/W % 32 for every source format (the fused MoE quantises FC2 activations in blocks of 32
  and MXFP4 weights need the per-rank intermediate % 32), I/W % 256 for IQ2 GGML experts, and
  whatever ``fused_moe.plan_weights`` enforces for the mode (checked when ``quant_mode`` given).

Scales that are global to a layer (NVFP4 ``weight_scale_2`` / ``input_scale`` / ``alpha``, the
per-expert MoE globals and activation scales, FP8 per-tensor scales) are the same on every rank;
the shards carry them unchanged. Activation quantisation stays per rank and needs no change: its
blocks (1x16, 1x32, 1x128 along K) never straddle a shard boundary under the rules above, so the
quantised slice of a row-parallel input equals the slice of the quantised full input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._capi import B12xError, InvalidArgumentError

__all__ = ["ShardingError", "LinearShard", "MoEShard", "LINEAR_FORMATS", "shard_column_parallel",
           "shard_row_parallel", "shard_moe", "shard_range", "linear_rule",
           "check_linear_shard", "check_moe_shard"]


class ShardingError(InvalidArgumentError):
    """A tensor-parallel shard that cannot be cut or that a b12x kernel cannot run."""

    def __init__(self, message: str):
        super().__init__(1, message)


@dataclass(frozen=True)
class _Fmt:
    name: str
    values_per_unit: int    # K values per group of `bytes_per_unit` weight columns
    bytes_per_unit: int
    scale: Optional[str]    # None | "row" ([N, K/g] per-row groups) | "tile" (fp32 128x128)
    k_group: int            # K values per scale column (row scales) or per tile
    k_rule: int             # kernel K granule (gemm::format_k_multiple) and scale/block granule
    n_rule: int = 1         # per-rank N granule (128 for the 128-row block-FP8 scale tiles)


LINEAR_FORMATS: Dict[str, _Fmt] = {
    "fp8_tensor": _Fmt("fp8_tensor", 1, 1, None, 1, 32),
    "fp8_block": _Fmt("fp8_block", 1, 1, "tile", 128, 128, 128),
    "mxfp8": _Fmt("mxfp8", 1, 1, "row", 32, 32),
    "nvfp4": _Fmt("nvfp4", 2, 1, "row", 16, 32),
    "nvfp4_w4a16": _Fmt("nvfp4_w4a16", 2, 1, "row", 16, 32),
    "mxfp4": _Fmt("mxfp4", 2, 1, "row", 32, 32),
    "mxfp4_w4a8": _Fmt("mxfp4_w4a8", 2, 1, "row", 32, 32),
    "mxfp4_w4a16": _Fmt("mxfp4_w4a16", 2, 1, "row", 32, 32),
    "q8_0": _Fmt("q8_0", 32, 34, None, 32, 32),
    "iq2_xxs": _Fmt("iq2_xxs", 256, 66, None, 256, 256),
    "iq2_xs": _Fmt("iq2_xs", 256, 74, None, 256, 256),
}

_WHY_K = {
    "fp8_block": "block FP8 quantises activations in 1x128 groups, its weight scales cover 128 K "
                 "values and the kernel needs K % 128 == 0",
    "fp8_tensor": "the FP8 kernel needs K % 32 == 0",
    "mxfp8": "MXFP8 scale blocks hold 32 K values and the kernel needs K % 32 == 0",
    "nvfp4": "the NVFP4 kernel needs K % 32 == 0 (whole 16-value UE4M3 scale blocks, 16-byte "
             "packed rows)",
    "nvfp4_w4a16": "the NVFP4 kernel needs K % 32 == 0 (whole 16-value UE4M3 scale blocks)",
    "mxfp4": "MXFP4 scale blocks hold 32 K values and the kernel needs K % 32 == 0",
    "mxfp4_w4a8": "MXFP4 scale blocks hold 32 K values and the kernel needs K % 32 == 0",
    "mxfp4_w4a16": "MXFP4 scale blocks hold 32 K values and the kernel needs K % 32 == 0",
    "q8_0": "Q8_0 blocks hold 32 K values (a shard must keep whole blocks)",
    "iq2_xxs": "IQ2_XXS blocks hold 256 K values (a shard must keep whole blocks)",
    "iq2_xs": "IQ2_XS blocks hold 256 K values (a shard must keep whole blocks)",
}


def _fmt(fmt: str) -> _Fmt:
    key = str(fmt).lower()
    if key not in LINEAR_FORMATS:
        raise ShardingError(f"b12x.parallel: unknown linear format {fmt!r} (supported: "
                            f"{', '.join(LINEAR_FORMATS)})")
    return LINEAR_FORMATS[key]


# ---- array helpers (numpy or torch, same code) ------------------------------------------------
def _is_torch(x) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch optional
        return False
    return isinstance(x, torch.Tensor)


def _contig(x):
    if x is None:
        return None
    if _is_torch(x):
        return x.contiguous().clone() if x.is_contiguous() else x.contiguous()
    return np.ascontiguousarray(x).copy()


def _cat(parts: List[Any], axis: int):
    if len(parts) == 1:
        return _contig(parts[0])
    if _is_torch(parts[0]):
        import torch
        return torch.cat(parts, dim=axis).contiguous()
    return np.ascontiguousarray(np.concatenate(parts, axis=axis))


def _shape(x) -> Tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _check_rank(rank: int, world_size: int, layer: str) -> None:
    if not isinstance(world_size, (int, np.integer)) or world_size < 1:
        raise ShardingError(f"{layer}: world_size={world_size!r} must be a positive integer")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < world_size:
        raise ShardingError(f"{layer}: rank={rank!r} is outside [0, world_size={world_size})")


def shard_range(size: int, rank: int, world_size: int, *, layer: str = "b12x.parallel",
                dim: str = "dim") -> Tuple[int, int]:
    """[start, stop) of rank's equal slice of ``size`` (raises unless ``size % world_size == 0``)."""
    _check_rank(rank, world_size, layer)
    if size % world_size != 0:
        raise ShardingError(f"{layer}: {dim}={size} does not divide evenly by world_size="
                            f"{world_size} (tensor parallelism splits it into equal shards)")
    per = size // world_size
    return rank * per, (rank + 1) * per


def linear_rule(fmt: str, split: str) -> Tuple[int, str]:
    """(granule, reason) a per-rank dimension must satisfy: ``split`` is "N" or "K"."""
    f = _fmt(fmt)
    if split == "N":
        if f.n_rule > 1:
            return f.n_rule, ("block FP8 weight scales cover 128x128 tiles, so a rank's rows "
                              "must be whole 128-row scale blocks (vLLM: output_size_per_partition "
                              "% block_n == 0)")
        return 1, "any positive row count"
    return f.k_rule, _WHY_K[f.name]


def check_linear_shard(fmt: str, kind: str, dim: str, per_rank: int, *, layer: str,
                       rank: int = 0, world_size: int = 1) -> None:
    """Raise ShardingError unless ``per_rank`` (the rank's N or K) satisfies the format's rule."""
    g, why = linear_rule(fmt, dim)
    if per_rank <= 0 or per_rank % g != 0:
        raise ShardingError(
            f"{layer} ({kind}-parallel {fmt}, rank {rank} of {world_size}): per-rank {dim}="
            f"{per_rank} breaks the rule {dim} % {g} == 0 ({why})")


# ---- linear layers -------------------------------------------------------------------------------
@dataclass
class LinearShard:
    """One rank's piece of a linear layer, in checkpoint layout (pass to ``b12x.gemm``)."""
    kind: str                 # "column" or "row"
    format: str
    rank: int
    world_size: int
    weight: Any
    weight_scale: Any
    bias: Any                 # column: the rank's slice; row: full bias on rank 0 only (or None)
    out_features: int         # per-rank N
    in_features: int          # per-rank K
    #: ranges of the full layer this rank holds: N rows (column) or K columns (row), [start, stop)
    ranges: List[Tuple[int, int]] = field(default_factory=list)
    #: layer-global scales, identical on every rank (NVFP4 weight_scale_2 / input_scale / alpha,
    #: FP8 per-tensor output_scale); passed through unchanged
    shared: Dict[str, Any] = field(default_factory=dict)
    #: row-parallel with bias_mode="after_reduce": the full bias to add once after the all-reduce
    bias_after_reduce: Any = None


def _logical_k(f: _Fmt, weight, layer: str) -> int:
    cols = _shape(weight)[1]
    if cols % f.bytes_per_unit != 0:
        raise ShardingError(f"{layer}: weight has {cols} bytes per row, not a whole number of "
                            f"{f.name} blocks ({f.bytes_per_unit} bytes)")
    return cols // f.bytes_per_unit * f.values_per_unit


def _check_weight(f: _Fmt, weight, weight_scale, layer: str) -> Tuple[int, int]:
    if weight is None or len(_shape(weight)) != 2:
        raise ShardingError(f"{layer}: weight must be 2-D [N, ...] in checkpoint layout, got "
                            f"{None if weight is None else _shape(weight)}")
    n = _shape(weight)[0]
    k = _logical_k(f, weight, layer)
    if f.scale is None:
        if weight_scale is not None and f.name in ("q8_0", "iq2_xxs", "iq2_xs"):
            raise ShardingError(f"{layer}: {f.name} keeps its scales inside the blocks; "
                                f"weight_scale must be None")
        return n, k
    if weight_scale is None:
        raise ShardingError(f"{layer}: weight_scale is required for {f.name}")
    s = _shape(weight_scale)
    if f.scale == "tile":
        want = ((n + 127) // 128, (k + 127) // 128)
        if s != want:
            raise ShardingError(f"{layer}: weight_scale has shape {list(s)}, expected {list(want)} "
                                f"(fp32 [ceil(N/128), ceil(K/128)] for N={n}, K={k})")
    else:
        cols = k // f.k_group
        ok = len(s) == 2 and s[0] == n and (s[1] == cols or (f.name == "mxfp8" and s[1] >= cols))
        if not ok:
            raise ShardingError(
                f"{layer}: weight_scale has shape {list(s)}, expected [{n}, {cols}] ({f.name} "
                f"linear scales [N, K/{f.k_group}] for N={n}, K={k}; shard before swizzling to "
                f"the 128x4 layout)")
    return n, k


def shard_column_parallel(fmt: str, weight, weight_scale, rank: int, world_size: int, *,
                          bias=None, output_sizes: Optional[Sequence[int]] = None,
                          shared: Optional[Dict[str, Any]] = None,
                          layer: str = "column-parallel linear") -> LinearShard:
    """Split the output dimension N (weight rows, their scales, the bias).

    ``output_sizes``: the sub-outputs of a merged layer (e.g. ``[I, I]`` for gate_up, ``[q, k, v]``
    sizes for QKV); each is split separately and the rank's pieces are concatenated in order, so
    the merged layout (``[gate; up]`` stays ``[gate_r; up_r]``) is kept on every rank."""
    f = _fmt(fmt)
    n, k = _check_weight(f, weight, weight_scale, layer)
    _check_rank(rank, world_size, layer)
    sizes = [n] if output_sizes is None else [int(s) for s in output_sizes]
    if sum(sizes) != n or any(s <= 0 for s in sizes):
        raise ShardingError(f"{layer}: output_sizes={sizes} must be positive and sum to the "
                            f"weight's N={n}")
    if bias is not None and _shape(bias) != (n,):
        raise ShardingError(f"{layer}: bias has shape {list(_shape(bias))}, expected [{n}]")
    if k % f.k_rule != 0:
        raise ShardingError(f"{layer} (column-parallel {f.name}): K={k} breaks the rule K % "
                            f"{f.k_rule} == 0 ({_WHY_K[f.name]})")
    ranges = []
    base = 0
    for i, size in enumerate(sizes):
        dim = "N" if len(sizes) == 1 else f"N[{i}] (output {i} of {len(sizes)})"
        a, b = shard_range(size, rank, world_size, layer=layer, dim=dim)
        check_linear_shard(f.name, "column", "N", b - a, layer=layer + (
            "" if len(sizes) == 1 else f" output {i}"), rank=rank, world_size=world_size)
        ranges.append((base + a, base + b))
        base += size
    w = _cat([weight[a:b] for a, b in ranges], 0)
    s = None
    if f.scale == "row":
        s = _cat([weight_scale[a:b] for a, b in ranges], 0)
    elif f.scale == "tile":
        s = _cat([weight_scale[a // 128:b // 128] for a, b in ranges], 0)
    bs = None if bias is None else _cat([bias[a:b] for a, b in ranges], 0)
    per_n = sum(b - a for a, b in ranges)
    return LinearShard("column", f.name, int(rank), int(world_size), w, s, bs, per_n, k, ranges,
                       dict(shared or {}))


def shard_row_parallel(fmt: str, weight, weight_scale, rank: int, world_size: int, *,
                       bias=None, bias_mode: str = "rank0",
                       shared: Optional[Dict[str, Any]] = None,
                       layer: str = "row-parallel linear") -> LinearShard:
    """Split the input dimension K (weight columns, scale columns). Each rank's output is a
    partial sum; the engine all-reduces them. ``bias_mode``: "rank0" (vLLM: only rank 0 adds the
    bias, so the all-reduce adds it once) or "after_reduce" (no rank adds it; the full bias is in
    ``bias_after_reduce``, to be added once after the all-reduce)."""
    f = _fmt(fmt)
    n, k = _check_weight(f, weight, weight_scale, layer)
    _check_rank(rank, world_size, layer)
    if bias is not None and _shape(bias) != (n,):
        raise ShardingError(f"{layer}: bias has shape {list(_shape(bias))}, expected [{n}]")
    if bias_mode not in ("rank0", "after_reduce"):
        raise ShardingError(f"{layer}: bias_mode={bias_mode!r} (supported: 'rank0', "
                            f"'after_reduce')")
    a, b = shard_range(k, rank, world_size, layer=layer, dim="K")
    check_linear_shard(f.name, "row", "K", b - a, layer=layer, rank=rank, world_size=world_size)
    ca, cb = a // f.values_per_unit * f.bytes_per_unit, b // f.values_per_unit * f.bytes_per_unit
    w = _contig(weight[:, ca:cb])
    s = None
    if f.scale == "row":
        s = _contig(weight_scale[:, a // f.k_group:b // f.k_group])
    elif f.scale == "tile":
        s = _contig(weight_scale[:, a // 128:b // 128])
    bs = _contig(bias) if (bias is not None and bias_mode == "rank0" and rank == 0) else None
    after = _contig(bias) if (bias is not None and bias_mode == "after_reduce") else None
    return LinearShard("row", f.name, int(rank), int(world_size), w, s, bs, n, b - a, [(a, b)],
                       dict(shared or {}), after)


# ---- MoE --------------------------------------------------------------------------------------
_MOE_SOURCES = {"modelopt_nvfp4": (16, "ue4m3"), "fp4_e8m0_k32": (32, "e8m0"), "ggml": (0, "")}
_GGML_BLOCKS = {"q8_0": (32, 34), "iq2_xxs": (256, 66), "iq2_xs": (256, 74)}
_GATED = {"silu": True, "situ": True, "swigluoai_uninterleave": True, "swiglu_oai": True,
          "relu2": False, "relu2_no_mul": False}
_W13 = {"w13": "w13", "up_gate": "w13", "w31": "w31", "gate_up": "w31"}


@dataclass
class MoEShard:
    """One rank's experts: every expert keeps all its H, I is split. Checkpoint layout (linear
    block scales); ``prepare_kwargs()`` gives what ``fused_moe.prepare_weights`` takes."""
    source_format: str
    activation: str
    w13_layout: str           # unchanged from the source: the rank's FC1 keeps the same order
    rank: int
    world_size: int
    num_experts: int
    hidden_size: int
    intermediate_size: int    # per rank
    w13: Any
    w13_scale: Any
    w2: Any
    w2_scale: Any
    #: per-expert globals (w13/w2 weight globals, a13/a2 activation gscales), same on every rank
    shared: Dict[str, Any] = field(default_factory=dict)
    #: I range [start, stop) of the full layer this rank holds (same for gate and up)
    i_range: Tuple[int, int] = (0, 0)
    ggml_w13_dtype: str = "q8_0"
    ggml_w2_dtype: str = "q8_0"

    def prepare_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of ``fused_moe.prepare_weights`` / ``fused_moe.reference`` (NVFP4
        scales swizzled to the 128x4 layout per expert, as the fused MoE takes them)."""
        s13, s2 = self.w13_scale, self.w2_scale
        if self.source_format == "modelopt_nvfp4":
            from ._lib.intrinsics import swizzle_block_scale
            s13, s2 = swizzle_block_scale(s13), swizzle_block_scale(s2)
        kw = {"w1_fp4": self.w13, "w2_fp4": self.w2, "w1_blockscale": s13, "w2_blockscale": s2}
        for src, dst in (("w13_global_scale", "w1_global_scale"),
                         ("w2_global_scale", "w2_global_scale"),
                         ("a13_gscale", "a1_gscale"), ("a2_gscale", "a2_gscale")):
            if self.shared.get(src) is not None:
                kw[dst] = self.shared[src]
        return kw

    def weights_plan(self, quant_mode: str, params_dtype="bfloat16"):
        """``fused_moe.plan_weights`` for this rank's shapes (validates the combination)."""
        from .moe import fused_moe
        return fused_moe.plan_weights(
            quant_modes=quant_mode, source_format=self.source_format, activation=self.activation,
            params_dtype=params_dtype, num_experts=self.num_experts, hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size, w13_layout=self.w13_layout,
            ggml_w1_dtype=self.ggml_w13_dtype, ggml_w2_dtype=self.ggml_w2_dtype)


def check_moe_shard(source_format: str, hidden_size: int, i_per_rank: int, *, layer: str,
                    rank: int = 0, world_size: int = 1, ggml_w2_dtype: str = "q8_0") -> None:
    """Raise ShardingError unless the rank's intermediate size fits the fused MoE kernels."""
    rules = [(32, "the fused MoE quantises FC2 activations in blocks of 32 values and MXFP4 "
                  "weights need the per-rank intermediate size % 32 == 0")]
    if source_format == "ggml":
        bv = _GGML_BLOCKS[ggml_w2_dtype][0]
        rules.append((bv, f"FC2's {ggml_w2_dtype} blocks hold {bv} I values (a shard must keep "
                          f"whole blocks)"))
    elif source_format == "modelopt_nvfp4":
        rules.append((32, "FC2's NVFP4 UE4M3 scales cover 16 I values (whole blocks per rank)"))
    for g, why in sorted(rules, key=lambda r: -r[0]):
        if i_per_rank <= 0 or i_per_rank % g != 0:
            raise ShardingError(
                f"{layer} (tensor-parallel MoE {source_format}, rank {rank} of {world_size}): "
                f"per-rank intermediate size I={i_per_rank} breaks the rule I % {g} == 0 ({why})")
    if hidden_size % 32 != 0:
        raise ShardingError(f"{layer} (tensor-parallel MoE {source_format}): hidden_size="
                            f"{hidden_size} breaks the rule H % 32 == 0 (activation blocks of 32)")


def shard_moe(source_format: str, w13, w13_scale, w2, w2_scale, rank: int, world_size: int, *,
              activation: str = "silu", w13_layout: str = "w31", w13_global_scale=None,
              w2_global_scale=None, a13_gscale=None, a2_gscale=None, quant_mode: Optional[str] = None,
              ggml_w13_dtype: str = "q8_0", ggml_w2_dtype: str = "q8_0",
              layer: str = "MoE layer") -> MoEShard:
    """Split an MoE layer's intermediate dimension I across ranks (vLLM's TP FusedMoE).

    * ``w13`` (FC1) ``[E, 2I, H/2]`` gated or ``[E, I, H/2]`` (relu2); FP4 bytes, GGML rows
      ``[E, rows, H/bv*bb]`` for ``ggml``; scales ``[E, rows, H/16]`` UE4M3 (modelopt_nvfp4,
      *linear* layout) or ``[E, rows, H/32]`` E8M0 (fp4_e8m0_k32).
    * ``w13_layout``: "w31" = ``[gate; up]`` (vLLM's fused order), "w13" = ``[up; gate]`` (the b12x
      naming; see include/b12x/moe.h). Each half is split on its own and the rank's FC1 is
      ``[gate_r; up_r]`` (or ``[up_r; gate_r]``): the label stays valid on every rank. Slicing the
      fused 2I rows in one piece would give rank 0 only gate rows and rank 1 only up rows.
    * ``w2`` (FC2) ``[E, H, I/2]``: its K (= I) is split; scales ``[E, H, I/16]`` or ``[E, H, I/32]``.
    * Globals (``w13_global_scale``, ``w2_global_scale``, ``a13_gscale``, ``a2_gscale``) are per
      expert, shared by every rank and passed through unchanged.
    * ``quant_mode`` (optional): also run ``fused_moe.plan_weights`` on the per-rank shapes.
    """
    sf = str(source_format).lower()
    if sf not in _MOE_SOURCES:
        raise ShardingError(f"{layer}: source_format={source_format!r} (supported: "
                            f"{', '.join(_MOE_SOURCES)})")
    act = str(activation).lower()
    if act not in _GATED:
        raise ShardingError(f"{layer}: activation={activation!r} (supported: "
                            f"{', '.join(_GATED)})")
    act = {"swiglu_oai": "swigluoai_uninterleave", "relu2_no_mul": "relu2"}.get(act, act)
    lay = _W13.get(str(w13_layout).lower())
    if lay is None:
        raise ShardingError(f"{layer}: w13_layout={w13_layout!r} (supported: w13/up_gate, "
                            f"w31/gate_up)")
    gated = _GATED[act]
    _check_rank(rank, world_size, layer)
    for name, t in (("w13", w13), ("w2", w2)):
        if t is None or len(_shape(t)) != 3:
            raise ShardingError(f"{layer}: {name} must be 3-D [E, rows, packed K], got "
                                f"{None if t is None else _shape(t)}")
    E, rows1, c1 = _shape(w13)
    E2, H, c2 = _shape(w2)
    if E2 != E:
        raise ShardingError(f"{layer}: w13 has {E} experts, w2 has {E2}")
    if sf == "ggml":
        for nm, dt in (("ggml_w13_dtype", ggml_w13_dtype), ("ggml_w2_dtype", ggml_w2_dtype)):
            if dt not in _GGML_BLOCKS:
                raise ShardingError(f"{layer}: {nm}={dt!r} (supported: q8_0, iq2_xxs, iq2_xs)")
        bv1, bb1 = _GGML_BLOCKS[ggml_w13_dtype]
        bv2, bb2 = _GGML_BLOCKS[ggml_w2_dtype]
        if c1 % bb1 or c2 % bb2:
            raise ShardingError(f"{layer}: GGML rows of w13 ({c1} bytes) / w2 ({c2} bytes) are not "
                                f"whole {ggml_w13_dtype}/{ggml_w2_dtype} blocks")
        h1, I = c1 // bb1 * bv1, c2 // bb2 * bv2
    else:
        h1, I = 2 * c1, 2 * c2
    if h1 != H:
        raise ShardingError(f"{layer}: w13 has hidden size {h1}, w2 has {H} rows")
    want_rows = 2 * I if gated else I
    if rows1 != want_rows:
        raise ShardingError(f"{layer}: w13 has {rows1} rows, expected {want_rows} "
                            f"({'2I, gated ' + act if gated else 'I, non-gated relu2'}; I={I} "
                            f"from w2)")
    g = _MOE_SOURCES[sf][0]
    if sf != "ggml":
        for name, s, r, k in (("w13_scale", w13_scale, rows1, H), ("w2_scale", w2_scale, H, I)):
            want = (E, r, k // g)
            if s is None or _shape(s) != want:
                raise ShardingError(
                    f"{layer}: {name} has shape {None if s is None else list(_shape(s))}, "
                    f"expected {list(want)} ({sf} linear block scales [E, rows, K/{g}]; shard "
                    f"before swizzling)")
    a, b = shard_range(I, rank, world_size, layer=layer, dim="intermediate size I")
    ir = b - a
    check_moe_shard(sf, H, ir, layer=layer, rank=rank, world_size=world_size,
                    ggml_w2_dtype=ggml_w2_dtype)
    if gated:
        pieces = [(a, b), (I + a, I + b)]  # first half, second half: same order as the source
    else:
        pieces = [(a, b)]
    w13_r = _cat([w13[:, p:q] for p, q in pieces], 1)
    s13_r = None if sf == "ggml" else _cat([w13_scale[:, p:q] for p, q in pieces], 1)
    if sf == "ggml":
        bv2, bb2 = _GGML_BLOCKS[ggml_w2_dtype]
        w2_r = _contig(w2[:, :, a // bv2 * bb2:b // bv2 * bb2])
        s2_r = None
    else:
        w2_r = _contig(w2[:, :, a // 2:b // 2])
        s2_r = _contig(w2_scale[:, :, a // g:b // g])
    shared = {"w13_global_scale": w13_global_scale, "w2_global_scale": w2_global_scale,
              "a13_gscale": a13_gscale, "a2_gscale": a2_gscale}
    shard = MoEShard(sf, act, lay, int(rank), int(world_size), E, H, ir, w13_r, s13_r, w2_r, s2_r,
                     {k: v for k, v in shared.items() if v is not None}, (a, b),
                     ggml_w13_dtype, ggml_w2_dtype)
    if quant_mode is not None:
        try:
            shard.weights_plan(quant_mode)
        except B12xError as e:
            raise ShardingError(f"{layer} (tensor-parallel MoE, rank {rank} of {world_size}, "
                                f"per-rank I={ir}): {e}") from e
    return shard
