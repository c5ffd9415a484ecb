"""Model-zoo checkpoints (zoo.py) and arch specs / initialisation (model.py).

The reference networks are pytorchvideo's own i3d_r50 and slow_r50 (skipped when pytorchvideo is
absent). The PySlowFast (.pyth and Caffe2 .pkl) and mmaction2 files are written here from those
models' weights, named by walking the pytorchvideo modules and spelling each library's documented
names (slowfast/models/*_helper.py, slowfast/utils/c2_model_loading.py, mmaction/models/backbones/
resnet3d.py) -- independently of zoo.py's rename tables.
"""

import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn as nn

import model as models
import zoo
from model import ARCHS, ArchSpec, Bottleneck3D, resnet3d
from zoo import build_model

KINETICS = {"mean": (0.45, 0.45, 0.45), "std": (0.225, 0.225, 0.225)}
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
HEAD5 = {"head_classes": 5, "head_loaded": True}  # the file's classifier, of 5 classes, loaded
BN = ("weight", "bias", "running_mean", "running_var")


def randomise(m):
    """Random affine BN parameters and statistics: with the defaults (1, 0, 0, 1) a wrong BN mapping
    would go unnoticed."""
    g = torch.Generator().manual_seed(1)
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm3d):
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=g) * 0.2)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=g) * 1.5 + 0.5)
            bn.weight.data.copy_(torch.rand(bn.num_features, generator=g) + 0.5)
            bn.bias.data.copy_(torch.randn(bn.num_features, generator=g) * 0.2)
    return m.eval()


def pytorchvideo_net(name, stem_stride_t=1):
    hub = pytest.importorskip("pytorchvideo.models.hub.resnet")
    torch.manual_seed(0)
    m = getattr(hub, name)(pretrained=False)
    # The hub head averages a fixed (T, 7, 7) window (224 px clips); at 112 px the same global
    # average is the adaptive pool. Weightless: the state dict stays the hub's.
    m.blocks[-1].pool = nn.AdaptiveAvgPool3d(1)
    # mmaction2's i3d_r50 (configs/_base_/models/i3d_r50.py): conv1_stride_t = pool1_stride_t = 2.
    m.blocks[0].conv.stride = (stem_stride_t, 2, 2)
    m.blocks[0].pool.stride = (stem_stride_t, 2, 2)
    return randomise(m)


@pytest.fixture(scope="module")
def clip():
    return torch.randn(
        1, 3, 8, 112, 112, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )


@pytest.fixture(scope="module")
def nets(clip):
    """name -> (pytorchvideo model, its float64 logits on `clip`)."""
    out = {}
    for key, name, st in (
        ("i3d", "i3d_r50", 1),
        ("slow", "slow_r50", 1),
        ("mmaction_i3d", "i3d_r50", 2),
    ):
        m = pytorchvideo_net(name, st).double()
        with torch.no_grad():
            out[key] = (m.float(), m.double()(clip))
        m.float()  # saved as the zoos save: float32
    return out


# ---- each library's names, by walking the pytorchvideo modules -----------------------------------


def parts(m):
    """(role, stage 1..4, block, parameter name, tensor) for every tensor of a pytorchvideo
    ResNet."""
    stem = m.blocks[0]
    yield "conv1", 0, 0, "weight", stem.conv.weight
    for p, t in stem.norm.state_dict().items():
        yield "bn1", 0, 0, p, t
    stages = [b for b in m.blocks if hasattr(b, "res_blocks")]
    for s, stage in enumerate(stages, start=1):
        for i, blk in enumerate(stage.res_blocks):
            if blk.branch1_conv is not None:
                yield "down_conv", s, i, "weight", blk.branch1_conv.weight
                for p, t in blk.branch1_norm.state_dict().items():
                    yield "down_bn", s, i, p, t
            for x in "abc":
                yield f"conv_{x}", s, i, "weight", getattr(blk.branch2, f"conv_{x}").weight
                for p, t in getattr(blk.branch2, f"norm_{x}").state_dict().items():
                    yield f"bn_{x}", s, i, p, t
    for p, t in m.blocks[-1].proj.state_dict().items():
        yield "fc", 0, 0, p, t


