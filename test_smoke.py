"""Smoke tests: model.py, data.py, train.py, bench.py. CPU only, tiny archs and clips, nothing downloads.

python -m pytest -q          (tests that read ../shared/data skip when it is absent)
"""
from pathlib import Path
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

from PIL import Image
from torch.utils.flop_counter import FlopCounterMode
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

from model import ARCH_SPECS, ARCHS, TV_VIDEO, build_model
import bench
import data
import prepare
import model as models
import train


# ============================== model.py ==============================================================

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
    m2d = random_2d_resnet(ARCH_SPECS[arch3d].twin2d)
    sd = m2d.state_dict()
    if arch3d == "resnet50_3d":  # like torchvision's IMAGENET1K_V1 files, saved before BN had this buffer
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


def test_odd_T_and_other_archs_shapes():
    with torch.no_grad():
        assert build_model("resnet10_3d", 3).eval()(torch.randn(1, 3, 3, 31, 31)).shape == (1, 3)
        assert build_model("resnet18_3d", 3).eval()(torch.randn(1, 3, 4, 35, 35)).shape == (1, 3)
    with torch.device("meta"):  # every arch builds and maps a 16x224x224 clip to num_classes
        for arch in ARCHS:
            assert build_model(arch, 7, dropout=0.5)(torch.empty(2, 3, 16, 224, 224)).shape == (2, 7), arch


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
    ckpt = sd if wrap == "bare" else {wrap: sd, "epoch": 3, "args": {"arch": "resnet10_3d"},
                                      "rng": {"numpy": np.random.get_state()}}
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
    assert set(TV_VIDEO) <= set(ARCHS)


# ============================== data.py ===============================================================

# pytest resets warning filters per test, dropping data.py's own filter for torchvision 0.29's deprecation
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")

HERE = Path(__file__).resolve().parent
UCF101_LISTS = HERE.parent / "shared" / "data" / "ucf101"
W, H = 48, 40      # synthetic frame size; short side 40
NUM_FRAMES = 10    # frames per synthetic video
SMALL = dict(t_length=4, t_stride=2, new_size=40, crop_size=32)  # tiny clips: (3, 4, 32, 32)


# ---- helpers -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Four train + four val videos of NUM_FRAMES 48x40 JPEGs. Read-only: tests that break frames copy."""
    root = tmp_path_factory.mktemp("synth")
    train, val = prepare.make_synth(root, classes=4, videos=4, frames=NUM_FRAMES, size=(W, H))
    return root, Path(train), Path(val)


