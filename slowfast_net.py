"""SlowFast and X3D: PySlowFast's two ConvNet families, module for module and name for name.

    model = build(spec)  # spec: a model.ModelSpec whose arch is a key of SLOWFAST or X3D
    logits = model(x)  # x: ONE clip (B, 3, T, H, W); SlowFast takes its slow pathway from it

Parameter names are PySlowFast's own (s1.pathway0_stem.conv, s2.pathway1_res0.branch2.a_bn,
s3_fuse.conv_f2s, head.projection, ...), so its .pyth files (`model_state`) load as they are and
zoo.py renames the other layouts (Caffe2 blobs, pytorchvideo, mmaction2) to these names.
mmaction2's SlowFast is another function of the same tensors less the laterals' BN: its variant
(variant(arch, "mmaction2"), ModelSpec.slowfast_variant) is this module with conv-only laterals and
every alpha-th frame for the slow pathway ("mmaction2_lateral_norm": with the laterals' BN).

References
- Feichtenhofer, Fan, Malik, He. SlowFast Networks for Video Recognition. ICCV 2019.
- Feichtenhofer. X3D: Expanding Architectures for Efficient Video Recognition. CVPR 2020.
- Wang, Girshick, Gupta, He. Non-local Neural Networks. CVPR 2018.
- facebookresearch/SlowFast: slowfast/models/video_model_builder.py (SlowFast, X3D,
  FuseFastToSlow), resnet_helper.py (ResStage, ResBlock, BottleneckTransform, X3DTransform),
  stem_helper.py (ResNetBasicStem, X3DStem), head_helper.py (ResNetBasicHead, X3DHead),
  nonlocal_helper.py, operators.py (SE), models/utils.py (round_width), datasets/utils.py
  (pack_pathway_output), utils/weight_init_helper.py; configs/Kinetics/*.yaml for the values below.
- open-mmlab/mmaction2 (commit 4d6c934): models/backbones/resnet3d_slowfast.py (ResNet3dSlowFast,
  ResNet3dPathway), resnet3d.py, heads/slowfast_head.py; configs/recognition/slowfast/*.py.
"""

import math
from typing import NamedTuple

import torch
import torch.nn as nn


class SlowFastSpec(NamedTuple):
    """One SlowFast network (PySlowFast's RESNET / SLOWFAST / NONLOCAL config keys)."""

    layers: tuple  # blocks per stage res2..res5 (RESNET.DEPTH 50 / 101)
    alpha: int  # SLOWFAST.ALPHA: fast frames per slow frame, the laterals' temporal stride
    fusion_kernel: int  # SLOWFAST.FUSION_KERNEL_SZ: temporal kernel of the laterals
    temporal_blocks: tuple = (3, 4, 6, 3)  # RESNET.NUM_BLOCK_TEMP_KERNEL: first n blocks 3x1x1
    nonlocal_blocks: tuple = ((), (), (), ())  # NONLOCAL.LOCATION of the slow pathway, per stage
    beta_inv: int = 8  # SLOWFAST.BETA_INV: fast channels = slow channels / beta_inv
    fusion_ratio: int = 2  # SLOWFAST.FUSION_CONV_CHANNEL_RATIO: lateral channels = fast * ratio
    width: int = 64  # RESNET.WIDTH_PER_GROUP: the slow stem's channels
    # blocks per stage of the fast pathway; None: `layers` (mmaction2's R101-R50 has another depth)
    fast_layers: tuple = None
    # The laterals: conv -> BN -> ReLU (PySlowFast's FuseFastToSlow) or the conv alone (mmaction2's
    # ResNet3dPathway with lateral_norm False, its default and every config's but one, VARIANTS).
    lateral_norm: bool = True
    # The slow pathway's frames: "linspace" (PySlowFast's pack_pathway_output) or "stride", every
    # alpha-th frame from the first (mmaction2's interpolate(x, scale 1 / resample_rate, nearest)).
    slow_frames: str = "linspace"


class X3DSpec(NamedTuple):
    """One X3D network (PySlowFast's X3D config keys; X3D-XS, S and M share one network)."""

    depth_factor: float  # X3D.DEPTH_FACTOR
    width_factor: float = 2.0  # X3D.WIDTH_FACTOR
    bottleneck_factor: float = 2.25  # X3D.BOTTLENECK_FACTOR
    dim_c1: int = 12  # X3D.DIM_C1
    dim_c5: int = 2048  # X3D.DIM_C5


