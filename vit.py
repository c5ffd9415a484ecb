"""The plain video ViTs of VideoMAE and VideoMAEv2: tubelet embedding, sinusoid positions, mean
pooling.

    model = vit.build("vit_b16", num_classes=400, t_length=16, crop_size=224)
    logits = model(x)  # x: float (B, 3, T, H, W), normalised; logits: (B, num_classes)

A clip (B, 3, T, H, W) is cut into tubelets of 2 x P x P pixels (one Conv3d of that kernel and
stride: T/2 x H/P x W/P tokens), a fixed 1-D sinusoid table over the flattened token index is added,
L pre-norm blocks (attention through torch.nn.functional.scaled_dot_product_attention, MLP of
mlp_ratio x width, optional layer scale) follow, and the head reads the mean of all tokens after
`fc_norm` (no class token). The attention's qkv projection has no bias; q and v have their own
biases (`q_bias`, `v_bias`) and k has none, as in BEiT: a loader that drops them computes another
network.

Parameter names are those of the official fine-tuning model (patch_embed.proj, pos_embed,
blocks.i.{norm1, attn.qkv, attn.q_bias, attn.v_bias, attn.proj, norm2, mlp.fc1, mlp.fc2, gamma_1,
gamma_2}, fc_norm, head), so the official .pth files load as they are; vit_zoo.py converts the other
layouts (pretraining, transformers, mmaction2) to these names.

The position table is a non-persistent buffer: the official model keeps it as a plain attribute, so
its checkpoints hold none, and a model built for another clip length or crop size (8 frames, 160 px)
builds the table for its own token grid, exactly as the official code constructed at that size does.
A learned table (use_learnable_pos_emb, mmaction2's option) arrives from a checkpoint as a parameter
(set_pos_embed), interpolated to this grid by vit_zoo.

References
- Dosovitskiy et al. An Image is Worth 16x16 Words (ViT). ICLR 2021.
- Bao, Dong, Piao, Wei. BEiT: BERT Pre-Training of Image Transformers. ICLR 2022 (q/v biases,
  layer scale, layer-wise lr decay).
- Tong, Song, Wang, Wang. VideoMAE: Masked Autoencoders are Data-Efficient Learners for
  Self-Supervised Video Pre-Training. NeurIPS 2022 (ViT-S/B/L/H, tubelet 2x16x16).
- Wang et al. VideoMAE V2: Scaling Video Masked Autoencoders with Dual Masking. CVPR 2023
  (ViT-g/14).
- Followed: MCG-NJU/VideoMAE and OpenGVLab/VideoMAEv2 models/modeling_finetune.py
  (VisionTransformer, Block, Attention, PatchEmbed, get_sinusoid_encoding_table, the
  vit_*_patch*_224 constructors).
"""

from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
import torchvision


class ViTSpec(NamedTuple):
    """One video ViT (modeling_finetune.py's vit_*_patch*_224 constructors)."""

    width: int  # embed_dim
    depth: int  # blocks
    heads: int
    mlp_ratio: float
    patch: int  # spatial patch, px; the tubelet is 2 frames
    tubelet: int = 2
    # (width, heads) of its VideoMAE pretraining decoder (modeling_pretrain.py pretrain_videomae_*:
    # decoder_embed_dim, decoder_num_heads); None: that rule for a new size (decoder_of)
    decoder: Optional[tuple] = None


# The video ViTs (model.ARCHS has an entry for each): a new one is one line here, pretraining
# included.
VIT_SPECS = {
    # Tiny CPU arch for tests and the demo (not a published model): DeiT-Ti's width, 4 blocks; its
    # pretraining decoder half that width.
    "vit_t16": ViTSpec(192, 4, 3, 4.0, 16, decoder=(96, 3)),
    # vit_small_patch16_224
    "vit_s16": ViTSpec(384, 12, 6, 4.0, 16, decoder=(192, 3)),
    # vit_base_patch16_224
    "vit_b16": ViTSpec(768, 12, 12, 4.0, 16, decoder=(384, 6)),
    # vit_large_patch16_224
    "vit_l16": ViTSpec(1024, 24, 16, 4.0, 16, decoder=(512, 8)),
    # vit_huge_patch16_224
    "vit_h16": ViTSpec(1280, 32, 16, 4.0, 16, decoder=(512, 8)),
    # VideoMAEv2 vit_giant_patch14_224 (6144 hidden)
    "vit_g14": ViTSpec(1408, 40, 16, 48 / 11, 14, decoder=(512, 8)),
}
EPS = 1e-6  # every LayerNorm of the official models: partial(nn.LayerNorm, eps=1e-6)
# transformers' VideoMAE (modeling_videomae.py): the blocks' layernorm_before / _after take the
# config's layer_norm_eps (1e-12 in the Hub configs), fc_norm is nn.LayerNorm's default (1e-5). A
# network runs with the eps of the source its weights were trained in: (blocks, fc_norm).
OFFICIAL_EPS = (EPS, EPS)
TRANSFORMERS_FC_EPS = 1e-5
INIT_SCALE = 0.001  # run_class_finetuning.py --init_scale: the new head starts 1000x smaller


