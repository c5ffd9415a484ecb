"""mmaction2's SlowFast and X3D files against mmaction2's own model code.

The reference is open-mmlab/mmaction2 (Apache-2.0) at commit 4d6c934, its backbones and heads
vendored unchanged under tests/reference/mmaction2 (see its README; the pip package of that release
does not import: its models/localizers/drn is missing, mmaction2 issue #2714). mmcv's and mmengine's
own ConvModule, BaseModule, ... are used where installed; otherwise the small stand-ins below. Every
comparison is float64 in eval mode with random weights and random BN statistics, batch 1; the
state dicts are saved under mmaction2's own module names, as its .pth files hold them.
"""

import functools
import sys
import types
from unittest import mock

import pytest
import torch
import torch.nn as nn

import model as models
import checkpoint
import flags
import slowfast_zoo
import train
import zoo
from conftest import REPO, one_line_error, randomise_zoo, run_main

REF = REPO / "tests" / "reference" / "mmaction2"


class ConvModule(nn.Module):
    """mmcv.cnn.ConvModule as the vendored files call it: conv (conv_cfg Conv3d), then norm (BN3d,
    registered as `bn`) and activation where their cfg is not None, in that order."""

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias="auto",
        conv_cfg=None,
        norm_cfg=None,
        act_cfg=dict(type="ReLU"),
        **kw,
    ):
        super().__init__()
        assert (conv_cfg or {}).get("type", "Conv3d") == "Conv3d", conv_cfg
        bias = norm_cfg is None if bias == "auto" else bias
        self.conv = nn.Conv3d(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias
        )
        if norm_cfg is not None:
            assert norm_cfg["type"] == "BN3d", norm_cfg
            self.bn = nn.BatchNorm3d(out_channels)
        self.activate = build_activation_layer(act_cfg) if act_cfg is not None else None

    @property
    def norm(self):
        return getattr(self, "bn", None)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x) if hasattr(self, "bn") else x
        return self.activate(x) if self.activate is not None else x


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def build_activation_layer(cfg):
    kinds = {"ReLU": lambda **k: nn.ReLU(k.get("inplace", False)), "Swish": lambda **k: Swish()}
    cfg = dict(cfg)
    return kinds[cfg.pop("type")](**cfg)


def _standins():
    """mmcv / mmengine modules for what the vendored files import, where those packages are not
    installed. Only ConvModule, Swish and build_activation_layer compute; the rest (loggers,
    checkpoint loading, init helpers, NonLocal3d) is imported but never called by these tests."""
    try:
        import mmcv.cnn  # noqa: F401
        import mmengine.model  # noqa: F401

        return {}
    except ImportError:
        pass

    def unused(*args, **kwargs):
        raise AssertionError("not used by these networks")

    class BaseModule(nn.Module):
        def __init__(self, init_cfg=None):
            super().__init__()

    mods = {}
    for name, attrs in {
        "mmcv": {},
        "mmcv.cnn": dict(
            ConvModule=ConvModule,
            Swish=Swish,
            build_activation_layer=build_activation_layer,
            NonLocal3d=unused,
        ),
        "mmengine": {},
        "mmengine.logging": dict(MMLogger=object, print_log=unused),
        "mmengine.model": dict(BaseModule=BaseModule, Sequential=nn.Sequential),
        "mmengine.model.weight_init": dict(
            constant_init=unused, kaiming_init=unused, normal_init=unused
        ),
        "mmengine.runner": dict(load_checkpoint=unused),
        "mmengine.runner.checkpoint": dict(_load_checkpoint=unused, load_checkpoint=unused),
        "mmengine.utils": {},
        "mmengine.utils.dl_utils": {},
        "mmengine.utils.dl_utils.parrots_wrapper": dict(_BatchNorm=nn.modules.batchnorm._BatchNorm),
    }.items():
        mods[name] = types.ModuleType(name)
        mods[name].__dict__.update(attrs)
    return mods


# Only while importing: the stand-ins (modules, not packages) and the vendored `mmaction` must not
# be what other test modules find under those names (pytest imports every module before any test).
sys.path.insert(0, str(REF))
try:
    with mock.patch.dict(sys.modules, _standins()):
        from mmaction.models.backbones.resnet3d_slowfast import ResNet3dSlowFast
        from mmaction.models.backbones.x3d import X3D
        from mmaction.models.heads.slowfast_head import SlowFastHead
        from mmaction.models.heads.x3d_head import X3DHead