def write_list(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_frames(folder, n, size=(16, 12), start=1, tmpl="img_{:05d}.jpg", seed=0):
    """n small random JPEG frames start .. start+n-1 in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(start, start + n):
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(folder / tmpl.format(i))
    return folder


def copy_video(src, dst, count=NUM_FRAMES, tmpl="img_{:05d}.jpg", dst_start=1):
    """Copy a synth video's first `count` frames into a new folder, renamed by tmpl from dst_start."""
    dst.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        (dst / tmpl.format(dst_start + k)).write_bytes((src / f"img_{1 + k:05d}.jpg").read_bytes())
    return dst


def frames_of(folder, numbers, tmpl="img_{:05d}.jpg"):
    """Reference decode: uint8 (3, len(numbers), H, W) of the given frame numbers."""
    return torch.stack([data.decode_frame(os.path.join(folder, tmpl.format(int(i)))) for i in numbers]).permute(3, 0, 1, 2)


def run_cli(*commands):
    """Run `python prepare.py ARGS` for each ARGS tuple from the repository folder, all at once: each pays
    seconds of torch + torchvision imports, and CI has 2 cores. Returns (returncode, stdout, stderr) each."""
    procs = [subprocess.Popen([sys.executable, "prepare.py", *map(str, args)], cwd=HERE, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in commands]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append((proc.returncode, out, err))
    return results


def assert_interleaved(clip):
    """Clips are (.., 3, T, c, c) views of (.., T, c, c, 3) memory -- the decoder's layout, by design."""
    assert clip.movedim(-4, -1).is_contiguous()


# ---- sample_indices ------------------------------------------------------------------------------
def test_train_indices_random_start_within_bounds_and_reproducible():
    nf, L, s = 20, 4, 4  # span 13 -> starts 0..7
    idx = data.sample_indices(nf, L, s, "train", num_clips=2000, rng=np.random.default_rng(0))
    assert idx.shape == (2000, L) and idx.dtype == np.int64
    assert (np.diff(idx, axis=1) == s).all()
    assert set(idx[:, 0].tolist()) == set(range(1, 9))  # every possible start, and only those
    again = data.sample_indices(nf, L, s, "train", num_clips=2000, rng=np.random.default_rng(0))
    other = data.sample_indices(nf, L, s, "train", num_clips=2000, rng=np.random.default_rng(1))
    assert np.array_equal(idx, again)
    assert not np.array_equal(idx, other)
    with pytest.raises(ValueError, match="rng"):
        data.sample_indices(nf, L, s, "train")


def test_val_indices_centred():
    for nf, L, s in [(100, 8, 4), (30, 4, 4), (29, 8, 4), (11, 4, 2), (7, 1, 4)]:
        idx = data.sample_indices(nf, L, s, "val")
        assert idx.shape == (1, L) and (np.diff(idx) == s).all()
        before, after = idx[0, 0] - 1, nf - idx[0, -1]  # frames left out on each side
        assert before >= 0 and after >= 0 and abs(before - after) <= 1, (nf, L, s, idx)
    with pytest.raises(ValueError, match="val"):
        data.sample_indices(100, 8, 4, "val", num_clips=2)


def test_test_indices_spread_first_to_last():
    nf, L, s = 100, 8, 4
    for num_clips in (2, 3, 5, 10):
        idx = data.sample_indices(nf, L, s, "test", num_clips=num_clips)
        assert idx.shape == (num_clips, L) and (np.diff(idx, axis=1) == s).all()
        assert idx[0, 0] == 1 and idx[-1, -1] == nf  # from the first frame to the last
        gaps = np.diff(idx[:, 0])
        assert (gaps > 0).all() and gaps.max() - gaps.min() <= 1  # evenly spread
    # one test clip is the centred (val) clip
    assert np.array_equal(data.sample_indices(nf, L, s, "test", num_clips=1), data.sample_indices(nf, L, s, "val"))


def test_short_videos_shrink_stride_then_repeat_last_frame():
    # 20 frames cannot hold 8 x stride 4 (span 29): stride 2 (span 15) is the largest that fits
    for mode in data.MODES:
        idx = data.sample_indices(20, 8, 4, mode, rng=np.random.default_rng(0))
        assert (np.diff(idx) == 2).all() and idx.min() >= 1 and idx.max() <= 20
    # 5 frames for 8: every frame once, then the last repeated
    for mode in data.MODES:
        idx = data.sample_indices(5, 8, 4, mode, rng=np.random.default_rng(0))
        assert idx.tolist() == [[1, 2, 3, 4, 5, 5, 5, 5]]
    # 1 frame: the whole clip is that frame, in every mode and for every test clip
    for mode, clips in [("train", 3), ("val", 1), ("test", 4)]:
        idx = data.sample_indices(1, 6, 3, mode, num_clips=clips, rng=np.random.default_rng(0), start_index=1)
        assert idx.shape == (clips, 6) and (idx == 1).all()
        idx0 = data.sample_indices(1, 6, 3, mode, num_clips=clips, rng=np.random.default_rng(0), start_index=0)
        assert (idx0 == 0).all()


@pytest.mark.parametrize("start_index", [0, 1, 7])
def test_indices_never_leave_the_video(start_index):
    """Sweep sizes; check the documented rule as properties of the output, not by re-deriving it."""
    rng = np.random.default_rng(0)
    for nf in range(1, 13):
        for L in range(1, 7):
            for s in range(1, 5):
                for mode, clips in [("train", 4), ("val", 1), ("test", 1), ("test", 3)]:
                    idx = data.sample_indices(nf, L, s, mode, num_clips=clips, rng=rng, start_index=start_index)
                    first, last = start_index, start_index + nf - 1
                    assert idx.shape == (clips, L), (nf, L, s, mode)
                    assert idx.min() >= first and idx.max() <= last, (nf, L, s, mode, idx)
                    for clip in idx:
                        d = np.diff(clip)
                        steps = set(d[d > 0].tolist())
                        assert len(steps) <= 1 and all(1 <= x <= s for x in steps), (nf, L, s, clip)
                        if (L - 1) * s + 1 <= nf:    # fits: the exact stride, no repeats
                            assert (d == s).all(), (nf, L, s, clip)
                        elif L <= nf:                # shrunk to the largest stride that fits, no repeats
                            (step,) = steps or {1}
                            assert (d > 0).all() and (L - 1) * (step + 1) + 1 > nf, (nf, L, s, clip)
                        else:                        # every frame, then repeats of the last
                            assert clip.tolist() == list(range(first, last + 1)) + [last] * (L - nf)
                    if mode == "test" and clips > 1:  # from the first frame to the last
                        assert idx[0, 0] == first and idx[-1, -1] == last, (nf, L, s, idx)


# ---- list files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("split,count", [("train", 9537), ("val", 3783)])
def test_real_ucf101_split1_lists(split, count):
    path = UCF101_LISTS / f"ucf101_{split}_split1_list.txt"
    if not UCF101_LISTS.is_dir():
        pytest.skip(f"{UCF101_LISTS} absent")
    videos = data.read_list(path, num_classes=101)
    assert len(videos) == count
    assert sorted({v.label for v in videos}) == list(range(101))
    assert all(v.num_frames >= 1 for v in videos)
    assert all(os.path.dirname(v.path).startswith(str(UCF101_LISTS)) for v in videos)  # root = the list's folder
    ds = data.VideoFrameDataset(path, mode="val")  # construction decodes nothing
    assert len(ds) == count and ds.num_classes == 101


def test_list_parsing_spaces_comments_root(tmp_path):
    listdir = tmp_path / "lists"
    listdir.mkdir()
    absolute = tmp_path / "elsewhere" / "abs video"
    path = write_list(listdir / "list.txt", [
        "# a comment line",
        "",
        "my video/with spaces 10 2",
        "   ",
        "   # indented comment",
        "dir#1 3 0",                   # '#' inside a path is not a comment
        f"{absolute} 5 1",
        "plain 7 3   ",
    ])
    videos = data.read_list(path)
    assert [(v.num_frames, v.label, v.line) for v in videos] == [(10, 2, 3), (3, 0, 6), (5, 1, 7), (7, 3, 8)]
    assert videos[0].path == os.path.join(str(listdir), "my video", "with spaces")
    assert videos[1].path == os.path.join(str(listdir), "dir#1")
    assert videos[2].path == str(absolute)  # absolute paths ignore the root
    other = tmp_path / "root"
    videos = data.read_list(path, root=other)
    assert videos[0].path == os.path.join(str(other), "my video", "with spaces")
    assert videos[2].path == str(absolute)
    ds = data.VideoFrameDataset(path, root=other, mode="val", **SMALL)
    assert len(ds) == 4 and ds.num_classes == 4 and ds.videos[3].path == os.path.join(str(other), "plain")
    assert data.VideoFrameDataset(path, num_classes=10, mode="val", **SMALL).num_classes == 10


def test_dataset_reads_folder_with_spaces_and_start_index_0(synth, tmp_path):
    root, train, _ = synth
    src = root / "train" / "video_0001"
    copy_video(src, tmp_path / "a video dir", tmpl="{:d}.jpg", dst_start=0)
    path = write_list(tmp_path / "list.txt", [f"a video dir {NUM_FRAMES} 1"])
    ds = data.VideoFrameDataset(path, image_tmpl="{:d}.jpg", start_index=0, mode="val", t_length=NUM_FRAMES,
                                t_stride=1, new_size=40, crop_size=40)
    clip, label, _ = ds[0]
    ref = frames_of(src, range(1, NUM_FRAMES + 1))  # frame 0 of the copy is frame 1 of the source
    assert label == 1 and torch.equal(clip, ref[..., 4:44])  # centre crop of the 48 wide frames


# ---- clips ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["train", "val"])
def test_clip_shape_dtype_label(synth, mode):
    root, train, val = synth
    ds = data.VideoFrameDataset(train if mode == "train" else val, mode=mode, **SMALL)
    assert len(ds) == 4 and ds.num_classes == 4
    for i in range(len(ds)):
        clip, label, _ = ds[i]
        assert clip.shape == (3, 4, 32, 32) and clip.dtype == torch.uint8
        assert_interleaved(clip)
        assert type(label) is int and label == ds.videos[i].label == i % 4


def test_test_mode_views(synth):
    root, _, val = synth
    ds = data.VideoFrameDataset(val, mode="test", num_clips=2, num_crops=3, **SMALL)
    clip, label, _ = ds[1]
    assert clip.shape == (6, 3, 4, 32, 32) and clip.dtype == torch.uint8 and type(label) is int and label == 1
    assert_interleaved(clip)
    assert not torch.equal(clip[0], clip[1]) and not torch.equal(clip[0], clip[3])  # crops and clips differ


def test_val_clip_content_exact(synth):
    """crop_size == new_size == short side: nothing is resized, so a clip is an exact crop of decoded frames."""
    root, _, val = synth
    clip, _, _ = data.VideoFrameDataset(val, mode="val", t_length=4, t_stride=2, new_size=40, crop_size=40)[2]
    idx = data.sample_indices(NUM_FRAMES, 4, 2, "val")[0]
    assert torch.equal(clip, frames_of(root / "val" / "video_0002", idx)[..., 4:44])  # centre of 48 wide


@pytest.mark.parametrize("num_clips,t_length,t_stride", [
    (2, 3, 2),  # clips 1,3,5 | 6,8,10: disjoint
    (3, 4, 2),  # clips 1,3,5,7 | 3,5,7,9 | 4,6,8,10: they share frames
    (2, 4, 2),  # clips 1,3,5,7 | 4,6,8,10: interleave without sharing a frame (decode order != clip order)
])
def test_test_views_content_exact(synth, num_clips, t_length, t_stride):
    """Views are clip-major (view = clip * num_crops + crop); three crops along the long side."""
    root, _, val = synth
    video = root / "val" / "video_0002"
    ds = data.VideoFrameDataset(val, mode="test", num_clips=num_clips, num_crops=3, t_length=t_length,
                                t_stride=t_stride, new_size=40, crop_size=40)
    clip, _, _ = ds[2]
    idx = data.sample_indices(NUM_FRAMES, t_length, t_stride, "test", num_clips=num_clips)
    assert idx[0, 0] == 1 and idx[-1, -1] == NUM_FRAMES
    assert clip.shape == (num_clips * 3, 3, t_length, 40, 40)
    for c in range(num_clips):
        ref = frames_of(video, idx[c])
        for k, x0 in enumerate((0, 4, 8)):  # start, centre, end of the 48 wide frames
            assert torch.equal(clip[c * 3 + k], ref[..., x0:x0 + 40]), (c, k)


def test_train_clip_is_a_strided_crop_maybe_flipped(synth):
    root, train, _ = synth
    video = root / "train" / "video_0003"
    ds = data.VideoFrameDataset(train, mode="train", t_length=4, t_stride=2, new_size=40, crop_size=40)
    full = frames_of(video, range(1, NUM_FRAMES + 1))
    windows = 0
    for epoch in range(6):
        ds.set_epoch(epoch)
        clip, _, info = ds[3]
        if torch.equal(info["box"], torch.tensor(data.IDENTITY_BOX)):
            continue  # resampled in the loader (test_protocols.py checks those pixels)
        windows += 1
        matches = [(start, x0, flip) for start in range(NUM_FRAMES - 6) for x0 in range(W - 40 + 1)
                   for flip in (False, True)
                   if torch.equal(clip, (lambda r: r.flip(-1) if flip else r)(full[:, start:start + 7:2, :, x0:x0 + 40]))]
        assert len(matches) == 1, (epoch, matches)
    assert windows >= 3


def test_short_and_one_frame_videos_through_dataset(synth, tmp_path):
    root, _, _ = synth
    copy_video(root / "val" / "video_0000", tmp_path / "one", count=1)   # only img_00001.jpg on disk
    copy_video(root / "val" / "video_0001", tmp_path / "three", count=3)
    path = write_list(tmp_path / "list.txt", ["one 1 0", "three 3 1"])
    for mode, kw in [("train", {}), ("val", {}), ("test", dict(num_clips=2, num_crops=3))]:
        ds = data.VideoFrameDataset(path, mode=mode, **SMALL, **kw)
        one, _, _ = ds[0]
        three, _, _ = ds[1]
        assert one.shape[-4:] == three.shape[-4:] == (3, 4, 32, 32)
        assert (one == one[..., :1, :, :]).all()  # every time step is the one frame
        # 3 frames for 4: stride 1, then the last frame repeated
        assert torch.equal(three[..., 3, :, :], three[..., 2, :, :])
        assert not torch.equal(three[..., 0, :, :], three[..., 1, :, :])


# ---- reproducibility -----------------------------------------------------------------------------
def test_same_seed_epoch_index_same_clip_other_epoch_differs(synth):
    root, train, _ = synth
    ds = data.VideoFrameDataset(train, mode="train", seed=3, **SMALL)
    ds.set_epoch(5)
    a, _, _ = ds[2]
    # the global RNGs neither influence a clip nor are touched by it
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    states = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    b, _, _ = ds[2]
    assert random.getstate() == states[0] and np.array_equal(np.random.get_state()[1], states[1])
    assert torch.equal(torch.get_rng_state(), states[2])
    fresh = data.VideoFrameDataset(train, mode="train", seed=3, **SMALL)
    fresh.set_epoch(5)
    c, _, _ = fresh[2]
    assert torch.equal(a, b) and torch.equal(a, c)
    ds.set_epoch(6)
    assert not torch.equal(ds[2][0], a)
    other_seed = data.VideoFrameDataset(train, mode="train", seed=4, **SMALL)
    other_seed.set_epoch(5)
    assert not torch.equal(other_seed[2][0], a)


def test_dataloader_workers_0_and_2_identical(synth):
    # Per epoch, as train.py does: set_epoch, then a fresh loader (workers only see the epoch they start with).
    root, train, _ = synth
    batches = {}
    for workers in (0, 2):
        ds = data.VideoFrameDataset(train, mode="train", seed=1, **SMALL)
        for epoch in (2, 3):
            ds.set_epoch(epoch)
            sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
            loader = torch.utils.data.DataLoader(ds, batch_size=2, sampler=sampler, num_workers=workers,
                                                 collate_fn=data.collate)
            batches[workers, epoch] = list(loader)
    assert len(batches[0, 2]) == 2
    for epoch in (2, 3):
        for (x0, y0, i0), (x2, y2, i2) in zip(batches[0, epoch], batches[2, epoch]):
            assert x0.shape == (2, 3, 4, 32, 32) and torch.equal(x0, x2) and torch.equal(y0, y2)
            assert torch.equal(i0["box"], i2["box"])  # the device crop too
    for workers in (0, 2):  # same sampler order, another epoch: other clips
        assert not torch.equal(torch.cat([x for x, *_ in batches[workers, 2]]), torch.cat([x for x, *_ in batches[workers, 3]]))
    # and equal to the samples read directly in the sampler's order
    order = list(torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0)))
    direct = torch.stack([ds[i][0] for i in order])
    assert torch.equal(torch.cat([x for x, *_ in batches[2, 3]]), direct)


