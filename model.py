"""The I3D ResNet-3D family, torchvision's video models, and exact ImageNet -> 3D inflation.

    # zoo.build_model: with weights
    model = build_network("resnet50_3d", num_classes=400, dropout=0.5)
    logits = model(x)  # x: float (B, 3, T, H, W), normalised; logits: (B, num_classes)

resnet50_3d is the I3D-R50 of the Non-local / PySlowFast / mmaction2 (i3d_r50) model zoos:
28.04M parameters at 400 classes, 56.8 GMACs for a 16x224x224 clip. Parameter names mirror
torchvision's 2D resnet (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc, ...), so inflating
ImageNet weights is a name-for-name copy in which every conv kernel gains a temporal axis.
resnet50_3d_slowonly is the Slow-only R50 of the same zoos; resnet50_3d_mmaction is mmaction2's
i3d_r50, which strides time by 2 in conv1 and the first max-pool (same tensors, another network).
Pretrained weights (ImageNet, our checkpoints, the Kinetics zoos) are read and renamed by zoo.py.

References
- He, Zhang, Ren, Sun. Deep Residual Learning for Image Recognition. CVPR 2016.
- Carreira, Zisserman. Quo Vadis, Action Recognition? A New Model and the Kinetics Dataset
  (I3D, inflation of 2D ImageNet filters). CVPR 2017.
- Wang, Girshick, Gupta, He. Non-local Neural Networks. CVPR 2018 (the I3D-R50 baseline:
  5x7x7 stem, temporal pool after res2, 3x1x1 in alternate bottlenecks).
- Feichtenhofer, Fan, Malik, He. SlowFast Networks for Video Recognition. ICCV 2019 (Slow-only).
- Tran et al. A Closer Look at Spatiotemporal Convolutions for Action Recognition. CVPR 2018
  (r3d / mc3 / r2plus1d, provided here through torchvision).
- torchvision/models/resnet.py (layout and names), facebookresearch/SlowFast (PySlowFast),
  facebookresearch/pytorchvideo (models/resnet.py, hub), open-mmlab/mmaction2 (ResNet3d, i3d_r50
  configs).
"""

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn as nn
import torchvision

import mvit_net
import slowfast_net
import vit
import vjepa


