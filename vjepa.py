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
    """One encoder (vision_transformer.py's constructors, with use_rope=True)."""

    width: int  # embed_dim
    depth: int
    heads: int
    mlp_ratio: float
    patch: int = 16
    tubelet: int = 2


VJEPA_SPECS = {
    # Tiny CPU arch for tests and the demo (not a published model): 192 wide, 4 blocks, 64 per head.
    "vjepa2_vitt16": VJEPASpec(192, 4, 3, 4.0),
    "vjepa2_vitl16": VJEPASpec(1024, 24, 16, 4.0),  # vit_large: vitl.pt
    "vjepa2_vith16": VJEPASpec(1280, 32, 16, 4.0),  # vit_huge: vith.pt
    # vit_giant_xformers (the eval configs' model_name): 22 heads of 64, MLP 48/11 (6144 hidden);
    # vitg.pt (256 px) and vitg-384.pt (384 px) are the same network
    "vjepa2_vitg16": VJEPASpec(1408, 40, 22, 48 / 11),
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


def token_positions(T, H, W, device):
    """(3, T*H*W) long: each token's frame, row and column (tokens time-major, then rows,
    columns)."""
    t, h, w = torch.meshgrid(*(torch.arange(n, device=device) for n in (T, H, W)), indexing="ij")
    return torch.stack((t.flatten(), h.flatten(), w.flatten()))


def rotate(x, pos):
    """rotate_queries_or_keys: x (B, heads, N, D) by positions pos (N,), angles in x's dtype."""
    D = x.shape[-1]
    omega = 1.0 / 10000 ** (torch.arange(D // 2, dtype=x.dtype, device=x.device) / (D / 2.0))
    freq = pos.to(x.dtype)[:, None] * omega  # (N, D/2)
    # channel c takes frequency c mod D/2 (the official repeat, kept for its weights)
    sin, cos = freq.sin().repeat(1, 2), freq.cos().repeat(1, 2)  # (N, D)
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    return x * cos + torch.stack((-x2, x1), dim=-1).flatten(-2) * sin


def rope(x, pos, d):
    """The first 3d channels of each head rotated by frame, row, column (d each); the rest as they
    are."""
    parts = [rotate(x[..., i * d : (i + 1) * d], pos[i]) for i in range(3)]
    return torch.cat(parts + [x[..., 3 * d :]], dim=-1)


class Attention(nn.Module):
    """modules.py Attention (pos None) / RoPEAttention (pos given): one qkv projection with bias."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.rope_dim = 2 * ((dim // heads // 3) // 2)

    def forward(self, x, pos=None):
        B, N, C = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        if pos is not None:
            q, k = rope(q, pos, self.rope_dim), rope(k, pos, self.rope_dim)
        x = F.scaled_dot_product_attention(q, k, v)  # each (B, heads, N, C / heads)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    """modules.py Block: pre-norm attention and MLP, stochastic depth on both branches."""

    def __init__(self, dim, heads, mlp_ratio, drop_path=0.0, eps=EPS):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads)
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
        # torch.linspace in float32 as the official dpr, on the CPU even when built on the meta
        # device
        rates = torch.linspace(0, drop_path, spec.depth, device="cpu").tolist()
        self.blocks = nn.ModuleList(
            Block(D, spec.heads, spec.mlp_ratio, rates[i]) for i in range(spec.depth)
        )
        self.norm = nn.LayerNorm(D, eps=EPS)
        self.apply(init_weights)
        rescale(self.blocks)
        self.head = AttentiveClassifier(D, num_classes, probe_heads(D), PROBE_BLOCKS, dropout)
        self.snippet = None  # frames per segment (--mode TSN); None: the clip is one segment

    def tokens(self, x):
        """(B, 3, T, H, W) -> the normalised last-block tokens (B, T/2 * H/16 * W/16, width)."""
        if x.dim() != 5:
            raise ValueError(f"{self.arch}: expected a clip batch (B, 3, T, H, W), got {x.shape}")
        B, C, T, H, W = x.shape
        s = self.spec
        if T % s.tubelet or H % s.patch or W % s.patch:
            raise ValueError(
                f"{self.arch} takes clips of a multiple of {s.tubelet} frames and {s.patch} px, "
                f"got {T}x{H}x{W}"
            )
        pos = token_positions(T // s.tubelet, H // s.patch, W // s.patch, x.device)
        x = self.patch_embed(x)  # (B, N, D)
        for blk in self.blocks:
            if self.grad_ckpt and blk.training and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(blk, x, pos, use_reentrant=False)
            else:
                x = blk(x, pos)
        return self.norm(x)

    def forward(self, x):
        return self.head(segment_tokens(self.tokens, x, self.snippet))


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
    return vit.geometry_error(arch, t_length, crop_size, VJEPA_SPECS)


def build(arch, num_classes, dropout=0.0, drop_path=None, grad_ckpt=False, depth=None):
    """A randomly initialised VJEPA_SPECS network (drop_path None: 0, the official default)."""
    return VJEPAViT(arch, num_classes, dropout, drop_path or 0.0, grad_ckpt, depth)