finally:
    sys.path.remove(str(REF))


class Recognizer(nn.Module):
    """mmaction2's Recognizer3D at test time, less its data preprocessor and clip averaging:
    cls_head(backbone(x)), under the names backbone.* / cls_head.* of its .pth files."""

    def __init__(self, backbone, cls_head):
        super().__init__()
        self.backbone, self.cls_head = backbone, cls_head

    def forward(self, x):
        return self.cls_head(self.backbone(x))


def mm_slowfast(tau, depth=50, fast_depth=50, fusion_kernel=5, lateral_norm=False, classes=5):
    """configs/_base_/models/slowfast_r50.py with the overrides of the recognition configs:
    resample_rate = speed_ratio = tau (alpha), slow / fast depth, fusion_kernel, lateral_norm."""
    slow = dict(type="resnet3d", depth=depth, pretrained=None, lateral=True)
    slow.update(conv1_kernel=(1, 7, 7), dilations=(1, 1, 1, 1), conv1_stride_t=1)
    slow.update(pool1_stride_t=1, inflate=(0, 0, 1, 1), norm_eval=False)
    slow.update(fusion_kernel=fusion_kernel, lateral_norm=lateral_norm)
    fast = dict(type="resnet3d", depth=fast_depth, pretrained=None, lateral=False)
    fast.update(base_channels=8, conv1_kernel=(5, 7, 7), conv1_stride_t=1, pool1_stride_t=1)
    fast.update(norm_eval=False)
    backbone = ResNet3dSlowFast(
        resample_rate=tau, speed_ratio=tau, channel_ratio=8, slow_pathway=slow, fast_pathway=fast
    )
    head = SlowFastHead(classes, 2304, spatial_type="avg", dropout_ratio=0.5)
    return Recognizer(backbone, head)


# The published configs (configs/recognition/slowfast/*.py) as the arch they load into.
CONFIGS = {
    "slowfast_r50_8xb8-4x16x1-256e": ("slowfast_r50_4x16", dict(tau=8)),
    "slowfast_r50_8xb8-8x8x1-256e": ("slowfast_r50_8x8", dict(tau=4, fusion_kernel=7)),
    "slowfast_r50_8xb8-8x8x1-steplr-256e": (
        "slowfast_r50_8x8",
        dict(tau=4, fusion_kernel=7, lateral_norm=True),
    ),
    "slowfast_r101_8xb8-8x8x1-256e": (
        "slowfast_r101_8x8",
        dict(tau=4, depth=101, fast_depth=101, fusion_kernel=7),
    ),
    "slowfast_r101-r50_32xb8-4x16x1-256e": ("slowfast_r101_r50_4x16", dict(tau=8, depth=101)),
}


@functools.cache  # shared by the tests of this module, which only read it
def reference(name):
    """mmaction2's network of a published config, random (seeded: every run tests the same)."""
    torch.manual_seed(0)
    return randomise_zoo(mm_slowfast(**CONFIGS[name][1])).double()


def save(tmp_path, net, name):
    """A .pth as mmaction2 writes it: {"meta": ..., "state_dict": backbone.* / cls_head.*}, float32
    (randomise_zoo's values are float32 ones)."""
    path = tmp_path / name
    state = {k: v.float() if v.is_floating_point() else v for k, v in net.state_dict().items()}
    torch.save({"meta": {"cfg": "..."}, "state_dict": state}, path)
    return str(path)


def clip(frames, crop):
    g = torch.Generator().manual_seed(1)
    return torch.randn(1, 3, frames, crop, crop, dtype=torch.float64, generator=g)