def decoder_of(spec):
    """(width, heads) of the pretraining decoder of ViTSpec `spec`: its own, else the rule the
    published sizes follow (half the encoder's width, at most 512, 64 channels per head)."""
    if spec.decoder:
        return spec.decoder
    width = min(spec.width // 2, 512)
    return width, max(width // 64, 1)


def sinusoid_table(n, dim):
    """(1, n, dim) the official get_sinusoid_encoding_table: angle pos / 10000^(2 (j // 2) / dim),
    sin on even j, cos on odd j, over the flattened token index (time-major, then rows, then
    columns), computed in float64 and stored in float32 as the official code does (its values,
    rounding included)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    j = torch.arange(dim, dtype=torch.float64)
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * (j // 2) / dim)
    table = torch.where(j.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
    return table.float().unsqueeze(0)


class Attention(nn.Module):
    """Multi-head self-attention, BEiT's biases: qkv without bias, q_bias and v_bias, k unbiased."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        qkv = F.linear(x, self.qkv.weight, bias).reshape(B, N, 3, self.heads, C // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, N, C / heads)
        x = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(C / heads)) v
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()  # exact (erf) GELU, as the official nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm block; init_values > 0: layer scale (gamma_1, gamma_2 per channel, CaiT / BEiT)."""

    def __init__(self, dim, heads, mlp_ratio, drop_path=0.0, init_values=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=EPS)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        # torchvision's StochasticDepth ("row": per sample, survivors scaled by 1 / (1 - p)) is
        # timm's drop_path; model.set_drop_path finds it by type.
        self.drop_path = torchvision.ops.StochasticDepth(drop_path, "row")
        if init_values > 0:
            self.gamma_1 = nn.Parameter(torch.full((dim,), float(init_values)))
            self.gamma_2 = nn.Parameter(torch.full((dim,), float(init_values)))
        else:
            self.gamma_1 = self.gamma_2 = None

    def forward(self, x):  # x: (B, N, C)
        a, m = self.attn, self.mlp
        if self.gamma_1 is None:
            x = x + self.drop_path(a(self.norm1(x)))
            return x + self.drop_path(m(self.norm2(x)))
        x = x + self.drop_path(self.gamma_1 * a(self.norm1(x)))
        return x + self.drop_path(self.gamma_2 * m(self.norm2(x)))


class PatchEmbed(nn.Module):
    """Tubelets of tubelet x patch x patch pixels -> tokens: (B, 3, T, H, W) -> (B, T'H'W', C)."""

    def __init__(self, dim, patch, tubelet):
        super().__init__()
        self.proj = nn.Conv3d(3, dim, (tubelet, patch, patch), (tubelet, patch, patch))

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, C, T', H', W') -> (B, T'H'W', C)


