"""MViTv2-B as PySlowFast builds it, on torchvision's MViT module, and PySlowFast's files renamed.

    model = build(spec)  # spec: a model.ModelSpec, arch "mvitv2_b", t_length x crop_size clips
    logits = model(x)  # x: (B, 3, T, H, W), normalised; T = spec.t_length, H = W = spec.crop_size

torchvision.models.video.MViT (what mvit_v2_s is) has every part MViTv2 needs: decomposed relative
positions over H, W and T, residual pooling (the class token left out), conv pooling of Q and of
K / V with a LayerNorm after it, the channel change inside the attention (proj_after_attn =
PySlowFast's DIM_MUL_IN_ATT), max-pooled skips, the class token read by the head, stochastic depth.
Given the block list PySlowFast's MViT.__init__ derives from MVITv2_B_32x3.yaml (block_settings
below), it computes PySlowFast's function: tests/test_mvit.py compares the logits in float64 with
the vendored PySlowFast MViT. So no attention code here: only the spec, the rules that turn it into
torchvision's blocks, and the key renames of PySlowFast's .pyth files (PYSLOWFAST_RULES).

References
- Li, Wu, Fan, Mangalam, Xiong, Malik, Feichtenhofer. MViTv2: Improved Multiscale Vision
  Transformers for Classification and Detection. CVPR 2022.
- facebookresearch/SlowFast: slowfast/models/video_model_builder.py (MViT.__init__: the per-block
  heads, widths, Q / KV strides and kernels), attention.py (MultiScaleBlock, MultiScaleAttention:
  parameter names), common.py (Mlp), stem_helper.py (PatchEmbed), head_helper.py
  (TransformerBasicHead), models/utils.py (round_width); configs/Kinetics/MVITv2_B_32x3.yaml.
- torchvision/models/video/mvit.py (MViT, MSBlockConfig, MultiscaleBlock, Pool, PositionalEncoding).
"""

import re
from typing import NamedTuple

from torchvision.models.video.mvit import MSBlockConfig, MViT

from slowfast_net import round_width


class MViTSpec(NamedTuple):
    """One MViTv2 (PySlowFast's MVIT config keys; the B values of MVITv2_B_32x3.yaml)."""

    depth: int = 24  # MVIT.DEPTH
    embed_dim: int = 96  # MVIT.EMBED_DIM
    num_heads: int = 1  # MVIT.NUM_HEADS
    # MVIT.DIM_MUL = HEAD_MUL = [[2, 2.0], [5, 2.0], [21, 2.0]]: the blocks that double the width
    # and the heads, which are also the blocks whose Q is pooled by POOL_Q_STRIDE (1, 2, 2)
    stage_starts: tuple = (2, 5, 21)
    q_stride: tuple = (1, 2, 2)  # MVIT.POOL_Q_STRIDE of the stage_starts blocks (1, 1, 1 elsewhere)
    kv_stride: tuple = (1, 8, 8)  # MVIT.POOL_KV_STRIDE_ADAPTIVE: K / V stride of block 0
    kernel: tuple = (3, 3, 3)  # MVIT.POOL_KVQ_KERNEL, of every block's Q and K / V pooling
    drop_path: float = 0.3  # MVIT.DROPPATH_RATE
    patch_kernel: tuple = (3, 7, 7)  # MVIT.PATCH_KERNEL
    patch_stride: tuple = (2, 4, 4)  # MVIT.PATCH_STRIDE
    patch_padding: tuple = (1, 3, 3)  # MVIT.PATCH_PADDING


# configs/Kinetics/MVITv2_B_32x3.yaml (also the network of MVITv2_B_16x4 in PySlowFast's zoo).
# The yaml's other MVIT keys are torchvision MViT's fixed choices: MODE conv, POOL_FIRST False,
# CLS_EMBED_ON True, USE_ABS_POS False, REL_POS_SPATIAL / TEMPORAL True, RESIDUAL_POOLING True,
# DIM_MUL_IN_ATT True, QKV_BIAS True, MLP_RATIO 4.0, NORM layernorm (eps 1e-6), DROPOUT_RATE 0.0.
MVITS = {"mvitv2_b": MViTSpec()}