def pyslowfast_name(role, s, i, p):
    # video_model_builder.ResNet: s1 stem, s2..s5; ResBlock branch1 / branch1_bn, branch2.a / a_bn
    # ...
    res = f"s{s + 1}.pathway0_res{i}."
    return {
        "conv1": f"s1.pathway0_stem.conv.{p}",
        "bn1": f"s1.pathway0_stem.bn.{p}",
        "down_conv": res + f"branch1.{p}",
        "down_bn": res + f"branch1_bn.{p}",
        "fc": f"head.projection.{p}",
    }.get(role) or res + (
        f"branch2.{role[-1]}.{p}" if role.startswith("conv") else f"branch2.{role[-1]}_bn.{p}"
    )


def caffe2_name(role, s, i, p):
    # The Caffe2 zoo's blobs (slowfast/utils/c2_model_loading.py): _w, _bn_s/_b/_rm/_riv, pred_w/b.
    if p == "num_batches_tracked":
        return None  # Caffe2 has no such blob
    bn = (
        {"weight": "s", "bias": "b", "running_mean": "rm", "running_var": "riv"}[p]
        if p in BN
        else None
    )
    res = f"res{s + 1}_{i}_"
    return {
        "conv1": "conv1_w",
        "bn1": f"res_conv1_bn_{bn}",
        "down_conv": res + "branch1_w",
        "down_bn": res + f"branch1_bn_{bn}",
        "fc": "pred_" + p[0],
    }.get(role) or res + (
        f"branch2{role[-1]}_w" if role.startswith("conv") else f"branch2{role[-1]}_bn_{bn}"
    )


def mmaction2_name(role, s, i, p):
    # Recognizer3D: backbone.* (ResNet3d, ConvModule = .conv + .bn), cls_head.fc_cls (I3DHead).
    blk = f"backbone.layer{s}.{i}."
    n = {"a": 1, "b": 2, "c": 3}.get(role[-1])
    return {
        "conv1": f"backbone.conv1.conv.{p}",
        "bn1": f"backbone.conv1.bn.{p}",
        "down_conv": blk + f"downsample.conv.{p}",
        "down_bn": blk + f"downsample.bn.{p}",
        "fc": f"cls_head.fc_cls.{p}",
    }.get(role) or blk + (f"conv{n}.conv.{p}" if role.startswith("conv") else f"conv{n}.bn.{p}")


def save(layout, m, path, meta_cfg=None):
    """Write `m`'s weights as `layout` saves them; returns the path."""
    if layout == "pytorchvideo":  # pytorchvideo's hub files: {"model_state": ...} (hub/resnet.py)
        torch.save({"model_state": m.state_dict(), "epoch": 196}, path)
    elif layout == "pyslowfast":  # slowfast/utils/checkpoint.py save_checkpoint
        sd = {pyslowfast_name(r, s, i, p): t.clone() for r, s, i, p, t in parts(m)}
        torch.save(
            {
                "epoch": 196,
                "model_state": sd,
                "optimizer_state": {},
                "cfg": "MODEL:\n  ARCH: i3d\n",
            },
            path,
        )
    elif layout == "caffe2":  # a Python-2-era pickle of numpy blobs, with solver state mixed in
        blobs = {
            caffe2_name(r, s, i, p): t.detach().numpy().copy()
            for r, s, i, p, t in parts(m)
            if caffe2_name(r, s, i, p)
        }
        blobs.update(
            {
                "conv1_w_momentum": np.zeros(3, np.float32),
                "lr": np.float32(0.1),
                "model_iter": np.int64(9),
            }
        )
        with open(path, "wb") as f:
            pickle.dump({"blobs": blobs}, f, protocol=2)
    elif layout == "mmaction2":  # mmengine: {"meta": {"cfg": config text}, "state_dict": ...}
        sd = {mmaction2_name(r, s, i, p): t.clone() for r, s, i, p, t in parts(m)}
        torch.save(
            {"meta": {"cfg": meta_cfg} if meta_cfg else {}, "state_dict": sd, "optimizer": {}}, path
        )
    return str(path)


