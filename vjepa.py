"""V-JEPA 2's video encoders (3D rotary positions) and its attentive probe.

    model = vjepa.build("vjepa2_vitl16", num_classes=174)  # any clip length, any crop (x16)
    logits = model(x)  # x: float (B, 3, T, H, W), normalised; logits: (B, num_classes)
    tokens = model.tokens(x)  # (B, T/2 * H/16 * W/16, width): what the official probes read

A clip is cut into tubelets of 2 x 16 x 16 pixels (one Conv3d, as vit.py), L pre-norm blocks follow
and a final LayerNorm (`norm`); no position table: each block's attention rotates its queries and
keys by the token's (frame, row, column) index (RoPE). The head is V-JEPA 2's AttentiveClassifier: a
learned query token reads the tokens through cross-attention after `probe_blocks - 1` self-attention
blocks.

The rotation is the official `RoPEAttention` (src/models/utils/modules.py, `use_rope=True`) to the
bit:
- each head's first 2 * ((head_dim // 3) // 2) channels rotate by the frame index, the next as many
  by the row, the next by the column; the rest (4 of 64 at ViT-L, 4 of 64 at ViT-g) are not rotated;
- adjacent channel pairs (2i, 2i + 1) rotate together, but the angle of channel c is pos *
  10000^(-(c mod D/2) / (D/2)) (the official `.repeat(1, 1, 1, 2)`, documented upstream as a bug
  kept for the published weights): the two channels of a pair get different frequencies;
- the angles are computed in the queries' dtype, as the official code does.
Positions come from the clip's own token grid (the official `handle_nonsquare_inputs=True`), so any
clip length and any crop work: RoPE has no table to interpolate.

V-JEPA 2.1 (app/vjepa_2_1) is the same network with three differences, each a VJEPASpec field:
channel pairs that share their frequency (rope_pairs), rows and columns rescaled onto a 16-position
grid (rope_grid: interpolate_rope), and a learned video-modality embedding (mod_embed); its final
norm is its norms_block[-1] (vjepa_zoo.py renames it `norm`).

Parameter names are the official ones (patch_embed.proj, blocks.i.{norm1, attn.qkv, attn.proj,
norm2, mlp.fc1, mlp.fc2}, norm; head.pooler.{query_tokens, cross_attention_block.{norm1, xattn.q,
xattn.kv, norm2, mlp}, blocks.i}, head.linear), so the official .pt files load as they are
(vjepa_zoo.py).

References
- Assran et al. V-JEPA 2: Self-Supervised Video Models Enable Understanding, Prediction and
  Planning.
  2025. facebookresearch/vjepa2 (MIT): src/models/vision_transformer.py (VisionTransformer,
  vit_large / vit_huge / vit_giant_xformers with use_rope=True), src/models/utils/modules.py
  (RoPEAttention, rotate_queries_or_keys, Block, CrossAttention, CrossAttentionBlock),
  src/models/attentive_pooler.py (AttentivePooler, AttentiveClassifier), src/utils/tensors.py.
- Mur-Labadia et al. V-JEPA 2.1: Unlocking Dense Features in Video Self-Supervised Learning. 2026.
  facebookresearch/vjepa2 (MIT): app/vjepa_2_1/models/vision_transformer.py, models/utils/modules.py
  (RoPEAttention with interpolate_rope), src/hub/backbones.py (_make_vjepa2_1_model).
- Su et al. RoFormer: Enhanced Transformer with Rotary Position Embedding. 2021.
"""

import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
import torchvision

import vit
from vit import EPS, Mlp, PatchEmbed


class VJEPASpec(NamedTuple):
    """One encoder (vision_transformer.py's constructors, with use_rope=True). The last three
    fields are V-JEPA 2.1's differences (app/vjepa_2_1/models), one field each."""

    width: int  # embed_dim
    depth: int
    heads: int
    mlp_ratio: float
    patch: int = 16
    tubelet: int = 2
    # the rotation's channel pairs share one frequency (2.1's repeat_interleave; V-JEPA 2 keeps
    # its repeat)
    rope_pairs: bool = False
    # rows and columns rescaled onto this many positions (2.1's interpolate_rope: 256 px / 16)
    rope_grid: int = 0
    # a learned video-modality embedding added to every token (2.1's video_mod_embed)
    mod_embed: bool = False