R50, R101 = (3, 4, 6, 3), (3, 4, 23, 3)
# configs/Kinetics/SLOWFAST_4x16_R50.yaml, SLOWFAST_8x8_R50.yaml, SLOWFAST_NLN_8x8_R50.yaml,
# c2/SLOWFAST_8x8_R101_101_101.yaml, c2/SLOWFAST_16x8_R101_50_50.yaml (+ the NLN one). "16x8" is
# the same network as "8x8" fed 64 frames: the frame count is --t_length.
SLOWFAST = {
    "slowfast_r50_4x16": SlowFastSpec(R50, alpha=8, fusion_kernel=5),
    "slowfast_r50_8x8": SlowFastSpec(R50, alpha=4, fusion_kernel=7),
    # configs/Charades/SLOWFAST_16x8_R50.yaml (and _multigrid): the 8x8 network, fed 64 frames
    "slowfast_r50_16x8": SlowFastSpec(R50, alpha=4, fusion_kernel=7),
    "slowfast_r50_8x8_nl": SlowFastSpec(R50, 4, 5, nonlocal_blocks=((), (1, 3), (1, 3, 5), ())),
    "slowfast_r101_8x8": SlowFastSpec(R101, 4, 5, temporal_blocks=(3, 4, 23, 3)),
    "slowfast_r101_16x8": SlowFastSpec(R101, 4, 5),
    "slowfast_r101_16x8_nl": SlowFastSpec(R101, 4, 5, nonlocal_blocks=((), (), (6, 13, 20), ())),
    # mmaction2's slowfast_r101-r50_32xb8-4x16x1: an R101 slow pathway beside an R50 fast one (no
    # PySlowFast file; mmaction2's inflate (0, 0, 1, 1): every res4 block 3x1x1).
    "slowfast_r101_r50_4x16": SlowFastSpec(R101, 8, 5, (3, 4, 23, 3), fast_layers=R50),
    # Not a zoo network: one block per stage, width 16, alpha 2 (4-frame clips), for CPU tests and
    # the demo.
    "slowfast_tiny": SlowFastSpec((1, 1, 1, 1), 2, 5, (1, 1, 1, 1), ((), (), (0,), ()), width=16),
}
# The networks mmaction2 builds (ResNet3dSlowFast at 4d6c934) for the same archs: conv-only laterals
# and every alpha-th frame (its resample_rate equals speed_ratio in every config: the fast pathway
# is the clip). Its configs match the archs' PySlowFast values (R50 4x16: speed_ratio 8,
# fusion_kernel 5; R50 8x8: 4, 7) except slowfast_r101_8xb8-8x8x1, which inherits fusion_kernel 7
# from the R50 8x8 config where PySlowFast's R101 8x8 has 5.
# One published file, slowfast_r50_8xb8-8x8x1-steplr, sets lateral_norm True: BN and ReLU after the
# lateral conv as PySlowFast's, with mmaction2's frames.
VARIANTS = {
    "pyslowfast": {},
    "mmaction2": dict(lateral_norm=False, slow_frames="stride"),
    "mmaction2_lateral_norm": dict(slow_frames="stride"),
}
MMACTION2_ARCHS = {"slowfast_r101_8x8": dict(fusion_kernel=7)}
# configs/Kinetics/X3D_XS.yaml, X3D_S.yaml, X3D_M.yaml (WIDTH_FACTOR 2.0, DEPTH_FACTOR 2.2,
# BOTTLENECK_FACTOR 2.25) and X3D_L.yaml (DEPTH_FACTOR 5.0); they differ in frames and crop.
X3D = {"x3d_xs": X3DSpec(2.2), "x3d_s": X3DSpec(2.2), "x3d_m": X3DSpec(2.2), "x3d_l": X3DSpec(5.0)}


def variant(arch, name=None):
    """The SlowFastSpec of `arch` as `name` (a key of VARIANTS; None: "pyslowfast") builds it."""
    name = name or "pyslowfast"
    if name not in VARIANTS:
        raise ValueError(f"--slowfast-variant {name}: choose one of {', '.join(VARIANTS)}")
    spec = SLOWFAST[arch]._replace(**VARIANTS[name])
    mmaction2 = name.startswith("mmaction2")
    return spec._replace(**MMACTION2_ARCHS.get(arch, {})) if mmaction2 else spec