def test_flip_mirrors_along_width(synth):
    root, train, _ = synth
    flipping = data.VideoFrameDataset(train, mode="train", flip=True, **SMALL)
    plain = data.VideoFrameDataset(train, mode="train", flip=False, **SMALL)
    same = mirrored = 0
    for epoch in range(3):
        flipping.set_epoch(epoch), plain.set_epoch(epoch)
        for i in range(len(plain)):
            a, b = flipping[i][0], plain[i][0]
            if torch.equal(a, b):
                same += 1
            else:
                assert torch.equal(a, b.flip(-1)), (epoch, i)
                mirrored += 1
    assert same >= 1 and mirrored >= 1


# ---- collate, normalize (crop_resize: test_protocols.py) --------------------------------------
def test_collate_stacks_in_channels_last(synth):
    root, train, val = synth
    ds = data.VideoFrameDataset(val, mode="test", num_clips=2, num_crops=3, **SMALL)
    items = [ds[i] for i in range(3)]
    x, y, _ = data.collate(items)
    assert x.shape == (3, 6, 3, 4, 32, 32) and x.dtype == torch.uint8
    assert torch.equal(x, torch.stack([c for c, *_ in items]))
    assert y.dtype == torch.int64 and y.tolist() == [0, 1, 2]
    assert x.flatten(0, 1).is_contiguous(memory_format=torch.channels_last_3d)

    ds = data.VideoFrameDataset(train, mode="train", **SMALL)
    items = [ds[i] for i in range(4)]
    x, y, info = data.collate(items)
    assert info["box"].shape == (4, 4) and info["bad"] == [""] * 4
    assert x.shape == (4, 3, 4, 32, 32) and torch.equal(x, torch.stack([c for c, *_ in items]))
    assert x.is_contiguous(memory_format=torch.channels_last_3d) and y.tolist() == [0, 1, 2, 3]
    assert data.normalize(x).is_contiguous(memory_format=torch.channels_last_3d)  # documented: keeps the format


def test_normalize():
    x = torch.randint(0, 256, (2, 3, 4, 5, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    mean = torch.tensor(data.MEAN).view(3, 1, 1, 1)
    std = torch.tensor(data.STD).view(3, 1, 1, 1)
    out = data.normalize(x)
    assert out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out, (x / 255 - mean) / std, rtol=1e-5, atol=1e-5)
    assert data.normalize(x, dtype=torch.float64).dtype == torch.float64
    torch.testing.assert_close(data.normalize(x[0]), out[0])  # one clip (3, T, H, W) too
    kinetics = data.normalize(x, (0.45,) * 3, (0.225,) * 3)  # PySlowFast / pytorchvideo weights' statistics
    torch.testing.assert_close(kinetics, (x / 255 - 0.45) / 0.225, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        data.normalize(x.float())
    with pytest.raises(ValueError):
        data.normalize(torch.zeros(2, 4, 4, 5, 6, dtype=torch.uint8))  # 4 channels
    with pytest.raises(ValueError):
        data.normalize(x.movedim(1, -1))  # channels last dim, not dim -4


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad,what", [
    ("lonely", "expected"),                 # one field
    ("two fields", "expected"),
    ("vid x 0", "integers"),
    ("vid 3 1.5", "integers"),
    ("vid 0 1", "num_frames must be >= 1"),
    ("vid -2 1", "num_frames must be >= 1"),
    ("vid 3 4", r"label 4 outside \[0, 4\)"),
    ("vid 3 -1", "label -1 outside"),
])
def test_bad_line_names_list_and_line(tmp_path, bad, what):
    path = write_list(tmp_path / "list.txt", ["# header", "good 3 0", "", bad, "good2 3 1"])
    with pytest.raises(ValueError, match=re.escape(f"{path}:4: ") + ".*" + what):
        data.VideoFrameDataset(path, num_classes=4, mode="val", **SMALL)


def test_empty_list_and_bad_options(tmp_path):
    path = write_list(tmp_path / "list.txt", ["# only a comment", ""])
    with pytest.raises(ValueError, match=re.escape(str(path))):
        data.VideoFrameDataset(path)
    path = write_list(tmp_path / "ok.txt", ["good 3 0"])
    for tmpl in ("img.jpg", "img_{}_{}.jpg", "img_{name}.jpg", "img_{:s}.jpg", "img_{.jpg"):
        with pytest.raises(ValueError, match="image_tmpl"):
            data.VideoFrameDataset(path, image_tmpl=tmpl)
    with pytest.raises(ValueError, match="mode"):
        data.VideoFrameDataset(path, mode="eval")
    with pytest.raises(ValueError):
        data.VideoFrameDataset(path, mode="val", num_clips=2)
    with pytest.raises(ValueError):
        data.VideoFrameDataset(path, mode="test", num_crops=2)
    with pytest.raises(ValueError):
        data.VideoFrameDataset(path, new_size=100, crop_size=112)


