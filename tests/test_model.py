"""model.py: inflation from 2D weights, published sizes, output shapes, gradients, checkpoints,
errors.

CPU only, tiny archs and clips, nothing downloads.
"""

from torch.utils.flop_counter import FlopCounterMode
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision

from model import ARCHS, FrameMaxPool, ResNet3D, R10
from zoo import build_model


def random_2d_resnet(name, seed=0):
    """torchvision 2D ResNet, random weights, non-trivial BN statistics and affine, eval mode.
    Fresh BN (mean 0, var 1, gamma 1, beta 0) would hide a BN that was not copied."""
    torch.manual_seed(seed)
    m = torchvision.models.get_model(name, weights=None)
    for bn in m.modules():
        if isinstance(bn, torch.nn.BatchNorm2d):
            bn.running_mean.normal_(0, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.normal_(0, 0.2)
    return m.eval()


def still_clip(img, T):
    """(B, 3, H, W) -> (B, 3, T, H, W): every frame the same image."""
    return img[:, :, None].expand(-1, -1, T, -1, -1).contiguous()


@pytest.mark.parametrize("arch3d", ["resnet18_3d", "resnet50_3d"])
def test_center_inflation_is_exact(arch3d, tmp_path, capsys):
    m2d = random_2d_resnet(ARCHS[arch3d].layout.twin2d)
    sd = m2d.state_dict()
    # like torchvision's IMAGENET1K_V1 files, saved before BN had this buffer
    if arch3d == "resnet50_3d":
        sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    path = tmp_path / "r2d.pth"
    torch.save(sd, path)
    m3d = build_model(arch3d, 1000, pretrained=str(path), inflate="center").eval()
    n_conv = sum(isinstance(m, torch.nn.Conv3d) for m in m3d.modules())
    assert f"inflated {n_conv}," in capsys.readouterr().out  # every conv came from the 2D model

    img = torch.randn(2, 3, 67, 65)  # odd sizes: padding/stride corner cases must agree too
    with torch.no_grad():
        ref = m2d(img)
        out = m3d(still_clip(img, 4))
    assert out.shape == ref.shape
    assert (out - ref).abs().max() < 1e-4 * ref.abs().max()


def test_mean_inflation_matches_stem_on_interior_frames(tmp_path):
    m2d = random_2d_resnet("resnet18")
    path = tmp_path / "r18.pth"
    torch.save(m2d.state_dict(), path)
    m3d = build_model("resnet18_3d", 1000, pretrained=str(path), inflate="mean").eval()
    T, kt = 8, m3d.conv1.kernel_size[0]
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        ref = m2d.relu(m2d.bn1(m2d.conv1(img)))  # (1, 64, 32, 32)
        out = m3d.relu(m3d.bn1(m3d.conv1(still_clip(img, T))))  # (1, 64, T, 32, 32)
    tol = 1e-4 * ref.abs().max()
    inner = range(kt // 2, T - kt // 2)  # frames whose 5-tap window never reaches the zero padding
    for t in inner:
        assert (out[:, :, t] - ref).abs().max() < tol, t
    # The edge frames see zero padding, so mean inflation must differ there (center would not).
    assert (out[:, :, 0] - ref).abs().max() > 100 * tol


def test_published_sizes():
    # Non-local / PySlowFast / mmaction2 zoos: I3D-R50 28.04M params; 56.8 GMACs at 16x224x224.
    n = sum(p.numel() for p in build_model("resnet50_3d", 400).parameters())
    assert abs(n / 28.04e6 - 1) < 1e-3, n
    with torch.device("meta"):  # shapes only: counting FLOPs costs no compute
        m = build_model("resnet50_3d", 400)
        with FlopCounterMode(display=False) as fc:
            m(torch.empty(1, 3, 16, 224, 224))
    assert abs(fc.get_total_flops() / 2 / 56.8e9 - 1) < 5e-3, fc.get_total_flops()
    with torch.device("meta"):  # mmaction2 slowonly_r50: 32.45M
        n = sum(p.numel() for p in build_model("resnet50_3d_slowonly", 400).parameters())
    assert abs(n / 32.45e6 - 1) < 1e-3, n


@pytest.mark.parametrize("T", [4, 8, 16, 32])
def test_output_shapes_odd_hw(T):
    m = build_model("resnet10_3d", 5).eval()
    with torch.no_grad():
        assert m(torch.randn(2, 3, T, 33, 47)).shape == (2, 5)


@pytest.mark.slow
def test_odd_T_and_other_archs_shapes():
    with torch.no_grad():
        assert build_model("resnet10_3d", 3).eval()(torch.randn(1, 3, 3, 31, 31)).shape == (1, 3)
        assert build_model("resnet18_3d", 3).eval()(torch.randn(1, 3, 4, 35, 35)).shape == (1, 3)
    with torch.device("meta"):  # every arch builds and maps a 16x224x224 clip to num_classes
        for arch in ARCHS:  # (t_length: the clip a ViT's position table is built for)
            net = build_model(arch, 7, dropout=0.5, t_length=16)
            assert net(torch.empty(2, 3, 16, 224, 224)).shape == (2, 7), arch


def test_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    m = build_model("resnet10_3d", 4, dropout=0.5).train()
    loss = F.cross_entropy(m(torch.randn(2, 3, 4, 32, 32)), torch.tensor([0, 3]))
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_torchvision_video_model_head_replaced():
    m = build_model("r3d_18", 6, dropout=0.5).eval()
    assert m.fc.out_features == 6
    with torch.no_grad():
        assert m(torch.randn(1, 3, 4, 32, 32)).shape == (1, 6)


@pytest.mark.parametrize("wrap", ["model", "state_dict", "bare"])
def test_3d_checkpoint_with_module_prefix_and_other_num_classes(wrap, tmp_path, capsys):
    src = build_model("resnet10_3d", 5)
    sd = {"module." + k: v for k, v in src.state_dict().items()}  # as saved from DataParallel/DDP
    # Trainer checkpoints carry numpy RNG state and args too: not loadable with weights_only=True.
    ckpt = (
        sd
        if wrap == "bare"
        else {
            wrap: sd,
            "epoch": 3,
            "args": {"arch": "resnet10_3d"},
            "rng": {"numpy": np.random.get_state()},
        }
    )
    path = tmp_path / "ckpt.pth"
    torch.save(ckpt, path)
    dst = build_model("resnet10_3d", 7, pretrained=str(path))
    out = capsys.readouterr().out
    assert "skipped 2 (fc.weight, fc.bias: shape mismatch; classifier re-initialised)" in out, out
    assert dst.fc.weight.shape == (7, 512)
    s, d = src.state_dict(), dst.state_dict()
    for k in s:
        if not k.startswith("fc."):
            assert torch.equal(s[k], d[k]), k


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="needs at least 2 frames"):
        build_model("resnet10_3d", 3)(torch.randn(1, 3, 1, 32, 32))
    with pytest.raises(ValueError, match="unknown arch"):
        build_model("resnet12_3d", 3)
    with pytest.raises(ValueError, match="no ImageNet 2D counterpart"):
        build_model("resnet10_3d", 3, pretrained="imagenet")  # fails before any download
    with pytest.raises(ValueError, match="no IMAGENET1K_V2 weights for resnet18"):
        build_model("resnet18_3d", 3, pretrained="imagenet_v2")
    with pytest.raises(ValueError, match="no such file"):
        build_model("resnet10_3d", 3, pretrained=str(tmp_path / "missing.pth"))
    path = tmp_path / "r18.pth"  # 2D weights of another depth: refuse to half-inflate
    torch.save(torchvision.models.resnet18().state_dict(), path)
    with pytest.raises(ValueError, match="2D weights do not fit resnet50_3d"):
        build_model("resnet50_3d", 3, pretrained=str(path))
    assert {"r3d_18", "mc3_18", "r2plus1d_18", "s3d", "mvit_v2_s", "swin3d_t"} <= set(ARCHS)


@pytest.mark.parametrize("t_stride", [1, 2])
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last_3d])
def test_frame_max_pool_is_max_pool3d_without_overlapping_3d_windows(t_stride, fmt):
    # CUDA's max_pool3d backward scatters into overlapping windows with atomicAdd: not
    # bit-repeatable, so the stems pool each frame in 2D. Same values and gradient as the 3D pool,
    # the memory format kept.
    torch.manual_seed(0)
    x = torch.randn(2, 8, 5, 17, 16).contiguous(memory_format=fmt).requires_grad_()
    ref, got = (
        torch.nn.MaxPool3d((1, 3, 3), (t_stride, 2, 2), (0, 1, 1))(x),
        FrameMaxPool(t_stride)(x),
    )
    gy = torch.randn_like(ref)
    assert torch.equal(ref, got) and got.is_contiguous(memory_format=fmt)
    assert torch.equal(*(torch.autograd.grad(y, x, gy)[0] for y in (ref, got)))
    net = ResNet3D(R10, 4)
    assert not [
        m for m in net.modules() if isinstance(m, torch.nn.MaxPool3d) and m.kernel_size != m.stride
    ]


@pytest.mark.slow
def test_dropout_is_applied_where_an_arch_takes_it():
    """--dro reaches every arch whose entry takes it (Arch.dropout): an nn.Dropout of that p in the
    built model (on the meta device: no weights made); and it acts: two train-mode forwards of one
    clip differ with it, not without (eval mode: equal)."""
    for arch, entry in ARCHS.items():
        if not entry.dropout:
            continue
        with torch.device("meta"):
            model = build_model(arch, 5, dropout=0.37, t_length=16, crop_size=224)
        ps = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        assert 0.37 in ps, arch
    x = torch.randn(2, 3, 4, 32, 32)
    for p in (0.5, 0.0):
        torch.manual_seed(0)
        model = build_model("resnet10_3d", 5, dropout=p)
        a, b = model(x), model(x)
        assert torch.equal(a, b) == (p == 0), p
        model.eval()
        assert torch.equal(model(x), model(x))
