"""The I3D ResNet-3D family, torchvision's video models, and exact ImageNet -> 3D inflation.

    model = build_model("resnet50_3d", num_classes=400, dropout=0.5, pretrained="imagenet")
    logits = model(x)  # x: float (B, 3, T, H, W), normalised; logits: (B, num_classes)

resnet50_3d is the I3D-R50 of the Non-local / PySlowFast / mmaction2 (i3d_r50) model zoos:
28.04M parameters at 400 classes, 56.8 GMACs for a 16x224x224 clip. Parameter names mirror
torchvision's 2D resnet (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc, ...), so inflating
ImageNet weights is a name-for-name copy in which every conv kernel gains a temporal axis.
resnet50_3d_slowonly is the Slow-only R50 of the same zoos; resnet50_3d_mmaction is mmaction2's
i3d_r50, which strides time by 2 in conv1 and the first max-pool (same tensors, another network).

Pretrained weights (load_pretrained): torchvision ImageNet (inflated), our checkpoints, and the
Kinetics checkpoints of pytorchvideo (.pyth), PySlowFast (PyTorch .pyth and Caffe2 .pkl) and
mmaction2 (.pth), recognised by their key layout and renamed by small rule tables; loading is
strict (only the classifier may differ) and `model.pretrained_info` tells the input normalisation
the weights expect.

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
  facebookresearch/pytorchvideo (models/resnet.py, hub), open-mmlab/mmaction2 (ResNet3d, i3d_r50 configs).
"""
import os
import pickle
import re
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torchvision


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
        self.conv1 = nn.Conv3d(inplanes, planes, (kt, 3, 3), (1, stride, stride), (kt // 2, 1, 1), bias=False)
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
        self.conv2 = nn.Conv3d(planes, planes, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False)
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


ARCH_SPECS = {
    "resnet10_3d": ArchSpec(BasicBlock3D, (1, 1, 1, 1), 5, True, I3D, None),  # tiny CPU arch for tests/demo
    "resnet18_3d": ArchSpec(BasicBlock3D, (2, 2, 2, 2), 5, True, I3D, "resnet18"),
    "resnet34_3d": ArchSpec(BasicBlock3D, (3, 4, 6, 3), 5, True, I3D, "resnet34"),
    # PySlowFast I3D_8x8_R50 = pytorchvideo i3d_r50: Kinetics weights trained on 8x8 clips (8 frames, stride 8).
    "resnet50_3d": ArchSpec(Bottleneck3D, (3, 4, 6, 3), 5, True, I3D, "resnet50"),
    "resnet101_3d": ArchSpec(Bottleneck3D, (3, 4, 23, 3), 5, True, I3D, "resnet101"),
    # PySlowFast SLOW_8x8_R50 = pytorchvideo slow_r50 = mmaction2 slowonly_r50 (8x8 clips).
    "resnet50_3d_slowonly": ArchSpec(Bottleneck3D, (3, 4, 6, 3), 1, False, SLOW, "resnet50"),
    # mmaction2's i3d_r50 (configs/_base_/models/i3d_r50.py: conv1 5x7x7 with conv1_stride_t=2, the first
    # max-pool with pool1_stride_t=2, pool2, inflate ((1,1,1),(1,0,1,0),(1,0,1,0,1,0),(0,1,0)), 3x1x1).
    # Same tensors as resnet50_3d, another network: time shrinks 4x in the stem and 8x before res3. Its
    # Kinetics-400 weights were trained on 32x2x1 clips (SampleFrames clip_len=32, frame_interval=2:
    # 32 frames, every 2nd; --t_length 32 --t_stride 2) at 224 px, ImageNet mean/std.
    "resnet50_3d_mmaction": ArchSpec(Bottleneck3D, (3, 4, 6, 3), 5, True, I3D, "resnet50", stem_stride_t=2),
}
# torchvision.models.video, for comparison. Their own input limits apply: mvit_v1_b takes exactly
# 16x224x224 (absolute position embedding), s3d ends in a fixed 2x7x7 average pool (16x224x224
# clips work, small ones fail inside torch). We do not re-check these limits.
TV_VIDEO = ("r3d_18", "mc3_18", "r2plus1d_18", "s3d", "mvit_v1_b", "mvit_v2_s",
            "swin3d_t", "swin3d_s", "swin3d_b")
ARCHS = tuple(ARCH_SPECS) + TV_VIDEO


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


class ResNet3D(nn.Module):
    """One of ARCH_SPECS. Module names follow torchvision's ResNet; pool2/dropout hold no weights."""

    def __init__(self, arch, num_classes, dropout=0.0, zero_init_residual=False):
        super().__init__()
        spec = ARCH_SPECS[arch]
        self.arch = arch
        self.min_t = min_frames(spec)  # forward() checks it for a clear message
        self.inplanes = 64
        st = spec.stem_stride_t  # 1, or mmaction2 i3d_r50's 2 (conv1_stride_t = pool1_stride_t = 2)
        self.conv1 = nn.Conv3d(3, 64, (spec.conv1_t, 7, 7), (st, 2, 2), (spec.conv1_t // 2, 3, 3), bias=False)
        self.bn1 = nn.BatchNorm3d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool3d((1, 3, 3), (st, 2, 2), (0, 1, 1))
        self.layer1 = self._make_layer(spec.block, 64, spec.layers[0], 1, spec.inflate[0])
        # No parameters, so no name to keep in step with torchvision; floor mode (odd T drops a frame).
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
            for m in self.modules():  # (the zoos train without it; pretrained weights overwrite it).
                if isinstance(m, (Bottleneck3D, BasicBlock3D)):
                    nn.init.zeros_((m.bn3 if isinstance(m, Bottleneck3D) else m.bn2).weight)

    def _make_layer(self, block, planes, blocks, stride, pattern):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(  # "B" shortcut, names downsample.0 / .1 as torchvision
                nn.Conv3d(self.inplanes, planes * block.expansion, 1, (1, stride, stride), bias=False),
                nn.BatchNorm3d(planes * block.expansion),
            )
            init_conv_bn(*downsample)
        layers = []
        for i in range(blocks):
            inflate = bool(pattern[i % len(pattern)])
            first = i == 0  # only the first block of a stage strides and projects the shortcut
            layers.append(block(self.inplanes, planes, stride if first else 1,
                                downsample if first else None, inflate))
            self.inplanes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        if x.dim() != 5:
            raise ValueError(f"{self.arch}: expected a clip batch (B, 3, T, H, W), got {tuple(x.shape)}")
        B, C, T, H, W = x.shape
        if T < self.min_t:
            raise ValueError(f"{self.arch} needs at least {self.min_t} frames per clip, got T={T}")
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, 64, T/s^2, H/4, W/4), s = stem_stride_t
        x = self.pool2(self.layer1(x))  # (B, 64*e, T', H/4, W/4); /2 in time with the temporal pool
        x = self.layer4(self.layer3(self.layer2(x)))  # (B, 512*e, T', H/32, W/32)
        x = self.avgpool(x).flatten(1)  # (B, 512*e)
        return self.fc(self.dropout(x))


def inflate_weight(w2d, kt, mode):
    """(O, I, h, w) -> (O, I, kt, h, w). "mean": repeat over time and divide by kt, so a clip of
    identical frames gives the 2D response wherever the kernel does not touch the zero padding.
    "center": the 2D kernel in the middle tap, zeros elsewhere: exact at every frame."""
    if mode == "mean":
        return w2d.unsqueeze(2).repeat(1, 1, kt, 1, 1) / kt
    if mode == "center":
        assert kt % 2 == 1, f"center inflation needs an odd temporal size, got {kt}"
        w3d = w2d.new_zeros(w2d.shape[0], w2d.shape[1], kt, *w2d.shape[2:])
        w3d[:, :, kt // 2] = w2d
        return w3d
    raise ValueError(f"inflate must be 'mean' or 'center', got {mode!r}")


# ---- pretrained weights: the zoos' checkpoint layouts ---------------------------------------------
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
KINETICS_MEAN, KINETICS_STD = (0.45, 0.45, 0.45), (0.225, 0.225, 0.225)  # PySlowFast's DATA.MEAN / DATA.STD
HEAD = ("fc.", "head.", "classifier.")  # classifiers: ours and torchvision's r3d..., swin3d/mvit, s3d
_C2_BN = {"s": "weight", "b": "bias", "rm": "running_mean", "riv": "running_var"}  # Caffe2 BN blob suffixes


def _abc(letter):
    """The a/b/c conv of a PySlowFast / pytorchvideo bottleneck is our conv1/conv2/conv3."""
    return "abc".index(letter) + 1


# Key rules: (regex over a whole source name, our name from the match); the first rule that matches
# wins, a name no rule matches is unexpected. Our names are torchvision's (conv1, bn1, layerS.I.convK,
# layerS.I.bnK, layerS.I.downsample.0/.1, fc). Stage S = 1..4 is res2..res5.
PYTORCHVIDEO_RULES = (
    # pytorchvideo/models/resnet.py (create_resnet: blocks = [stem, stage, (pool), stage, ..., head];
    # ResBlock branch1_conv/branch1_norm, BottleneckBlock conv_a/norm_a..c), stem.py (ResNetBasicStem
    # conv/norm), head.py (ResNetBasicHead proj). Stages are renumbered stage1..4 first (_pytorchvideo_stages)
    # because i3d_r50's parameter-free (2,1,1) pool takes blocks.2 and moves its head to blocks.6.
    (r"blocks\.0\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"blocks\.0\.norm\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (r"stage(\d)\.res_blocks\.(\d+)\.branch1_conv\.(\w+)", lambda m: f"layer{m[1]}.{m[2]}.downsample.0.{m[3]}"),
    (r"stage(\d)\.res_blocks\.(\d+)\.branch1_norm\.(\w+)", lambda m: f"layer{m[1]}.{m[2]}.downsample.1.{m[3]}"),
    (r"stage(\d)\.res_blocks\.(\d+)\.branch2\.conv_([abc])\.(\w+)",
     lambda m: f"layer{m[1]}.{m[2]}.conv{_abc(m[3])}.{m[4]}"),
    (r"stage(\d)\.res_blocks\.(\d+)\.branch2\.norm_([abc])\.(\w+)",
     lambda m: f"layer{m[1]}.{m[2]}.bn{_abc(m[3])}.{m[4]}"),
    (r"blocks\.\d+\.proj\.(\w+)", lambda m: f"fc.{m[1]}"),
)
PYSLOWFAST_RULES = (
    # slowfast/models/video_model_builder.py (ResNet: s1 = stem, s2..s5 = res2..res5, head), stem_helper.py
    # (ResNetBasicStem conv/bn), resnet_helper.py (ResStage pathway0_res{i}; ResBlock branch1/branch1_bn;
    # BottleneckTransform a/a_bn, b/b_bn, c/c_bn), head_helper.py (ResNetBasicHead projection).
    (r"s1\.pathway0_stem\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"s1\.pathway0_stem\.bn\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (r"s(\d)\.pathway0_res(\d+)\.branch1\.(\w+)", lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.0.{m[3]}"),
    (r"s(\d)\.pathway0_res(\d+)\.branch1_bn\.(\w+)", lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.1.{m[3]}"),
    (r"s(\d)\.pathway0_res(\d+)\.branch2\.([abc])\.(\w+)",
     lambda m: f"layer{int(m[1]) - 1}.{m[2]}.conv{_abc(m[3])}.{m[4]}"),
    (r"s(\d)\.pathway0_res(\d+)\.branch2\.([abc])_bn\.(\w+)",
     lambda m: f"layer{int(m[1]) - 1}.{m[2]}.bn{_abc(m[3])}.{m[4]}"),
    (r"head\.projection\.(\w+)", lambda m: f"fc.{m[1]}"),
)
CAFFE2_RULES = (
    # slowfast/utils/c2_model_loading.py: the blob names of the Caffe2 zoo (video-nonlocal-net), e.g.
    # res3_1_branch2a_bn_riv; _s/_b/_rm/_riv = BN weight/bias/running_mean/running_var, pred = classifier.
    (r"conv1_w", lambda m: "conv1.weight"),
    (r"res_conv1_bn_(s|b|rm|riv)", lambda m: f"bn1.{_C2_BN[m[1]]}"),
    (r"res(\d)_(\d+)_branch1_w", lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.0.weight"),
    (r"res(\d)_(\d+)_branch1_bn_(s|b|rm|riv)",
     lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.1.{_C2_BN[m[3]]}"),
    (r"res(\d)_(\d+)_branch2([abc])_w", lambda m: f"layer{int(m[1]) - 1}.{m[2]}.conv{_abc(m[3])}.weight"),
    (r"res(\d)_(\d+)_branch2([abc])_bn_(s|b|rm|riv)",
     lambda m: f"layer{int(m[1]) - 1}.{m[2]}.bn{_abc(m[3])}.{_C2_BN[m[4]]}"),
    (r"pred_(w|b)", lambda m: "fc." + {"w": "weight", "b": "bias"}[m[1]]),
)
MMACTION2_RULES = (
    # mmaction/models/backbones/resnet3d.py (ResNet3d conv1/layerN, Bottleneck3d conv1..3 and the
    # downsample as mmcv ConvModules = .conv + .bn), mmaction/models/heads/i3d_head.py (fc_cls);
    # Recognizer3D prefixes backbone. / cls_head.
    (r"backbone\.conv1\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"backbone\.conv1\.bn\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (r"backbone\.(layer\d\.\d+)\.conv(\d)\.conv\.(\w+)", lambda m: f"{m[1]}.conv{m[2]}.{m[3]}"),
    (r"backbone\.(layer\d\.\d+)\.conv(\d)\.bn\.(\w+)", lambda m: f"{m[1]}.bn{m[2]}.{m[3]}"),
    (r"backbone\.(layer\d\.\d+)\.downsample\.conv\.(\w+)", lambda m: f"{m[1]}.downsample.0.{m[2]}"),
    (r"backbone\.(layer\d\.\d+)\.downsample\.bn\.(\w+)", lambda m: f"{m[1]}.downsample.1.{m[2]}"),
    (r"cls_head\.fc_cls\.(\w+)", lambda m: f"fc.{m[1]}"),
)
SAME_NAMES = ((r"(.+)", lambda m: m[1]),)  # ours, torchvision, plain state dicts


class Zoo(NamedTuple):
    """A checkpoint layout: how to recognise it, rename it, and the input normalisation its weights expect."""
    name: str
    signature: Optional[str]  # a key only this layout has
    rules: tuple
    mean: Optional[tuple]
    std: Optional[tuple]
    stem_stride_t: Optional[int] = None  # temporal stride of conv1 and the first max-pool; None: unknown


ZOOS = (
    Zoo("pytorchvideo", "blocks.0.conv.weight", PYTORCHVIDEO_RULES, KINETICS_MEAN, KINETICS_STD, 1),
    Zoo("pyslowfast", "s1.pathway0_stem.conv.weight", PYSLOWFAST_RULES, KINETICS_MEAN, KINETICS_STD, 1),
    Zoo("pyslowfast-caffe2", "conv1_w", CAFFE2_RULES, KINETICS_MEAN, KINETICS_STD, 1),
    Zoo("mmaction2", "backbone.conv1.conv.weight", MMACTION2_RULES, IMAGENET_MEAN, IMAGENET_STD),
)
TORCHVISION = Zoo("torchvision", None, SAME_NAMES, IMAGENET_MEAN, IMAGENET_STD)

# --pretrained kinetics400: the published Kinetics-400 weights of each arch (top-1 as published).
KINETICS400_URLS = {
    # pytorchvideo hub i3d_r50 / slow_r50 (pytorchvideo/models/hub/resnet.py): 73.27 / 74.58 top-1, 8x8 clips
    "resnet50_3d": "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics/I3D_8x8_R50.pyth",
    "resnet50_3d_slowonly": "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics/SLOW_8x8_R50.pyth",
    # mmaction2 configs/recognition/i3d/README.md, i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e: 73.47 top-1
    "resnet50_3d_mmaction": "https://download.openmmlab.com/mmaction/v1.0/recognition/i3d/"
                            "i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb/"
                            "i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb_20220812-e213c223.pth",
}


def kinetics400_file(arch):
    """Path of the arch's Kinetics-400 file in torch.hub's cache, downloaded there if absent."""
    url = KINETICS400_URLS.get(arch)
    if url is None:
        raise ValueError(f"--pretrained kinetics400: no published Kinetics-400 weights for {arch} "
                         f"(have: {', '.join(KINETICS400_URLS)})")
    path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(url))
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:  # writes a temporary file and renames it when complete: no half file at `path`
            torch.hub.download_url_to_file(url, path, progress=True)
        except Exception as e:  # offline, proxy, interrupted
            why = (str(e).splitlines() or [""])[0]
            raise ValueError(f"--pretrained kinetics400: could not download {url} ({type(e).__name__}: {why}). "
                             f"Offline? Download it elsewhere and put it at {path}") from e
    return path


def _load_any(src):
    """Unpickle a torch checkpoint or a Caffe2 .pkl. Safe unpickling first (a plain state dict needs
    nothing else); our checkpoints (args, numpy RNG state), PySlowFast's (cfg) and Caffe2's pickles
    (numpy arrays) need full unpickling, which can run code from the file: only pass files you trust."""
    def caffe2(path):  # PySlowFast's Caffe2 zoo: a Python 2 pickle (slowfast/utils/checkpoint.py: latin1)
        with open(path, "rb") as f:
            return pickle.load(f, encoding="latin1")
    loaders = [lambda p: torch.load(p, map_location="cpu", weights_only=True),
               lambda p: torch.load(p, map_location="cpu", weights_only=False), caffe2]
    if src.endswith(".pkl"):  # try the Caffe2 reader first: no pointless unpickling of a large file
        loaders.insert(0, loaders.pop())
    errors = []
    for load in loaders:
        try:
            return load(src)
        except Exception as e:
            errors.append(e)
    e = errors[1] if src.endswith(".pkl") else errors[0]  # torch's own complaint, first line only
    why = (str(e).splitlines() or [""])[0]
    raise ValueError(f"--pretrained {src}: cannot read it as a torch checkpoint ({type(e).__name__}: {why}) "
                     "nor as a Caffe2 pickle") from e


def _caffe2_blobs(blobs):
    """numpy blobs -> tensors, without the solver's blobs (momentum, lr, model_iter), which PySlowFast
    also skips (slowfast/utils/checkpoint.py)."""
    out = {}
    for k, v in blobs.items():
        if k.endswith("_momentum") or k in ("lr", "model_iter") or not hasattr(v, "dtype"):
            continue
        out[k] = torch.as_tensor(v.copy())  # copy: the pickle's arrays may be read-only
    return out


def _pytorchvideo_stages(state):
    """blocks.N.res_blocks -> stageS.res_blocks, S = 1, 2, ... in the order of N."""
    found = sorted({int(m[1]) for k in state if (m := re.match(r"blocks\.(\d+)\.res_blocks\.", k))})
    stage = {n: i + 1 for i, n in enumerate(found)}
    return {re.sub(r"^blocks\.(\d+)\.res_blocks\.", lambda m: f"stage{stage[int(m[1])]}.res_blocks.", k): v
            for k, v in state.items()}


def _mmaction2_stem_stride(obj):
    """conv1_stride_t of an mmaction2 checkpoint from the config text mmengine / mmcv store in its meta
    (ResNet3d's default is 1); None without it, or when conv1 and pool1 disagree (no arch here has that)."""
    meta = obj.get("meta") if isinstance(obj, dict) else None
    text = (meta.get("cfg") or meta.get("config")) if isinstance(meta, dict) else None
    if not isinstance(text, str):
        return None
    conv = re.search(r"conv1_stride_t\W+(\d+)", text)
    pool = re.search(r"pool1_stride_t\W+(\d+)", text)
    conv, pool = (int(conv[1]) if conv else 1), (int(pool[1]) if pool else 1)
    return conv if conv == pool else None


def read_checkpoint(src):
    """(state dict in the file's own names, its Zoo) for a checkpoint file of any layout above,
    ours ("model", with "args"), a "state_dict" / "model_state" wrapper, or a bare state dict."""
    if not os.path.isfile(src):
        raise ValueError(f"--pretrained {src!r}: no such file (and not imagenet / imagenet_v2 / kinetics400)")
    obj, kind, outer = _load_any(src), "bare", {}
    if isinstance(obj, dict) and isinstance(obj.get("blobs"), dict):
        obj, kind = _caffe2_blobs(obj["blobs"]), "blobs"
    else:
        for key in ("model_state", "model", "state_dict"):
            if isinstance(obj, dict) and isinstance(obj.get(key), dict):
                outer, obj, kind = obj, obj[key], key
                break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"--pretrained {src}: not a state dict (nor a dict with 'model' / 'state_dict' / "
                         "'model_state', nor a Caffe2 pickle with 'blobs')")
    state = strip_prefixes(obj)
    for zoo in ZOOS:
        if zoo.signature in state:
            if zoo.name == "pytorchvideo":
                state = _pytorchvideo_stages(state)
            if zoo.name == "mmaction2":
                zoo = zoo._replace(stem_stride_t=_mmaction2_stem_stride(outer))
            return state, zoo
    conv1 = state.get("conv1.weight")
    if conv1 is not None and conv1.dim() == 4:  # a 2D torchvision ResNet: inflated on loading
        return state, TORCHVISION
    if kind == "model":  # ours: the normalisation it was trained with is in its args
        args = outer.get("args") if isinstance(outer.get("args"), dict) else {}
        spec = ARCH_SPECS.get(args.get("arch"))
        return state, Zoo("ours", None, SAME_NAMES, tuple(args.get("mean") or IMAGENET_MEAN),
                          tuple(args.get("std") or IMAGENET_STD), spec.stem_stride_t if spec else None)
    return state, Zoo(kind, None, SAME_NAMES, None, None)


def convert_state_dict(state, rules):
    """Rename by the first matching rule: (our state dict, names no rule matched)."""
    out, unexpected = {}, []
    for k, v in state.items():
        for pattern, name in rules:
            m = re.fullmatch(pattern, k)
            if m:
                out[name(m)] = v
                break
        else:
            unexpected.append(k)
    return out, unexpected


def strip_prefixes(state_dict):
    """DataParallel/DDP save "module.", torch.compile "_orig_mod.": strip them wherever they lead."""
    out = {}
    for k, v in state_dict.items():
        while k.startswith(("module.", "_orig_mod.")):
            k = k.split(".", 1)[1]
        out[k] = v
    return out


def _imagenet_state_dict(arch, version):
    twin = ARCH_SPECS[arch].twin2d if arch in ARCH_SPECS else None
    if twin is None:
        raise ValueError(f"{arch} has no ImageNet 2D counterpart in torchvision; "
                         "use --pretrained none or a checkpoint file")
    tag = {"imagenet": "IMAGENET1K_V1", "imagenet_v2": "IMAGENET1K_V2"}[version]
    enum = torchvision.models.get_model_weights(twin)  # e.g. ResNet50_Weights
    if not hasattr(enum, tag):
        have = ", ".join(w.name for w in enum)
        raise ValueError(f"torchvision has no {tag} weights for {twin} (has: {have}); "
                         "use --pretrained imagenet")
    weights = getattr(enum, tag)
    try:
        state = weights.get_state_dict(progress=True, check_hash=True)
    except Exception as e:  # offline, proxy, truncated file
        cache = os.path.join(torch.hub.get_dir(), "checkpoints")
        fname = os.path.basename(weights.url)
        raise ValueError(f"could not get {twin} {tag} ({type(e).__name__}: {e}). Offline? Put {weights.url} "
                         f"into {cache}, or pass --pretrained /path/to/{fname}") from e
    return state, f"{version} (torchvision {twin} {tag})"


@torch.no_grad()
def _copy_weights(model, state, inflate):
    """Copy `state` into `model` name for name, inflating 2D convs. Returns (inflated, copied, skipped),
    skipped = [(name, why)] for the model's tensors left as they were."""
    inflated, copied, skipped = 0, 0, []
    for k, dst in model.state_dict().items():
        w = state.get(k)
        if w is None and k.endswith("num_batches_tracked"):
            continue  # torchvision's V1 ImageNet files (pre torch 0.4.1) and Caffe2 blobs lack it; 0 is right
        if w is None:
            skipped.append((k, "missing"))
        elif w.dim() == 4 and dst.dim() == 5 and w.shape == dst.shape[:2] + dst.shape[3:]:
            w3d = inflate_weight(w, dst.shape[2], inflate)  # 2D (O, I, h, w) -> 3D (O, I, kt, h, w)
            assert w3d.shape == dst.shape, f"{k}: inflated {tuple(w3d.shape)} != {tuple(dst.shape)}"
            dst.copy_(w3d)
            inflated += 1
        elif w.shape == dst.shape:  # BN, fc, and every tensor of a 3D checkpoint
            dst.copy_(w)
            copied += 1
        else:
            skipped.append((k, f"shape {'x'.join(map(str, w.shape))} in the file, "
                               f"{'x'.join(map(str, dst.shape))} here"))
    return inflated, copied, skipped


def _check_stem(model, zoo, name):
    """Weights of another temporal stride in the stem have the same shapes and compute another
    network (mmaction2's i3d_r50 vs resnet50_3d): refuse them when the file tells its stride."""
    spec = ARCH_SPECS.get(getattr(model, "arch", None))
    if spec is None or zoo.stem_stride_t in (None, spec.stem_stride_t):
        return
    fits = [a for a, s in ARCH_SPECS.items() if s == spec._replace(stem_stride_t=zoo.stem_stride_t)]
    raise ValueError(f"--pretrained {name}: {zoo.name} weights of a network with temporal stride "
                     f"{zoo.stem_stride_t} in conv1 and the first max-pool; {model.arch} has {spec.stem_stride_t} "
                     f"(same tensors, another network)" + (f": use --arch {fits[0]}" if fits else ""))


def _few(names, n=4):
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


@torch.no_grad()
def load_pretrained(model, src, inflate="mean"):
    """Fill `model` from ImageNet ("imagenet"/"imagenet_v2"), Kinetics-400 ("kinetics400"), or a file:
    a 2D torchvision ResNet, ours, or a pytorchvideo / PySlowFast (PyTorch or Caffe2) / mmaction2
    checkpoint. Strict: every tensor but the classifier must fit. Prints one summary line, sets
    model.pretrained_info = {"format", "mean", "std"} (the normalisation the weights expect)."""
    arch = getattr(model, "arch", "the model")
    if src in ("imagenet", "imagenet_v2"):
        state, name = _imagenet_state_dict(arch, src)
        zoo = TORCHVISION
    else:
        path = kinetics400_file(arch) if src == "kinetics400" else src
        name = f"kinetics400 ({path})" if src == "kinetics400" else src
        state, zoo = read_checkpoint(path)
    _check_stem(model, zoo, name)
    state, unexpected = convert_state_dict(state, zoo.rules)
    # 2D or 3D source: by conv1's kernel, (O, I, h, w) vs (O, I, t, h, w).
    is_2d = getattr(state.get("conv1.weight"), "ndim", 0) == 4
    dims = "2D" if is_2d else "3D"
    inflated, copied, skipped = _copy_weights(model, state, inflate)
    if inflated + copied == 0:
        raise ValueError(f"--pretrained {name}: no tensor fits {arch} ({zoo.name} layout)")
    # Only the classifier may differ (another num_classes): it keeps its fresh init. Anything else
    # missing or of another shape means another arch: fail rather than train a half-loaded network.
    bad = [f"{k} ({why})" for k, why in skipped if not k.startswith(HEAD)]
    if bad:
        raise ValueError(f"--pretrained {name}: {dims} weights do not fit {arch} ({zoo.name} layout; "
                         f"{len(bad)} tensors missing or mismatched: {_few(bad, 3)})")
    # Tensors of the file that nothing here takes: a head of another shape is fine, anything else
    # (a deeper net, non-local blocks, another pathway) means the file is another arch.
    model_keys = model.state_dict().keys()
    unused = unexpected + [k for k in state if k not in model_keys]
    extra = [k for k in unused if not re.match(r"(fc|head|classifier|cls_head)\.|pred_|blocks\.\d+\.proj\.", k)]
    if extra:
        raise ValueError(f"--pretrained {name}: the file ({zoo.name} layout) has {len(extra)} tensors {arch} does "
                         f"not have ({_few(extra, 3)}): weights of another arch?")
    line = f"pretrained {name} ({zoo.name}, {dims}): inflated {inflated}, copied {copied}, skipped {len(skipped)}"
    if skipped:  # all classifier tensors, by the check above
        reasons = sorted({"missing" if why == "missing" else "shape mismatch" for _, why in skipped})
        line += f" ({_few([k for k, _ in skipped])}: {' / '.join(reasons)}; classifier re-initialised)"
    if unused:
        line += f"; unused in the file: {_few(unused)}"
    spec = ARCH_SPECS.get(arch)
    if zoo.name == "mmaction2" and zoo.stem_stride_t is None and spec and spec.conv1_t > 1:
        line += ("; the file does not say its stem's temporal stride: mmaction2's i3d_r50 weights "
                 "belong in --arch resnet50_3d_mmaction")
    print(line)
    model.pretrained_info = {"format": zoo.name, "mean": zoo.mean, "std": zoo.std}
    return {"inflated": inflated, "copied": copied, "skipped": [k for k, _ in skipped], "format": zoo.name}


def build_model(arch, num_classes, dropout=0.0, pretrained=None, inflate="mean"):
    """An arch from ARCHS with a `num_classes` head. pretrained: None | "imagenet" | "imagenet_v2" |
    "kinetics400" | path to a 2D torchvision ResNet state dict | path to a 3D checkpoint (ours,
    "state_dict", bare, pytorchvideo, PySlowFast .pyth / Caffe2 .pkl, mmaction2). The model's
    `pretrained_info` is None without weights, else {"format", "mean", "std"} (see load_pretrained)."""
    if arch in ARCH_SPECS:
        model = ResNet3D(arch, num_classes, dropout)
    elif arch in TV_VIDEO:
        if pretrained in ("imagenet", "imagenet_v2"):
            raise ValueError(f"--pretrained {pretrained} is for the resnet*_3d archs; "
                             f"{arch} takes none or a 3D checkpoint file")
        if arch.startswith(("s3d", "mvit")):  # their `dropout` argument is the head dropout
            model = torchvision.models.get_model(arch, num_classes=num_classes, dropout=dropout)
        else:  # no head dropout: add one after the (weightless) avgpool, so names stay torchvision's
            model = torchvision.models.get_model(arch, num_classes=num_classes)
            model.avgpool = nn.Sequential(model.avgpool, nn.Dropout(dropout))
        model.arch = arch
    else:
        raise ValueError(f"unknown arch {arch!r}; choose one of: {', '.join(ARCHS)}")
    if inflate not in ("mean", "center"):
        raise ValueError(f"inflate must be 'mean' or 'center', got {inflate!r}")
    model.pretrained_info = None
    if pretrained not in (None, "", "none"):
        load_pretrained(model, pretrained, inflate)
    return model