def test_missing_frame_names_frame_video_and_line(synth, tmp_path):
    root, _, _ = synth
    video = copy_video(root / "val" / "video_0000", tmp_path / "vid")
    missing = video / "img_00005.jpg"
    missing.unlink()
    path = write_list(tmp_path / "list.txt", ["# header", f"vid {NUM_FRAMES} 0"])
    ds = data.VideoFrameDataset(path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32)
    with pytest.raises(data.BadVideo) as err:
        ds[0]
    message = str(err.value)
    assert str(missing) in message and str(video) in message and f"{path}:2" in message


@pytest.mark.parametrize("garbage", [os.urandom(200), b"\xff\xd8\xff\xe0" + bytes(range(256))])
def test_corrupt_frame_names_frame_and_line(synth, tmp_path, garbage):
    root, _, _ = synth
    video = copy_video(root / "val" / "video_0000", tmp_path / "vid")
    bad = video / "img_00003.jpg"
    bad.write_bytes(garbage)
    path = write_list(tmp_path / "list.txt", [f"vid {NUM_FRAMES} 0"])
    ds = data.VideoFrameDataset(path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32)
    with pytest.raises(data.BadVideo) as err:
        ds[0]
    message = str(err.value)
    assert str(bad) in message and str(video) in message and f"{path}:1" in message


def test_frame_size_change_names_frame_and_line(synth, tmp_path):
    root, _, _ = synth
    video = copy_video(root / "val" / "video_0000", tmp_path / "vid")
    odd = video / "img_00004.jpg"
    Image.new("RGB", (W + 2, H)).save(odd)
    path = write_list(tmp_path / "list.txt", [f"vid {NUM_FRAMES} 0"])
    ds = data.VideoFrameDataset(path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32)
    with pytest.raises(data.BadVideo, match=re.escape(f"{path}:1: {odd}")):
        ds[0]


def test_pillow_fallback_decoder(synth, tmp_path, monkeypatch):
    """Without TorchCodec, data.py decodes with Pillow: same clips (up to decoder rounding), same errors."""
    root, _, val = synth
    ds = data.VideoFrameDataset(val, mode="val", **SMALL)
    fast = ds[1][0]
    frame = data.decode_frame(str(root / "val" / "video_0001" / "img_00001.jpg"))
    gray = tmp_path / "gray.jpg"
    Image.fromarray(np.full((12, 16), 77, np.uint8)).save(gray)
    assert data.decode_frame(str(gray)).shape == (12, 16, 3)

    monkeypatch.setattr(data, "DECODER", "pil")  # what data.py picks when TorchCodec is missing
    slow = ds[1][0]
    assert slow.shape == fast.shape and slow.dtype == torch.uint8
    assert_interleaved(slow)
    assert (slow.int() - fast.int()).abs().max() <= 2
    pil = data.decode_frame(str(root / "val" / "video_0001" / "img_00001.jpg"))
    assert pil.shape == frame.shape == (H, W, 3) and pil.dtype == torch.uint8
    assert (pil.int() - frame.int()).abs().max() <= 2
    assert data.decode_frame(str(gray)).shape == (12, 16, 3)  # grayscale JPEG -> RGB

    corrupt = copy_video(root / "val" / "video_0000", tmp_path / "corrupt")
    (corrupt / "img_00002.jpg").write_bytes(os.urandom(200))
    holed = copy_video(root / "val" / "video_0000", tmp_path / "holed")
    (holed / "img_00004.jpg").unlink()
    path = write_list(tmp_path / "list.txt", [f"corrupt {NUM_FRAMES} 0", f"holed {NUM_FRAMES} 1"])
    ds = data.VideoFrameDataset(path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32)
    with pytest.raises(data.BadVideo, match=re.escape(f"{path}:1: {corrupt / 'img_00002.jpg'}")):
        ds[0]
    with pytest.raises(data.BadVideo, match=re.escape(f"{path}:2: {holed / 'img_00004.jpg'}")):
        ds[1]


# ---- `python data.py` commands -----------------------------------------------------------------
def test_cli_synth(tmp_path):
    out = tmp_path / "synth"
    [(rc, stdout, stderr)] = run_cli(("synth", out, "--classes", 4, "--videos", 8, "--frames", 6, "--size", "48x40"))
    assert rc == 0, stderr
    for split in ("train", "val"):
        lines = (out / f"{split}.txt").read_text().splitlines()
        assert len(lines) == 8
        labels = []
        for line in lines:
            rel, n, label = line.rsplit(maxsplit=2)
            assert int(n) == 6 and not os.path.isabs(rel)
            labels.append(int(label))
            names = sorted(os.listdir(out / rel))
            assert names == [f"img_{i:05d}.jpg" for i in range(1, 7)]
            with Image.open(out / rel / names[-1]) as img:
                assert img.format == "JPEG" and img.size == (48, 40)
        assert sorted(labels) == [0, 0, 1, 1, 2, 2, 3, 3]
    ds = data.VideoFrameDataset(out / "train.txt", mode="val", t_length=4, t_stride=1, new_size=40, crop_size=32)
    clip, _, _ = ds[0]
    assert clip.shape == (3, 4, 32, 32) and not torch.equal(clip[:, 0], clip[:, 1])  # frames move


def fake_ucf101(tmp_path):
    """A tiny UCF101: official split files for 3 classes, frame folders counted by the test."""
    frames, splits = tmp_path / "ucf" / "RGB", tmp_path / "ucf_splits"
    splits.mkdir()
    write_list(splits / "classInd.txt", ["1 ApplyEyeMakeup", "2 Biking", "3 HandstandPushups", ""])
    write_list(splits / "trainlist01.txt", [
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1",
        "HandStandPushups/v_HandStandPushups_g08_c01.avi 3",  # UCF101 spells this class two ways
        "Biking/v_Biking_g08_c01.avi 2",
        "Biking/v_Biking_g09_c01.avi 2",                      # no frames: warned about, left out
    ])
    write_list(splits / "testlist01.txt", ["ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi", "Biking/v_Biking_g01_c01.avi"])
    write_list(splits / "trainlist02.txt", ["Biking/v_Biking_g01_c01.avi 2"])  # another split: ignored
    write_frames(frames / "v_ApplyEyeMakeup_g08_c01", 3)
    write_frames(frames / "HandstandPushups" / "v_HandStandPushups_g08_c01", 5)  # per-class layout works too
    write_frames(frames / "v_Biking_g08_c01", 4)
    write_frames(frames / "v_ApplyEyeMakeup_g01_c01", 6)
    write_frames(frames / "v_Biking_g01_c01", 2)
    write_frames(frames / "v_Biking_g01_c01", 1, start=4)  # a gap after frame 2: 2 usable frames
    return frames, splits


def fake_hmdb51(tmp_path):
    """A tiny HMDB51: '<class>_test_split1.txt' files ('<video>.avi <0|1|2>', trailing spaces as in the
    real ones) for 3 classes, one flat folder of frame folders."""
    frames, splits = tmp_path / "hmdb" / "frames", tmp_path / "hmdb_splits"
    splits.mkdir()
    # class names sort brush_hair < sword < sword_exercise, but their FILES sort
    # sword_exercise_test_split1.txt < sword_test_split1.txt: labels must follow the class names
    write_list(splits / "brush_hair_test_split1.txt", ["Brushing_hair_1.avi 1 ", "Brushing_hair_2.avi 2 ",
                                                        "Brushing_hair_3.avi 0 "])
    write_list(splits / "sword_test_split1.txt", ["#20_sword_fight.avi 1 ", "sword_2.avi 2 "])
    write_list(splits / "sword_exercise_test_split1.txt", ["sword_ex_1.avi 2 ", ""])
    write_list(splits / "sword_test_split2.txt", ["other_split.avi 1 "])
    for name, n in [("Brushing_hair_1", 4), ("Brushing_hair_2", 3), ("Brushing_hair_3", 5), ("#20_sword_fight", 6),
                    ("sword_2", 2), ("sword_ex_1", 7), ("other_split", 3)]:
        write_frames(frames / name, n)
    return frames, splits


