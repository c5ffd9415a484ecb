"""SlowFast and X3D (slowfast_net.py) against PySlowFast's own model code, and their checkpoints.

The reference is facebookresearch/SlowFast (Apache-2.0), vendored unchanged under
tests/reference/pyslowfast (see its README) and built from its own config defaults and Kinetics
yaml files, with only the sizes shrunk (frames, crop) so that the tests stay CPU-cheap. Every
comparison is float64 in eval mode with random weights and random BN statistics, batch 1.
"""

import functools
import math
import re
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn as nn

import model as models
import slowfast_net
from conftest import REPO, one_line_error, randomise_zoo, run_main

pytest.importorskip("pytorchvideo")  # the vendored batchnorm_helper / operators import its layers
REF = REPO / "tests" / "reference" / "pyslowfast"


def _shim_missing():
    """Stand-ins for what the vendored files import but never use in these networks (detectron2's
    ROIAlign, the detection head's) or what fvcore provides when it is not installed."""
    if "detectron2" not in sys.modules:
        d2 = types.ModuleType("detectron2")
        d2.layers = types.ModuleType("detectron2.layers")
        d2.layers.ROIAlign = None
        sys.modules.update({"detectron2": d2, "detectron2.layers": d2.layers})
    try:
        import fvcore.common.config  # noqa: F401
        import fvcore.common.registry  # noqa: F401
        import fvcore.nn.weight_init  # noqa: F401
    except ImportError:
        yacs = pytest.importorskip("yacs.config")
        fv = {n: types.ModuleType(n) for n in ("fvcore", "fvcore.common", "fvcore.nn")}
        fv["fvcore.common.config"] = types.ModuleType("fvcore.common.config")
        fv["fvcore.common.config"].CfgNode = yacs.CfgNode
        fv["fvcore.common.registry"] = registry = types.ModuleType("fvcore.common.registry")
        registry.Registry = lambda name: types.SimpleNamespace(register=lambda: lambda c: c)
        fv["fvcore.nn.weight_init"] = init = types.ModuleType("fvcore.nn.weight_init")
        init.c2_msra_fill = lambda m: nn.init.kaiming_normal_(m.weight, mode="fan_out")
        init.c2_xavier_fill = lambda m: nn.init.xavier_uniform_(m.weight)
        sys.modules.update(fv)


_shim_missing()
sys.path.insert(0, str(REF))
from slowfast.config.defaults import get_cfg  # noqa: E402
from slowfast.models import video_model_builder  # noqa: E402

sys.path.remove(str(REF))


def ref_cfg(yaml, frames, crop, classes=5):
    """PySlowFast's config: its defaults, the zoo's yaml, then the tiny sizes of the test."""
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Kinetics" / yaml))
    cfg.NUM_GPUS, cfg.MODEL.NUM_CLASSES = 0, classes
    cfg.DATA.NUM_FRAMES, cfg.DATA.TRAIN_CROP_SIZE = frames, crop
    return cfg


@functools.cache  # shared by the tests of this module, which only read it
def reference(yaml, frames, crop):
    cfg = ref_cfg(yaml, frames, crop)
    cls = video_model_builder.SlowFast if cfg.MODEL.ARCH == "slowfast" else video_model_builder.X3D
    # PySlowFast's own init draws from the global generator: seeded, every run tests the same net
    torch.manual_seed(0)
    ref = randomise_zoo(cls(cfg).double())
    # Float32 values, as the zoo's files hold: a file loaded into the float32 model is then exact,
    # and the float64 comparison measures the computation alone (100 random blocks amplify a
    # rounding of the weights far past 1e-6).
    for t in ref.state_dict().values():
        if t.is_floating_point():
            t.copy_(t.float().double())
    # Eval mode ends in a softmax (MODEL.HEAD_ACT); compare the logits before it.
    if isinstance(ref.head.act, nn.Softmax):
        ref.head.act = nn.Identity() if cfg.MODEL.ARCH == "x3d" else None
    return cfg, ref