# V-JEPA 2.1: src/hub/backbones.py _make_vjepa2_1_model (use_rope, interpolate_rope=True, the
# default modality_embedding=True); each encoder's last LayerNorm is its norms_block[-1]
V21 = dict(rope_pairs=True, rope_grid=16, mod_embed=True)


VJEPA_SPECS = {
    # Tiny CPU arch for tests and the demo (not a published model): 192 wide, 4 blocks, 64 per head.
    "vjepa2_vitt16": VJEPASpec(192, 4, 3, 4.0),
    "vjepa2_vitl16": VJEPASpec(1024, 24, 16, 4.0),  # vit_large: vitl.pt
    "vjepa2_vith16": VJEPASpec(1280, 32, 16, 4.0),  # vit_huge: vith.pt
    # vit_giant_xformers (the eval configs' model_name): 22 heads of 64, MLP 48/11 (6144 hidden);
    # vitg.pt (256 px) and vitg-384.pt (384 px) are the same network
    "vjepa2_vitg16": VJEPASpec(1408, 40, 22, 48 / 11),
    # V-JEPA 2.1 (app/vjepa_2_1/models/vision_transformer.py; hub names and files in backbones.py).
    # Tiny CPU arch for tests: vit_tiny, 12 blocks (the least the official code builds).
    "vjepa2_1_vitt16": VJEPASpec(192, 12, 3, 4.0, **V21),
    # vit_base, vit_large: vjepa2_1_vitb_dist_vitG_384.pt, vjepa2_1_vitl_dist_vitG_384.pt
    "vjepa2_1_vitb16": VJEPASpec(768, 12, 12, 4.0, **V21),
    "vjepa2_1_vitl16": VJEPASpec(1024, 24, 16, 4.0, **V21),
    # vit_giant_xformers: vjepa2_1_vitg_384.pt
    "vjepa2_1_vitg16": VJEPASpec(1408, 40, 22, 48 / 11, **V21),
    # vit_gigantic_xformers: 26 heads of 64, MLP 64/13 (8192 hidden); vjepa2_1_vitG_384.pt
    "vjepa2_1_vitG16": VJEPASpec(1664, 48, 26, 64 / 13, **V21),
}
# configs/eval/vitl/*.yaml and configs/eval/vitg-384/*.yaml: classifier num_heads 16,
# num_probe_blocks 4
PROBE_HEADS, PROBE_BLOCKS = 16, 4
# AttentiveClassifier's norm_layer is nn.LayerNorm's default (eps 1e-5), not the encoder's 1e-6
PROBE_EPS = 1e-5
INIT_STD = 0.02


def trunc_normal_(t, std=INIT_STD):
    """src/utils/tensors.py trunc_normal_ (mean 0, bounds +-2 absolute): uniform, erfinv, scale,
    clamp. torch.nn.init.trunc_normal_ now samples otherwise, so the official init is reproduced
    here."""
    cdf = lambda x: (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0  # noqa: E731
    lo, hi = cdf(-2.0 / std), cdf(2.0 / std)
    with torch.no_grad():
        t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * math.sqrt(2.0)).add_(0.0)
        return t.clamp_(min=-2.0, max=2.0)


def init_weights(m):
    """VisionTransformer._init_weights / AttentivePooler._init_weights: Linear and Conv3d trunc
    normal 0.02 with zero bias, LayerNorm 1 / 0."""
    if isinstance(m, (nn.Linear, nn.Conv3d)):
        trunc_normal_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


def rescale(blocks, start=1):
    """_rescale_blocks: block i's attn.proj and mlp.fc2 weights divided by sqrt(2 (i + start))."""
    with torch.no_grad():
        for i, blk in enumerate(blocks):
            blk.attn.proj.weight.div_(math.sqrt(2.0 * (i + start)))
            blk.mlp.fc2.weight.div_(math.sqrt(2.0 * (i + start)))