def test_cli_lists_ucf101_and_hmdb51(tmp_path):
    ucf_frames, ucf_splits = fake_ucf101(tmp_path)
    hmdb_frames, hmdb_splits = fake_hmdb51(tmp_path)
    ucf, hmdb = run_cli(("lists", ucf_frames, "--ucf101", ucf_splits, "--split", 1),
                        ("lists", hmdb_frames, "--hmdb51", hmdb_splits, "--split", 1, "--out", hmdb_frames))

    assert ucf[0] == 0, ucf[2]
    assert "v_Biking_g09_c01" in ucf[2]  # the video without frames is named
    out = tmp_path / "ucf"  # default: FRAMES_DIR's parent, the lists' default root
    assert sorted(p.name for p in out.glob("*.txt")) == ["ucf101_classes.txt", "ucf101_train_split1_list.txt",
                                                         "ucf101_val_split1_list.txt"]
    train = (out / "ucf101_train_split1_list.txt").read_text().splitlines()
    val = (out / "ucf101_val_split1_list.txt").read_text().splitlines()
    assert train == ["RGB/v_ApplyEyeMakeup_g08_c01 3 0", "RGB/HandstandPushups/v_HandStandPushups_g08_c01 5 2",
                     "RGB/v_Biking_g08_c01 4 1"]  # classInd is 1-based, labels 0-based
    assert val == ["RGB/v_ApplyEyeMakeup_g01_c01 6 0", "RGB/v_Biking_g01_c01 2 1"]
    videos = data.read_list(out / "ucf101_train_split1_list.txt", num_classes=3)
    assert all(os.path.isdir(v.path) for v in videos)

    assert hmdb[0] == 0, hmdb[2]
    train = (hmdb_frames / "hmdb51_train_split1_list.txt").read_text().splitlines()
    val = (hmdb_frames / "hmdb51_val_split1_list.txt").read_text().splitlines()
    # '1' train, '2' test, '0' unused; split 2 ignored. A '#' name must not read as a comment:
    assert sorted(train) == sorted(["Brushing_hair_1 4 0", "./#20_sword_fight 6 1"])
    assert sorted(val) == sorted(["Brushing_hair_2 3 0", "sword_2 2 1", "sword_ex_1 7 2"])
    videos = data.read_list(hmdb_frames / "hmdb51_train_split1_list.txt", num_classes=3)
    assert len(videos) == 2 and all(os.path.isdir(v.path) for v in videos)


def test_cli_check(synth, tmp_path):
    root, train, _ = synth
    src = root / "train" / "video_0000"
    copy_video(src, tmp_path / "good")
    copy_video(src, tmp_path / "short", count=6)
    copy_video(src, tmp_path / "corrupt")
    (tmp_path / "corrupt" / f"img_{NUM_FRAMES:05d}.jpg").write_bytes(os.urandom(300))  # the last frame
    path = write_list(tmp_path / "list.txt", [
        f"good {NUM_FRAMES} 0",          # 1: fine
        f"nowhere {NUM_FRAMES} 1",       # 2: missing folder
        f"short {NUM_FRAMES} 2",         # 3: 6 frames on disk
        "# comment",
        f"corrupt {NUM_FRAMES} 3",       # 5: unreadable frame
        f"good {NUM_FRAMES} 9",          # 6: bad label
        "good x 1",                      # 7: malformed
        f"good {NUM_FRAMES} 1",          # 8: fine
    ])
    good, bad = run_cli(("check", train), ("check", path, "--num_classes", 4))

    assert good[0] == 0 and "OK" in good[1], good
    assert f"{len(data.read_list(train))} videos" in good[1]

    rc, out, err = bad
    assert rc == 1, out + err
    for line, what in [(2, "missing folder"), (3, "6 on disk"), (5, "unreadable frame"), (6, "label 9"), (7, "integers")]:
        assert re.search(re.escape(f"{path}:{line}: ") + ".*" + what, out), (line, out)
    for line in (1, 4, 8):
        assert f"{path}:{line}:" not in out
    assert str(tmp_path / "nowhere") in out
    assert str(tmp_path / "corrupt" / f"img_{NUM_FRAMES:05d}.jpg") in out
    assert str(tmp_path / "short" / "img_00007.jpg") in out  # the first missing frame


