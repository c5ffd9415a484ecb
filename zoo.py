"""Pretrained weights for model.py's networks, read from the model zoos' own files.

    # model.build_network + load_pretrained
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
- epic-kitchens/C1-Action-Recognition-TSN-TRN-TSM (EPIC-100 TSM .ckpt): src/systems.py,
  src/models/tsm.py, src/ops/temporal_shift.py; epic-kitchens/epic-kitchens-slowfast (EPIC-100
  SlowFast .pyth): slowfast/models/head_helper.py, slowfast/datasets/frame_loader.py.
"""

import dataclasses
import os
import re
from typing import Callable, NamedTuple, Optional

import torch
import torchvision

import model as models
import mvit_net
import slowfast_zoo
import vit_zoo
import vjepa_zoo
import weights
from model import HEAD, copy_weights


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
EPIC_TSM_RULES = (
    # epic-kitchens/C1-Action-Recognition-TSN-TRN-TSM (commit e8e1a79): src/systems.py
    # (EpicActionRecognitionSystem keeps the network as `model`: Lightning saves "model." names
    # under "state_dict"), src/models/tsm.py (TSM: base_model = torchvision's ResNet, whose fc
    # becomes a Dropout; new_fc = the classifier of 97 + 300 outputs, verbs first), and
    # src/ops/temporal_shift.py (TemporalShift wraps each residual block's conv1 as `.net`).
    (r"model\.base_model\.(layer\d\.\d+)\.conv1\.net\.(\w+)", r"\1.conv1.\2"),
    (r"model\.base_model\.(.+)", r"\1"),
    (r"model\.new_fc\.(\w+)", r"fc.\1"),
)
SAME_NAMES = ((r"(.+)", lambda m: m[1]),)  # ours, torchvision, plain state dicts


class Layout(NamedTuple):
    """One layout of a weights file: how it is recognised, which family of archs it fits, and how
    its names become ours."""

    name: str  # as the load line and the messages say it
    family: str  # a FAMILIES key; "" = the arch's own (a state dict in its names)
    recognise: Callable  # weights.Source, the arch's own names -> bool
    rules: tuple = ()  # rename rules (the family module's, where it has several)
    mean: Optional[tuple] = None  # the input normalisation the weights expect (None: unknown)
    std: Optional[tuple] = None
    # temporal stride of conv1 and the first max-pool (ResNet-3D); None: unknown
    stem_stride_t: Optional[int] = None
    # the heads the classifier's outputs are, in order (EPIC-100: verbs then nouns); None: one
    heads: Optional[tuple] = None
    # the network takes BGR frames (its loader reads them with cv2): the input convs' channels are
    # reversed on loading, the same network on RGB (exact where mean and std are one per channel)
    bgr: bool = False


def has(*keys):
    """A file holding every one of `keys` (its names, prefixes of DDP / compile stripped)."""
    return lambda source, own: all(k in source.state for k in keys)


def holds(*keys):
    """A file whose top-level dict holds one of `keys` (V-JEPA 2's encoders, its probes)."""
    return lambda source, own: any(k in source.outer for k in keys)


def folder_of(model_type):
    """A transformers folder (or its weights file beside config.json) of that model_type."""
    return lambda source, own: (source.config or {}).get("model_type") == model_type


def named(pattern):
    """A file with a name matching `pattern` (a regex over a whole name)."""
    return lambda source, own: any(re.fullmatch(pattern, k) for k in source.state)


def _ours(source, own):
    return source.ours


def _torchvision_2d(source, own):
    conv1 = source.state.get("conv1.weight")
    return conv1 is not None and conv1.dim() == 4


def _own_names(source, own):
    """A state dict in the arch's own names: most of its names are the arch's."""
    return 2 * len(own & source.state.keys()) > len(source.state)


def _convnet_names(source, own):
    return any(k.startswith(("conv1.", "layer1.", "features.")) for k in source.state)