def slow_indices(T, alpha):
    """The frames of a T-frame clip the slow pathway sees: PySlowFast's pack_pathway_output takes
    torch.linspace(0, T - 1, T // alpha).long() (in float32, its default dtype). For T a multiple of
    alpha this is close to, but not always, every alpha-th frame (T=32, alpha=4: 0, 4, 8, 13,
    ...)."""
    return torch.linspace(0, T - 1, T // alpha, dtype=torch.float32).long()


def frames_error(arch, T):
    """Why a clip of T frames cannot feed `arch`, in one line; None if it can (train.check_args)."""
    spec = SLOWFAST.get(arch)
    if spec is None or T % spec.alpha == 0:
        return None
    fits = max(spec.alpha, T // spec.alpha * spec.alpha)
    return (
        f"--t_length {T}: --arch {arch}'s slow pathway takes every {spec.alpha}th frame of the "
        f"clip (alpha {spec.alpha}): use a multiple of {spec.alpha}, e.g. {fits}"
    )


def round_width(width, multiplier, min_width=1, divisor=1):
    """Channels after a width multiplier, a multiple of `divisor` (PySlowFast models/utils.py)."""
    width *= multiplier
    out = max(min_width, int(width + divisor / 2) // divisor * divisor)
    return int(out + divisor if out < 0.9 * width else out)


def conv(c_in, c_out, kernel, stride=1, groups=1, bias=False):
    """A Conv3d with "same" padding for odd kernels; kernel / stride as (t, h, w) or an int."""
    kernel = kernel if isinstance(kernel, tuple) else (kernel,) * 3
    stride = stride if isinstance(stride, tuple) else (stride,) * 3
    pad = tuple(k // 2 for k in kernel)
    return nn.Conv3d(c_in, c_out, kernel, stride, pad, groups=groups, bias=bias)


class ResNetStem(nn.Module):
    """conv (kt x 7 x 7, spatial stride 2) -> BN -> ReLU -> 1x3x3 max-pool (stem_helper.py)."""

    def __init__(self, c_out, kt):
        super().__init__()
        self.conv = conv(3, c_out, (kt, 7, 7), (1, 2, 2))
        self.bn = nn.BatchNorm3d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.pool_layer = nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))

    def forward(self, x):
        return self.pool_layer(self.relu(self.bn(self.conv(x))))


class X3DStem(nn.Module):
    """1x3x3 conv (stride 2) -> depthwise 5x1x1 conv -> BN -> ReLU, no pool
    (stem_helper.X3DStem)."""

    def __init__(self, c_out):
        super().__init__()
        self.conv_xy = conv(3, c_out, (1, 3, 3), (1, 2, 2))
        self.conv = conv(c_out, c_out, (5, 1, 1), groups=c_out)
        self.bn = nn.BatchNorm3d(c_out)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(self.conv_xy(x))))


class SE(nn.Module):
    """Squeeze-excitation: x * sigmoid(fc2(relu(fc1(mean(x))))), fc1 to `ratio` of the channels
    rounded to a multiple of 8, at least 8 (operators.SE; its default act is a ReLU)."""

    def __init__(self, c, ratio=0.0625):
        super().__init__()
        c_fc = round_width(c, ratio, min_width=8, divisor=8)
        self.fc1 = nn.Conv3d(c, c_fc, 1)
        self.fc2 = nn.Conv3d(c_fc, c, 1)

    def forward(self, x):
        s = x.mean((2, 3, 4), keepdim=True)
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))


class Bottleneck(nn.Module):
    """SlowFast's: kt x1x1 (a) -> 1x3x3 (b, spatial stride) -> 1x1x1 (c), BN + ReLU between
    (resnet_helper.BottleneckTransform). X3D's (x3d=True): 1x1x1 (a) -> depthwise 3x3x3 (b) -> SE
    on even blocks -> Swish -> 1x1x1 (c) (resnet_helper.X3DTransform: SE comes BEFORE the Swish)."""

    def __init__(self, c_in, c_out, c_inner, kt, stride, x3d=False, se=False):
        super().__init__()
        self.a = conv(c_in, c_inner, (1 if x3d else kt, 1, 1))
        self.a_bn = nn.BatchNorm3d(c_inner)
        self.a_relu = nn.ReLU(inplace=True)
        groups = c_inner if x3d else 1
        self.b = conv(c_inner, c_inner, (kt if x3d else 1, 3, 3), (1, stride, stride), groups)
        self.b_bn = nn.BatchNorm3d(c_inner)
        if se:
            self.se = SE(c_inner)
        # Swish = nn.SiLU: x * sigmoid(x), as pytorchvideo's Swish, and exportable.
        self.b_relu = nn.SiLU() if x3d else nn.ReLU(inplace=True)
        self.c = conv(c_inner, c_out, 1)
        self.c_bn = nn.BatchNorm3d(c_out)

    def forward(self, x):
        x = self.b_bn(self.b(self.a_relu(self.a_bn(self.a(x)))))
        x = self.b_relu(self.se(x) if hasattr(self, "se") else x)
        return self.c_bn(self.c(x))


