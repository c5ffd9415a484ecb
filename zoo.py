"""Pretrained weights for model.py's networks, read from the model zoos' own files.

    # model.build_model + load_pretrained
    net = zoo.build_model("resnet50_3d", 400, pretrained="kinetics400")
    net.pretrained_info  # {"format": "pytorchvideo", "mean": (0.45, ...), "std": (0.225, ...)}

Sources: torchvision's ImageNet ResNets (2D, inflated by model.copy_weights), our checkpoints, and
the Kinetics checkpoints of pytorchvideo (.pyth), PySlowFast (PyTorch .pyth and Caffe2 .pkl) and
mmaction2 (.pth). A file's layout is recognised by a key only it has (Zoo.signature) and renamed to
our names by a small table of rules; loading is strict (only the classifier may differ) and checks
every shape as it copies; `model.pretrained_info` tells the input normalisation the weights expect.
Files are read as data (checkpoint.load: tensors, numbers, text, numpy arrays), never as code.

Layouts followed (each rule table cites its files)
- torchvision/models/resnet.py: our names (conv1, bn1, layerS.I.convK, layerS.I.downsample.0/.1,
  fc).
- facebookresearch/pytorchvideo: models/resnet.py, stem.py, head.py, hub/resnet.py (i3d_r50,
  slow_r50).
- facebookresearch/SlowFast (PySlowFast): models/video_model_builder.py, stem_helper.py,
  resnet_helper.py, head_helper.py; utils/c2_model_loading.py and utils/checkpoint.py (Caffe2 .pkl).
- open-mmlab/mmaction2: models/backbones/resnet3d.py, models/heads/i3d_head.py,
  configs/_base_/models/i3d_r50.py and configs/recognition/i3d (the Kinetics-400 file); for TSN /
  TSM models/backbones/resnet.py, resnet_tsm.py, heads/tsn_head.py, tsm_head.py (cls_head.fc_cls).
"""

import dataclasses
import os
import re
from typing import NamedTuple, Optional

import torch
import torchvision

import checkpoint
import model as models
import mvit_net
import slowfast_zoo
import vit_zoo
import vjepa_zoo
from model import HEAD, copy_weights, strip_prefixes


IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# PySlowFast's DATA.MEAN / DATA.STD
KINETICS_MEAN, KINETICS_STD = ((0.45, 0.45, 0.45), (0.225, 0.225, 0.225))
# Caffe2 BN blob suffixes
_C2_BN = {"s": "weight", "b": "bias", "rm": "running_mean", "riv": "running_var"}


def _abc(letter):
    """The a/b/c conv of a PySlowFast / pytorchvideo bottleneck is our conv1/conv2/conv3."""
    return "abc".index(letter) + 1