def init_conv_bn(*modules):
    """torchvision's ResNet init for the given convs and BatchNorms (not their children): each
    module calls it on the layers it creates itself, so a block subclass that re-initialises its
    own layers afterwards (zero-init of a last BN, a custom conv init) keeps what it chose."""
    for m in modules:
        if isinstance(m, nn.Conv3d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm3d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class BasicBlock3D(nn.Module):
    """Two 3x3 convs (torchvision's BasicBlock). `inflate` makes conv1 3x3x3 instead of 1x3x3.

    This is our choice for basic blocks: the temporal conv goes where the bottleneck puts it (the
    first conv of the block), as mmaction2's BasicBlock3d does. conv2 stays 1x3x3.
    """

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, inflate=False):
        super().__init__()
        kt = 3 if inflate else 1
        # Spatial stride in conv1, as torchvision's BasicBlock (so ImageNet weights fit the role).
        self.conv1 = nn.Conv3d(
            inplanes, planes, (kt, 3, 3), (1, stride, stride), (kt // 2, 1, 1), bias=False
        )
        self.bn1 = nn.BatchNorm3d(planes)
        self.conv2 = nn.Conv3d(planes, planes, (1, 3, 3), 1, (0, 1, 1), bias=False)
        self.bn2 = nn.BatchNorm3d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample  # built and initialised by ResNet3D._make_layer
        init_conv_bn(self.conv1, self.bn1, self.conv2, self.bn2)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck3D(nn.Module):
    """1x1 -> 3x3 -> 1x1 (x4 channels). `inflate` makes conv1 3x1x1 (pad 1,0,0) instead of 1x1x1.

    The spatial stride sits in conv2 (the 3x3), torchvision's "ResNet v1.5" and PySlowFast's
    layout; the original Caffe ResNet strided conv1. torchvision's ImageNet weights were trained
    with the stride in conv2, so putting it elsewhere would silently degrade inflated weights.
    """

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, inflate=False):
        super().__init__()
        kt = 3 if inflate else 1
        self.conv1 = nn.Conv3d(inplanes, planes, (kt, 1, 1), 1, (kt // 2, 0, 0), bias=False)
        self.bn1 = nn.BatchNorm3d(planes)
        self.conv2 = nn.Conv3d(
            planes, planes, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False
        )
        self.bn2 = nn.BatchNorm3d(planes)
        self.conv3 = nn.Conv3d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm3d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample  # built and initialised by ResNet3D._make_layer
        init_conv_bn(self.conv1, self.bn1, self.conv2, self.bn2, self.conv3, self.bn3)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


# Inflate patterns, one per stage res2..res5, 1 = temporal kernel 3 in the block's first conv.
# A pattern is a cycle repeated over the blocks of its stage (PySlowFast's _TEMPORAL_KERNEL_BASIS
# convention), so I3D gives res3 (1,0,1,0), res4 (1,0,1,0,1,0) at depth 50 and 1,0,1,0,... over
# the 23 blocks of res4 at depth 101, as in the Non-local release.
I3D = ((1,), (1, 0), (1, 0), (0, 1))
SLOW = ((0,), (0,), (1,), (1,))  # Slow-only: no temporal conv before res4 (SlowFast paper, Table 1)


class ArchSpec(NamedTuple):
    """One ResNet-3D: what differs between the I3D / Slow-only / mmaction2 variants."""

    block: type  # BasicBlock3D or Bottleneck3D
    layers: tuple  # blocks per stage res2..res5
    conv1_t: int  # temporal kernel of conv1 (5 for I3D, 1 for Slow-only)
    temporal_pool: bool  # (2,1,1) max-pool after res2 ("pool2")
    inflate: tuple  # patterns per stage, see I3D above
    twin2d: Optional[str]  # torchvision 2D ResNet whose ImageNet weights inflate into it
    stem_stride_t: int = 1  # temporal stride of conv1 AND of the first max-pool


# The ResNet-3D layouts: archs, each one entry of ARCHS below (resnet3d).
R10 = ArchSpec(BasicBlock3D, (1, 1, 1, 1), 5, True, I3D, None)  # tiny CPU arch for tests/demo
R18 = ArchSpec(BasicBlock3D, (2, 2, 2, 2), 5, True, I3D, "resnet18")
R34 = ArchSpec(BasicBlock3D, (3, 4, 6, 3), 5, True, I3D, "resnet34")
# PySlowFast I3D_8x8_R50 = pytorchvideo i3d_r50: Kinetics weights trained on 8x8 clips
# (8 frames, stride 8).
R50 = ArchSpec(Bottleneck3D, (3, 4, 6, 3), 5, True, I3D, "resnet50")
R101 = ArchSpec(Bottleneck3D, (3, 4, 23, 3), 5, True, I3D, "resnet101")
# PySlowFast SLOW_8x8_R50 = pytorchvideo slow_r50 = mmaction2 slowonly_r50 (8x8 clips).
R50_SLOW = ArchSpec(Bottleneck3D, (3, 4, 6, 3), 1, False, SLOW, "resnet50")
# mmaction2's i3d_r50 (configs/_base_/models/i3d_r50.py: conv1 5x7x7 with conv1_stride_t=2, the
# first max-pool with pool1_stride_t=2, pool2, inflate ((1,1,1),(1,0,1,0),(1,0,1,0,1,0),(0,1,0)),
# 3x1x1). Same tensors as resnet50_3d, another network: time shrinks 4x in the stem and 8x before
# res3. Its Kinetics-400 weights were trained on 32x2x1 clips (SampleFrames clip_len=32,
# frame_interval=2: 32 frames, every 2nd; --t_length 32 --t_stride 2) at 224 px, ImageNet mean/std.
R50_MMACTION = R50._replace(stem_stride_t=2)


def min_frames(spec):
    """Fewest input frames the arch maps to >= 1 frame at the end. Every conv pads T to "same" size
    but may stride (floor((T + 2p - k) / s) + 1); the (2,1,1) pool2 needs 2 frames in."""

    def frames_out(T):
        T = (T + 2 * (spec.conv1_t // 2) - spec.conv1_t) // spec.stem_stride_t + 1  # conv1
        T = (T - 1) // spec.stem_stride_t + 1  # first max-pool: temporal kernel 1, no padding
        return T // 2 if spec.temporal_pool else T  # pool2: kernel 2, stride 2, floor mode

    T = 1
    while frames_out(T) < 1:  # I3D: 2; Slow-only: 1; mmaction2 i3d_r50: 5
        T += 1
    return T


class FrameMaxPool(nn.Module):
    """nn.MaxPool3d((1, 3, 3), (t_stride, 2, 2), (0, 1, 1)), the stem's pool, computed as a 2D pool
    over each frame: the same numbers. Trap (CUDA): max_pool3d's backward adds into overlapping
    windows with atomicAdd in whatever order the threads run, so two identical runs differ in the
    last bits (use_deterministic_ algorithms refuses it); max_pool2d's backward gathers,
    deterministic. (B, C, T, H, W) is (B, C*T, H, W), or in channels_last_3d memory (B*T, C, H, W)
    channels-last: views, no copy."""

    def __init__(self, t_stride=1):
        super().__init__()
        self.t_stride = t_stride

    def forward(self, x):
        cl = x.is_contiguous(memory_format=torch.channels_last_3d) and not x.is_contiguous()
        fmt = torch.channels_last_3d if cl else torch.contiguous_format
        x = x[:, :, :: self.t_stride].contiguous(memory_format=fmt)  # t_stride 1: no copy
        B, C, T, H, W = x.shape
        if not cl:
            y = nn.functional.max_pool2d(x.view(B, C * T, H, W), 3, 2, 1)
            return y.view(B, C, T, *y.shape[-2:])
        y = nn.functional.max_pool2d(x.transpose(1, 2).reshape(B * T, C, H, W), 3, 2, 1)
        return y.view(B, T, C, *y.shape[-2:]).transpose(1, 2)


class ResNet3D(nn.Module):
    """A ResNet-3D of layout `spec` (an ArchSpec). Module names follow torchvision's ResNet;
    pool2/dropout hold no weights."""

    arch = "resnet3d"  # build_network names it after its --arch

    def __init__(self, spec, num_classes, dropout=0.0, zero_init_residual=False):
        super().__init__()
        self.min_t = min_frames(spec)  # forward() checks it for a clear message
        self.inplanes = 64
        st = spec.stem_stride_t  # 1, or mmaction2 i3d_r50's 2 (conv1_stride_t = pool1_stride_t = 2)
        self.conv1 = nn.Conv3d(
            3, 64, (spec.conv1_t, 7, 7), (st, 2, 2), (spec.conv1_t // 2, 3, 3), bias=False
        )
        self.bn1 = nn.BatchNorm3d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = FrameMaxPool(st)  # nn.MaxPool3d((1, 3, 3), (st, 2, 2), (0, 1, 1))
        self.layer1 = self._make_layer(spec.block, 64, spec.layers[0], 1, spec.inflate[0])
        # No parameters, so no name to keep in step with torchvision; floor mode (odd T drops a
        # frame).
        self.pool2 = nn.MaxPool3d((2, 1, 1), (2, 1, 1)) if spec.temporal_pool else nn.Identity()
        self.layer2 = self._make_layer(spec.block, 128, spec.layers[1], 2, spec.inflate[1])
        self.layer3 = self._make_layer(spec.block, 256, spec.layers[2], 2, spec.inflate[2])
        self.layer4 = self._make_layer(spec.block, 512, spec.layers[3], 2, spec.inflate[3])
        self.avgpool = nn.AdaptiveAvgPool3d(1)  # global over (T, H, W): any T, odd H/W
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(512 * spec.block.expansion, num_classes)

        # torchvision's init for what this class creates (stem here, shortcuts in _make_layer); each
        # block inits its own layers. fc keeps nn.Linear's default, as in torchvision.
        init_conv_bn(self.conv1, self.bn1)
        if zero_init_residual:  # Goyal et al. 2017: each block starts as identity. Off by default
            # (the zoos train without it; pretrained weights overwrite it).
            for m in self.modules():
                if isinstance(m, (Bottleneck3D, BasicBlock3D)):
                    nn.init.zeros_((m.bn3 if isinstance(m, Bottleneck3D) else m.bn2).weight)

    def _make_layer(self, block, planes, blocks, stride, pattern):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(  # "B" shortcut, names downsample.0 / .1 as torchvision
                nn.Conv3d(
                    self.inplanes, planes * block.expansion, 1, (1, stride, stride), bias=False
                ),
                nn.BatchNorm3d(planes * block.expansion),
            )
            init_conv_bn(*downsample)
        layers = []
        for i in range(blocks):
            inflate = bool(pattern[i % len(pattern)])
            first = i == 0  # only the first block of a stage strides and projects the shortcut
            layers.append(
                block(
                    self.inplanes,
                    planes,
                    stride if first else 1,
                    downsample if first else None,
                    inflate,
                )
            )
            self.inplanes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        if x.dim() != 5:
            raise ValueError(
                f"{self.arch}: expected a clip batch (B, 3, T, H, W), got {tuple(x.shape)}"
            )
        B, C, T, H, W = x.shape
        if T < self.min_t:
            raise ValueError(f"{self.arch} needs at least {self.min_t} frames per clip, got T={T}")
        # (B, 64, T/s^2, H/4, W/4), s = stem_stride_t
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.pool2(self.layer1(x))  # (B, 64*e, T', H/4, W/4); /2 in time with the temporal pool
        x = self.layer4(self.layer3(self.layer2(x)))  # (B, 512*e, T', H/32, W/32)
        x = self.avgpool(x).flatten(1)  # (B, 512*e)
        return self.fc(self.dropout(x))


def inflate_weight(w2d, kt, mode):
    """(C_out, C_in, kh, kw) -> (C_out, C_in, kt, kh, kw). "mean": repeat over time and divide by
    kt, so a clip of identical frames gives the 2D response wherever the kernel does not touch the
    zero padding. "center": the 2D kernel in the middle tap, zeros elsewhere: exact at every
    frame."""
    C_out, C_in, kh, kw = w2d.shape
    if mode == "mean":
        return w2d.unsqueeze(2).repeat(1, 1, kt, 1, 1) / kt
    if mode == "center":
        assert kt % 2 == 1, f"center inflation needs an odd temporal size, got {kt}"
        w3d = w2d.new_zeros(C_out, C_in, kt, kh, kw)
        w3d[:, :, kt // 2] = w2d
        return w3d
    raise ValueError(f"inflate must be 'mean' or 'center', got {mode!r}")


@torch.no_grad()
def copy_weights(model, state, inflate):
    """Copy `state` into `model` name for name, inflating 2D convs. Returns (inflated, copied,
    skipped), skipped = [(name, why)] for the model's tensors left as they were."""
    inflated, copied, skipped = 0, 0, []
    for k, dst in model.state_dict().items():
        w = state.get(k)
        if w is None and k.endswith("num_batches_tracked"):
            # torchvision's V1 ImageNet files (pre torch 0.4.1) and Caffe2 blobs lack it; 0 is right
            continue
        if w is None:
            skipped.append((k, "missing"))
        elif w.dim() == 4 and dst.dim() == 5 and w.shape == dst.shape[:2] + dst.shape[3:]:
            C_out, C_in, kt, kh, kw = dst.shape  # the file's 2D conv is this kernel without kt
            w3d = inflate_weight(w, kt, inflate)
            assert w3d.shape == dst.shape, f"{k}: inflated {tuple(w3d.shape)} != {tuple(dst.shape)}"
            dst.copy_(w3d)
            inflated += 1
        elif w.shape == dst.shape:  # BN, fc, and every tensor of a 3D checkpoint
            dst.copy_(w)
            copied += 1
        else:
            skipped.append(
                (
                    k,
                    f"shape {'x'.join(map(str, w.shape))} in the file, "
                    f"{'x'.join(map(str, dst.shape))} here",
                )
            )
    return inflated, copied, skipped


# ---- TSN and TSM: 2D networks over sparse segments -----------------------------------------------


class Consensus:
    """TSN's average consensus (Wang et al. 2016, "segmental consensus" with g = average): a clip
    batch (B, C, N * L, H, W) of N snippets of L frames each is run snippet by snippet through the
    network, as a batch of B * N snippets, and the N snippets' logits are averaged (before any
    softmax). A mixin before the network's class: it reshapes, the network's own forward computes.
    `snippet` = L for a 3D network; 1 for a 2D one (every frame is an image, a 2D snippet of L
    frames is L segments)."""

    snippet = 1
    frames = None  # TSM: the frames per clip its shift expects (set by add_shift); None: any

    def forward(self, x):
        B, C, T, H, W = x.shape
        L = self.snippet
        if T % L or (self.frames is not None and T != self.frames):
            raise ValueError(
                f"{self.arch}: got {T} frames per clip; this model takes "
                f"{self.frames or f'a multiple of {L}'} (--num_segments x --t_length)"
            )
        N = T // L
        # (B*N, C, L, H, W)
        x = x.reshape(B, C, N, L, H, W).transpose(1, 2).reshape(B * N, C, L, H, W)
        # 2D: (B*N, C, H, W)
        logits = super().forward(x if isinstance(self, ResNet3D) else x[:, :, 0])
        return logits.view(B, N, -1).mean(1)  # (B, num_classes)


class SegmentResNet2D(Consensus, torchvision.models.ResNet):
    """torchvision's ResNet, segment by segment; dropout before fc (TSN's), in the weightless
    avgpool."""

    def __init__(self, block, layers, num_classes, dropout=0.0):
        super().__init__(block, list(layers), num_classes=num_classes)
        self.avgpool = nn.Sequential(self.avgpool, nn.Dropout(dropout))


class SegmentResNet3D(Consensus, ResNet3D):
    """A ResNet-3D clip by clip: TSN mode with a 3D arch (the original's dense segments)."""


def temporal_shift(x, frames, div):
    """TSM's shift (Lin, Gan, Han. TSM: Temporal Shift Module for Efficient Video Understanding,
    ICCV 2019; mit-han-lab/temporal-shift-module ops/temporal_shift.py): x (B * T, C, H, W), T =
    frames per clip; channels [0, C/div) take the next frame's values, [C/div, 2C/div) the previous
    frame's, the rest stay; zeros enter at the ends. No parameters, no multiplies."""
    BT, C, H, W = x.shape
    x = x.view(BT // frames, frames, C, H, W)
    fold = C // div
    pad = x.new_zeros(x.shape[0], 1, fold, H, W)
    back = torch.cat((x[:, 1:, :fold], pad), 1)  # frame t sees t + 1
    forward = torch.cat((pad, x[:, :-1, fold : 2 * fold]), 1)  # frame t sees t - 1
    return torch.cat((back, forward, x[:, :, 2 * fold :]), 2).view(BT, C, H, W)


class ShiftConv2d(nn.Conv2d):
    """A residual block's conv1 with TSM's shift on its input ("residual shift": the block's
    identity path is taken before conv1, so only the residual branch sees shifted channels).
    Subclassing the conv keeps its parameter names (layerS.I.conv1.weight): torchvision's ImageNet
    files load as they are."""

    def __init__(self, conv, frames, div):
        super().__init__(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            conv.dilation,
            conv.groups,
            conv.bias is not None,
        )
        self.load_state_dict(conv.state_dict())
        self.frames, self.div = frames, div

    def forward(self, x):
        return super().forward(temporal_shift(x, self.frames, self.div))


def add_shift(model, frames, div):
    """TSM on a 2D ResNet: every residual block's conv1 shifts 1/div of its channels each way over
    the `frames` frames of a clip (mmaction2 ResNetTSM shift_place='blockres', shift_div=8)."""
    if not isinstance(model, SegmentResNet2D):
        raise ValueError(
            f"--shift needs a 2D ResNet arch ({', '.join(archs_with('shift'))}), not {model.arch}"
        )
    for block in model.modules():
        if isinstance(
            block, (torchvision.models.resnet.BasicBlock, torchvision.models.resnet.Bottleneck)
        ):
            block.conv1 = ShiftConv2d(block.conv1, frames, div)
    model.frames = frames
    return model


HEAD_NORM = ("norm.", "fc_norm.")  # the transformers' final norm sits with the head (layer L + 1)
# classifiers: ours and torchvision's r3d..., swin3d/mvit, s3d
HEAD = ("fc.", "head.", "classifier.")


def layer_ids(arch, names):
    """Parameter names (in registration order) -> ({name: layer i}, L) for --layer-decay (the arch's
    entry's `layers`)."""
    ids, blocks = {}, []
    for name in names:
        block = re.match(ARCHS[arch].layers, name)
        if block and block.group(0) not in blocks:
            blocks.append(block.group(0))
        # 0: stem, before any block
        ids[name] = None if name.startswith(HEAD + HEAD_NORM) else len(blocks)
    return {k: len(blocks) + 1 if i is None else i for k, i in ids.items()}, len(blocks)


def strip_prefixes(state_dict):
    """DataParallel/DDP save "module.", torch.compile "_orig_mod.": strip them wherever they
    lead."""
    out = {}
    for k, v in state_dict.items():
        while k.startswith(("module.", "_orig_mod.")):
            k = k.split(".", 1)[1]
        out[k] = v
    return out


def set_drop_path(model, top):
    """Stochastic depth rising linearly over the blocks to `top` (None: as built). The swin3d
    builders fix their own stochastic_depth_prob (no argument reaches it), so rescale the built
    schedule instead."""
    if top is None:
        return
    layers = [m for m in model.modules() if isinstance(m, torchvision.ops.StochasticDepth)]
    built = max((m.p for m in layers), default=0.0)
    for m in layers:
        m.p = m.p / built * top


# ---- the archs: one registry ---------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """What build_network builds; train.model_spec fills it from the flags of the same names."""

    arch: str
    num_classes: int
    dropout: float = 0.0  # before the classifier
    mode: Optional[str] = None  # "3D" | "TSN" | "2D"; None: the arch's own (the first of its modes)
    t_length: int = 1  # frames per clip (3D) or per snippet (TSN / 2D)
    num_segments: int = 1  # snippets per clip (TSN / 2D)
    shift: int = 0  # TSM: 1/shift of the channels each way over the clip's frames; 0: off
    drop_path: Optional[float] = None  # stochastic depth; None: the builder's default
    crop_size: int = 224  # input height = width (for archs that size position embeddings by it)
    # the ViTs: recompute each block in the backward (activation checkpointing)
    grad_ckpt: bool = False
    # SlowFast: whose network, a key of slowfast_net.VARIANTS ("pyslowfast", "mmaction2", ...);
    # None: PySlowFast's, or the --pretrained file's (zoo.build_model)
    slowfast_variant: Optional[str] = None


class Arch(NamedTuple):
    """One entry of ARCHS: how to build an arch and what it supports. flags.check_args, -h and
    build_network read these fields; nothing else lists archs."""

    build: Callable  # ModelSpec -> nn.Module with a spec.num_classes head, randomly initialised
    modes: tuple  # the --mode values it runs in; the first is its own (ModelSpec.mode None)
    shift: bool = False  # TSM's --shift (on a 2D ResNet's residual blocks)
    drop_path: bool = False  # --drop-path: torchvision's stochastic depth
    # --layer-decay: the pattern of the parameter names opening a block
    layers: Optional[str] = None
    # a ResNet-3D: its layout (zoo.py: ImageNet twin, stem stride)
    layout: Optional[ArchSpec] = None
    tokens: bool = False  # stages are token sequences, not (B, C, T, H, W) (features.py --layer)
    # Parts of parameter names that take --norm-weight-decay as the 1-D parameters do (no decay by
    # default): position tables and class / mask tokens (train.param_groups)
    no_decay: tuple = ()
    # --dro: a dropout before its classifier (flags.check_args refuses --dro where False)
    dropout: bool = True


def resnet3d(layout):
    """The ARCHS entry of a ResNet-3D of `layout`: 3D, or TSN over dense snippets of --t_length."""

    def build(spec):
        if spec.mode == "3D":
            return ResNet3D(layout, spec.num_classes, spec.dropout)
        model = SegmentResNet3D(layout, spec.num_classes, spec.dropout)
        model.snippet = spec.t_length
        return model

    return Arch(build, ("3D", "TSN"), layers=_STAGES, layout=layout)


def resnet2d(block, layers):
    """The ARCHS entry of torchvision's 2D ResNet of (block, blocks per stage), segment by
    segment."""
    return Arch(
        lambda spec: SegmentResNet2D(block, layers, spec.num_classes, spec.dropout),
        ("2D", "TSN"),
        shift=True,
        layers=_STAGES,
    )


@functools.cache
def segment_class(cls):
    """`cls` with Consensus's forward in front, made once per class."""
    return type(f"Segment{cls.__name__}", (Consensus, cls), {"__module__": __name__})


def torchvision_2d(spec):
    """A builder: torchvision's 2D classifier named --arch (its `dropout` is the head's, where it
    has one), segment by segment. Its class becomes segment_class(its class): parameter names stay
    torchvision's, so --pretrained imagenet loads torchvision's files as they are."""
    # a classifier without a dropout argument (convnext) has `dropout=False` in its entry
    head = {"dropout": spec.dropout} if ARCHS[spec.arch].dropout else {}
    model = torchvision.models.get_model(spec.arch, num_classes=spec.num_classes, **head)
    model.__class__ = segment_class(type(model))
    return model


def torchvision_video(spec):
    """A builder: torchvision.models.video's --arch, for comparison. Their own input limits apply:
    mvit_v1_b takes exactly 16x224x224 (absolute position embedding), s3d ends in a fixed 2x7x7
    average pool (16x224x224 clips work, small ones fail inside torch). We do not re-check them."""
    if spec.arch.startswith(("s3d", "mvit")):  # their `dropout` argument is the head dropout
        model = torchvision.models.get_model(
            spec.arch, num_classes=spec.num_classes, dropout=spec.dropout
        )
    else:  # no head dropout: add one after the (weightless) avgpool, so names stay torchvision's
        model = torchvision.models.get_model(spec.arch, num_classes=spec.num_classes)
        model.avgpool = nn.Sequential(model.avgpool, nn.Dropout(spec.dropout))
    set_drop_path(model, spec.drop_path)
    return model


def vit_video(spec):
    """A builder: a VideoMAE ViT (vit.py) for t_length x crop_size clips (its position table)."""
    return vit.build(
        spec.arch,
        spec.num_classes,
        spec.t_length,
        spec.crop_size,
        spec.dropout,
        spec.drop_path,
        grad_ckpt=spec.grad_ckpt,
    )


def vjepa_video(spec):
    """A builder: a V-JEPA 2 encoder with its attentive classifier (vjepa.py); any clip length and
    size. --mode TSN: the clip's --num_segments snippets of --t_length frames encoded one by one and
    their tokens concatenated before the classifier (the official multi-clip protocol)."""
    model = vjepa.build(
        spec.arch, spec.num_classes, spec.dropout, spec.drop_path, grad_ckpt=spec.grad_ckpt
    )
    model.snippet = spec.t_length if spec.mode == "TSN" else None
    return model


# --layer-decay's layers: the parameter names that open a block (module registration order is the
# forward order in all of them). BEiT (Bao et al. 2022, Sec. 2.6) and VideoMAE number the patch
# embedding 0, the blocks 1..L and the head L + 1; the ResNets' blocks here are their four stages.
# Names between blocks (Swin's patch merging) take the block before them, as mmpretrain's Swin rule
# does. --drop-path: torchvision's `stochastic_depth_prob`, whose default each builder keeps when
# --drop-path is not given (mvit 0.2, swin3d_t 0.1, swin3d_s/b 0.3).
_STAGES, _MVIT, _SWIN = r"layer\d+\.", r"blocks\.\d+\.", r"features\.\d+\.\d+\."
_PYSLOWFAST = r"s[2-5]\."
_VIDEO = ("3D",)
# torchvision's token networks; Arch.no_decay (no weight decay): mvit's absolute position embeddings
# and class token (its pos_encoding.*), Swin's relative position bias tables (Video Swin /
# mmaction2: decay_mult 0)
_MVIT_ARCH = Arch(
    torchvision_video,
    _VIDEO,
    drop_path=True,
    layers=_MVIT,
    tokens=True,
    no_decay=("pos_encoding.",),
)
_SWIN_ARCH = Arch(
    torchvision_video,
    _VIDEO,
    drop_path=True,
    layers=_SWIN,
    tokens=True,
    no_decay=("relative_position_bias_table",),
)
# a ViT's learned position table and the pretraining mask token (VideoMAE's no_weight_decay)
_VIT_ARCH = Arch(
    vit_video,
    _VIDEO,
    drop_path=True,
    layers=_MVIT,
    tokens=True,
    no_decay=("pos_embed", "mask_token"),
)
BASIC, BOTTLENECK = torchvision.models.resnet.BasicBlock, torchvision.models.resnet.Bottleneck
# --arch NAME -> its entry: the one list of archs. Adding an arch is one entry here: a builder (any
# function of a ModelSpec, from this module or another: import its module above, e.g. vit.build for
# the ViTs; that module takes the spec as it comes and does not import this one) and what it
# supports. A torchvision 2D classifier as a TSN backbone is one line (one without a dropout
# argument says so: `dropout=False`):
#     "efficientnet_b0": Arch(torchvision_2d, ("2D", "TSN")),
ARCHS = {
    "resnet10_3d": resnet3d(R10),
    "resnet18_3d": resnet3d(R18),
    "resnet34_3d": resnet3d(R34),
    "resnet50_3d": resnet3d(R50),
    "resnet101_3d": resnet3d(R101),
    "resnet50_3d_slowonly": resnet3d(R50_SLOW),
    "resnet50_3d_mmaction": resnet3d(R50_MMACTION),
    "r3d_18": Arch(torchvision_video, _VIDEO, layers=_STAGES),
    "mc3_18": Arch(torchvision_video, _VIDEO, layers=_STAGES),
    "r2plus1d_18": Arch(torchvision_video, _VIDEO, layers=_STAGES),
    "s3d": Arch(torchvision_video, _VIDEO),
    "mvit_v1_b": _MVIT_ARCH,
    "mvit_v2_s": _MVIT_ARCH,
    # PySlowFast's MViTv2-B (mvit_net.py: torchvision's MViT given the blocks of
    # MVITv2_B_32x3.yaml; its .pyth files renamed to torchvision's names). Nothing exempt from
    # weight decay by name: the yaml decays the relative positions (ZERO_DECAY_POS_CLS False).
    **{
        a: Arch(mvit_net.build, _VIDEO, drop_path=True, layers=_MVIT, tokens=True)
        for a in mvit_net.MVITS
    },
    "swin3d_t": _SWIN_ARCH,
    "swin3d_s": _SWIN_ARCH,
    "swin3d_b": _SWIN_ARCH,
    # torchvision's 2D ImageNet networks, under torchvision's names and parameter names (so
    # --pretrained imagenet loads its files as they are).
    "resnet18": resnet2d(BASIC, (2, 2, 2, 2)),
    "resnet34": resnet2d(BASIC, (3, 4, 6, 3)),
    "resnet50": resnet2d(BOTTLENECK, (3, 4, 6, 3)),
    "resnet101": resnet2d(BOTTLENECK, (3, 4, 23, 3)),
    "mobilenet_v2": Arch(torchvision_2d, ("2D", "TSN")),
    # The VideoMAE / VideoMAEv2 video ViTs (vit.py; 3D clips only; patch embedding and position
    # table layer 0, blocks.i layer i + 1, fc_norm and head L + 1).
    **{a: _VIT_ARCH for a in vit.VIT_SPECS},
    # V-JEPA 2's encoders (vjepa.py; RoPE, no position table: any clip length and crop; patch
    # embedding layer 0, blocks.i layer i + 1, norm and the attentive head L + 1).
    **{
        a: Arch(vjepa_video, ("3D", "TSN"), drop_path=True, layers=_MVIT, tokens=True)
        for a in vjepa.VJEPA_SPECS
    },
    # PySlowFast's SlowFast and X3D (slowfast_net.py; 3D clips only, PySlowFast's parameter names,
    # stages s2..s5 as --layer-decay's layers).
    **{a: Arch(slowfast_net.build, _VIDEO, layers=_PYSLOWFAST) for a in slowfast_net.SLOWFAST},
    **{a: Arch(slowfast_net.build, _VIDEO, layers=_PYSLOWFAST) for a in slowfast_net.X3D},
}
# The ViTs, for the flags only they take (--grad-ckpt) and their own weights (vit_zoo.py).
VITS = tuple(vit.VIT_SPECS)
VJEPAS = tuple(vjepa.VJEPA_SPECS)  # their weights: vjepa_zoo.py


def archs_with(field, value=True):
    """The archs whose entry has `field` (shift, drop_path, layers, ...), or `value` in it
    (modes)."""
    return [
        a
        for a, e in ARCHS.items()
        if (
            value in getattr(e, field)
            if isinstance(getattr(e, field), tuple)
            else getattr(e, field)
        )
    ]


def mode_error(arch, mode):
    """Why `arch` cannot run in --mode `mode`, in one line; None if it can (flags.check_args asks
    first)."""
    modes = ARCHS[arch].modes
    if mode in modes:
        return None
    if modes == ("3D",):  # torchvision's video nets, the ViTs: whole clips, no segments
        return f"--arch {arch} runs on 3D clips only: use --mode 3D, not --mode {mode}"
    if "3D" not in modes:
        return f"--arch {arch} is a 2D network: use --mode {' or --mode '.join(modes)}"
    others = [a for a in archs_with("modes", mode) if a not in archs_with("modes", "2D")]
    also = f" or a 3D one ({', '.join(others)})" if others else ""
    return (
        f"--mode {mode} takes a 2D arch ({', '.join(archs_with('modes', '2D'))}){also}, not "
        f"--arch {arch}"
    )


def as_spec(spec, *args, **fields):
    """A ModelSpec, or its fields: as_spec("resnet18", 10, mode="TSN") = ModelSpec("resnet18", 10,
    ...)."""
    return spec if isinstance(spec, ModelSpec) else ModelSpec(spec, *args, **fields)


def build_network(spec, *args, **fields):
    """The arch of a ModelSpec (or its fields, as_spec) with a `num_classes` head, randomly
    initialised (zoo.build_model adds weights: it sets `pretrained_info`, None here, to the
    normalisation they expect). mode "TSN" / "2D": the arch segment by segment (Consensus), snippets
    of t_length frames; shift > 0: TSM with 1/shift of the channels shifted each way over the
    num_segments * t_length frames of a clip. drop_path: stochastic depth (None: the builder's
    default)."""
    spec = as_spec(spec, *args, **fields)
    entry = ARCHS.get(spec.arch)
    if entry is None:
        raise ValueError(f"unknown arch {spec.arch!r}; choose one of: {', '.join(ARCHS)}")
    if spec.drop_path is not None and not entry.drop_path:
        have = ", ".join(archs_with("drop_path"))
        raise ValueError(f"--drop-path: {spec.arch} has no stochastic depth (these have: {have})")
    spec = dataclasses.replace(spec, mode=spec.mode or entry.modes[0])
    if mode_error(spec.arch, spec.mode):
        raise ValueError(mode_error(spec.arch, spec.mode))
    if spec.shift and not entry.shift:
        have = ", ".join(archs_with("shift"))
        raise ValueError(f"--shift needs a 2D ResNet arch ({have}), not {spec.arch}")
    if spec.slowfast_variant and spec.arch not in slowfast_net.SLOWFAST:
        have = ", ".join(slowfast_net.SLOWFAST)
        raise ValueError(f"--slowfast-variant needs a SlowFast arch ({have}), not {spec.arch}")
    model = entry.build(spec)
    model.arch = spec.arch
    if spec.shift:
        add_shift(model, spec.num_segments * spec.t_length, spec.shift)
    model.pretrained_info = None
    return model