KIN, IMN = (KINETICS_MEAN, KINETICS_STD), (IMAGENET_MEAN, IMAGENET_STD)
# EPIC-100's verb and noun classes, the EPIC-Kitchens team's heads in their order (C1's
# src/systems.py TASK_CLASS_COUNTS; epic-kitchens-slowfast's MODEL.NUM_CLASSES [97, 300])
EPIC_HEADS = (97, 300)
# The C1 TSM .ckpt normalise with ImageNet's mean as the mean AND the std (configs/tsm_rgb.yaml
# data.preprocessing; the repository's README, 2021/02/20: the published files were trained so)
EPIC_TSM_NORM = (IMAGENET_MEAN, IMAGENET_MEAN)
VIDEOMAE_BLOCKS = r"(?:backbone\.)?blocks\.\d+\..+"
# Every layout of every family, in the order they are tried: the first that recognises a file
# converts it. A layout fits the archs of its family (FAMILIES); a file given to another arch is
# refused by its family, naming the arch it fits. A new family adds rows here and its FAMILIES
# entry; no other reader changes.
LAYOUTS = (
    # facebookresearch/vjepa2: pretraining .pt (encoders), eval probes, transformers VJEPA2; first,
    # as `train.py pretrain --objective vjepa` writes the official keys beside its own
    Layout("official", "vjepa", holds(*vjepa_zoo.ENCODER_KEYS)),
    # train.py's own checkpoints ("model" + "args"): the family of the arch they were trained as
    Layout("ours", "", _ours),
    Layout("official-probe", "probe", holds("classifiers")),
    Layout("transformers", "vjepa", folder_of("vjepa2")),
    # MViT: mmaction2's (its ViT's patch embedding name, PySlowFast's block names), PySlowFast's
    Layout(
        "mmaction2", "mvit", has("backbone." + mvit_net.SIGNATURE), mvit_net.MMACTION2_RULES, *KIN
    ),
    Layout("pyslowfast", "mvit", has(mvit_net.SIGNATURE), mvit_net.PYSLOWFAST_RULES, *KIN),
    # VideoMAE / VideoMAEv2 ViTs (vit_zoo.py)
    Layout("transformers", "videomae", named(r"(videomae\.)?embeddings\.patch_embeddings\..+")),
    Layout("mmaction2", "videomae", has("backbone.patch_embed.projection.weight")),
    Layout("videomae-pretrain", "videomae", has("encoder.patch_embed.proj.weight")),
    # vit.py's names (the official fine-tuned files); a Swin3d's patch_embed has no blocks.N
    Layout(
        "videomae",
        "videomae",
        lambda s, own: (
            has("patch_embed.proj.weight")(s, own)
            and named(VIDEOMAE_BLOCKS)(s, own)
            and "blocks.0.attn.qkv.bias" not in s.state
        ),
    ),
    # SlowFast / X3D (slowfast_zoo.py renames them to PySlowFast's names)
    Layout("pytorchvideo", "slowfast", has("blocks.0.multipathway_blocks.0.conv.weight"), (), *KIN),
    Layout("pytorchvideo", "x3d", has("blocks.0.conv.conv_xy.weight"), (), *KIN),
    # mmaction2's X3D files are PySlowFast's converted: Kinetics normalisation
    Layout("mmaction2", "x3d", has("backbone.conv1_s.conv.weight"), (), *KIN),
    Layout("mmaction2", "slowfast", has("backbone.slow_path.conv1.conv.weight"), (), *IMN),
    Layout("pyslowfast-caffe2", "slowfast", has("t_conv1_w"), (), *KIN),
    Layout("pyslowfast-caffe2", "x3d", has("conv1_xy_w"), (), *KIN),
    # epic-kitchens-slowfast's EPIC-100 SlowFast: PySlowFast's names, a projection per head; its
    # frame_loader reads frames with cv2.imread (BGR) and never reverses them
    Layout(
        "epic-kitchens",
        "slowfast",
        has("head.projection_verb.weight", "head.projection_noun.weight"),
        (),
        *KIN,
        heads=EPIC_HEADS,
        bgr=True,
    ),
    Layout("pyslowfast", "slowfast", has("s1.pathway1_stem.conv.weight"), (), *KIN),
    Layout("pyslowfast", "x3d", has("s1.pathway0_stem.conv_xy.weight"), (), *KIN),
    # ResNet-3D / I3D / Slow-only / TSN / TSM (this module's rules)
    Layout("pytorchvideo", "resnet", has("blocks.0.conv.weight"), PYTORCHVIDEO_RULES, *KIN, 1),
    Layout("pyslowfast", "resnet", has("s1.pathway0_stem.conv.weight"), PYSLOWFAST_RULES, *KIN, 1),
    Layout("pyslowfast-caffe2", "resnet", has("conv1_w"), CAFFE2_RULES, *KIN, 1),
    Layout("mmaction2", "resnet", has("backbone.conv1.conv.weight"), MMACTION2_RULES, *IMN),
    # the EPIC-Kitchens team's TSM Lightning .ckpt of EPIC-100: one fc, verbs then nouns
    Layout(
        "epic-kitchens",
        "resnet",
        has("model.base_model.conv1.weight", "model.new_fc.weight"),
        EPIC_TSM_RULES,
        *EPIC_TSM_NORM,
        heads=EPIC_HEADS,
    ),
    # torchvision's 2D ResNets (ImageNet; inflated into a ResNet-3D on loading)
    Layout("torchvision", "resnet", _torchvision_2d, SAME_NAMES, *IMN),
    # any arch's own names, bare or under a wrapper key ("state_dict", ...)
    Layout("bare", "", _own_names, SAME_NAMES),
    Layout("torchvision / ours", "resnet", _convnet_names, SAME_NAMES),
)

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