# Key rules: (regex over a whole source name, our name from the match); the first rule that matches
# wins, a name no rule matches is unexpected. Our names are torchvision's (conv1, bn1,
# layerS.I.convK, layerS.I.bnK, layerS.I.downsample.0/.1, fc). Stage S = 1..4 is res2..res5.
PYTORCHVIDEO_RULES = (
    # pytorchvideo/models/resnet.py (create_resnet: blocks = [stem, stage, (pool), stage, ...,
    # head]; ResBlock branch1_conv/branch1_norm, BottleneckBlock conv_a/norm_a..c), stem.py
    # (ResNetBasicStem conv/norm), head.py (ResNetBasicHead proj). Stages are renumbered stage1..4
    # first (_pytorchvideo_stages) because i3d_r50's parameter-free (2,1,1) pool takes blocks.2 and
    # moves its head to blocks.6.
    (r"blocks\.0\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"blocks\.0\.norm\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (
        r"stage(\d)\.res_blocks\.(\d+)\.branch1_conv\.(\w+)",
        lambda m: f"layer{m[1]}.{m[2]}.downsample.0.{m[3]}",
    ),
    (
        r"stage(\d)\.res_blocks\.(\d+)\.branch1_norm\.(\w+)",
        lambda m: f"layer{m[1]}.{m[2]}.downsample.1.{m[3]}",
    ),
    (
        r"stage(\d)\.res_blocks\.(\d+)\.branch2\.conv_([abc])\.(\w+)",
        lambda m: f"layer{m[1]}.{m[2]}.conv{_abc(m[3])}.{m[4]}",
    ),
    (
        r"stage(\d)\.res_blocks\.(\d+)\.branch2\.norm_([abc])\.(\w+)",
        lambda m: f"layer{m[1]}.{m[2]}.bn{_abc(m[3])}.{m[4]}",
    ),
    (r"blocks\.\d+\.proj\.(\w+)", lambda m: f"fc.{m[1]}"),
)
PYSLOWFAST_RULES = (
    # slowfast/models/video_model_builder.py (ResNet: s1 = stem, s2..s5 = res2..res5, head),
    # stem_helper.py (ResNetBasicStem conv/bn), resnet_helper.py (ResStage pathway0_res{i}; ResBlock
    # branch1/branch1_bn; BottleneckTransform a/a_bn, b/b_bn, c/c_bn), head_helper.py
    # (ResNetBasicHead projection).
    (r"s1\.pathway0_stem\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"s1\.pathway0_stem\.bn\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (
        r"s(\d)\.pathway0_res(\d+)\.branch1\.(\w+)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.0.{m[3]}",
    ),
    (
        r"s(\d)\.pathway0_res(\d+)\.branch1_bn\.(\w+)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.1.{m[3]}",
    ),
    (
        r"s(\d)\.pathway0_res(\d+)\.branch2\.([abc])\.(\w+)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.conv{_abc(m[3])}.{m[4]}",
    ),
    (
        r"s(\d)\.pathway0_res(\d+)\.branch2\.([abc])_bn\.(\w+)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.bn{_abc(m[3])}.{m[4]}",
    ),
    (r"head\.projection\.(\w+)", lambda m: f"fc.{m[1]}"),
)
CAFFE2_RULES = (
    # slowfast/utils/c2_model_loading.py: the blob names of the Caffe2 zoo (video-nonlocal-net),
    # e.g. res3_1_branch2a_bn_riv; _s/_b/_rm/_riv = BN weight/bias/running_mean/running_var, pred =
    # classifier.
    (r"conv1_w", lambda m: "conv1.weight"),
    (r"res_conv1_bn_(s|b|rm|riv)", lambda m: f"bn1.{_C2_BN[m[1]]}"),
    (r"res(\d)_(\d+)_branch1_w", lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.0.weight"),
    (
        r"res(\d)_(\d+)_branch1_bn_(s|b|rm|riv)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.downsample.1.{_C2_BN[m[3]]}",
    ),
    (
        r"res(\d)_(\d+)_branch2([abc])_w",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.conv{_abc(m[3])}.weight",
    ),
    (
        r"res(\d)_(\d+)_branch2([abc])_bn_(s|b|rm|riv)",
        lambda m: f"layer{int(m[1]) - 1}.{m[2]}.bn{_abc(m[3])}.{_C2_BN[m[4]]}",
    ),
    (r"pred_(w|b)", lambda m: "fc." + {"w": "weight", "b": "bias"}[m[1]]),
)
MMACTION2_RULES = (
    # mmaction/models/backbones/resnet3d.py (ResNet3d conv1/layerN, Bottleneck3d conv1..3 and the
    # downsample as mmcv ConvModules = .conv + .bn), mmaction/models/heads/i3d_head.py (fc_cls);
    # Recognizer3D prefixes backbone. / cls_head.
    (r"backbone\.conv1\.conv\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"backbone\.conv1\.bn\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (r"backbone\.(layer\d\.\d+)\.conv(\d)\.conv\.(\w+)", lambda m: f"{m[1]}.conv{m[2]}.{m[3]}"),
    # mmaction2's 2D ResNet (backbones/resnet.py, same ConvModule names) for TSN; for TSM
    # (backbones/resnet_tsm.py) TemporalShift wraps conv1's conv as `.net`: conv1.conv.net.weight.
    (r"backbone\.(layer\d\.\d+)\.conv1\.conv\.net\.(\w+)", lambda m: f"{m[1]}.conv1.{m[2]}"),
    (r"backbone\.(layer\d\.\d+)\.conv(\d)\.bn\.(\w+)", lambda m: f"{m[1]}.bn{m[2]}.{m[3]}"),
    (r"backbone\.(layer\d\.\d+)\.downsample\.conv\.(\w+)", lambda m: f"{m[1]}.downsample.0.{m[2]}"),
    (r"backbone\.(layer\d\.\d+)\.downsample\.bn\.(\w+)", lambda m: f"{m[1]}.downsample.1.{m[2]}"),
    (r"cls_head\.fc_cls\.(\w+)", lambda m: f"fc.{m[1]}"),
)
SAME_NAMES = ((r"(.+)", lambda m: m[1]),)  # ours, torchvision, plain state dicts


class Zoo(NamedTuple):
    """A checkpoint layout: how to recognise it, rename it, and the input normalisation its weights
    expect."""

    name: str
    signature: Optional[str]  # a key only this layout has
    rules: tuple
    mean: Optional[tuple]
    std: Optional[tuple]
    # temporal stride of conv1 and the first max-pool; None: unknown
    stem_stride_t: Optional[int] = None


ZOOS = (
    Zoo("pytorchvideo", "blocks.0.conv.weight", PYTORCHVIDEO_RULES, KINETICS_MEAN, KINETICS_STD, 1),
    Zoo(
        "pyslowfast",
        "s1.pathway0_stem.conv.weight",
        PYSLOWFAST_RULES,
        KINETICS_MEAN,
        KINETICS_STD,
        1,
    ),
    Zoo("pyslowfast-caffe2", "conv1_w", CAFFE2_RULES, KINETICS_MEAN, KINETICS_STD, 1),
    Zoo("mmaction2", "backbone.conv1.conv.weight", MMACTION2_RULES, IMAGENET_MEAN, IMAGENET_STD),
    # The same layouts' SlowFast and X3D (slowfast_zoo.py renames them): their stems have other
    # names. mmaction2's X3D files are PySlowFast's converted: Kinetics normalisation.
    Zoo(
        "pytorchvideo",
        "blocks.0.multipathway_blocks.0.conv.weight",
        (),
        KINETICS_MEAN,
        KINETICS_STD,
    ),
    Zoo("pytorchvideo", "blocks.0.conv.conv_xy.weight", (), KINETICS_MEAN, KINETICS_STD),
    Zoo("mmaction2", "backbone.conv1_s.conv.weight", (), KINETICS_MEAN, KINETICS_STD),
    Zoo("mmaction2", "backbone.slow_path.conv1.conv.weight", (), IMAGENET_MEAN, IMAGENET_STD),
    # PySlowFast's MViT (mvit_net.py renames it to torchvision's MViT names)
    Zoo("pyslowfast", mvit_net.SIGNATURE, mvit_net.PYSLOWFAST_RULES, KINETICS_MEAN, KINETICS_STD),
)
TORCHVISION = Zoo("torchvision", None, SAME_NAMES, IMAGENET_MEAN, IMAGENET_STD)

# --pretrained kinetics400: the published Kinetics-400 weights of each arch (top-1 as published).
_PTV = "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics"
_PTV_FILES = {
    "slowfast_r50_8x8": "SLOWFAST_8x8_R50",
    "slowfast_r101_8x8": "SLOWFAST_8x8_R101",
    "slowfast_r101_16x8": "SLOWFAST_16x8_R101_50_50",
    **{f"x3d_{s}": f"X3D_{s.upper()}" for s in ("xs", "s", "m", "l")},
}
_MMACTION2_I3D = "i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb"
_MMACTION2_SF = "slowfast_r101-r50_32xb8-4x16x1-256e_kinetics400-rgb"
KINETICS400_URLS = {
    # pytorchvideo hub i3d_r50 / slow_r50 (pytorchvideo/models/hub/resnet.py): 73.27 / 74.58 top-1,
    # 8x8 clips
    "resnet50_3d": "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics/"
    "I3D_8x8_R50.pyth",
    "resnet50_3d_slowonly": "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics/"
    "SLOW_8x8_R50.pyth",
    # mmaction2 configs/recognition/i3d/README.md, i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e:
    # 73.47 top-1
    "resnet50_3d_mmaction": "https://download.openmmlab.com/mmaction/v1.0/recognition/i3d/"
    f"{_MMACTION2_I3D}/{_MMACTION2_I3D}_20220812-e213c223.pth",
    # pytorchvideo hub (models/hub/slowfast.py, x3d.py): slowfast_r50 76.4, slowfast_r101 77.9,
    # slowfast_16x8_r101_50_50 78.7; x3d_xs 69.12, x3d_s 73.33, x3d_m 75.94, x3d_l 77.44 top-1.
    **{a: f"{_PTV}/{f}.pyth" for a, f in _PTV_FILES.items()},
    # PySlowFast MODEL_ZOO.md (Caffe2): SlowFast R50 4x16, 75.6 top-1 (3 x 10 views).
    "slowfast_r50_4x16": "https://dl.fbaipublicfiles.com/pyslowfast/model_zoo/kinetics400/"
    "SLOWFAST_4x16_R50.pkl",
    # mmaction2 configs/recognition/slowfast/README.md: R101 slow + R50 fast 4x16, 77.03 top-1 (10
    # clips x 3 crops); only mmaction2 publishes it (its network: zoo.build_model builds that)
    "slowfast_r101_r50_4x16": "https://download.openmmlab.com/mmaction/v1.0/recognition/slowfast/"
    f"{_MMACTION2_SF}/{_MMACTION2_SF}_20220901-a77ac3ee.pth",
    # PySlowFast projects/mvitv2/README.md (and MODEL_ZOO.md): MViTv2-B 32x3, 82.9 top-1 (1 x 5
    # views)
    "mvitv2_b": "https://dl.fbaipublicfiles.com/pyslowfast/model_zoo/mvitv2/pysf_video_models/"
    "MViTv2_B_32x3_k400_f304025456.pyth",
}


def kinetics400_file(arch):
    """Path of the arch's Kinetics-400 file in torch.hub's cache, downloaded there if absent."""
    url = KINETICS400_URLS.get(arch)
    if url is None:
        raise ValueError(
            f"--pretrained kinetics400: no published Kinetics-400 weights for {arch} "
            f"(have: {', '.join(KINETICS400_URLS)})"
        )
    path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(url))
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:  # writes a temporary file and renames it when complete: no half file at `path`
            torch.hub.download_url_to_file(url, path, progress=True)
        except Exception as e:  # offline, proxy, interrupted
            why = (str(e).splitlines() or [""])[0]
            raise ValueError(
                f"--pretrained kinetics400: could not download {url} ({type(e).__name__}: "
                f"{why}). Offline? Download it elsewhere and put it at {path}"
            ) from e
    return path


def _caffe2_blobs(blobs):
    """numpy blobs -> tensors, without the solver's blobs (momentum, lr, model_iter), which
    PySlowFast also skips (slowfast/utils/checkpoint.py)."""
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
    return {
        re.sub(
            r"^blocks\.(\d+)\.res_blocks\.", lambda m: f"stage{stage[int(m[1])]}.res_blocks.", k
        ): v
        for k, v in state.items()
    }


def _mmaction2_stem_stride(obj):
    """conv1_stride_t of an mmaction2 checkpoint from the config text mmengine / mmcv store in its
    meta (ResNet3d's default is 1); None without it, or when conv1 and pool1 disagree (no arch here
    has that)."""
    meta = obj.get("meta") if isinstance(obj, dict) else None
    text = (meta.get("cfg") or meta.get("config")) if isinstance(meta, dict) else None
    if not isinstance(text, str):
        return None
    conv = re.search(r"conv1_stride_t\W+(\d+)", text)
    pool = re.search(r"pool1_stride_t\W+(\d+)", text)
    conv, pool = (int(conv[1]) if conv else 1), (int(pool[1]) if pool else 1)
    return conv if conv == pool else None


def _unwrap(obj):
    """A loaded checkpoint -> (its weights, the key they were under or "blobs" / "bare", the outer
    dict)."""
    if isinstance(obj, dict) and isinstance(obj.get("blobs"), dict):
        return _caffe2_blobs(obj["blobs"]), "blobs", {}
    for key in ("model_state", "model", "state_dict"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            return obj[key], key, obj
    return obj, "bare", {}


def zoo_layout(obj):
    """The name of the model zoo (ZOOS: pytorchvideo, pyslowfast, mmaction2, ...) whose layout a
    loaded checkpoint has, or None (ours, torchvision's, anything else)."""
    state, kind, outer = _unwrap(obj)
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        return None
    if kind == "model" and isinstance(outer.get("args"), dict):
        return None  # train.py's own, whatever its names (SlowFast / X3D keep PySlowFast's)
    names = strip_prefixes(state)
    return next((zoo.name for zoo in ZOOS if zoo.signature in names), None)


def read_checkpoint(src):
    """(state dict in the file's own names, its Zoo) for a checkpoint file of any layout above,
    ours ("model", with "args"), a "state_dict" / "model_state" wrapper, or a bare state dict."""
    if not os.path.isfile(src):
        raise ValueError(
            f"--pretrained {src!r}: no such file (and not imagenet / imagenet_v2 / kinetics400)"
        )
    obj, kind, outer = _unwrap(checkpoint.load(src, "--pretrained"))
    if (
        not isinstance(obj, dict)
        or not obj
        or not all(isinstance(v, torch.Tensor) for v in obj.values())
    ):
        raise ValueError(
            f"--pretrained {src}: not a state dict (nor a dict with 'model' / 'state_dict' / "
            "'model_state', nor a Caffe2 pickle with 'blobs')"
        )
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
        spec = layout(args.get("arch"))
        return state, Zoo(
            "ours",
            None,
            SAME_NAMES,
            tuple(args.get("mean") or IMAGENET_MEAN),
            tuple(args.get("std") or IMAGENET_STD),
            spec.stem_stride_t if spec else None,
        )
    return state, Zoo(kind, None, SAME_NAMES, None, None)


def convert_state_dict(state, rules):
    """Rename by the first matching rule: (our state dict, names no rule matched). Names only: the
    shapes are checked tensor by tensor when model.copy_weights copies them."""
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


def imagenet_state_dict(arch, version):
    twin = imagenet_twin(arch)
    if twin is None:
        raise ValueError(
            f"{arch} has no ImageNet 2D counterpart in torchvision; "
            "use --pretrained none or a checkpoint file"
        )
    tag = {"imagenet": "IMAGENET1K_V1", "imagenet_v2": "IMAGENET1K_V2"}[version]
    enum = torchvision.models.get_model_weights(twin)  # e.g. ResNet50_Weights
    if not hasattr(enum, tag):
        have = ", ".join(w.name for w in enum)
        raise ValueError(
            f"torchvision has no {tag} weights for {twin} (has: {have}); use --pretrained imagenet"
        )
    weights = getattr(enum, tag)
    try:
        state = weights.get_state_dict(progress=True, check_hash=True)
    except Exception as e:  # offline, proxy, truncated file
        cache = os.path.join(torch.hub.get_dir(), "checkpoints")
        fname = os.path.basename(weights.url)
        raise ValueError(
            f"could not get {twin} {tag} ({type(e).__name__}: {e}). Offline? Put {weights.url} "
            f"into {cache}, or pass --pretrained /path/to/{fname}"
        ) from e
    return state, f"{version} (torchvision {twin} {tag})"


def _check_stem(model, zoo, name):
    """Weights of another temporal stride in the stem have the same shapes and compute another
    network (mmaction2's i3d_r50 vs resnet50_3d): refuse them when the file tells its stride."""
    spec = layout(getattr(model, "arch", None))
    if spec is None or zoo.stem_stride_t in (None, spec.stem_stride_t):
        return
    other = spec._replace(stem_stride_t=zoo.stem_stride_t)
    fits = [a for a in models.ARCHS if layout(a) == other]
    hint = f": use --arch {fits[0]}" if fits else ""
    raise ValueError(
        f"--pretrained {name}: {zoo.name} weights of a network with temporal stride "
        f"{zoo.stem_stride_t} in conv1 and the first max-pool; {model.arch} has "
        f"{spec.stem_stride_t} (same tensors, another network){hint}"
    )


def _few(names, n=4):
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def layout(arch):
    """A ResNet-3D arch's layout (model.ArchSpec), None for any other arch."""
    entry = models.ARCHS.get(arch)
    return entry.layout if entry else None


def imagenet_twin(arch):
    """The torchvision 2D network whose ImageNet weights fit `arch` (inflated into a ResNet-3D), or
    None: a ResNet-3D's layout names it; a 2D arch is its own."""
    entry = models.ARCHS.get(arch)
    if entry is None or entry.layout:
        return entry and entry.layout.twin2d
    return arch if "2D" in entry.modes else None


@torch.no_grad()
def build_model(
    spec, *args, pretrained=None, inflate="mean", vjepa_key=None, head_note=None, **fields
):
    """model.build_model of a ModelSpec (or its fields: model.as_spec), then `pretrained`: None |
    "imagenet" | "imagenet_v2" | "kinetics400" | a 2D torchvision ResNet state dict | a 3D
    checkpoint (ours, "state_dict", bare, pytorchvideo, PySlowFast .pyth / Caffe2 .pkl, mmaction2).
    `pretrained_info`: None without weights, else {format, mean, std}. head_note: what becomes of
    a V-JEPA head the file does not hold, for the load line (--probe, --probe-weights)."""
    spec = models.as_spec(spec, *args, **fields)
    if inflate not in ("mean", "center"):
        raise ValueError(f"inflate must be 'mean' or 'center', got {inflate!r}")
    entry = models.ARCHS.get(spec.arch)  # None: build_model says "unknown arch"
    video_only = entry and entry.build in (
        models.torchvision_video,
        models.vit_video,
        models.vjepa_video,
        mvit_net.build,
    )
    if video_only and pretrained in ("imagenet", "imagenet_v2"):
        raise ValueError(
            f"--pretrained {pretrained} is for the resnet*_3d archs; "
            f"{spec.arch} takes none or a 3D checkpoint file"
        )
    source = pretrained
    if pretrained not in (None, "", "none") and slowfast_zoo.family_of(spec.arch) == "slowfast":
        # The file says whose SlowFast it is (PySlowFast's or mmaction2's network): read it once,
        # build that variant, load it.
        source = read_source(pretrained, spec.arch)
        state, file_zoo, name = source
        variant = slowfast_zoo.file_variant(spec, state, slowfast_layout(file_zoo), name)
        spec = dataclasses.replace(spec, slowfast_variant=variant)
    model = models.build_model(spec)
    if pretrained not in (None, "", "none"):
        load_pretrained(model, source, inflate, vjepa_key, head_note)
    return model


def read_source(src, arch):
    """--pretrained SRC for a ConvNet: (state dict, Zoo, name for messages). A ViT's file, folder or
    Hub id is refused in one line naming the ViT arch it fits."""
    if src in ("imagenet", "imagenet_v2"):
        state, name = imagenet_state_dict(arch, src)
        return state, TORCHVISION, name
    if os.path.isdir(src) or vit_zoo.is_hub_id(src):  # a transformers folder: a ViT's
        raise ValueError(vit_zoo.convnet_refusal(src, arch))
    path = kinetics400_file(arch) if src == "kinetics400" else src
    state, zoo = read_checkpoint(path)
    # A PySlowFast MViT (whose patch_embed.proj looks like VideoMAE's) fits its own arch only.
    mvit = zoo.rules is mvit_net.PYSLOWFAST_RULES
    refused = (
        mvit_net.refusal(state, arch, src) if mvit else vit_zoo.convnet_refusal(src, arch, state)
    )
    if refused:
        raise ValueError(refused)
    return state, zoo, f"kinetics400 ({path})" if src == "kinetics400" else src


def pretrained_info(zoo, state, skipped):
    """model.pretrained_info: the normalisation the weights expect, and the file's classifier (its
    number of classes, None if it has none; loaded, or skipped as of another size)."""
    head = next((v for k, v in state.items() if k.startswith(HEAD) and v.dim() > 1), None)
    return {
        "format": zoo.name,
        "mean": zoo.mean,
        "std": zoo.std,
        "head_classes": None if head is None else head.shape[0],
        "head_loaded": not any(k.startswith(HEAD) for k, _ in skipped),
    }


def slowfast_layout(zoo):
    """slowfast_zoo's name of a file's layout: ours, bare or "state_dict" files of the SlowFast /
    X3D archs have PySlowFast's names too; Caffe2 blobs are PySlowFast's Caffe2 layout."""
    if zoo.name == "blobs":
        return "pyslowfast-caffe2"
    return "pyslowfast" if zoo.rules is SAME_NAMES else zoo.name


def _rename(model, state, zoo, name):
    """convert_state_dict by the layout's rules; SlowFast / X3D by slowfast_zoo's (their names are
    PySlowFast's), which also refuses, in one line, a file of the other family for any arch."""
    arch = getattr(model, "arch", None)
    if slowfast_zoo.family_of(arch) is None:
        other = slowfast_zoo.family(state)
        if other:
            archs = models.slowfast_net.SLOWFAST if other == "slowfast" else models.slowfast_net.X3D
            raise ValueError(
                f"--pretrained {name}: {'a SlowFast' if other == 'slowfast' else 'an X3D'} "
                "checkpoint "
                f"({zoo.name} layout), not {arch}'s network: use --arch {' / '.join(archs)}"
            )
        state, unexpected = convert_state_dict(state, zoo.rules)
        # PySlowFast's MViT class token is (1, 1, C), torchvision's (C,)
        return (
            mvit_net.fit(state) if zoo.rules is mvit_net.PYSLOWFAST_RULES else state
        ), unexpected
    layout_name = slowfast_layout(zoo)
    rules = slowfast_zoo.rules(arch, layout_name, state, name)
    state, unexpected = convert_state_dict(state, rules)
    slowfast_zoo.check(model, slowfast_zoo.fit(model, state, layout_name), name)
    return state, unexpected


def load_pretrained(model, src, inflate="mean", vjepa_key=None, head_note=None):
    """Fill `model` from ImageNet ("imagenet"/"imagenet_v2"), Kinetics-400 ("kinetics400"), or a
    file: a 2D torchvision ResNet, ours, or a pytorchvideo / PySlowFast (PyTorch or Caffe2) /
    mmaction2 checkpoint. Strict: every tensor but the classifier must fit. Prints one summary line,
    sets model.pretrained_info = {"format", "mean", "std"} (the normalisation the weights
    expect)."""
    arch = getattr(model, "arch", "the model")
    if arch in models.VJEPAS:  # the V-JEPA 2 layouts (vjepa_zoo.py)
        return vjepa_zoo.load(model, src, vjepa_key, head_note)
    if arch in models.VITS:  # the VideoMAE layouts (vit_zoo.py)
        return vit_zoo.load(model, src, {z.signature: z.name for z in ZOOS})
    # src: what read_source gives, already read (zoo.build_model, for a SlowFast arch), or its SRC
    state, zoo, name = src if isinstance(src, tuple) else read_source(src, arch)
    _check_stem(model, zoo, name)
    if any(".conv1.conv.net." in k for k in state) and not getattr(model, "frames", None):
        raise ValueError(
            f"--pretrained {name}: a TSM checkpoint (mmaction2 layout, shifted convs); "
            f"this model has no shift: add --shift 8"
        )
    state, unexpected = _rename(model, state, zoo, name)
    # 2D or 3D source: by conv1's kernel, (O, I, h, w) vs (O, I, t, h, w).
    is_2d = getattr(state.get("conv1.weight"), "ndim", 0) == 4
    dims = "2D" if is_2d else "3D"
    inflated, copied, skipped = copy_weights(model, state, inflate)
    if inflated + copied == 0:
        raise ValueError(f"--pretrained {name}: no tensor fits {arch} ({zoo.name} layout)")
    # Only the classifier may differ (another num_classes): it keeps its fresh init. Anything else
    # missing or of another shape means another arch: fail rather than train a half-loaded network.
    bad = [f"{k} ({why})" for k, why in skipped if not k.startswith(HEAD)]
    if bad:
        raise ValueError(
            f"--pretrained {name}: {dims} weights do not fit {arch} ({zoo.name} layout; "
            f"{len(bad)} tensors missing or mismatched: {_few(bad, 3)})"
        )
    # Tensors of the file that nothing here takes: a head of another shape is fine, anything else
    # (a deeper net, non-local blocks, another pathway) means the file is another arch.
    model_keys = model.state_dict().keys()
    unused = unexpected + [k for k in state if k not in model_keys]
    # every layout's classifier
    heads = r"(fc|head|classifier|cls_head)\.|pred_|blocks\.\d+\.proj\."
    extra = [k for k in unused if not re.match(heads, k)]
    if extra:
        raise ValueError(
            f"--pretrained {name}: the file ({zoo.name} layout) has {len(extra)} tensors "
            f"{arch} does not have ({_few(extra, 3)}): weights of another arch?"
        )
    line = (
        f"pretrained {name} ({zoo.name}, {dims}): inflated {inflated}, copied {copied}, "
        f"skipped {len(skipped)}"
    )
    if skipped:  # all classifier tensors, by the check above
        reasons = sorted(
            {"missing" if why == "missing" else "shape mismatch" for _, why in skipped}
        )
        line += (
            f" ({_few([k for k, _ in skipped])}: {' / '.join(reasons)}; classifier re-initialised)"
        )
    if unused:
        line += f"; unused in the file: {_few(unused)}"
    spec = layout(arch)
    if zoo.name == "mmaction2" and zoo.stem_stride_t is None and spec and spec.conv1_t > 1:
        line += (
            "; the file does not say its stem's temporal stride: mmaction2's i3d_r50 weights "
            "belong in --arch resnet50_3d_mmaction"
        )
    print(line)
    model.pretrained_info = pretrained_info(zoo, state, skipped)
    return {
        "inflated": inflated,
        "copied": copied,
        "skipped": [k for k, _ in skipped],
        "format": zoo.name,
    }