# (arch, the zoo's yaml, frames, crop): the fast pathway's frames, a multiple of alpha.
PARITY = [
    ("slowfast_r50_8x8", "SLOWFAST_8x8_R50.yaml", 8, 64),
    ("slowfast_r101_16x8_nl", "c2/SLOWFAST_NLN_16x8_R101_50_50.yaml", 8, 64),
    ("slowfast_r50_4x16", "SLOWFAST_4x16_R50.yaml", 16, 32),
    ("x3d_xs", "X3D_XS.yaml", 4, 64),
    ("x3d_m", "X3D_M.yaml", 4, 64),
]


@pytest.mark.parametrize("arch,yaml,frames,crop", PARITY)
def test_logits_match_pyslowfast_float64(arch, yaml, frames, crop):
    cfg, ref = reference(yaml, frames, crop)
    with torch.device("meta"):  # no init: every tensor comes from the reference
        net = models.build_network(arch, 5)
    # Same names, same shapes: PySlowFast's state dict loads strictly, as its .pyth files do.
    assert list(net.state_dict()) == list(ref.state_dict())
    net.load_state_dict(ref.state_dict(), assign=True)
    net.eval()
    x = torch.randn(
        1, 3, frames, crop, crop, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        want = ref([x] if cfg.MODEL.ARCH == "x3d" else slowfast_net_pack(cfg, x))
        got = net(x)
    assert got.shape == want.shape == (1, 5)
    assert ((got - want).norm() / want.norm()).item() < 1e-6


def slowfast_net_pack(cfg, x):
    """PySlowFast's datasets/utils.py pack_pathway_output, transcribed (on a batch, time is dim
    2)."""
    fast = x
    slow = torch.index_select(
        x, 2, torch.linspace(0, x.shape[2] - 1, x.shape[2] // cfg.SLOWFAST.ALPHA).long()
    )
    return [slow, fast]


@pytest.mark.parametrize("alpha", [2, 4, 8])
def test_slow_pathway_frames_are_pack_pathway_indices(alpha):
    """The slow pathway sees exactly the frames pack_pathway_output picks, for many clip lengths
    (not always every alpha-th frame: T=32, alpha=4 takes 13, not 12)."""
    cfg = types.SimpleNamespace(SLOWFAST=types.SimpleNamespace(ALPHA=alpha))
    for T in range(alpha, 129, alpha):
        clip = torch.arange(T, dtype=torch.float64).view(1, 1, T, 1, 1).expand(1, 3, T, 2, 2)
        want = slowfast_net_pack(cfg, clip)[0][0, 0, :, 0, 0].long().tolist()
        net = types.SimpleNamespace(
            spec=slowfast_net.SLOWFAST["slowfast_r50_8x8"]._replace(alpha=alpha)
        )
        slow, fast = slowfast_net.SlowFast.pathways(net, clip)
        assert slow[0, 0, :, 0, 0].long().tolist() == want
        assert fast is clip
    assert slowfast_net.slow_indices(32, 4).tolist() == [0, 4, 8, 13, 17, 22, 26, 31]


def test_x3d_expansion_rules():
    """X3D-M's published size (X3D paper Table 3: 3.8M parameters at 400 classes) and the channel /
    depth rules of video_model_builder.X3D."""
    net = models.build_network("x3d_m", 400)
    n = sum(p.numel() for p in net.parameters())
    assert abs(n / 1e6 - 3.8) < 0.05, n
    assert [len(getattr(net, f"s{s}").blocks[0]) for s in (2, 3, 4, 5)] == [3, 5, 11, 7]
    assert (
        net.s5.pathway0_res0.branch2.b.groups == net.s5.pathway0_res0.branch2.b.in_channels == 432
    )
    assert hasattr(net.s3.pathway0_res2.branch2, "se") and not hasattr(
        net.s3.pathway0_res1.branch2, "se"
    )
    assert math.ceil(5.0 * 5) == len(models.build_network("x3d_l", 400).s4.blocks[0])


# ---- checkpoints: every layout, made here from the reference's state dict ------------------------
import pickle  # noqa: E402

import zoo  # noqa: E402
from slowfast.utils.c2_model_loading import get_name_convert_func  # noqa: E402


def caffe2_names(name):
    """Our (PySlowFast's) name -> its Caffe2 blob, written from the blob names of the Caffe2 zoo
    (video-nonlocal-net / c2_model_loading.py's comments), independently of slowfast_zoo's rules."""
    bn = {"weight": "s", "bias": "b", "running_mean": "rm", "running_var": "riv"}
    wb = {"weight": "w", "bias": "b"}
    path, leaf = name.rsplit(".", 1)
    if m := re.fullmatch(r"s1\.pathway(\d)_stem\.(conv|bn)", path):
        t = "t_" if m[1] == "1" else ""
        return f"{t}conv1_w" if m[2] == "conv" else f"{t}res_conv1_bn_{bn[leaf]}"
    if m := re.fullmatch(
        r"s(\d)\.pathway(\d)_res(\d+)\.(branch1|branch1_bn|branch2\.(\w)(_bn)?)", path
    ):
        t, base = "t_" if m[2] == "1" else "", f"res{m[1]}_{m[3]}_"
        if m[4].startswith("branch1"):
            return base.join((t, "branch1_w" if m[4] == "branch1" else f"branch1_bn_{bn[leaf]}"))
        return f"{t}{base}branch2{m[5]}" + (f"_bn_{bn[leaf]}" if m[6] else "_w")
    if m := re.fullmatch(r"s(\d)_fuse\.(conv_f2s|bn)", path):
        last = {1: "pool1", 2: "res2_2", 3: "res3_3", 4: "res4_5"}[int(m[1])]
        sub = f"t_{last}_subsample" if m[1] == "1" else f"t_{last}_branch2c_bn_subsample"
        return f"{sub}_w" if m[2] == "conv_f2s" else f"{sub}_bn_{bn[leaf]}"
    if m := re.fullmatch(r"s(\d)\.pathway0_nonlocal(\d+)\.(conv_(\w+)|bn)", path):
        tail = f"{m[4]}_{wb[leaf]}" if m[4] else f"bn_{bn[leaf]}"
        return f"nonlocal_conv{m[1]}_{m[2]}_{tail}"
    assert path == "head.projection", name
    return f"pred_{wb[leaf]}"


def save(tmp_path, obj, name):
    path = tmp_path / name
    if name.endswith(".pkl"):
        path.write_bytes(pickle.dumps(obj))
    else:
        torch.save(obj, path)
    return str(path)


def logits(net, x):
    with torch.no_grad():
        return net.double().eval()(x)


def close(a, b):
    return ((a - b).norm() / b.norm()).item() < 1e-6


def clip(frames, crop):
    return torch.randn(
        1, 3, frames, crop, crop, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )


@pytest.mark.parametrize("arch,yaml,frames,crop", [PARITY[0], PARITY[3]])
def test_pyslowfast_pyth_loads_exactly_and_the_head_is_replaced(
    tmp_path, capsys, arch, yaml, frames, crop
):
    cfg, ref = reference(yaml, frames, crop)
    x = clip(frames, crop)
    want = logits(ref, [x] if cfg.MODEL.ARCH == "x3d" else slowfast_net_pack(cfg, x))
    path = save(tmp_path, {"model_state": ref.state_dict(), "cfg": "..."}, "ref.pyth")
    got = logits(zoo.build_model(arch, 5, pretrained=path), x)
    assert close(got, want)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"pretrained {path} (pyslowfast, 3D)") and "skipped 0" in line
    if "x3d" not in arch:
        return
    # Fine-tuning: another num_classes re-initialises the projection only, and says so.
    net = zoo.build_model(arch, 7, pretrained=path)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "skipped 2 (head.projection.weight, head.projection.bias" in line
    for k in ("head.conv_5.weight", "head.lin_5.weight", "s5.pathway0_res6.branch2.c.weight"):
        assert torch.equal(net.state_dict()[k].double(), ref.state_dict()[k])


@pytest.mark.slow
def test_caffe2_pkl_of_slowfast_loads_exactly(tmp_path):
    """A Caffe2 .pkl (blobs as numpy arrays) of SlowFast NLN; its blob names convert back to
    PySlowFast's by PySlowFast's own c2_model_loading converter, and the logits are the same."""
    cfg, ref = reference("SLOWFAST_NLN_8x8_R50.yaml", 8, 32)
    blobs = {
        caffe2_names(k): v.numpy() for k, v in ref.state_dict().items() if "num_batches" not in k
    }
    convert = get_name_convert_func()
    assert {convert(b) for b in blobs} == {k for k in ref.state_dict() if "num_batches" not in k}
    blobs.update(lr=1.0, model_iter=3, **{"res2_0_branch2a_w_momentum": blobs["res2_0_branch2a_w"]})
    path = save(tmp_path, {"blobs": blobs}, "SLOWFAST_NLN_8x8_R50.pkl")
    x = clip(8, 32)
    got = logits(zoo.build_model("slowfast_r50_8x8_nl", 5, pretrained=path), x)
    assert close(got, logits(ref, slowfast_net_pack(cfg, x)))


def mmaction2_x3d_names(name):
    """PySlowFast's X3D name -> mmaction2's (backbones/x3d.py ConvModules, heads/x3d_head.py)."""
    path, leaf = name.rsplit(".", 1)
    stem = {"conv_xy": "conv1_s.conv", "conv": "conv1_t.conv", "bn": "conv1_t.bn"}
    if m := re.fullmatch(r"s1\.pathway0_stem\.(\w+)", path):
        return f"backbone.{stem[m[1]]}.{leaf}"
    if m := re.fullmatch(r"s(\d)\.pathway0_res(\d+)\.(.+)", path):
        block = f"backbone.layer{int(m[1]) - 1}.{m[2]}."
        part = {"branch1": "downsample.conv", "branch1_bn": "downsample.bn"}.get(m[3])
        if part is None:
            sub = m[3].removeprefix("branch2.")
            part = (
                sub.replace("se.", "se_module.")
                if sub.startswith("se.")
                else f"conv{'abc'.index(sub[0]) + 1}.{'bn' if sub.endswith('_bn') else 'conv'}"
            )
        return f"{block}{part}.{leaf}"
    head = {
        "conv_5": "backbone.conv5.conv",
        "conv_5_bn": "backbone.conv5.bn",
        "lin_5": "cls_head.fc1",
    }
    head["projection"] = "cls_head.fc2"
    return f"{head[path.split('.')[1]]}.{leaf}"


def test_mmaction2_x3d_gives_the_same_logits(tmp_path):
    cfg, ref = reference("X3D_M.yaml", 4, 64)
    state = {mmaction2_x3d_names(k): v for k, v in ref.state_dict().items()}
    state["cls_head.fc1.weight"] = state["cls_head.fc1.weight"].flatten(1)  # an nn.Linear there
    path = save(tmp_path, {"state_dict": state, "meta": {}}, "x3d_m_mmaction2.pth")
    x = clip(4, 64)
    assert close(logits(zoo.build_model("x3d_m", 5, pretrained=path), x), logits(ref, [x]))


def ptv_models():
    """pytorchvideo's create_slowfast (the hub's slowfast_r50 settings) and create_x3d (x3d_m's), at
    the tiny sizes, with their eval-mode softmax taken off."""
    from pytorchvideo.models.slowfast import create_slowfast
    from pytorchvideo.models.x3d import create_x3d

    sf = create_slowfast(
        model_num_class=5,
        slowfast_fusion_conv_kernel_size=(7, 1, 1),
        head_pool_kernel_sizes=((2, 2, 2), (8, 2, 2)),
    )
    x3d = create_x3d(model_num_class=5, input_clip_length=4, input_crop_size=64)
    for m in (sf, x3d):
        m.blocks[-1].activation = None
        randomise_zoo(m.double())
    return sf, x3d


def test_pytorchvideo_builders_and_hub_files_give_the_same_logits(tmp_path):
    sf, x3d = ptv_models()
    x = clip(8, 64)
    cfg = types.SimpleNamespace(SLOWFAST=types.SimpleNamespace(ALPHA=4))
    for arch, ref, inputs, frames in (
        ("slowfast_r50_8x8", sf, slowfast_net_pack(cfg, x), 8),
        ("x3d_m", x3d, x[:, :, :4], 4),
    ):
        path = save(tmp_path, {"model_state": ref.state_dict()}, f"{arch}.pyth")
        got = logits(zoo.build_model(arch, 5, pretrained=path), x[:, :, :frames])
        assert close(got, logits(ref, inputs)), arch


def zeros_of(arch, net=None):
    """A state dict of `arch`'s names and shapes (built on the meta device: no init, no memory)."""
    with torch.device("meta"):
        net = net or models.build_network(arch, 5)
    # One zero expanded to each shape: torch.save writes a 1-element storage, the file stays tiny.
    return {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in net.state_dict().items()}


def refusal(tmp_path, arch, obj, name="w.pyth"):
    """zoo.load_pretrained's ValueError for `obj` saved as `name` into a (meta) `arch`: every
    refusal comes before a tensor is copied."""
    with torch.device("meta"):
        net = models.build_network(arch, 5)
    with pytest.raises(ValueError) as e:
        zoo.load_pretrained(net, save(tmp_path, obj, name))
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.slow
def test_wrong_checkpoints_are_refused_in_one_line(tmp_path):
    sf = {"model_state": zeros_of("slowfast_r50_8x8")}
    x3d = {"model_state": zeros_of("x3d_xs")}
    narrow = slowfast_net.X3DNet(slowfast_net.X3DSpec(2.2, width_factor=1.0), 5)
    cases = [
        (
            "x3d_m",
            sf,
            "a SlowFast checkpoint (pyslowfast layout), not x3d_m's network: use --arch "
            "slowfast_r50_4x16",
        ),
        (
            "slowfast_r50_8x8",
            x3d,
            "an X3D checkpoint (pyslowfast layout), not slowfast_r50_8x8's network: use --arch "
            "x3d_xs",
        ),
        ("resnet50_3d", x3d, "use --arch x3d_xs / x3d_s / x3d_m / x3d_l"),
        ("resnet50_3d", sf, "a SlowFast checkpoint"),
        (
            "x3d_m",
            {"model_state": zeros_of("x3d_m", narrow)},
            "stem width 12; x3d_m has (3, 5, 11, 7), 24",
        ),
        ("x3d_l", x3d, "use --arch x3d_xs / x3d_s / x3d_m"),
        ("slowfast_r50_4x16", sf, "use --arch slowfast_r50_8x8"),
        (
            "slowfast_r101_8x8",
            {"model_state": zeros_of("slowfast_r101_16x8")},
            "use --arch slowfast_r101_16x8",
        ),
    ]
    for arch, obj, needle in cases:
        assert needle in refusal(tmp_path, arch, obj), (arch, needle)
    # A Caffe2 .pkl of another arch: I3D's blobs (no t_ pathway) for SlowFast, X3D's for X3D.
    i3d = {"blobs": {"conv1_w": np.zeros((64, 3, 5, 7, 7)), "pred_w": np.zeros((5, 2048))}}
    x3d_c2 = {"blobs": {"conv1_xy_w": np.zeros((24, 3, 1, 3, 3))}}
    assert "not a SlowFast / X3D checkpoint (pyslowfast-caffe2" in refusal(
        tmp_path, "slowfast_r50_8x8", i3d, "w.pkl"
    )
    assert (
        "a pyslowfast-caffe2 file of x3d; x3d_m loads x3d from pyslowfast, pytorchvideo, mmaction2"
        in refusal(tmp_path, "x3d_m", x3d_c2, "w.pkl")
    )


def test_a_clip_length_alpha_does_not_divide_and_tsn_are_refused_before_any_work(capsys):
    with pytest.raises(SystemExit) as e:
        run_main(
            [
                "ucf101",
                "no_train.txt",
                "no_val.txt",
                "--arch",
                "slowfast_r50_4x16",
                "--t_length",
                "20",
            ]
        )
    one_line_error(capsys, "--t_length 20", "every 8th frame", "e.g. 16", exc=e)
    for arch, mode in (("slowfast_r50_8x8", "TSN"), ("x3d_xs", "2D")):
        with pytest.raises(SystemExit) as e:
            run_main(["ucf101", "no_train.txt", "no_val.txt", "--arch", arch, "--mode", mode])
        one_line_error(capsys, f"--arch {arch} runs on 3D clips only", f"not --mode {mode}", exc=e)
    with pytest.raises(ValueError, match="multiple of 4"):
        models.build_network("slowfast_r50_8x8", 5)(torch.zeros(1, 3, 6, 32, 32))


@pytest.mark.parametrize("arch", ["slowfast_tiny", "x3d_xs"])
def test_features_are_what_the_classifier_sees(arch, tmp_path):
    """features.py's pooled features: SlowFast's two pathways pooled and concatenated (slow first,
    as head_helper.ResNetBasicHead), X3D's lin_5 output; end to end from a checkpoint file."""
    import features
    from conftest import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path / "ck.pth", arch=arch, new_size=32, crop_size=32)
    net, _, _ = __import__("predict").load_checkpoint(ckpt, "cpu", 1, 1)
    x = torch.randn(2, 3, 4, 32, 32)
    got, logits = features.Extractor(net)(x)
    with torch.no_grad():
        xs = net.backbone(x)
        want = (
            torch.cat([p.mean((2, 3, 4)) for p in xs], 1) if arch != "x3d_xs" else net.features(x)
        )
        assert torch.allclose(got, want, atol=1e-6) and torch.allclose(logits, net(x))
    assert got.shape == (2, 512 + 64 if arch == "slowfast_tiny" else 2048)