def relerr(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


# ---- the same logits as the zoo's network --------------------------------------------------------

CASES = [  # (layout, pytorchvideo net, our arch, expected normalisation)
    ("pytorchvideo", "i3d", "resnet50_3d", KINETICS),
    ("pytorchvideo", "slow", "resnet50_3d_slowonly", KINETICS),
    ("pyslowfast", "i3d", "resnet50_3d", KINETICS),
    ("pyslowfast", "slow", "resnet50_3d_slowonly", KINETICS),
    ("caffe2", "i3d", "resnet50_3d", KINETICS),
    ("caffe2", "slow", "resnet50_3d_slowonly", KINETICS),
    ("mmaction2", "slow", "resnet50_3d_slowonly", IMAGENET),
    ("mmaction2", "mmaction_i3d", "resnet50_3d_mmaction", IMAGENET),
]


@pytest.mark.slow
@pytest.mark.parametrize("layout,net,arch,norm", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_zoo_checkpoint_gives_the_zoo_logits(layout, net, arch, norm, nets, clip, tmp_path, capsys):
    ref_model, ref = nets[net]
    path = save(layout, ref_model, tmp_path / ("w.pkl" if layout == "caffe2" else "w.pyth"))
    ours = build_model(arch, 400, pretrained=path)
    out = capsys.readouterr().out
    fmt = {"caffe2": "pyslowfast-caffe2"}.get(layout, layout)
    n = sum(
        1 for k in ours.state_dict() if layout != "caffe2" or not k.endswith("num_batches_tracked")
    )
    assert f"({fmt}, 3D): inflated 0, copied {n}" in out and "skipped 0" in out, out
    assert ours.pretrained_info == {"format": fmt, **norm, "head_classes": 400, "head_loaded": True}
    with torch.no_grad():
        logits = ours.eval().double()(clip)
    assert logits.shape == (1, 400)
    assert relerr(logits, ref) < 1e-6, relerr(logits, ref)


def test_a_swin3d_file_loads_into_its_own_arch(tmp_path, capsys):
    # its patch_embed.proj is named as a ViT's: it must not be refused as a ViT file
    ref = build_model("swin3d_t", 5)
    torch.save(ref.state_dict(), tmp_path / "swin.pth")
    ours = build_model("swin3d_t", 5, pretrained=str(tmp_path / "swin.pth"))
    assert "skipped 0" in capsys.readouterr().out
    assert all(torch.equal(v, ours.state_dict()[k]) for k, v in ref.state_dict().items())


def test_mmaction2_arch_is_not_resnet50_3d(nets, clip):
    # Same tensors, another network: the stem's temporal stride changes the logits.
    assert relerr(nets["mmaction_i3d"][1], nets["i3d"][1]) > 1e-2
    assert build_model("resnet50_3d_mmaction", 3).min_t == 5  # 5 -> conv1 3 -> pool1 2 -> pool2 1


def test_stem_stride_mismatch_refused(nets, tmp_path, capsys):
    cfg = "model = dict(backbone=dict(type='ResNet3d', conv1_stride_t=2, pool1_stride_t=2))"
    mm = save("mmaction2", nets["mmaction_i3d"][0], tmp_path / "mm.pth", meta_cfg=cfg)
    with pytest.raises(
        ValueError, match="temporal stride 2 .* resnet50_3d has 1 .*use --arch resnet50_3d_mmaction"
    ):
        build_model("resnet50_3d", 400, pretrained=mm)
    # no meta: cannot tell; says so
    mm = save("mmaction2", nets["mmaction_i3d"][0], tmp_path / "mm.pth")
    build_model("resnet50_3d", 400, pretrained=mm)
    assert "i3d_r50 weights belong in --arch resnet50_3d_mmaction" in capsys.readouterr().out
    pv = save("pytorchvideo", nets["i3d"][0], tmp_path / "pv.pyth")
    with pytest.raises(ValueError, match="use --arch resnet50_3d$"):
        build_model("resnet50_3d_mmaction", 400, pretrained=pv)


def test_partly_fitting_3d_checkpoints_fail_naming_tensors(nets, tmp_path):
    m = nets["i3d"][0]
    # I3D weights into Slow-only: conv1 and the 10 bottlenecks whose temporal kernel differs.
    path = save("pytorchvideo", m, tmp_path / "i3d.pyth")
    with pytest.raises(
        ValueError,
        match=r"do not fit resnet50_3d_slowonly \(pytorchvideo layout; 11 tensors "
        r"missing or mismatched: conv1.weight \(shape 64x3x5x7x7 in "
        r"the file, 64x3x1x7x7 here\)",
    ):
        build_model("resnet50_3d_slowonly", 400, pretrained=path)
    # A truncated file: the last block of res5 (blocks.5 in i3d_r50, after the pool at blocks.2) is
    # gone.
    sd = {k: v for k, v in m.state_dict().items() if not k.startswith("blocks.5.res_blocks.2.")}
    torch.save({"model_state": sd}, tmp_path / "cut.pyth")
    with pytest.raises(
        ValueError, match=r"15 tensors missing or mismatched: layer4.2.conv1.weight \(missing\)"
    ):
        build_model("resnet50_3d", 400, pretrained=str(tmp_path / "cut.pyth"))
    # A file with more than the arch has (a deeper net): not silently dropped.
    sd = dict(m.state_dict())
    sd["blocks.5.res_blocks.3.branch2.conv_a.weight"] = torch.zeros(512, 2048, 1, 1, 1)
    torch.save({"model_state": sd}, tmp_path / "deep.pyth")
    with pytest.raises(
        ValueError, match=r"has 1 tensors resnet50_3d does not have \(layer4.3.conv1.weight\)"
    ):
        build_model("resnet50_3d", 400, pretrained=str(tmp_path / "deep.pyth"))


def test_other_classifier_is_reinitialised_and_said(nets, tmp_path, capsys):
    m = nets["slow"][0]
    path = save("caffe2", m, tmp_path / "slow.pkl")
    ours = build_model("resnet50_3d_slowonly", 101, pretrained=path)
    out = capsys.readouterr().out
    n = sum(1 for k in ours.state_dict() if not k.endswith("num_batches_tracked"))
    said = (
        f"copied {n - 2}, skipped 2 (fc.weight, fc.bias: shape mismatch; classifier re-initialised)"
    )
    assert said in out, out
    assert ours.fc.weight.shape == (101, 2048)
    assert torch.equal(ours.conv1.weight, m.blocks[0].conv.weight)  # slow_r50: blocks.4 is res5
    assert torch.equal(
        ours.layer4[2].bn3.running_var, m.blocks[4].res_blocks[2].branch2.norm_c.running_var
    )


def test_normalisation_of_our_and_plain_checkpoints(tmp_path):
    sd = build_model("resnet10_3d", 5).state_dict()
    torch.save(
        {
            "model": sd,
            "args": {"arch": "resnet10_3d", "mean": (0.5, 0.4, 0.3), "std": (0.2, 0.2, 0.2)},
        },
        tmp_path / "ours.pth",
    )
    info = build_model("resnet10_3d", 5, pretrained=str(tmp_path / "ours.pth")).pretrained_info
    assert info == {"format": "ours", "mean": (0.5, 0.4, 0.3), "std": (0.2, 0.2, 0.2), **HEAD5}
    # before mean/std were saved
    torch.save({"model": sd, "args": {"arch": "resnet10_3d"}}, tmp_path / "old.pth")
    old = build_model("resnet10_3d", 5, pretrained=str(tmp_path / "old.pth"))
    assert old.pretrained_info == {"format": "ours", **IMAGENET, **HEAD5}
    torch.save(sd, tmp_path / "bare.pth")
    assert build_model("resnet10_3d", 5, pretrained=str(tmp_path / "bare.pth")).pretrained_info == {
        "format": "bare",
        "mean": None,
        "std": None,
        **HEAD5,
    }
    assert build_model("resnet10_3d", 5).pretrained_info is None
    import torchvision

    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "r18.pth")
    # torchvision's 1000-class fc: not loaded into 5 classes
    assert build_model("resnet18_3d", 5, pretrained=str(tmp_path / "r18.pth")).pretrained_info == {
        "format": "torchvision",
        **IMAGENET,
        "head_classes": 1000,
        "head_loaded": False,
    }


def test_kinetics400_offline_says_where_to_put_the_file(tmp_path, monkeypatch, nets):
    calls = []

    def offline(url, dst, *a, **k):
        calls.append(url)
        raise OSError("[Errno -3] Temporary failure in name resolution\nsecond line")

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    url = zoo.KINETICS400_URLS["resnet50_3d"]
    where = os.path.join(str(tmp_path / "hub"), "checkpoints", "I3D_8x8_R50.pyth")
    with pytest.raises(ValueError) as e:
        build_model("resnet50_3d", 400, pretrained="kinetics400")
    msg = str(e.value)
    assert "\n" not in msg and url in msg and f"put it at {where}" in msg, msg
    assert calls == [url]
    with pytest.raises(ValueError, match="no published Kinetics-400 weights for resnet10_3d"):
        build_model("resnet10_3d", 400, pretrained="kinetics400")
    # Once the file is where the message said, it loads through the converter, with no download.
    save("pytorchvideo", nets["i3d"][0], where)
    m = build_model("resnet50_3d", 400, pretrained="kinetics400")
    info = {"format": "pytorchvideo", **KINETICS, "head_classes": 400, "head_loaded": True}
    assert calls == [url] and m.pretrained_info == info


# ---- named specs, init a block can rely on -------------------------------------------------------


LAYOUTS = {arch: entry.layout for arch, entry in ARCHS.items() if entry.layout}  # the ResNet-3Ds


class ZeroInitBottleneck(Bottleneck3D):
    """A forked block with its own init: last BN zeroed (Goyal et al.), conv2 a constant."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        nn.init.zeros_(self.bn3.weight)
        nn.init.constant_(self.conv2.weight, 0.01)


def test_block_keeps_its_own_init(monkeypatch):
    spec = ARCHS["resnet50_3d"].layout._replace(
        block=ZeroInitBottleneck, layers=(1, 1, 1, 1), twin2d=None
    )
    monkeypatch.setitem(ARCHS, "zero_init_r50", resnet3d(spec))
    m = build_model("zero_init_r50", 3)
    blocks = [b for b in m.modules() if isinstance(b, ZeroInitBottleneck)]
    assert len(blocks) == 4
    for b in blocks:
        assert (b.bn3.weight == 0).all() and (b.conv2.weight == 0.01).all()
        assert (b.bn1.weight == 1).all()  # the rest: torchvision's init, as before
    # Every conv the model made itself still gets kaiming fan_out (std sqrt(2 / fan_out)).
    for conv in (m.conv1, m.layer1[0].downsample[0], blocks[0].conv1):
        fan_out = conv.weight.shape[0] * conv.weight[0, 0].numel()
        assert abs(conv.weight.std().item() / (2 / fan_out) ** 0.5 - 1) < 0.1


def test_arch_specs_are_named_records():
    for arch, spec in LAYOUTS.items():
        assert isinstance(spec, ArchSpec) and spec.block in (models.BasicBlock3D, Bottleneck3D)
    assert LAYOUTS["resnet50_3d_mmaction"] == LAYOUTS["resnet50_3d"]._replace(stem_stride_t=2)


@pytest.mark.parametrize("arch", list(LAYOUTS))
def test_min_t_is_the_fewest_frames_that_work(arch):
    with torch.device("meta"):  # shapes only
        m = build_model(arch, 3)
        assert m(torch.empty(1, 3, m.min_t, 64, 64)).shape == (1, 3)
        if m.min_t > 1:
            with pytest.raises(ValueError, match=f"needs at least {m.min_t} frames"):
                m(torch.empty(1, 3, m.min_t - 1, 64, 64))
            # without the check, one frame fewer fails in torch or ends empty
            fewer, m.min_t = (m.min_t - 1, 1)
            try:
                out = m.layer1(m.maxpool(m.conv1(torch.empty(1, 3, fewer, 64, 64))))
                T = m.pool2(out).shape[2]
            except RuntimeError:
                T = 0
            assert T == 0


def test_unreadable_files_fail_in_one_line(tmp_path):
    for name in ("junk.pkl", "junk.pth"):
        (tmp_path / name).write_bytes(b"not a checkpoint")
        with pytest.raises(
            ValueError,
            match=f"{name}: cannot read it as a torch checkpoint .* nor as a Caffe2 pickle",
        ) as e:
            build_model("resnet10_3d", 3, pretrained=str(tmp_path / name))
        assert "\n" not in str(e.value)
    with open(tmp_path / "other.pkl", "wb") as f:
        pickle.dump({"weights": [1, 2, 3]}, f)
    with pytest.raises(ValueError, match="other.pkl: not a state dict"):
        build_model("resnet10_3d", 3, pretrained=str(tmp_path / "other.pkl"))