def test_cli_extract(tmp_path):
    av = pytest.importorskip("av")
    videos, frames = tmp_path / "videos", tmp_path / "frames"
    (videos / "classA").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, n in [("classA/clip one.avi", 8), ("two.avi", 5)]:
        with av.open(str(videos / name), "w") as container:
            stream = container.add_stream("mpeg4", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            for _ in range(n):
                img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
                container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
            container.mux(stream.encode())  # flush the encoder
    (videos / "notes.txt").write_text("not a video")
    [(rc, out, err)] = run_cli(("extract", videos, frames, "--short-side", 32, "-j", 2))
    assert rc == 0, out + err
    for rel, n in [("classA/clip one", 8), ("two", 5)]:  # same relative path, without the extension
        names = sorted(os.listdir(frames / rel))
        assert names == [f"img_{i:05d}.jpg" for i in range(1, n + 1)], rel
        for name in (names[0], names[-1]):
            with Image.open(frames / rel / name) as img:
                assert img.format == "JPEG" and img.size == (43, 32)  # 64x48 -> short side 32
    assert sorted(os.listdir(frames)) == ["classA", "two"]  # no .part folders, nothing for notes.txt
    assert os.listdir(frames / "classA") == ["clip one"]


def test_extract_without_pyav_says_how_to_install(tmp_path, monkeypatch):
    real = prepare.importlib.util.find_spec
    monkeypatch.setattr(prepare.importlib.util, "find_spec",
                        lambda name, *a: None if name == "av" else real(name, *a))
    with pytest.raises(SystemExit, match="pip install av"):
        prepare.extract(tmp_path, tmp_path / "frames")
    assert not (tmp_path / "frames").exists()


# ============================== data.py: regression ===================================================

def test_multi_clip_test_views_hold_their_own_frames(tmp_path):
    # Frame k has pixel value k. 10 test clips of 16x4 over 214 frames interleave without sharing frames:
    # each view must still hold exactly its clip's frames, in order (decoding each frame once must not mix them).
    os.makedirs(tmp_path / "v")
    for k in range(1, 215):
        Image.fromarray(np.full((40, 48, 3), k, np.uint8)).save(tmp_path / "v" / f"img_{k:05d}.png")
    (tmp_path / "l.txt").write_text("v 214 0\n")
    ds = data.VideoFrameDataset(tmp_path / "l.txt", image_tmpl="img_{:05d}.png", mode="test", num_clips=10,
                                num_crops=3, t_length=16, t_stride=4, new_size=40, crop_size=40)
    clip, _, _ = ds[0]
    got = clip[:, 0, :, 20, 20].numpy().reshape(10, 3, 16)  # (clips, crops, T)
    want = data.sample_indices(214, 16, 4, "test", 10)
    assert (got == want[:, None, :]).all()


# ============================== train.py ==============================================================

REPO = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
# A tiny recipe: 4 frames, 32 px crops, the 4-block resnet10_3d. Seconds per epoch on 2 cores.
TINY = ["--arch", "resnet10_3d", "--t_length", "4", "--t_stride", "2", "--new_size", "36", "--crop_size", "32",
        "-b", "4", "--lr", "0.01", "--lr_steps", "2", "--dro", "0", "-j", "0", "-p", "1", "-ef", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    train_list, val_list = prepare.make_synth(out, classes=4, videos=12, frames=10, size=(48, 40))
    # An odd-length val list, so a 2-process split is uneven (the case where padded samplers go wrong).
    lines = Path(val_list).read_text().splitlines()[:7]
    odd = out / "val7.txt"
    odd.write_text("\n".join(lines) + "\n")
    return str(train_list), str(odd)


def run_main(argv):
    return train.main(train.parse_args(argv))


def run_train_cli(argv, **kw):
    return subprocess.run([sys.executable, str(REPO / "train.py"), *argv], capture_output=True, text=True,
                          env=ENV, cwd=REPO, **kw)


def acc_line(text):
    m = re.search(r"^ \* Acc@1 ([\d.]+) Acc@5 ([\d.]+)$", text, re.M)
    assert m, text
    return float(m.group(1)), float(m.group(2))


def load_weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_demo_learns_motion_and_evaluate_reproduces_best(tmp_path, capsys):
    # Classes differ only in the direction of motion: a single frame carries no label information.
    out = str(tmp_path)
    best = run_main(["demo", "--output_root", out, "--device", "cpu"])
    assert best >= 90.0, f"demo reached only {best:.1f}% (chance 25%)"
    # It ends with the per-class table (the directions' names) and leaves the pictures in the run folder.
    text = capsys.readouterr().out.strip().splitlines()
    start = text.index(next(line for line in text if line.startswith("class ")))
    assert "mean class accuracy" in text[start - 1] and len(text) == start + 5  # the table ends the output
    assert {row.split()[0] for row in text[start + 1:]} == {"right", "down", "left", "up"}
    run_dir = tmp_path / train.run_dir_name(train.parse_args(["demo"]))
    for png, min_size in (("curves.png", (900, 300)), ("confusion_1x1.png", (500, 500))):
        with Image.open(run_dir / png) as im:
            assert im.size[0] >= min_size[0] and im.size[1] >= min_size[1], (png, im.size)
    assert torch.load(run_dir / "checkpoint.pth", weights_only=False)["class_names"] == ["right", "down", "left", "up"]
    logs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert [log["epoch"] for log in logs] == list(range(len(logs)))
    for key in ("epoch", "lr", "train_loss", "train_top1", "val_top1", "val_top5", "epoch_time"):
        assert key in logs[-1]
    assert max(log["val_top1"] for log in logs) == pytest.approx(best)
    capsys.readouterr()
    top1, _ = run_main(["demo", "--output_root", out, "--device", "cpu", "--evaluate", "--resume", str(run_dir / "model_best.pth")])
    assert acc_line(capsys.readouterr().out)[0] == pytest.approx(best, abs=1e-3)
    assert top1 == pytest.approx(best)


@pytest.mark.parametrize("workers, schedule", [("0", []), ("2", ["-b", "2", "--iter_size", "2"])])
def test_resume_is_exact(tiny_data, tmp_path, workers, schedule):
    # 3 epochs in one run == 2 epochs, then --resume for the 3rd: same weights, bit for bit.
    args = ["ucf101", *tiny_data, *TINY, "-j", workers, "--dro", "0.5", "--warmup", "0.5", *schedule]
    run_main([*args, "--epochs", "3", "--output_root", str(tmp_path / "a")])
    run_main([*args, "--epochs", "2", "--output_root", str(tmp_path / "b")])
    name = train.run_dir_name(train.parse_args(args))
    run_main([*args, "--epochs", "3", "--output_root", str(tmp_path / "b"), "--resume", "auto"])
    a, b = (load_weights(tmp_path / r / name / "checkpoint.pth") for r in "ab")
    assert_same_weights(a, b)
    assert torch.load(tmp_path / "b" / name / "checkpoint.pth", weights_only=False)["epoch"] == 3


def test_original_launch_command_parses(tiny_data, tmp_path):
    # The original project's command verbatim; only sizes shrunk and a local 2D ResNet for --pretrained.
    r18 = tmp_path / "r18.pth"
    torch.save(torchvision.models.resnet18().state_dict(), r18)
    argv = ("ucf101 {} {} --arch resnet18_3d --dro 0.2 --mode 3D --t_length 4 --t_stride 2 --pretrained {} "
            "--epochs 1 --batch-size 4 --lr 0.001 --lr_steps 40 80 90 --workers 0 --image_tmpl img_{{:05d}}.jpg "
            "--new_size 36 --crop_size 32 --device cpu --output_root {}").format(*tiny_data, r18, tmp_path).split()
    args = train.parse_args(argv)
    assert (args.dropout, args.t_length, args.lr_steps, args.pretrained) == (0.2, 4, [40, 80, 90], str(r18))
    assert train.run_dir_name(args) == "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2"
    assert train.parse_args(["ucf101", "a", "b", "--pretrained"]).pretrained == "imagenet"
    train.main(args)
    ckpt = torch.load(tmp_path / "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2" / "checkpoint.pth", weights_only=False)
    assert ckpt["args"]["arch"] == "resnet18_3d" and ckpt["model"]["fc.weight"].shape == (101, 512)
    assert not any(k.startswith("module.") for k in ckpt["model"])


def test_ddp_trains_and_evaluates_exactly(tiny_data, tmp_path):
    # torchrun with 2 CPU processes (gloo); 7 val videos split 4 + 3 must give the single-process numbers.
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(REPO / "train.py")]
    common = ["ucf101", *tiny_data, *TINY, "--epochs", "1"]
    r = subprocess.run([*torchrun, *common, "--ddp", "-b", "2", "--iter_size", "2", "--lr_policy", "cosine",
                        "--output_root", str(tmp_path / "ddp")],
                       capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 process(es)" in r.stdout and r.stdout.count("run folder") == 1  # only rank 0 prints
    ckpt = str(tmp_path / "ddp" / train.run_dir_name(train.parse_args(common)) / "checkpoint.pth")
    evaluate = [*common, "--evaluate", "--resume", ckpt, "--save_scores", "--test_clips", "2", "--test_crops", "3"]
    r2 = subprocess.run([*torchrun, *evaluate, "--ddp", "--output_root", str(tmp_path / "e2")],
                        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    assert r2.returncode == 0, r2.stderr[-3000:]
    r1 = run_train_cli([*evaluate, "--output_root", str(tmp_path / "e1")], timeout=300)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert acc_line(r2.stdout) == acc_line(r1.stdout)
    s1, s2 = (np.load(next((tmp_path / e).rglob("scores_2x3.npz"))) for e in ("e1", "e2"))
    assert s1["scores"].shape == (7, 101)
    assert (s1["labels"] == s2["labels"]).all() and abs(s1["scores"] - s2["scores"]).max() < 1e-5


def test_sigterm_saves_and_resumes_exactly(tiny_data, tmp_path):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "3", "--dro", "0.5"]
    name = train.run_dir_name(train.parse_args(args))
    # All three runs as subprocesses with one thread each: the same float summation order everywhere.
    assert run_train_cli([*args, "--output_root", str(tmp_path / "ref")]).returncode == 0
    # Interrupt a second run mid-training, then resume it from its checkpoint.
    p = subprocess.Popen([sys.executable, str(REPO / "train.py"), *args, "--output_root", str(tmp_path / "x")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    for line in p.stdout:  # wait until it is inside the second epoch's loop
        if line.startswith("epoch 1 ["):
            p.send_signal(signal.SIGTERM)
            break
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "saved" in out
    ckpt = torch.load(tmp_path / "x" / name / "checkpoint.pth", weights_only=False)
    assert ckpt["epoch"] == 1 and ckpt["iter"] >= 1
    r = run_train_cli([*args, "--output_root", str(tmp_path / "x"), "--resume", "auto"])
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stderr[-2000:]
    assert_same_weights(load_weights(tmp_path / "ref" / name / "checkpoint.pth"),
                        load_weights(tmp_path / "x" / name / "checkpoint.pth"))


def test_sigkill_leaves_a_loadable_checkpoint(tiny_data, tmp_path):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "50", "--output_root", str(tmp_path)]
    ckpt = tmp_path / train.run_dir_name(train.parse_args(args)) / "checkpoint.pth"
    p = subprocess.Popen([sys.executable, str(REPO / "train.py"), *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    try:
        deadline = time.time() + 120
        while not ckpt.exists() and time.time() < deadline:
            time.sleep(0.05)
        mtime = ckpt.stat().st_mtime
        while ckpt.stat().st_mtime == mtime and time.time() < deadline:  # kill as a later save is under way
            time.sleep(0.01)
        time.sleep(0.02)
    finally:
        p.kill()
        p.wait()
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] >= 2 and "fc.weight" in state["model"]


@pytest.mark.parametrize("extra, message", [
    (["--arch", "resnet_nope"], "resnet_nope"),
    (["--evaluate"], "--evaluate needs --resume"),
    (["--device", "cuda"], "--device cuda"),
    (["--resume", "/nonexistent/ckpt.pth"], "/nonexistent/ckpt.pth"),
    (["--amp", "fp16"], "--amp fp16"),
])
def test_user_errors_exit_2_with_one_line(tiny_data, tmp_path, capsys, extra, message):
    if extra[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *tiny_data, *TINY, "--output_root", str(tmp_path), *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("flag", ["--test_clips", "--eval-freq", "--print-freq", "--batch-size", "--t_length"])
def test_zero_counts_are_rejected_naming_the_flag(capsys, flag):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "a.txt", "b.txt", flag, "0"])
    assert e.value.code == 2 and f"{flag}: must be an integer >= 1" in capsys.readouterr().err


def test_missing_list_is_one_line_from_the_cli(tmp_path):
    r = run_train_cli(["ucf101", str(tmp_path / "missing.txt"), str(tmp_path / "val.txt"), "--device", "cpu"])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "missing.txt" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_list_line_is_one_line_from_the_cli(tiny_data, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(Path(tiny_data[0]).read_text().splitlines()[0] + "\nsome_video twelve 3\n")
    r = run_train_cli(["ucf101", str(bad), tiny_data[1], "--device", "cpu", "--data_root", str(Path(tiny_data[0]).parent)])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "bad.txt:2" in r.stderr, r.stderr


def test_nan_loss_stops_naming_epoch_and_iteration(tiny_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *tiny_data, *TINY, "--lr", "1e30", "--epochs", "2", "--output_root", str(tmp_path)])
    assert e.value.code == 1
    assert re.search(r"loss is (nan|inf) at epoch \d+ iteration \d+", capsys.readouterr().err)


# ============================== bench.py ==============================================================

BENCH_REPO = os.path.dirname(os.path.abspath(__file__))
# Frames of 48x32 with new_size 32 = the short side and crop 24: both the naive pipeline's short-side
# resize and data.py's crop resize are no-ops, and (48 - 24) and (32 - 24) are even, so the naive
# centre crop's round(d / 2) and data.py's d // 2 put the crop at the same pixel.
BENCH_TINY = {"size": (48, 32), "frames": 12, "videos": 2, "new_size": 32, "crop_size": 24,
              "t_length": 4, "t_stride": 2}
BENCH_CLIP_ARGS = ["--t_length", str(BENCH_TINY["t_length"]), "--t_stride", str(BENCH_TINY["t_stride"]),
                   "--new_size", str(BENCH_TINY["new_size"]), "--crop_size", str(BENCH_TINY["crop_size"])]


@pytest.fixture(scope="module")
def bench_frames(tmp_path_factory):
    """A tiny textured frame dataset (train.txt, val.txt), made once for this module."""
    out = tmp_path_factory.mktemp("bench_frames")
    prepare.make_synth(str(out), classes=2, videos=BENCH_TINY["videos"], frames=BENCH_TINY["frames"],
                    size=BENCH_TINY["size"], quality=95)
    return str(out)


def bench_main(argv, tmp_path, capsys, threads=None):
    """bench.main in this process with --json; returns (the JSON as written, stdout). fork_rng: the
    model/train steps seed torch's global RNG, which must not leak into other tests. threads=1 for the
    training steps: tiny convs gain nothing from 2 threads, and on a busy 2-core machine spinning
    OpenMP threads make them ~6x slower."""
    path = tmp_path / f"{argv[0]}.json"
    capsys.readouterr()  # drop anything printed before
    before = torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.set_num_threads(threads or before)
            returned = bench.main(argv + ["--json", str(path)])
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    with open(path) as f:
        written = json.load(f)
    assert f"wrote {path}" in out
    assert written.keys() == returned.keys()
    return written, out


def bench_row(out, name):
    """The numbers after `name` on the table line that starts with it."""
    lines = [line for line in out.splitlines() if line.startswith(name)]
    assert len(lines) == 1, (name, out)
    return lines[0][len(name):].split()


def bench_cli(argv, tmp_path):
    """python bench.py ARGV as a user runs it: (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(BENCH_REPO, "bench.py"), *argv], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


# ---- data --------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [0, 1])
def test_bench_data_tiny(workers, bench_frames, tmp_path, capsys):
    threads = torch.get_num_threads()
    res, out = bench_main(["data", "--frames", bench_frames, *BENCH_CLIP_ARGS, "--videos", "2",
                           "--iters", "4", "--repeats", "1", "--workers", str(workers)], tmp_path, capsys)
    assert torch.get_num_threads() == threads  # the per-core setting (1 thread) is undone afterwards
    decoders = data.available_decoders()
    names = ([bench.DECODE.format(d) for d in decoders] + [bench.NAIVE]
             + [bench.PIPELINE.format(d) for d in decoders] + [bench.BYTES])
    assert bench.DECODE.format("pil") in names  # the naive pipeline's decoder ...
    assert bench.DECODE.format(data.DECODER) in names and bench.OURS in names  # ... and data.py's own
    assert set(res["modes"]) == {"train", "val"}
    for mode, r in res["modes"].items():
        one = r["per_core"]
        assert list(one) == names, mode
        assert all(v > 0 and math.isfinite(v) for v in one.values()), (mode, one)
        best_a = max(v for k, v in one.items() if k.startswith("(a)"))
        assert r["c_over_b"] == pytest.approx(one[bench.OURS] / one[bench.NAIVE], rel=1e-12)
        assert r["c_over_best_a"] == pytest.approx(one[bench.OURS] / best_a, rel=1e-12)
        assert r["device_part_cpu_clips_s"] > 0
        assert r["videos"] == BENCH_TINY["videos"] and r["frame_size"] == list(BENCH_TINY["size"])
        assert r["jpeg_kb"] > 0
        if workers:
            assert list(r["workers"]) == names and all(v > 0 for v in r["workers"].values()), r["workers"]
        else:
            assert r["workers"] == {}

    assert res["settings"]["workers"] == workers and res["settings"]["frames"] == bench_frames
    # the printed tables: one per mode, every method's row with its 1-core figure, the targets line
    assert out.count(f"{workers} workers") == 2
    for mode in ("train", "val"):
        assert f"data: {mode} clips 3x4x24x24 (t_stride 2)" in out
    for name in names:
        rows = [line for line in out.splitlines() if line.startswith(name)]
        assert len(rows) == 2, (name, out)
        for line, mode in zip(rows, ("train", "val")):
            cells = line[len(name):].split()
            assert float(cells[0]) == pytest.approx(res["modes"][mode]["per_core"][name], abs=0.051)
            if workers:
                assert float(cells[1]) == pytest.approx(res["modes"][mode]["workers"][name], abs=0.051)
            else:
                assert cells[1] == "-"
            vs_b = res["modes"][mode]["per_core"][name] / res["modes"][mode]["per_core"][bench.NAIVE]
            assert float(cells[-2].rstrip("x")) == pytest.approx(vs_b, abs=0.006)
    targets = re.findall(r"targets, 1 core: \(c\)/\(b\) = ([\d.]+)x \(>= 5\), \(c\)/best \(a\) = ([\d.]+)x \(>= 0.8\)", out)
    assert len(targets) == 2, out
    for (cb, ca), mode in zip(targets, ("train", "val")):
        assert float(cb) == pytest.approx(res["modes"][mode]["c_over_b"], abs=0.006)
        assert float(ca) == pytest.approx(res["modes"][mode]["c_over_best_a"], abs=0.006)
    assert out.count("(c) device part") == 2


def test_bench_data_workers_time_each_method(bench_frames, tmp_path, monkeypatch, capsys):
    """The 'N workers' column runs the same work as the '1 core' column: for each (a) row the decoder
    alone, for (b) the naive clip with default_collate, for (c) data.py with that row's decoder and
    data.collate, for (d) the bytes mode with data.collate_encoded; all in batches of 8."""
    seen = []

    def spy(dataset, indices, workers, batch=8, collate=None):  # records what would be timed
        seen.append((dataset, batch, collate))
        return 1.0

    monkeypatch.setattr(bench, "rate_loader", spy)
    bench_main(["data", "--frames", bench_frames, *BENCH_CLIP_ARGS, "--iters", "2", "--repeats", "1",
                "--workers", "1"], tmp_path, capsys)
    decoders = data.available_decoders()
    expected = [(bench.DecodeOnly, d, None) for d in decoders]
    expected += [(bench.Naive, None, torch.utils.data.default_collate)]
    expected += [(bench.Pipeline, d, data.collate) for d in decoders]
    expected += [(data.VideoFrameDataset, None, data.collate_encoded)]
    assert len(seen) == 2 * len(expected)  # train and val
    for (dataset, batch, collate), (cls, dec, coll) in zip(seen, expected * 2):
        assert batch == 8, f"rate_loader got batch={batch!r}"
        assert type(dataset) is cls and getattr(dataset, "decoder", None) == dec and collate is coll, (dataset, dec, collate)


@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")  # torchvision 0.29, as data.py does
def test_bench_naive_val_clip_equals_data_py(bench_frames):
    """Fairness: on val clips, with both resizes no-ops, (b) and (c) produce the same normalised
    clip from the same frames -- the benchmark compares two ways of doing the same work."""
    ds = data.VideoFrameDataset(os.path.join(bench_frames, "val.txt"), mode="val", t_length=BENCH_TINY["t_length"],
                                t_stride=BENCH_TINY["t_stride"], new_size=BENCH_TINY["new_size"],
                                crop_size=BENCH_TINY["crop_size"])
    for i in range(len(ds)):
        paths = bench.clip_files(ds, i)
        assert len(paths) == BENCH_TINY["t_length"] and len(set(paths)) == len(paths)
        naive = bench.naive_clip(paths, "val", BENCH_TINY["new_size"], BENCH_TINY["crop_size"], np.random.default_rng(0))
        clip, _, _ = ds[i]
        ours = data.normalize(clip)
        assert naive.dtype == ours.dtype == torch.float32
        assert naive.shape == ours.shape == (3, BENCH_TINY["t_length"], BENCH_TINY["crop_size"], BENCH_TINY["crop_size"])
        assert (naive - ours).abs().max() < 1e-5, (i, (naive - ours).abs().max())
        # not trivially equal: the clip's frames differ (moving patch + noise), the crop is not flat
        assert (ours[:, 0] - ours[:, -1]).abs().max() > 0.1 and ours.std() > 0.1


# ---- model -------------------------------------------------------------------------------------
def bench_macs_by_hooks(arch, num_classes, t_length, crop_size):
    """Forward MACs of one clip counted from module shapes (an independent check of FlopCounterMode):
    Conv3d: out.numel() * in/groups * prod(kernel); Linear: out.numel() * in_features."""
    macs, seen = [0], {"conv": 0, "fc": 0}

    def conv_hook(m, inp, out):
        macs[0] += out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        seen["conv"] += 1

    def fc_hook(m, inp, out):
        macs[0] += out.numel() * m.in_features
        seen["fc"] += 1

    with torch.device("meta"):  # shapes only
        m = models.build_model(arch, num_classes)
        for mod in m.modules():
            if isinstance(mod, nn.Conv3d):
                mod.register_forward_hook(conv_hook)
            elif isinstance(mod, nn.Linear):
                mod.register_forward_hook(fc_hook)
        m(torch.empty(1, 3, t_length, crop_size, crop_size))
    assert seen["conv"] == sum(isinstance(mod, nn.Conv3d) for mod in m.modules()) and seen["fc"] == 1
    return macs[0] / 1e9


def test_bench_model_params_and_gmacs_cli(tmp_path):
    """The issue's command, params + GMACs only (--iters 0), as a user runs it."""
    path = tmp_path / "model.json"
    rc, out, err = bench_cli(["model", "--arch", "resnet18_3d", "--t_length", "8", "--crop_size", "112",
                              "-b", "2", "--iters", "0", "--device", "cpu", "--json", str(path)], tmp_path)
    assert rc == 0, err
    res = json.loads(path.read_text())
    params = sum(p.numel() for p in models.build_model("resnet18_3d", 400).parameters())
    assert res["params"] == params
    gmacs = bench_macs_by_hooks("resnet18_3d", 400, 8, 112)
    assert res["gmacs_per_clip"] == pytest.approx(gmacs, rel=0.01)
    assert (f"model resnet18_3d, 400 classes, clip 3x8x112x112: {params / 1e6:.2f}M params, "
            f"{res['gmacs_per_clip']:.2f} GMACs per clip (forward)") in out, out
    assert res["rows"] == {} and "clips/s" not in out  # --iters 0: no timing table


def test_bench_count_published_sizes(tmp_path, capsys):
    """I3D-R50 of the model zoos: 28.04M params, 56.8 GMACs at 16x224x224 (issue targets)."""
    params, gmacs = bench.count("resnet50_3d", 400, 16, 224)
    assert abs(params / 28.04e6 - 1) < 1e-3, params
    assert abs(gmacs / 56.8 - 1) < 0.02, gmacs
    assert gmacs == pytest.approx(bench_macs_by_hooks("resnet50_3d", 400, 16, 224), rel=0.01)
    res, out = bench_main(["model", "--arch", "resnet50_3d", "--iters", "0", "--device", "cpu"], tmp_path, capsys)
    assert (res["params"], res["gmacs_per_clip"]) == (params, gmacs)
    assert f"{params / 1e6:.2f}M params, {gmacs:.2f} GMACs per clip" in out


def test_bench_model_rows_tiny(tmp_path, capsys):
    res, out = bench_main(["model", "--arch", "resnet10_3d", "--t_length", "4", "--crop_size", "32", "-b", "2",
                           "--iters", "2", "--warmup", "1", "--amp", "bf16", "--channels-last", "--device", "cpu"],
                          tmp_path, capsys, threads=1)
    rows = ["fp32", "bf16", "bf16+channels-last"]  # cumulative: each option on top of the row above
    assert list(res["rows"]) == rows
    for name in rows:
        r = res["rows"][name]
        assert r["clips_s"] > 0 and math.isfinite(r["clips_s"]) and r["peak_gib"] > 0, (name, r)
        cells = bench_row(out, name + " ")
        assert float(cells[0]) == pytest.approx(r["clips_s"], abs=0.006)
        assert float(cells[1]) == pytest.approx(1000 * 2 / r["clips_s"], rel=0.01, abs=0.06)  # ms per step of 2 clips
        assert float(cells[3].rstrip("x")) == pytest.approx(r["clips_s"] / res["rows"]["fp32"]["clips_s"], abs=0.006)
    assert res["params"] == sum(p.numel() for p in models.build_model("resnet10_3d", 400).parameters())
    assert "batch 2 on cpu, 1 warmup + 2 timed steps" in out


# ---- train -------------------------------------------------------------------------------------
def test_bench_train_tiny(bench_frames, tmp_path, capsys):
    res, out = bench_main(["train", "--arch", "resnet10_3d", "--frames", bench_frames, *BENCH_CLIP_ARGS,
                           "-b", "2", "--workers", "0", "--iters", "2", "--warmup", "1", "--device", "cpu"],
                          tmp_path, capsys, threads=1)
    synth, real = res["synthetic_clips_s"], res["real_clips_s"]
    assert synth > 0 and real > 0 and math.isfinite(synth) and math.isfinite(real)
    assert res["real_over_synthetic"] == pytest.approx(real / synth, rel=1e-12)
    assert 0 <= res["real_data_wait"] < 1 and 0 <= res["synthetic_data_wait"] < 1
    assert float(bench_row(out, "synthetic (uint8 batches in memory)")[0]) == pytest.approx(synth, abs=0.006)
    assert float(bench_row(out, "real (VideoFrameDataset)")[0]) == pytest.approx(real, abs=0.006)
    m = re.search(r"real / synthetic = ([\d.]+)x", out)
    assert m and float(m.group(1)) == pytest.approx(real / synth, abs=0.006), out
    assert "train resnet10_3d 3x4x24x24, batch 2, 0 workers, cpu, fp32" in out


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd,present,missing", [("data", None, "train.txt"), ("data", "train.txt", "val.txt"),
                                                  ("train", "val.txt", "train.txt")])
def test_bench_bad_frames_one_line_exit_2(cmd, present, missing, tmp_path, capsys):
    """A --frames folder without the list the command reads: exit 2 and one line naming the folder and
    the missing file -- before any work (no frames made, nothing benchmarked, no traceback)."""
    folder = tmp_path / "frames"
    folder.mkdir()
    if present:
        (folder / present).write_text("")
    argv = [cmd, "--frames", str(folder), "--workers", "0"] + (["--device", "cpu"] if cmd == "train" else [])
    with pytest.raises(SystemExit) as e:  # SystemExit, not another exception
        bench.main(argv)
    assert e.value.code == 2
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [f"bench.py: error: --frames {folder} has no {missing} (make one: python prepare.py synth DIR)"]
    assert cap.out == ""