def convert_state_dict(state, rules):
    """Rename by the first matching rule: (our state dict, names no rule matched). Names only: the
    shapes are checked tensor by tensor when model.copy_weights copies them."""
    out, _, unexpected = weights.convert(state, rules)
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
    """model.build_network of a ModelSpec (or its fields: model.as_spec), then `pretrained`: None |
    "imagenet" | "imagenet_v2" | "kinetics400" | a file, folder or Hub id of any LAYOUTS layout.
    `pretrained_info`: None without weights, else {format, mean, std, ...}. head_note: what becomes
    of a V-JEPA head the file does not hold, for the load line (--probe, --probe-weights)."""
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
            f"--pretrained {pretrained} is for the resnet*_3d archs (inflated) and the 2D ones; "
            f"{spec.arch} takes none or a 3D checkpoint file"
        )
    source = None
    if pretrained not in (None, "", "none"):
        source = read_source(pretrained, spec.arch)
    if source and spec.arch in models.slowfast_net.SLOWFAST:
        # The file says whose SlowFast it is (PySlowFast's or mmaction2's network): build that
        # variant, then load it.
        found = match(source)
        variant = slowfast_zoo.file_variant(spec, source.state, slowfast_layout(found), source.name)
        spec = dataclasses.replace(spec, slowfast_variant=variant)
    model = models.build_network(spec)
    if source:
        load_pretrained(model, source, inflate, vjepa_key, head_note)
    return model


def read_source(src, arch):
    """--pretrained SRC -> weights.Source, read once: "imagenet" / "imagenet_v2" (torchvision's
    2D weights), "kinetics400" (the arch's published file), a file, a folder or a Hub id."""
    if src in ("imagenet", "imagenet_v2"):
        state, name = imagenet_state_dict(arch, src)
        return weights.Source(name, {}, state, "imagenet")
    if src == "kinetics400":
        path = kinetics400_file(arch)
        return weights.read(path)._replace(name=f"kinetics400 ({path})")
    if not (os.path.exists(src) or weights.is_hub_id(src)):
        raise ValueError(
            f"--pretrained {src!r}: no such file (and not imagenet / imagenet_v2 / kinetics400)"
        )
    return weights.read(src)


def match(source, own=frozenset()):
    """The first LAYOUTS entry that recognises the source (`own`: the arch's own names, for a
    state dict in them); none: a ValueError naming the layouts whose rules rename most of its
    names."""
    found = next((lay for lay in LAYOUTS if lay.recognise(source, own)), None)
    if found is not None:
        return found
    names = list(source.state) or list(source.outer)
    score = {}
    for lay in LAYOUTS:
        rules = FAMILIES[lay.family].rules(lay) if lay.family else ()
        n = sum(1 for k in names if any(re.fullmatch(p, k) for p, _ in rules if p != "(.+)"))
        score.setdefault((lay.name, lay.family), n)
    best = sorted(score.items(), key=lambda kv: -kv[1])[:2]
    near = "; ".join(f"{n} of {len(names)} names are {lay} {fam}'s" for (lay, fam), n in best if n)
    raise ValueError(
        f"--pretrained {source.name}: no known layout ({len(names)} tensors, e.g. "
        f"{weights.few(names)}); {near or 'no layout renames any of them'}. docs/zoo.md lists "
        "the layouts"
    )


