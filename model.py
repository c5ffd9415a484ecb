"""The I3D ResNet-3D family, torchvision's video models, and exact ImageNet -> 3D inflation.

    model = build_model("resnet50_3d", num_classes=400, dropout=0.5, pretrained="imagenet")
    logits = model(x)  # x: float (B, 3, T, H, W), normalised; logits: (B, num_classes)

resnet50_3d is the I3D-R50 of the Non-local / PySlowFast / mmaction2 (i3d_r50) model zoos:
28.04M parameters at 400 classes, 56.8 GMACs for a 16x224x224 clip. Parameter names mirror
torchvision's 2D resnet (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc, ...), so inflating
ImageNet weights is a name-for-name copy in which every conv kernel gains a temporal axis.

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
  open-mmlab/mmaction2 (ResNet3d, i3d_r50 configs).
"""
import os

import torch
import torch.nn as nn
import torchvision


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
        self.downsample = downsample

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
        self.downsample = downsample

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

# name: (block, blocks per stage, conv1 temporal size, temporal max-pool after res2, inflate, 2D twin)
ARCH_SPECS = {
    "resnet10_3d": (BasicBlock3D, (1, 1, 1, 1), 5, True, I3D, None),  # tiny CPU arch for tests/demo
    "resnet18_3d": (BasicBlock3D, (2, 2, 2, 2), 5, True, I3D, "resnet18"),
    "resnet34_3d": (BasicBlock3D, (3, 4, 6, 3), 5, True, I3D, "resnet34"),
    "resnet50_3d": (Bottleneck3D, (3, 4, 6, 3), 5, True, I3D, "resnet50"),
    "resnet101_3d": (Bottleneck3D, (3, 4, 23, 3), 5, True, I3D, "resnet101"),
    "resnet50_3d_slowonly": (Bottleneck3D, (3, 4, 6, 3), 1, False, SLOW, "resnet50"),
}
# torchvision.models.video, for comparison. Their own input limits apply: mvit_v1_b takes exactly
# 16x224x224 (absolute position embedding), s3d ends in a fixed 2x7x7 average pool (16x224x224
# clips work, small ones fail inside torch). We do not re-check these limits.
TV_VIDEO = ("r3d_18", "mc3_18", "r2plus1d_18", "s3d", "mvit_v1_b", "mvit_v2_s",
            "swin3d_t", "swin3d_s", "swin3d_b")
ARCHS = tuple(ARCH_SPECS) + TV_VIDEO


class ResNet3D(nn.Module):
    """One of ARCH_SPECS. Module names follow torchvision's ResNet; pool2/dropout hold no weights."""

    def __init__(self, arch, num_classes, dropout=0.0, zero_init_residual=False):
        super().__init__()
        block, layers, conv1_t, temporal_pool, inflate, _ = ARCH_SPECS[arch]
        self.arch = arch
        # The only layer that shrinks T is the (2,1,1) max-pool (every conv pads T to "same"),
        # so T >= 2 with it, T >= 1 without. forward() checks this for a clear message.
        self.min_t = 2 if temporal_pool else 1
        self.inplanes = 64
        self.conv1 = nn.Conv3d(3, 64, (conv1_t, 7, 7), (1, 2, 2), (conv1_t // 2, 3, 3), bias=False)
        self.bn1 = nn.BatchNorm3d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))
        self.layer1 = self._make_layer(block, 64, layers[0], 1, inflate[0])
        # No parameters, so no name to keep in step with torchvision; floor mode (odd T drops a frame).
        self.pool2 = nn.MaxPool3d((2, 1, 1), (2, 1, 1)) if temporal_pool else nn.Identity()
        self.layer2 = self._make_layer(block, 128, layers[1], 2, inflate[1])
        self.layer3 = self._make_layer(block, 256, layers[2], 2, inflate[2])
        self.layer4 = self._make_layer(block, 512, layers[3], 2, inflate[3])
        self.avgpool = nn.AdaptiveAvgPool3d(1)  # global over (T, H, W): any T, odd H/W
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        # torchvision's init. fc keeps nn.Linear's default, as there.
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm3d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
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
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, 64, T, H/4, W/4)
        x = self.pool2(self.layer1(x))  # (B, 64*e, T/2, H/4, W/4); T/2 only with the temporal pool
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