class ResBlock(nn.Module):
    """relu(shortcut(x) + branch2(x)); the shortcut is a strided 1x1x1 conv + BN where the
    channels or the size change (resnet_helper.ResBlock)."""

    def __init__(self, c_in, c_out, c_inner, kt, stride, x3d=False, se=False):
        super().__init__()
        if c_in != c_out or stride != 1:
            self.branch1 = conv(c_in, c_out, 1, (1, stride, stride))
            self.branch1_bn = nn.BatchNorm3d(c_out)
        self.branch2 = Bottleneck(c_in, c_out, c_inner, kt, stride, x3d, se)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        f_x = self.branch2(x)
        shortcut = self.branch1_bn(self.branch1(x)) if hasattr(self, "branch1") else x
        return self.relu(shortcut + f_x)


class NonLocal(nn.Module):
    """Dot-product non-local block, keys and values max-pooled 1x2x2 (nonlocal_helper.Nonlocal
    with PySlowFast's NONLOCAL.INSTANTIATION dot_product, NONLOCAL.POOL [1, 2, 2])."""

    def __init__(self, c):
        super().__init__()
        c_inner = c // 2
        self.conv_theta, self.conv_phi = nn.Conv3d(c, c_inner, 1), nn.Conv3d(c, c_inner, 1)
        self.conv_g, self.conv_out = nn.Conv3d(c, c_inner, 1), nn.Conv3d(c_inner, c, 1)
        self.bn = nn.BatchNorm3d(c)
        self.pool = nn.MaxPool3d((1, 2, 2), (1, 2, 2))

    def forward(self, x):
        B, C, T, H, W = x.shape
        theta = self.conv_theta(x).flatten(2)  # (B, C/2, THW)
        pooled = self.pool(x)
        phi, g = self.conv_phi(pooled).flatten(2), self.conv_g(pooled).flatten(2)  # (B, C/2, N)
        affinity = torch.einsum("bct,bcn->btn", theta, phi) / phi.shape[2]
        y = torch.einsum("btn,bcn->bct", affinity, g).view(B, -1, T, H, W)
        return x + self.bn(self.conv_out(y))


class Stage(nn.Module):
    """One stage over one or two pathways: blocks pathway{p}_res{i}, non-local blocks
    pathway{p}_nonlocal{i} after block i (resnet_helper.ResStage's names)."""

    def __init__(self, pathways):
        super().__init__()
        self.blocks = []  # per pathway: the module names in forward order
        for p, (blocks, nonlocal_after) in enumerate(pathways):
            names = []
            for i, block in enumerate(blocks):
                self.add_module(f"pathway{p}_res{i}", block)
                names.append(f"pathway{p}_res{i}")
                if i in nonlocal_after:
                    self.add_module(
                        f"pathway{p}_nonlocal{i}", NonLocal(block.branch2.c.out_channels)
                    )
                    names.append(f"pathway{p}_nonlocal{i}")
            self.blocks.append(names)

    def forward(self, xs):
        out = []
        for x, names in zip(xs, self.blocks):
            for name in names:
                x = getattr(self, name)(x)
            out.append(x)
        return out


class Fuse(nn.Module):
    """The lateral connection: the fast features, conv'd (fusion_kernel x1x1, temporal stride alpha)
    to ratio x their channels, then BN and ReLU (video_model_builder.FuseFastToSlow; mmaction2's
    lateral ConvModule has the conv alone: spec.lateral_norm False), concatenated to the slow
    ones."""

    def __init__(self, c_fast, spec):
        super().__init__()
        c = c_fast * spec.fusion_ratio
        self.conv_f2s = conv(c_fast, c, (spec.fusion_kernel, 1, 1), (spec.alpha, 1, 1))
        if spec.lateral_norm:
            self.bn = nn.BatchNorm3d(c)
            self.relu = nn.ReLU(inplace=True)

    def forward(self, xs):
        slow, fast = xs
        lateral = self.conv_f2s(fast)
        if hasattr(self, "bn"):
            lateral = self.relu(self.bn(lateral))
        return [torch.cat([slow, lateral], 1), fast]