def logits(net, x):
    with torch.no_grad():
        return net.double().eval()(x)


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.slow
@pytest.mark.parametrize(
    "config,frames,crop",
    [
        ("slowfast_r50_8xb8-8x8x1-256e", 8, 64),
        ("slowfast_r50_8xb8-8x8x1-steplr-256e", 8, 32),
        ("slowfast_r101-r50_32xb8-4x16x1-256e", 16, 32),
    ],
)
def test_mmaction2_slowfast_file_gives_mmaction2s_logits(tmp_path, capsys, config, frames, crop):
    """The arch's name loads mmaction2's file into mmaction2's network (the load line names the
    layout) and gives its logits: conv-only laterals (BN + ReLU with lateral_norm), every alpha-th
    frame, the head's columns."""
    arch, ref = CONFIGS[config][0], reference(config)
    path = save(tmp_path, ref, f"{config}.pth")
    net = zoo.build_model(arch, 5, pretrained=path)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"pretrained {path} (mmaction2, 3D)") and "skipped 0" in line, line
    normed = CONFIGS[config][1].get("lateral_norm", False)
    assert net.slowfast_variant == "mmaction2" + "_lateral_norm" * normed
    assert hasattr(net.s1_fuse, "bn") == normed
    x = clip(frames, crop)
    assert rel_err(logits(net, x), logits(ref, x)) < 1e-6


@pytest.mark.parametrize("config", CONFIGS)
def test_every_published_config_has_the_archs_tensors(config):
    """Each published config's state dict (built on the meta device: no memory) renames to exactly
    the tensors, names and shapes, of the arch it loads into, as mmaction2's network: the depths of
    both pathways, the lateral kernel (7 for mmaction2's R101 8x8, 5 for PySlowFast's), the lateral
    BN of the steplr config only."""
    arch, kw = CONFIGS[config]
    variant = "mmaction2_lateral_norm" if kw.get("lateral_norm") else "mmaction2"
    with torch.device("meta"):
        state = mm_slowfast(**kw).state_dict()
        net = models.build_network(arch, 5, slowfast_variant=variant)
    renamed, unexpected = zoo.convert_state_dict(state, slowfast_zoo.MMACTION2_SLOWFAST_RULES)
    assert unexpected == []
    ours = net.state_dict()
    assert sorted(renamed) == sorted(ours)
    assert all(renamed[k].shape == ours[k].shape for k in ours), config


def test_mmaction2_x3d_file_gives_mmaction2s_logits(tmp_path):
    """configs/_base_/models/x3d.py (X3D-M: gamma_w 1, gamma_b 2.25, gamma_d 2.2; X3DHead with
    fc1_bias False): mmaction2's own X3D and head, its file loaded into x3d_m."""
    torch.manual_seed(0)
    backbone = X3D(gamma_w=1, gamma_b=2.25, gamma_d=2.2)
    head = X3DHead(5, 432, spatial_type="avg", dropout_ratio=0.5, fc1_bias=False)
    ref = randomise_zoo(Recognizer(backbone, head)).double()
    path = save(tmp_path, ref, "x3d_m_16x5x1_facebook-kinetics400-rgb.pth")
    x = clip(4, 64)
    assert rel_err(logits(zoo.build_model("x3d_m", 5, pretrained=path), x), logits(ref, x)) < 1e-6


def test_a_run_records_the_files_network_and_its_checkpoint_rebuilds_it(tmp_path, capsys):
    """train.make_model builds the --pretrained file's network and writes it into the args (here a
    file of ours, of mmaction2's network: no lateral BN); predict (as --evaluate, export and
    features) rebuilds that network from the checkpoint alone and gives the same logits."""
    import predict

    torch.manual_seed(0)
    src = models.build_network("slowfast_tiny", 5, slowfast_variant="mmaction2").float()
    src = randomise_zoo(src).double()
    path = tmp_path / "tiny_mmaction2.pyth"
    torch.save({"model_state": src.state_dict()}, path)
    common = ["ucf101", "t.txt", "v.txt", "--arch", "slowfast_tiny", "--num_classes", "5"]
    args = train.parse_args([*common, "--t_length", "4", "--pretrained", str(path)])
    assert args.slowfast_variant is None
    net = train.make_model(args)
    assert args.slowfast_variant == net.slowfast_variant == "mmaction2"
    ckpt = tmp_path / "checkpoint.pth"
    torch.save({"model": net.state_dict(), "args": vars(args), "epoch": 1, "iter": 0}, ckpt)
    rebuilt, _, _ = predict.load_checkpoint(str(ckpt), "cpu", 1, 1)
    assert rebuilt.slowfast_variant == "mmaction2" and not hasattr(rebuilt.s2_fuse, "bn")
    x = clip(4, 32)
    assert rel_err(logits(rebuilt, x), logits(src, x)) < 1e-6
    # A resumed run keeps the network (flags.py's model group): PySlowFast's is refused.
    saved, args.slowfast_variant = vars(args).copy(), "pyslowfast"
    with pytest.raises(SystemExit):
        checkpoint.check_resume_flags(args, str(ckpt), saved, False, flags.flag_sets())
    err = capsys.readouterr().err
    assert "was trained with --slowfast-variant mmaction2, not pyslowfast" in err