def family_of(arch):
    """The FAMILIES key of an arch."""
    return _other_family(arch) or "resnet"


def _other_family(arch):
    """The family of an arch that is no ResNet-3D / 2D net, else None."""
    return next((f for f, fam in FAMILIES.items() if f != "resnet" and fam.fits(arch)), None)


def load_pretrained(model, src, inflate="mean", vjepa_key=None, head_note=None):
    """Fill `model` from `src` (a weights.Source, or what read_source takes): its layout is the
    first LAYOUTS entry that recognises it; a layout of another family than the arch's is refused
    in one line naming the arch it fits. Prints one summary line, sets model.pretrained_info
    (the normalisation the weights expect, the file's classifier)."""
    arch = getattr(model, "arch", "the model")
    source = src if isinstance(src, weights.Source) else read_source(src, arch)
    found = match(source, set(model.state_dict()))
    family = found.family or family_of(arch)
    if found.name == "ours":  # the family of the arch it was trained as
        family = family_of(source.outer["args"].get("arch")) if family_of(arch) else family
    if vjepa_key and family != "vjepa":
        raise ValueError(
            f"--vjepa-key {vjepa_key}: it picks an encoder of an official V-JEPA 2 .pt; "
            f"--pretrained {source.name} ({found.name} layout) for --arch {arch} has none: "
            "leave the flag out"
        )
    if not FAMILIES[family].fits(arch):
        raise ValueError(FAMILIES[family].refuse(source, found, arch))
    return FAMILIES[family].load(
        model, source, found, inflate=inflate, vjepa_key=vjepa_key, head_note=head_note
    )


def _load_vit(model, source, found, **_):
    return vit_zoo.load(model, source, "videomae" if found.name == "bare" else found.name)


def _load_vjepa(model, source, found, vjepa_key=None, head_note=None, **_):
    layout = "ours" if found.name == "bare" else found.name
    return vjepa_zoo.load(model, source, layout, vjepa_key, head_note)


def _refuse_vit(source, found, arch):
    return vit_zoo.refusal(source, "videomae" if found.name == "bare" else found.name, arch)


def _refuse_vjepa(source, found, arch):
    return vjepa_zoo.refusal(source, "ours" if found.name == "bare" else found.name, arch)


def _refuse_probe(source, found, arch):
    return (
        f"--pretrained {source.name}: an official V-JEPA 2 probe checkpoint (classifiers), not an "
        "encoder: give it with --probe-weights"
    )


def _refuse_slowfast(source, found, arch):
    other = found.family
    archs = models.slowfast_net.SLOWFAST if other == "slowfast" else models.slowfast_net.X3D
    return (
        f"--pretrained {source.name}: {'a SlowFast' if other == 'slowfast' else 'an X3D'} "
        f"checkpoint ({found.name} layout), not {arch}'s network: use --arch {' / '.join(archs)}"
    )


def _refuse_mvit(source, found, arch):
    state, _, _ = weights.convert(source.state, _mvit_rules(found))
    return mvit_net.refusal(state, arch, source.name, found.name)


def _mvit_rules(found):
    return found.rules if found.name not in ("ours", "bare") else SAME_NAMES


def _refuse_convnet(source, found, arch):
    """A ResNet-3D / 2D file for an arch of another family."""
    name = source.name
    what = f"a {found.name} ConvNet checkpoint"
    fam = family_of(arch)
    if fam in ("slowfast", "x3d"):
        want = fam
        return (
            f"--pretrained {name}: not a SlowFast / X3D checkpoint ({found.name} layout); "
            f"--arch {arch} takes PySlowFast, pytorchvideo, mmaction2"
            f"{' or Caffe2' if want == 'slowfast' else ''} {want} files"
        )
    if fam == "videomae":
        return (
            f"--pretrained {name}: {what} (no ViT patch embedding); --arch {arch} takes a "
            "VideoMAE / VideoMAEv2 checkpoint"
        )
    return (
        f"--pretrained {name}: {what}, not {arch}'s network; it loads into a ResNet-3D / 2D "
        "--arch (resnet*_3d, resnet*)"
    )