@pytest.mark.parametrize(
    "recipe,yaml",
    [
        ("kinetics_slowfast_r50_8x8", "SLOWFAST_8x8_R50.yaml"),
        ("kinetics_x3d_xs", "X3D_XS.yaml"),
        ("kinetics_x3d_m", "X3D_M.yaml"),
    ],
)
def test_recipes_are_the_pyslowfast_configs(recipe, yaml):
    """Every value of the recipe is its yaml's (with PySlowFast's defaults), read by PySlowFast's
    own config code: clips, crops, schedule, optimiser, batch over NUM_GPUS."""
    import train

    args = train.parse_args(["kinetics400", "t.txt", "v.txt", f"@{REPO / 'recipes' / recipe}.txt"])
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Kinetics" / yaml))
    d, s = cfg.DATA, cfg.SOLVER
    assert (args.t_length, args.t_stride) == (d.NUM_FRAMES, d.SAMPLING_RATE)
    assert (args.new_size, args.crop_size) == (d.TRAIN_JITTER_SCALES[0], d.TRAIN_CROP_SIZE)
    assert tuple(args.mean) == tuple(d.MEAN) and tuple(args.std) == tuple(d.STD)
    assert (args.lr, args.weight_decay, args.momentum, args.epochs) == (
        s.BASE_LR,
        s.WEIGHT_DECAY,
        s.MOMENTUM,
        s.MAX_EPOCH,
    )
    assert (args.lr_policy, args.lr_min) == (s.LR_POLICY, s.COSINE_END_LR)
    assert (args.warmup, args.lr_warmup_start) == (s.WARMUP_EPOCHS, s.WARMUP_START_LR)
    assert args.norm_weight_decay == cfg.BN.WEIGHT_DECAY and args.dropout == cfg.MODEL.DROPOUT_RATE
    assert (
        args.batch_size * cfg.NUM_GPUS == cfg.TRAIN.BATCH_SIZE
        and args.eval_freq == cfg.TRAIN.EVAL_PERIOD
    )
    spec = slowfast_net.SLOWFAST.get(args.arch)
    if spec:
        assert (spec.alpha, spec.beta_inv, spec.fusion_kernel) == (
            cfg.SLOWFAST.ALPHA,
            cfg.SLOWFAST.BETA_INV,
            cfg.SLOWFAST.FUSION_KERNEL_SZ,
        )
    else:
        x = slowfast_net.X3D[args.arch]
        assert (x.width_factor, x.depth_factor, x.bottleneck_factor) == (
            cfg.X3D.WIDTH_FACTOR,
            cfg.X3D.DEPTH_FACTOR,
            cfg.X3D.BOTTLENECK_FACTOR,
        )


def test_sizes_are_the_published_ones():
    """bench.py's count (meta device, torch's FlopCounterMode, MACs) per view against the zoos:
    X3D-XS / X3D-M 3.8M parameters, 0.60 / 4.73 GFLOPs (PySlowFast MODEL_ZOO.md, fvcore's MACs);
    SlowFast R50 4x16 / 8x8 36.1 / 65.7 GFLOPs per 256-px test view (SlowFast paper, Table 2)."""
    import bench

    for arch, T, crop, params, gmacs in (
        ("x3d_xs", 4, 160, 3.8, 0.60),
        ("x3d_m", 16, 224, 3.8, 4.73),
        ("slowfast_r50_4x16", 32, 256, None, 36.1),
        ("slowfast_r50_8x8", 32, 256, None, 65.7),
    ):
        p, g = bench.count(arch, 400, T, crop)
        assert g == pytest.approx(gmacs, rel=0.02), arch
        assert params is None or p / 1e6 == pytest.approx(params, abs=0.05), arch