def test_a_variant_that_is_not_the_files_is_refused_in_one_line(tmp_path):
    """Before any network is built: mmaction2's file for --slowfast-variant pyslowfast, a PySlowFast
    file for mmaction2, an mmaction2 file with BN in its laterals for mmaction2 (conv-only), and
    the flag on an arch that is no SlowFast."""
    z = torch.zeros(1)
    mm = {f"backbone.slow_path.{m}.conv.weight": z for m in ("conv1", "conv1_lateral")}
    # our names, in a bare state dict (no "s1.pathway0_stem.conv.weight": no layout's signature)
    pysf = {"s1.pathway1_stem.conv.weight": z, "s1_fuse.conv_f2s.weight": z, "s1_fuse.bn.weight": z}
    normed = dict(mm, **{"backbone.slow_path.conv1_lateral.bn.weight": z})
    cases = [
        (
            {"state_dict": mm},
            "pyslowfast",
            "mmaction2's SlowFast network (mmaction2 layout), not "
            "--slowfast-variant pyslowfast's: leave the flag out",
        ),
        (
            pysf,
            "mmaction2",
            "pyslowfast's SlowFast network (pyslowfast layout), not --slowfast-variant mmaction2's",
        ),
        (
            {"state_dict": normed},
            "mmaction2",
            "mmaction2_lateral_norm's SlowFast network (mmaction2 layout), not --slowfast-variant "
            "mmaction2's",
        ),
    ]
    for i, (obj, variant, needle) in enumerate(cases):
        torch.save(obj, tmp_path / f"{i}.pth")
        with pytest.raises(ValueError) as e:
            path = str(tmp_path / f"{i}.pth")
            zoo.build_model("slowfast_r50_8x8", 5, pretrained=path, slowfast_variant=variant)
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="--slowfast-variant needs a SlowFast arch"):
        models.build_network("x3d_xs", 5, slowfast_variant="mmaction2")


def test_the_flag_on_another_arch_is_refused_before_any_work(capsys):
    with pytest.raises(SystemExit) as e:
        run_main(
            ["ucf101", "no.txt", "no.txt", "--arch", "x3d_xs", "--slowfast-variant", "mmaction2"]
        )
    one_line_error(capsys, "--slowfast-variant needs a SlowFast arch", "not x3d_xs", exc=e)


def test_a_published_file_for_another_arch_is_refused_naming_the_arch(tmp_path):
    """mmaction2's R50 4x16 file (lateral kernel 5) for --arch slowfast_r50_8x8 (kernel 7): one
    line, before a tensor is copied, naming the arch whose mmaction2 network it is."""
    with torch.device("meta"):
        state = mm_slowfast(**CONFIGS["slowfast_r50_8xb8-4x16x1-256e"][1]).state_dict()
    # One zero expanded to each shape: the file stays tiny.
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in state.items()}
    torch.save({"state_dict": state}, tmp_path / "w.pth")
    with pytest.raises(ValueError) as e:
        zoo.build_model("slowfast_r50_8x8", 5, pretrained=str(tmp_path / "w.pth"))
    assert "lateral kernel 5" in str(e.value) and "use --arch slowfast_r50_4x16" in str(e.value)
    assert "\n" not in str(e.value)


def test_sizes_are_mmaction2s_published_ones():
    """configs/recognition/slowfast/README.md's parameter counts (400 classes) are those of the
    mmaction2 networks here: 34.5M, 34.6M, 62.9M (lateral kernel 7: 62.8M with PySlowFast's 5),
    62.4M."""
    for arch, published in (
        ("slowfast_r50_4x16", 34.5),
        ("slowfast_r50_8x8", 34.6),
        ("slowfast_r101_8x8", 62.9),
        ("slowfast_r101_r50_4x16", 62.4),
    ):
        with torch.device("meta"):
            net = models.build_network(arch, 400, slowfast_variant="mmaction2")
        assert round(sum(p.numel() for p in net.parameters()) / 1e6, 1) == published, arch