class Family(NamedTuple):
    """The archs a layout's weights fit and the module that loads them."""

    fits: Callable  # arch -> bool
    load: Callable  # (model, weights.Source, Layout, inflate=, vjepa_key=) -> report dict
    refuse: Callable  # (weights.Source, Layout, arch of another family) -> the one-line refusal
    rules: Callable = lambda lay: lay.rules  # the layout's rename rules (for "closest" hints)


def _vit_rules(lay):
    return vit_zoo.LAYOUTS.get(lay.name, ())


FAMILIES = {
    "vjepa": Family(lambda a: a in models.VJEPAS, _load_vjepa, _refuse_vjepa),
    "probe": Family(lambda a: False, None, _refuse_probe),
    "videomae": Family(lambda a: a in models.VITS, _load_vit, _refuse_vit, _vit_rules),
    "mvit": Family(
        lambda a: a in mvit_net.MVITS, lambda *a, **k: load_convnet(*a, **k), _refuse_mvit
    ),
    "slowfast": Family(
        lambda a: a in models.slowfast_net.SLOWFAST,
        lambda *a, **k: load_convnet(*a, **k),
        _refuse_slowfast,
    ),
    "x3d": Family(
        lambda a: a in models.slowfast_net.X3D,
        lambda *a, **k: load_convnet(*a, **k),
        _refuse_slowfast,
    ),
    # every other arch: the ResNet-3Ds, the 2D / TSN / TSM nets, torchvision's video models
    "resnet": Family(
        lambda a: _other_family(a) is None, lambda *a, **k: load_convnet(*a, **k), _refuse_convnet
    ),
}


def zoo_layout(obj):
    """The name of the model zoo (pytorchvideo, pyslowfast, mmaction2, ...) whose layout a loaded
    checkpoint dict has, or None (ours, torchvision's, a bare state dict, anything else)."""
    if not isinstance(obj, dict):
        return None
    source = weights.from_dict(obj, "")
    found = next((lay for lay in LAYOUTS if lay.recognise(source, set())), None)
    if found is None or found.name in ("ours", "torchvision", "bare", "torchvision / ours"):
        return None
    return found.name


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
    X3D archs have PySlowFast's names too."""
    return "pyslowfast" if zoo.name in ("ours", "bare") else zoo.name


def convnet_layout(source, found, arch):
    """The Layout a ConvNet loader works with: ours with its args' normalisation and stem stride,
    a bare file named by its wrapper, an mmaction2 file with the stem stride its config tells."""
    if found.name == "ours":
        args = source.outer["args"]
        spec = layout(args.get("arch"))
        return found._replace(
            rules=SAME_NAMES,
            mean=tuple(args.get("mean") or IMAGENET_MEAN),
            std=tuple(args.get("std") or IMAGENET_STD),
            stem_stride_t=spec.stem_stride_t if spec else None,
        )
    if found.name == "bare":
        return found._replace(name=source.wrapper)
    if found.name == "mmaction2" and found.family == "resnet":
        return found._replace(stem_stride_t=_mmaction2_stem_stride(source.outer))
    return found


def _rename(model, state, zoo, name):
    """convert_state_dict by the layout's rules; SlowFast / X3D by slowfast_zoo's (their names are
    PySlowFast's); MViT by mvit_net's (and its clip checked against the file's tables)."""
    arch = getattr(model, "arch", None)
    if arch in mvit_net.MVITS:
        state, unexpected = convert_state_dict(state, _mvit_rules(zoo))
        # PySlowFast's and mmaction2's class token is (1, 1, C), torchvision's (C,)
        state = mvit_net.fit(state)
        # another MViT (v1, other widths): named, with the arch that loads it; then its clip
        error = mvit_net.refusal(state, arch, name, zoo.name) or mvit_net.clip_error(
            model, state, name
        )
        if error:
            raise ValueError(error)
        return state, unexpected
    if family_of(arch) not in ("slowfast", "x3d"):
        return convert_state_dict(state, zoo.rules)
    layout_name = slowfast_layout(zoo)
    rules = slowfast_zoo.rules(arch, layout_name, state, name)
    state, unexpected = convert_state_dict(state, rules)
    slowfast_zoo.check(model, slowfast_zoo.fit(model, state, layout_name), name)
    return state, unexpected