class ResNetHead(nn.Module):
    """Each pathway average-pooled over (T, H, W), concatenated, dropout, projection
    (head_helper.ResNetBasicHead; PySlowFast pools a fixed TRAIN_CROP_SIZE/32 window, the same
    numbers at the training size; a global pool here takes any size)."""

    def __init__(self, c_in, num_classes, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(c_in, num_classes)

    def features(self, xs):
        return torch.cat([x.mean((2, 3, 4)) for x in xs], 1)  # (B, sum of the pathways' C)

    def forward(self, features):
        # The head's input is what the classifier sees (features.py hooks it): the pooled features.
        return self.projection(self.dropout(features))


class X3DHead(nn.Module):
    """conv_5 (1x1x1) -> BN -> ReLU -> average pool -> lin_5 (1x1x1 to dim_c5, no BN) -> ReLU ->
    dropout -> projection (head_helper.X3DHead with X3D.BN_LIN5 False)."""

    def __init__(self, c_in, c_inner, c_out, num_classes, dropout):
        super().__init__()
        self.conv_5 = conv(c_in, c_inner, 1)
        self.conv_5_bn = nn.BatchNorm3d(c_inner)
        self.lin_5 = conv(c_inner, c_out, 1)
        self.dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(c_out, num_classes)

    def features(self, xs):
        x = torch.relu(self.conv_5_bn(self.conv_5(xs[0]))).mean((2, 3, 4), keepdim=True)
        return torch.relu(self.lin_5(x)).flatten(1)  # (B, dim_c5)

    def forward(self, features):
        return self.projection(self.dropout(features))


def init_weights(model):
    """PySlowFast's init (utils/weight_init_helper.py with RESNET.ZERO_INIT_FINAL_BN True, as every
    Kinetics config sets it): convs MSRA fan-out (bias 0), BN 1 / 0 and 0 for the last BN of each
    bottleneck and of each non-local block, the projection N(0, 0.01), bias 0."""
    last_bns = {id(m.c_bn) for m in model.modules() if isinstance(m, Bottleneck)}
    last_bns |= {id(m.bn) for m in model.modules() if isinstance(m, NonLocal)}
    for m in model.modules():
        if isinstance(m, nn.Conv3d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm3d):
            nn.init.constant_(m.weight, 0.0 if id(m) in last_bns else 1.0)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.01)
            nn.init.zeros_(m.bias)