def token_positions(T, H, W, device, grid=0):
    """(3, T*H*W): each token's frame, row and column (tokens time-major, then rows, columns).
    V-JEPA 2's are integers (so its angles are computed in the queries' dtype); grid: V-JEPA 2.1's,
    float32 as its `1.0 * ids`, rows and columns rescaled onto 0..grid-1 (interpolate_rope, in the
    same order of operations)."""
    t, h, w = torch.meshgrid(*(torch.arange(n, device=device) for n in (T, H, W)), indexing="ij")
    pos = torch.stack((t.flatten(), h.flatten(), w.flatten()))
    if grid:
        pos = pos.to(torch.get_default_dtype())
        pos[1] = pos[1] * (grid - 1) / (H - 1)
        pos[2] = pos[2] * (grid - 1) / (W - 1)
    return pos


def rotate(x, pos, pairs=False):
    """rotate_queries_or_keys: x (B, heads, N, D) by positions pos (N,) or (B, N). The angles are
    the official einsum's: pos times omega (x's dtype) in their promoted dtype (integer positions:
    x's dtype; 2.1's float32 ones under autocast: float32)."""
    D = x.shape[-1]
    omega = 1.0 / 10000 ** (torch.arange(D // 2, dtype=x.dtype, device=x.device) / (D / 2.0))
    # (B, N) positions (a masked sequence: each sample its own tokens) turn every head alike
    pos = pos[:, None] if pos.dim() == 2 else pos
    freq = pos[..., None] * omega  # (N, D/2) or (B, 1, N, D/2)
    sin, cos = freq.sin(), freq.cos()
    if pairs:  # V-JEPA 2.1: the pair (2i, 2i + 1) turns by frequency i
        sin, cos = sin.repeat_interleave(2, -1), cos.repeat_interleave(2, -1)
    else:  # V-JEPA 2: channel c by frequency c mod D/2 (the official repeat, kept for its weights)
        sin, cos = torch.cat((sin, sin), -1), torch.cat((cos, cos), -1)  # (..., D)
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    return x * cos + torch.stack((-x2, x1), dim=-1).flatten(-2) * sin


def rope(x, pos, d, pairs=False):
    """The first 3d channels of each head rotated by frame, row, column (d each); the rest as they
    are. Under autocast the rotated channels come out float32 and the official SDPA casts them back
    to x's dtype: so does this."""
    parts = [rotate(x[..., i * d : (i + 1) * d], pos[i], pairs) for i in range(3)]
    return torch.cat(parts + [x[..., 3 * d :]], dim=-1).to(x.dtype)


class Attention(nn.Module):
    """modules.py Attention (pos None) / RoPEAttention (pos given): one qkv projection with bias."""

    def __init__(self, dim, heads, rope_pairs=False):
        super().__init__()
        self.heads, self.rope_pairs = heads, rope_pairs
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.rope_dim = 2 * ((dim // heads // 3) // 2)

    def forward(self, x, pos=None):
        B, N, C = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        if pos is not None:
            d, pairs = self.rope_dim, self.rope_pairs
            q, k = rope(q, pos, d, pairs), rope(k, pos, d, pairs)
        x = F.scaled_dot_product_attention(q, k, v)  # each (B, heads, N, C / heads)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    """modules.py Block: pre-norm attention and MLP, stochastic depth on both branches."""

    def __init__(self, dim, heads, mlp_ratio, drop_path=0.0, eps=EPS, rope_pairs=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads, rope_pairs)
        self.drop_path = torchvision.ops.StochasticDepth(drop_path, "row")
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, pos=None):
        x = x + self.drop_path(self.attn(self.norm1(x), pos))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class CrossAttention(nn.Module):
    """modules.py CrossAttention: q from the queries, k and v from the tokens; no output
    projection."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)

    def forward(self, q, x):
        (B, n, C), N = q.shape, x.shape[1]
        q = self.q(q).reshape(B, n, self.heads, C // self.heads).transpose(1, 2)
        k, v = self.kv(x).reshape(B, N, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q = F.scaled_dot_product_attention(q, k, v)
        return q.transpose(1, 2).reshape(B, n, C)


class CrossAttentionBlock(nn.Module):
    """modules.py CrossAttentionBlock: q + xattn(q, norm1(x)), then q + mlp(norm2(q)); MLP ratio
    4."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=PROBE_EPS)
        self.xattn = CrossAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=PROBE_EPS)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, q, x):
        q = q + self.xattn(q, self.norm1(x))
        return q + self.mlp(self.norm2(q))


class AttentivePooler(nn.Module):
    """attentive_pooler.py AttentivePooler (one query, complete block): depth - 1 self-attention
    blocks over the tokens, then the query's cross-attention block. Modules are made in the official
    order, so the same seed gives the same weights."""

    def __init__(self, dim, heads, depth):
        super().__init__()
        self.query_tokens = nn.Parameter(torch.zeros(1, 1, dim))
        self.cross_attention_block = CrossAttentionBlock(dim, heads)
        self.blocks = nn.ModuleList(Block(dim, heads, 4.0, eps=PROBE_EPS) for _ in range(depth - 1))
        trunc_normal_(self.query_tokens)
        self.apply(init_weights)
        rescale(self.blocks)
        # the cross block's fc2 takes the last block's divisor (the official loop variable), 1 if
        # none
        with torch.no_grad():
            self.cross_attention_block.mlp.fc2.weight.div_(math.sqrt(2.0 * max(1, depth - 1)))

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.cross_attention_block(self.query_tokens.expand(x.shape[0], -1, -1), x)


class AttentiveClassifier(nn.Module):
    """attentive_pooler.py AttentiveClassifier: the pooled query -> linear (PyTorch's default init,
    as the official one). dropout (ours; 0 = official) before the linear."""

    def __init__(self, dim, num_classes, heads=PROBE_HEADS, depth=PROBE_BLOCKS, dropout=0.0):
        super().__init__()
        self.pooler = AttentivePooler(dim, heads, depth)
        self.linear = nn.Linear(dim, num_classes)
        self.dropout = nn.Dropout(dropout)

    def pooled(self, x):
        """(B, N, D) tokens -> (B, D): the query after the pooler."""
        return self.pooler(x).squeeze(1)

    def forward(self, x):
        return self.linear(self.dropout(self.pooled(x)))


def probe_heads(width):
    """The eval configs' 16 probe heads where the width divides, else 64 channels per head."""
    return PROBE_HEADS if width % PROBE_HEADS == 0 else width // 64


class VJEPAViT(nn.Module):
    """A VJEPA_SPECS encoder with an attentive classifier head; clips of any length and size."""

    def __init__(self, arch, num_classes, dropout=0.0, drop_path=0.0, grad_ckpt=False, depth=None):
        super().__init__()
        spec = VJEPA_SPECS[arch]._replace(depth=depth or VJEPA_SPECS[arch].depth)  # depth: tests
        self.arch, self.spec, self.grad_ckpt = arch, spec, grad_ckpt
        D = spec.width
        self.embed_dim = D
        self.patch_embed = PatchEmbed(D, spec.patch, spec.tubelet)
        # registered before the blocks: --layer-decay's layer 0, with the patch embedding
        self.video_mod_embed = nn.Parameter(torch.zeros(1, 1, D)) if spec.mod_embed else None
        # torch.linspace in float32 as the official dpr, on the CPU even when built on the meta
        # device
        rates = torch.linspace(0, drop_path, spec.depth, device="cpu").tolist()
        self.blocks = nn.ModuleList(
            Block(D, spec.heads, spec.mlp_ratio, rates[i], rope_pairs=spec.rope_pairs)
            for i in range(spec.depth)
        )
        # V-JEPA 2.1's norms_block[-1] (its other three norm deep-supervision outputs in training)
        self.norm = nn.LayerNorm(D, eps=EPS)
        self.apply(init_weights)
        rescale(self.blocks)
        if self.video_mod_embed is not None:
            nn.init.normal_(self.video_mod_embed, std=1e-6)
        # num_classes None: the encoder alone (V-JEPA pretraining's context and target encoders)
        self.head = (
            None
            if num_classes is None
            else AttentiveClassifier(D, num_classes, probe_heads(D), PROBE_BLOCKS, dropout)
        )
        self.snippet = None  # frames per segment (--mode TSN); None: the clip is one segment

    def tokens(self, x, keep=None):
        """(B, 3, T, H, W) -> the normalised last-block tokens (B, T/2 * H/16 * W/16, width).
        keep (B, n): only those tokens (indices in that order, time-major), each turned by its own
        position: vision_transformer.py's forward with `masks` (apply_masks after the patch
        embedding)."""
        if x.dim() != 5:
            raise ValueError(f"{self.arch}: expected a clip batch (B, 3, T, H, W), got {x.shape}")
        B, C, T, H, W = x.shape
        s = self.spec
        if (
            T % s.tubelet
            or H % s.patch
            or W % s.patch
            or min(H, W) < s.patch * (1 + bool(s.rope_grid))
        ):
            raise ValueError(
                f"{self.arch} takes clips of a multiple of {s.tubelet} frames and {s.patch} px"
                + (f", at least {2 * s.patch} px" if s.rope_grid else "")
                + f", got {T}x{H}x{W}"
            )
        pos = token_positions(T // s.tubelet, H // s.patch, W // s.patch, x.device, s.rope_grid)
        x = self.patch_embed(x)  # (B, N, D)
        if self.video_mod_embed is not None:
            # the official in-place add: in the wider dtype, stored in the tokens' (autocast: bf16)
            x = (x + self.video_mod_embed).to(x.dtype)
        if keep is not None:  # (3, B, n): each sample's kept tokens' positions
            x = torch.gather(x, 1, keep[..., None].expand(-1, -1, x.shape[-1]))
            pos = pos[:, keep]
        return self.norm(run_blocks(self.blocks, x, pos, self.grad_ckpt))

    def forward(self, x):
        return self.head(segment_tokens(self.tokens, x, self.snippet))


def run_blocks(blocks, x, pos, grad_ckpt):
    """The blocks in order at the tokens' positions pos; grad_ckpt (training only): each recomputed
    in the backward, its RNG (drop path) replayed, so the same results bit for bit."""
    for blk in blocks:
        if grad_ckpt and blk.training and torch.is_grad_enabled():
            x = torch.utils.checkpoint.checkpoint(blk, x, pos, use_reentrant=False)
        else:
            x = blk(x, pos)
    return x


def segment_tokens(tokens, x, snippet):
    """ClipAggregation (evals/video_classification_frozen/modelcustom/vit_encoder_multiclip.py): a
    clip of S segments of `snippet` frames each, (B, 3, S * snippet, H, W), encoded segment by
    segment (one batch of B * S) and the segments' tokens concatenated in time: (B, S * N, D),
    segment-major, as the official eval feeds its probe. snippet None: the clip is one segment."""
    B, C, T, H, W = x.shape
    if snippet is None or T == snippet:
        return tokens(x)
    if T % snippet:
        raise ValueError(
            f"got {T} frames per clip: a multiple of {snippet} (--num_segments x --t_length)"
        )
    S = T // snippet
    x = x.reshape(B, C, S, snippet, H, W).transpose(1, 2).reshape(B * S, C, snippet, H, W)
    t = tokens(x)  # (B * S, N, D)
    return t.reshape(B, S * t.shape[1], t.shape[2])


def geometry_error(arch, t_length, crop_size):
    """Why clips of t_length x crop_size cannot enter `arch`, in one line; None if they can."""
    s = VJEPA_SPECS[arch]
    # one row of patches: the official interpolation divides by rows - 1 (NaN positions)
    if s.rope_grid and crop_size < 2 * s.patch:
        return (
            f"--crop_size {crop_size}: {arch} rescales rows and columns of patches onto "
            f"{s.rope_grid} positions; give at least {2 * s.patch}"
        )
    return vit.geometry_error(arch, t_length, crop_size, VJEPA_SPECS)


def build(arch, num_classes, dropout=0.0, drop_path=None, grad_ckpt=False, depth=None):
    """A randomly initialised VJEPA_SPECS network (drop_path None: 0, the official default)."""
    return VJEPAViT(arch, num_classes, dropout, drop_path or 0.0, grad_ckpt, depth)