def load_convnet(model, source, found, inflate="mean", **_):
    """A ConvNet (ResNet-3D, 2D / TSN / TSM, SlowFast, X3D, MViT) from a source of one of its
    layouts. Strict: every tensor but the classifier must fit."""
    arch = getattr(model, "arch", "the model")
    zoo, name = convnet_layout(source, found, arch), source.name
    state = source.state
    if zoo.name == "pytorchvideo":
        state = _pytorchvideo_stages(state)
    if source.wrapper == "imagenet":
        zoo = zoo._replace(name=name)
    _check_stem(model, zoo, name)
    # mmaction2's ResNetTSM (conv1.conv.net) and the TSM original's TemporalShift (conv1.net)
    shifted = [k for k in state if re.search(r"layer\d\.\d+\.conv1\.(conv\.)?net\.weight$", k)]
    if shifted and not getattr(model, "frames", None):
        raise ValueError(
            f"--pretrained {name}: a TSM checkpoint ({zoo.name} layout, shifted convs); "
            f"this model has no shift: add --shift 8"
        )
    # Both TSMs shift every other block where layer3 has >= 23 (ResNet-101's n_round 2); --shift
    # shifts every block: the same tensors, another network
    plain = [k for k in state if re.search(r"layer\d\.\d+\.conv1\.(conv\.)?weight$", k)]
    if shifted and plain:
        raise ValueError(
            f"--pretrained {name}: a TSM checkpoint ({zoo.name} layout) shifting "
            f"{len(shifted)} of its {len(shifted) + len(plain)} blocks (TSM's every other block "
            "for a ResNet-101); --shift here shifts every block"
        )
    heads = file_heads(zoo, state, name)
    state, unexpected = _rename(model, state, zoo, name)
    if zoo.bgr:
        state = rgb_input(state, zoo, name)
    report = copy_and_report(model, state, unexpected, zoo, name, inflate)
    if heads:  # several heads in one classifier: train.check_pretrained_head matches --heads
        model.pretrained_info["heads"] = heads
    return report


def file_heads(zoo, state, name):
    """The heads a file's classifier holds, in order (None: one): the sizes of its projections
    where it has one per head (epic-kitchens-slowfast's head_helper.ResNetBasicHead:
    projection_verb, projection_noun), else the layout's, checked against its one fc."""
    if zoo.heads is None:
        return None
    verb, noun = state.get("head.projection_verb.weight"), state.get("head.projection_noun.weight")
    if verb is not None and noun is not None:
        return (verb.shape[0], noun.shape[0])
    fc = next((v for k, v in state.items() if k.endswith("new_fc.weight")), None)
    if fc is None or fc.shape[0] != sum(zoo.heads):
        rows = "no classifier" if fc is None else f"a classifier of {fc.shape[0]} outputs"
        raise ValueError(
            f"--pretrained {name}: {zoo.name} layout, whose classifier is "
            f"{' + '.join(map(str, zoo.heads))} outputs (verbs, nouns); the file has {rows}"
        )
    return zoo.heads


# The convs that read the frames (our names): a ResNet's conv1, SlowFast's two stems
INPUT_CONVS = re.compile(r"conv1\.weight|s1\.pathway\d_stem\.conv\.weight")


def rgb_input(state, zoo, name):
    """Weights of a network fed BGR frames -> the same network fed RGB: the input convs' channels
    reversed. Exact only where the normalisation is one number for every channel (else the
    reversed frames would be normalised by the other channels' mean and std)."""
    assert len(set(zoo.mean)) == len(set(zoo.std)) == 1, zoo
    out = dict(state)
    for k in [k for k in state if INPUT_CONVS.fullmatch(k)]:
        if state[k].shape[1] != 3:
            raise ValueError(f"--pretrained {name}: {k} reads {state[k].shape[1]} channels, not 3")
        out[k] = state[k].flip(1)
    return out


def copy_and_report(model, state, unexpected, zoo, name, inflate):
    """copy_weights, the strict checks, the load line and model.pretrained_info."""
    arch = getattr(model, "arch", "the model")
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