def _read_state_dict(src):
    """A state dict from a file: a trainer checkpoint ("model"), a "state_dict" wrapper, or bare."""
    if not os.path.isfile(src):
        raise ValueError(f"--pretrained {src!r}: no such file (and not 'imagenet' / 'imagenet_v2')")
    try:  # Safe unpickling first: a plain state dict needs nothing else.
        obj = torch.load(src, map_location="cpu", weights_only=True)
    except Exception:
        # Our checkpoints also hold the args dict and numpy RNG state, which the safe unpickler
        # refuses. Full unpickling can run code from the file: only pass files you trust.
        try:
            obj = torch.load(src, map_location="cpu", weights_only=False)
        except Exception as e:
            raise ValueError(f"--pretrained {src}: cannot read it as a torch checkpoint ({e})") from e
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        obj = obj["model"]
    elif isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"--pretrained {src}: not a state dict (nor a dict with 'model' / 'state_dict')")
    return strip_prefixes(obj)


def strip_prefixes(state_dict):
    """DataParallel/DDP save "module.", torch.compile "_orig_mod.": strip them wherever they lead."""
    out = {}
    for k, v in state_dict.items():
        while k.startswith(("module.", "_orig_mod.")):
            k = k.split(".", 1)[1]
        out[k] = v
    return out


def _imagenet_state_dict(arch, version):
    twin = ARCH_SPECS[arch][5] if arch in ARCH_SPECS else None
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
def load_pretrained(model, src, inflate="mean"):
    """Fill `model` from ImageNet ("imagenet"/"imagenet_v2"), a 2D torchvision ResNet state dict
    file, or a 3D checkpoint file. Prints one summary line; returns the counts."""
    if src in ("imagenet", "imagenet_v2"):
        state, name = _imagenet_state_dict(getattr(model, "arch", "this arch"), src)
    else:
        state, name = _read_state_dict(src), src
    # 2D or 3D source: by conv1's kernel, (O, I, h, w) vs (O, I, t, h, w). Files without conv1
    # (a 3D checkpoint of s3d, mvit, ...) are 3D; a file that fits nothing fails below.
    conv1 = state.get("conv1.weight")
    is_2d = conv1 is not None and conv1.dim() == 4
    inflated, copied, skipped = 0, 0, []
    for k, dst in model.state_dict().items():
        w = state.get(k)
        if w is None and k.endswith("num_batches_tracked"):
            continue  # files older than torch 0.4.1 (torchvision's V1 ImageNet) lack it; 0 is right
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
            skipped.append((k, "shape mismatch"))
    if inflated + copied == 0:
        raise ValueError(f"--pretrained {name}: no tensor fits {getattr(model, 'arch', 'the model')}")
    # The classifier may differ (another num_classes) and is then left at its fresh init. Anything
    # else missing from a 2D source means the wrong depth: fail rather than half-inflate.
    head = ("fc.", "head.", "classifier.")
    bad = [k for k, _ in skipped if not k.startswith(head)]
    if is_2d and bad:
        raise ValueError(f"--pretrained {name}: 2D weights do not fit {getattr(model, 'arch', 'the model')} "
                         f"({len(bad)} tensors missing or mismatched, e.g. {', '.join(bad[:3])})")
    line = f"pretrained {name} ({'2D' if is_2d else '3D'}): inflated {inflated}, copied {copied}, "
    line += f"skipped {len(skipped)}"
    if skipped:
        reasons = sorted({r for _, r in skipped})
        names = ", ".join(k for k, _ in skipped[:4]) + (", ..." if len(skipped) > 4 else "")
        fc_note = "; classifier re-initialised" if any(k.startswith(head) for k, _ in skipped) else ""
        line += f" ({names}: {' / '.join(reasons)}{fc_note})"
    print(line)
    return {"inflated": inflated, "copied": copied, "skipped": [k for k, _ in skipped]}


def build_model(arch, num_classes, dropout=0.0, pretrained=None, inflate="mean"):
    """An arch from ARCHS with a `num_classes` head. pretrained: None | "imagenet" | "imagenet_v2" |
    path to a 2D torchvision ResNet state dict | path to a 3D checkpoint (ours, "state_dict", bare)."""
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
    if pretrained not in (None, "", "none"):
        load_pretrained(model, pretrained, inflate)
    return model