class VideoViT(nn.Module):
    """A VIT_SPECS network for clips of t_length frames of crop_size x crop_size pixels."""

    def __init__(
        self,
        arch,
        num_classes,
        t_length=16,
        crop_size=224,
        dropout=0.0,
        drop_path=0.0,
        init_values=0.0,
        init_scale=INIT_SCALE,
        grad_ckpt=False,
        depth=None,
        norm_eps=OFFICIAL_EPS,
    ):
        super().__init__()
        spec = VIT_SPECS[arch]._replace(depth=depth or VIT_SPECS[arch].depth)  # depth: tests
        self.arch, self.spec, self.grad_ckpt = arch, spec, grad_ckpt
        if geometry_error(arch, t_length, crop_size):
            raise ValueError(geometry_error(arch, t_length, crop_size))
        self.grid = (t_length // spec.tubelet, crop_size // spec.patch, crop_size // spec.patch)
        D = spec.width
        self.patch_embed = PatchEmbed(D, spec.patch, spec.tubelet)
        T_, H_, W_ = self.grid
        self.register_buffer("pos_embed", sinusoid_table(T_ * H_ * W_, D), persistent=False)
        # stochastic depth rising to `drop_path` (float32 steps, as the official torch.linspace); on
        # the CPU even when built on the meta device (bench.py counts)
        rates = torch.linspace(0, drop_path, spec.depth, device="cpu").tolist()
        self.blocks = nn.ModuleList(
            Block(D, spec.heads, spec.mlp_ratio, rates[i], init_values) for i in range(spec.depth)
        )
        self.fc_norm = nn.LayerNorm(D, eps=EPS)
        self.head_dropout = nn.Dropout(dropout)
        self.head = nn.Linear(D, num_classes)
        self.apply(_init_weights)
        with torch.no_grad():  # the official head init: trunc normal 0.02, then x init_scale
            self.head.weight.mul_(init_scale)
            self.head.bias.mul_(init_scale)
        self.set_norm_eps(norm_eps)

    def set_norm_eps(self, norm_eps):
        """The LayerNorms' eps: (the blocks' norm1 / norm2, fc_norm), as the weights' source ran
        them."""
        blocks, fc = (float(e) for e in norm_eps)
        for blk in self.blocks:
            blk.norm1.eps = blk.norm2.eps = blocks
        self.fc_norm.eps = fc
        self.norm_eps = (blocks, fc)

    def set_pos_embed(self, table):
        """A learned position table (1, N, C) for this grid: becomes a trained parameter."""
        assert table.shape == self.pos_embed.shape, f"pos_embed {tuple(table.shape)}"
        del self.pos_embed  # the buffer
        self.pos_embed = nn.Parameter(table.detach().clone().to(self.head.weight.dtype))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A checkpoint of a learned-table model (--evaluate / predict rebuild it without its
        # --pretrained file): the table arrives as a parameter, so make one to receive it.
        key = prefix + "pos_embed"
        if key in state_dict and not isinstance(self.pos_embed, nn.Parameter):
            self.set_pos_embed(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def tokens(self, x):
        """(B, 3, T, H, W) -> the last block's tokens (B, T'H'W', C)."""
        if x.dim() != 5:
            raise ValueError(f"{self.arch}: expected a clip batch (B, 3, T, H, W), got {x.shape}")
        B, C, T, H, W = x.shape
        s = self.spec
        if (T // s.tubelet, H // s.patch, W // s.patch) != self.grid or T % s.tubelet:
            T_, H_, W_ = self.grid
            raise ValueError(
                f"{self.arch} was built for {T_ * s.tubelet}x{H_ * s.patch}x{W_ * s.patch} clips "
                f"(T x H x W; its position table has {T_}x{H_}x{W_} tokens), got {T}x{H}x{W}"
            )
        x = self.patch_embed(x) + self.pos_embed.to(x.dtype)  # (B, N, D), N = T'H'W'
        return run_blocks(self.blocks, x, self.grad_ckpt)

    def forward(self, x):
        x = self.fc_norm(self.tokens(x).mean(1))  # (B, D): mean pooling, then fc_norm
        return self.head(self.head_dropout(x))


def run_blocks(blocks, x, grad_ckpt):
    """The blocks in order; grad_ckpt (training only): each recomputed in the backward. The RNG
    (drop path) is replayed, so results are the same bit for bit as without it."""
    for blk in blocks:
        if grad_ckpt and blk.training and torch.is_grad_enabled():
            x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
        else:
            x = blk(x)
    return x


def _init_weights(m):
    """modeling_finetune.py VisionTransformer._init_weights: Linear trunc normal (std 0.02) and zero
    bias, LayerNorm 1 / 0; the Conv3d keeps PyTorch's default."""
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


def geometry_error(arch, t_length, crop_size, specs=VIT_SPECS):
    """Why clips of t_length x crop_size cannot enter `arch` (an entry of `specs`, which have
    `tubelet` and `patch`), in one line; None if they can."""
    s = specs[arch]
    if t_length % s.tubelet:
        return (
            f"--t_length {t_length}: {arch} embeds tubelets of {s.tubelet} frames; "
            f"give a multiple of {s.tubelet}"
        )
    if crop_size % s.patch:
        return (
            f"--crop_size {crop_size}: {arch} cuts {s.patch} px patches; give a multiple of "
            f"{s.patch}"
        )
    return None


def build(
    arch,
    num_classes,
    t_length=16,
    crop_size=224,
    dropout=0.0,
    drop_path=None,
    init_values=0.0,
    grad_ckpt=False,
    depth=None,
):
    """A randomly initialised VIT_SPECS network; drop_path None: 0 (the official default; the
    recipes set 0.1 to 0.3); depth: fewer blocks than the arch's (small test networks)."""
    return VideoViT(
        arch,
        num_classes,
        t_length,
        crop_size,
        dropout,
        drop_path or 0.0,
        init_values,
        grad_ckpt=grad_ckpt,
        depth=depth,
    )