def block_settings(spec):
    """torchvision's MSBlockConfig per block, by PySlowFast's MViT.__init__ rules: heads and width
    by round_width at the DIM_MUL / HEAD_MUL blocks (the width changes inside the block that
    multiplies it: DIM_MUL_IN_ATT); the K / V stride divided by each Q stride on the way
    (POOL_KV_STRIDE_ADAPTIVE, floored at 1); every block pools Q and K / V with the kernel
    (POOL_Q_STRIDE lists every block of the B config)."""
    blocks, heads, dim, kv = [], spec.num_heads, spec.embed_dim, spec.kv_stride
    for i in range(spec.depth):
        mul = 2.0 if i in spec.stage_starts else 1.0
        q = spec.q_stride if i in spec.stage_starts else (1, 1, 1)
        kv = tuple(max(s // d, 1) for s, d in zip(kv, q))
        # PySlowFast multiplies the heads, then divides the width by them multiplied once more
        # (round_width(num_heads, head_mul[i]) after num_heads was updated): kept as it is.
        heads = round_width(heads, mul)
        dim_out = round_width(dim, mul, divisor=round_width(heads, mul))
        blocks.append(MSBlockConfig(heads, dim, dim_out, spec.kernel, spec.kernel, q, kv))
        dim = dim_out
    return blocks


def geometry_error(arch, t_length, crop_size):
    """Why t_length x crop_size clips cannot enter `arch`, in one line; None if they can: the patch
    embedding strides time by 2 and space by 4, and Q is pooled by 2 three times after it."""
    if arch not in MVITS:
        return None
    spec = MVITS[arch]
    t, s = spec.patch_stride[0], spec.patch_stride[1] * 2 ** len(spec.stage_starts)
    if t_length % t:
        return f"--t_length {t_length}: {arch} embeds {t} frames per token; give a multiple of {t}"
    if crop_size % s:
        return (
            f"--crop_size {crop_size}: {arch} halves its {spec.patch_stride[1]} px token grid "
            f"{len(spec.stage_starts)} times; give a multiple of {s}, e.g. 224"
        )
    return None


class MViTv2(MViT):
    """torchvision's MViT for clips of exactly the size it was built for (its relative position
    tables and token grid are sized by them, as PySlowFast's MViT asserts)."""

    def forward(self, x):
        B, C, T, H, W = x.shape
        if (T, H, W) != self.clip:
            want = "x".join(map(str, self.clip))
            raise ValueError(
                f"{self.arch}: got a {T}x{H}x{W} clip; this model was built for {want} "
                "(--t_length x --crop_size x --crop_size)"
            )
        return super().forward(x)


def build(spec):
    """A builder (model.ARCHS): `spec.arch`'s network for spec.t_length x spec.crop_size clips, a
    spec.num_classes head after spec.dropout (MODEL.DROPOUT_RATE), stochastic depth rising to
    spec.drop_path (None: MVIT.DROPPATH_RATE)."""
    net = MVITS[spec.arch]
    error = geometry_error(spec.arch, spec.t_length, spec.crop_size)
    if error:
        raise ValueError(error)
    model = MViTv2(
        spatial_size=(spec.crop_size, spec.crop_size),
        temporal_size=spec.t_length,
        block_setting=block_settings(net),
        residual_pool=True,
        # PySlowFast's residual pooling adds Q to the patch tokens only
        residual_with_cls_embed=False,
        rel_pos_embed=True,
        proj_after_attn=True,
        dropout=spec.dropout,
        stochastic_depth_prob=net.drop_path if spec.drop_path is None else spec.drop_path,
        num_classes=spec.num_classes,
        patch_embed_kernel=net.patch_kernel,
        patch_embed_stride=net.patch_stride,
        patch_embed_padding=net.patch_padding,
    )
    model.clip = (spec.t_length, spec.crop_size, spec.crop_size)
    return model


# ---- PySlowFast's .pyth files --------------------------------------------------------------------

# PySlowFast's names (attention.py MultiScaleBlock / MultiScaleAttention, common.py Mlp,
# stem_helper.py PatchEmbed, video_model_builder.py MViT cls_token / norm, head_helper.py
# TransformerBasicHead) -> torchvision's (mvit.py: conv_proj, pos_encoding, MultiscaleBlock's
# project, MultiscaleAttention's project = Sequential(Linear), Pool(pool, norm_act = Sequential(
# LayerNorm)), MLP = Sequential(Linear, GELU, Dropout, Linear, Dropout), head = Sequential(Dropout,
# Linear)). The copy checks every shape (the class token is viewed by `fit`).
_B = r"blocks\.(\d+)\."
PYSLOWFAST_RULES = (
    (r"patch_embed\.proj\.(\w+)", lambda m: f"conv_proj.{m[1]}"),
    (r"cls_token", lambda m: "pos_encoding.class_token"),
    (_B + r"(norm[12])\.(\w+)", lambda m: f"blocks.{m[1]}.{m[2]}.{m[3]}"),
    (_B + r"attn\.qkv\.(\w+)", lambda m: f"blocks.{m[1]}.attn.qkv.{m[2]}"),
    (_B + r"attn\.proj\.(\w+)", lambda m: f"blocks.{m[1]}.attn.project.0.{m[2]}"),
    (_B + r"attn\.pool_([qkv])\.weight", lambda m: f"blocks.{m[1]}.attn.pool_{m[2]}.pool.weight"),
    (
        _B + r"attn\.norm_([qkv])\.(\w+)",
        lambda m: f"blocks.{m[1]}.attn.pool_{m[2]}.norm_act.0.{m[3]}",
    ),
    (_B + r"attn\.rel_pos_([hwt])", lambda m: f"blocks.{m[1]}.attn.rel_pos_{m[2]}"),
    (_B + r"mlp\.fc([12])\.(\w+)", lambda m: f"blocks.{m[1]}.mlp.{3 * int(m[2]) - 3}.{m[3]}"),
    (_B + r"proj\.(\w+)", lambda m: f"blocks.{m[1]}.project.{m[2]}"),
    (r"norm\.(\w+)", lambda m: f"norm.{m[1]}"),
    (r"head\.projection\.(\w+)", lambda m: f"head.1.{m[1]}"),
)
# mmaction2's MViT (mmaction/models/backbones/mvit.py at 4d6c934: MViT, MultiScaleBlock,
# MultiScaleAttention, MLP; models/utils/embed.py PatchEmbed3D `projection`; heads/mvit_head.py
# MViTHead fc_cls; Recognizer3D's backbone. / cls_head. prefixes). Its blocks keep PySlowFast's
# names; the patch embedding is `projection`, the final norm `norm3` (the norm of out_scales' last
# stage, the one the head reads).
MMACTION2_RULES = (
    (r"backbone\.patch_embed\.projection\.(\w+)", lambda m: f"conv_proj.{m[1]}"),
    (r"backbone\.cls_token", lambda m: "pos_encoding.class_token"),
    *((rf"backbone\.{pattern}", name) for pattern, name in PYSLOWFAST_RULES[2:10]),
    (r"backbone\.norm3\.(\w+)", lambda m: f"norm.{m[1]}"),
    (r"cls_head\.fc_cls\.(\w+)", lambda m: f"head.1.{m[1]}"),
)
# A key only the MViT files have (block 0 pools K in MViTv1 and v2 alike): zoo.LAYOUTS.
SIGNATURE = "blocks.0.attn.pool_k.weight"


def widths(state):
    """An MViT state dict's attention width per block, in block order (PySlowFast's, mmaction2's
    or torchvision's names)."""
    found = {}
    for k, v in state.items():
        m = re.fullmatch(r"(?:backbone\.)?blocks\.(\d+)\.attn\.(?:proj|project\.0)\.weight", k)
        if m:
            found[int(m[1])] = v.shape[0]
    return [found[i] for i in sorted(found)]


def clip_error(model, state, src):
    """The clip a file's relative position tables were trained on, where it is not the model's:
    torchvision's block 0 tables span 2 * tokens - 1 positions over T and H (patch stride 2 over
    time, 4 over space). One line naming --t_length / --crop_size, or None."""
    got_t, got_h = state.get("blocks.0.attn.rel_pos_t"), state.get("blocks.0.attn.rel_pos_h")
    if got_t is None or got_h is None or getattr(model, "clip", None) is None:
        return None
    spec = MVITS[model.arch]
    t = (got_t.shape[0] + 1) // 2 * spec.patch_stride[0]
    # block 0's H table: 2 * max(tokens / q stride, tokens / kv stride) - 1; q is not pooled there
    crop = (got_h.shape[0] + 1) // 2 * spec.patch_stride[1]
    T, H, _ = model.clip
    fix = [f"--t_length {t}"] if t != T else []
    fix += [f"--crop_size {crop}"] if crop != H else []
    if not fix:
        return None
    return (
        f"--pretrained {src}: its relative position tables were trained on {t}x{crop}x{crop} "
        f"clips (blocks.0.attn.rel_pos_t {tuple(got_t.shape)}), this model is built for "
        f"{T}x{H}x{H}: give {' '.join(fix)}"
    )


def describe(state):
    """What an MViT state dict holds, for messages: blocks, widths, relative positions."""
    w = widths(state) or ["?"]
    v = "v2" if any(k.endswith("rel_pos_h") for k in state) else "v1 (absolute positions)"
    return f"an MViT{v} of {len(widths(state))} blocks, width {w[0]} to {w[-1]}"


def arch_for(state):
    """The arch whose network an MViT state dict holds (blocks, widths, relative positions), or
    None."""
    rel = any(k.endswith("rel_pos_h") for k in state)
    for arch, spec in MVITS.items():
        if rel and widths(state) == [b.output_channels for b in block_settings(spec)]:
            return arch
    return None


def refusal(state, arch, src, layout="pyslowfast"):
    """The one line refusing an MViT file for `arch` (not its network), or None."""
    fits = arch_for(state)
    if arch in MVITS and fits == arch:
        return None
    hint = f"use --arch {fits}" if fits else f"no arch here has that network ({', '.join(MVITS)}"
    hint += "" if fits else ": MViTv2-B, 24 blocks, width 96 to 768)"
    return f"--pretrained {src}: {describe(state)} ({layout} layout), not {arch}'s network: {hint}"


def fit(state):
    """PySlowFast keeps the class token as (1, 1, C), torchvision as (C,): viewed (same numbers)."""
    token = state.get("pos_encoding.class_token")
    if token is not None and token.dim() == 3:
        state["pos_encoding.class_token"] = token.reshape(-1)
    return state