class SlowFast(nn.Module):
    """PySlowFast's SlowFast (video_model_builder.SlowFast, no detection head), or mmaction2's
    (ResNet3dSlowFast + SlowFastHead) with spec = variant(arch, "mmaction2"). forward takes ONE clip
    of T frames (the fast pathway) and gives the slow pathway slow_indices(T, alpha) of it (every
    alpha-th frame in mmaction2's)."""

    def __init__(self, spec, num_classes, dropout=0.0):
        super().__init__()
        self.spec = spec
        w, beta = spec.width, spec.beta_inv  # RESNET.WIDTH_PER_GROUP, one group
        # SlowFast's temporal kernels (_TEMPORAL_KERNEL_BASIS["slowfast"]): slow 1, 1, 1, 3, 3 and
        # fast 5, 3, 3, 3, 3 for conv1, res2..res5.
        kt = {0: (1, 1, 1, 3, 3), 1: (5, 3, 3, 3, 3)}
        self.s1 = nn.Module()
        self.s1.pathway0_stem = ResNetStem(w, kt[0][0])
        self.s1.pathway1_stem = ResNetStem(w // beta, kt[1][0])
        self.s1_fuse = Fuse(w // beta, spec)
        c_in = [w + w // beta * spec.fusion_ratio, w // beta]
        for s, depths in enumerate(zip(spec.layers, spec.fast_layers or spec.layers)):
            c_out, c_inner, stride = w * 4 * 2**s, w * 2**s, 1 if s == 0 else 2
            pathways = []
            for p, (div, n) in enumerate(zip((1, beta), depths)):
                blocks = [
                    ResBlock(
                        c_in[p] if i == 0 else c_out // div,
                        c_out // div,
                        c_inner // div,
                        kt[p][s + 1] if i < spec.temporal_blocks[s] else 1,
                        stride if i == 0 else 1,
                    )
                    for i in range(n)
                ]
                pathways.append((blocks, spec.nonlocal_blocks[s] if p == 0 else ()))
            self.add_module(f"s{s + 2}", Stage(pathways))
            if s < 3:
                self.add_module(f"s{s + 2}_fuse", Fuse(c_out // beta, spec))
            c_in = [c_out + c_out // beta * spec.fusion_ratio, c_out // beta]
        self.head = ResNetHead(w * 32 + w * 32 // beta, num_classes, dropout)
        self.head.fast_channels = w * 32 // beta  # the last (C_slow + C_fast) features
        init_weights(self)

    def pathways(self, x):
        """(B, 3, T, H, W) -> [slow (B, 3, T / alpha, H, W), fast = x] (PackPathway)."""
        B, C, T, H, W = x.shape
        alpha = self.spec.alpha
        if T % alpha:
            raise ValueError(frames_error(getattr(self, "arch", "slowfast_r50_8x8"), T))
        if self.spec.slow_frames == "stride":
            return [x[:, :, ::alpha], x]
        return [x.index_select(2, slow_indices(T, alpha).to(x.device)), x]

    def backbone(self, x):
        """The two pathways' last features [(B, 2048, T/alpha, H/32, W/32), (B, 256, T, ...)]."""
        xs = self.s1_fuse(self.stems(self.pathways(x)))
        for s in (2, 3, 4):
            xs = getattr(self, f"s{s}_fuse")(getattr(self, f"s{s}")(xs))
        return self.s5(xs)

    def stems(self, xs):
        return [self.s1.pathway0_stem(xs[0]), self.s1.pathway1_stem(xs[1])]

    def features(self, x):
        """Both pathways' pooled features concatenated, as the head sees them: (B, 2304)."""
        return self.head.features(self.backbone(x))

    def forward(self, x):
        return self.head(self.features(x))


class X3DNet(nn.Module):
    """PySlowFast's X3D (video_model_builder.X3D): the expansion rules of its constructor."""

    def __init__(self, spec, num_classes, dropout=0.0):
        super().__init__()
        self.spec = spec
        c1 = round_width(spec.dim_c1, spec.width_factor)
        self.s1 = nn.Module()
        self.s1.pathway0_stem = X3DStem(c1)
        # res2..res5: 1, 2, 5, 3 blocks x DEPTH_FACTOR (rounded up), DIM_C1 x 1, 2, 4, 8 channels
        # (each x2 rounded to a multiple of 8) x WIDTH_FACTOR, all spatial stride 2.
        c_in, dim = c1, spec.dim_c1
        for s, blocks in enumerate((1, 2, 5, 3)):
            dim = dim if s == 0 else round_width(dim, 2.0, divisor=8)
            c_out = round_width(dim, spec.width_factor)
            c_inner = int(spec.bottleneck_factor * c_out)
            n = int(math.ceil(spec.depth_factor * blocks))
            block = [
                ResBlock(
                    c_in if i == 0 else c_out,
                    c_out,
                    c_inner,
                    3,
                    2 if i == 0 else 1,
                    True,
                    i % 2 == 0,
                )
                for i in range(n)
            ]
            self.add_module(f"s{s + 2}", Stage([(block, ())]))
            c_in = c_out
        self.head = X3DHead(c_out, c_inner, spec.dim_c5, num_classes, dropout)
        init_weights(self)

    def backbone(self, x):
        x = [self.s1.pathway0_stem(x)]
        return self.s5(self.s4(self.s3(self.s2(x))))

    def features(self, x):
        """lin_5's pooled features, as the projection sees them: (B, dim_c5)."""
        return self.head.features(self.backbone(x))

    def forward(self, x):
        return self.head(self.features(x))


def build(spec):
    """The network of a model.ModelSpec whose arch is a key of SLOWFAST or X3D."""
    if spec.arch in SLOWFAST:
        model = SlowFast(variant(spec.arch, spec.slowfast_variant), spec.num_classes, spec.dropout)
        # what the checkpoint's args record (train.make_model): the network, not the flag's None
        model.slowfast_variant = spec.slowfast_variant or "pyslowfast"
        return model
    return X3DNet(X3D[spec.arch], spec.num_classes, spec.dropout)
