"""Evaluation and training protocols: the training crop distribution, one resample at full
detail, the zoos' test-clip placements and the original project's 10-crop test.

Every reference here is written from the zoo's own source, independently of data.py:
- PySlowFast slowfast/datasets/transform.py: random_short_side_scale_jitter + random_crop
  (training), slowfast/datasets/decoder.py: get_start_end_idx + temporal_sampling (test clips);
- mmaction2 mmaction/datasets/transforms/loading.py: SampleFrames._get_test_clips, test_mode=True;
- BannyStone/Video_Classification_PyTorch lib/transforms.py: GroupOverSample (test_10crop.py).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

import data


# ---- helpers -------------------------------------------------------------------------------------
def write_video(root, name, frames, label=0):
    """uint8 (N, H, W, 3) frames -> root/name/img_00001.png ... (PNG: lossless, so pixels are
    exact)."""
    (root / name).mkdir(parents=True)
    for t, img in enumerate(frames, 1):
        Image.fromarray(img).save(root / name / f"img_{t:05d}.png")
    return f"{name} {len(frames)} {label}\n"


def one_video_list(tmp_path, frames):
    lst = tmp_path / "list.txt"
    lst.write_text(write_video(tmp_path, "v", frames))
    return lst


def reference_crop(frame, S, y, x, crop, flip=False):
    """PySlowFast's training crop of one frame: short side to S, long side floor(long * S / short),
    bilinear (F.interpolate, align_corners=False), then the crop at (y, x) of the rescaled frame."""
    H, W, _ = frame.shape
    size = (S, math.floor(W / H * S)) if H <= W else (math.floor(H / W * S), S)
    if H == W == S or min(H, W) == S:
        size = (H, W)  # PySlowFast returns the frames untouched when the short side is already S
    big = F.interpolate(
        frame.permute(2, 0, 1)[None].double(), size=size, mode="bilinear", align_corners=False
    )
    out = big[0, :, y : y + crop, x : x + crop]
    return out.flip(-1) if flip else out  # (3, crop, crop)


def reference_draws(rng, H, W, new_size, crop):
    """The reference's random draws, in data.py's order (box, then flip): S, offsets, flip."""
    S = int(round(rng.uniform(new_size, 1.25 * new_size)))
    rh, rw = (S, math.floor(W / H * S)) if H <= W else (math.floor(H / W * S), S)
    return (
        S,
        int(rng.integers(0, rh - crop + 1)),
        int(rng.integers(0, rw - crop + 1)),
        rng.random() < 0.5,
    )


# ---- training crops: the reference distribution --------------------------------------------------
def test_train_box_distribution_matches_reference_monte_carlo():
    """Scale, and how often border pixels are covered, for a 340x256 frame at new_size 256, crop
    224: data.train_box against an independent simulation of the reference (S ~ U[256, 320] rounded,
    resize, crop at a uniform whole-pixel offset of the rescaled frame)."""
    H, W, new, crop, N = 256, 340, 256, 224, 20000
    rng = np.random.default_rng(0)
    # (N, 4): y0, x0, h, w
    ours = np.array([data.train_box(H, W, new, crop, rng) for _ in range(N)])
    ref_rng = np.random.default_rng(1)
    S = np.round(ref_rng.uniform(new, 1.25 * new, N))
    rw = np.floor(W / H * S)
    # uniform integer offsets 0 .. size - crop
    y = np.floor(ref_rng.uniform(0, 1, N) * (S - crop + 1))
    x = np.floor(ref_rng.uniform(0, 1, N) * (rw - crop + 1))

    # covered: the pixel's centre (k + 0.5 original px) lies in the crop, in either frame's
    # coordinates
    def cover_ours(k, axis):
        lo, side = ours[:, axis], ours[:, axis + 2]
        return np.mean((lo <= k + 0.5) & (k + 0.5 < lo + side))

    def cover_ref(k, offset, scale):
        c = (k + 0.5) * scale
        return np.mean((offset <= c) & (c < offset + crop))

    tol = lambda p: 4.5 * math.sqrt(2 * p * (1 - p) / N)  # two independent estimates, ~4.5 sigma
    for k in (0, 10, 60):
        p_row, q_row = cover_ours(k, 0), cover_ref(k, y, S / H)
        p_col, q_col = cover_ours(k, 1), cover_ref(k, x, rw / W)
        assert abs(p_row - q_row) < tol(q_row), (k, p_row, q_row)
        assert abs(p_col - q_col) < tol(q_col), (k, p_col, q_col)
    assert 0.17 < cover_ours(10, 0) < 0.23 and 0.05 < cover_ours(10, 1) < 0.10  # ~19.5% and ~7.5%
    # scale: the box side h = crop * H / S; two-sample Kolmogorov-Smirnov distance, alpha ~ 0.001
    ref_h = np.sort(crop * H / S)
    grid = np.linspace(crop * 0.8 - 1, crop + 1, 400)
    ks = (
        np.abs(
            np.searchsorted(np.sort(ours[:, 2]), grid, "right")
            - np.searchsorted(ref_h, grid, "right")
        ).max()
        / N
    )
    assert ks < 1.95 * math.sqrt(2 / N), ks
    # w from the same S
    assert np.allclose(ours[:, 3], crop * W / np.floor(W / H * (crop * H / ours[:, 2]) + 1e-9))
    # every box inside the frame
    assert (
        (ours[:, :2] >= 0).all()
        and (ours[:, 0] + ours[:, 2] <= H + 1e-9).all()
        and (ours[:, 1] + ours[:, 3] <= W + 1e-9).all()
    )


@pytest.mark.parametrize("size", [(40, 53), (80, 106), (53, 40), (33, 45)])
def test_train_clip_is_the_reference_crop_end_to_end(tmp_path, size):
    """Loader + crop_resize on real pixels (random noise, the hardest pattern) = the reference crop
    of the full-resolution frames, flip included: frames at short side new_size (the upscale path,
    on the device), at 2x (downscale, in the loader) and smaller than crop_size (in the loader)."""
    H, W = size
    new, crop, T = 40, 36, 2
    frames = np.random.default_rng(H).integers(0, 256, (4, H, W, 3), dtype=np.uint8)
    ds = data.VideoFrameDataset(
        one_video_list(tmp_path, frames),
        image_tmpl="img_{:05d}.png",
        mode="train",
        t_length=T,
        t_stride=1,
        new_size=new,
        crop_size=crop,
    )
    flips, paths = set(), set()
    for epoch in range(12):
        ds.set_epoch(epoch)
        clip, label, info = ds[0]
        assert clip.shape == (3, T, crop, crop) and clip.dtype == torch.uint8 and info["bad"] == ""
        assert info["box"].shape == (4,) and info["box"].dtype == torch.float32
        x, _, batch_info = data.collate([(clip, label, info)])
        out = data.crop_resize(x.double(), batch_info["box"])[0]  # (3, T, crop, crop)
        rng = np.random.default_rng([0, epoch, 0])
        # the loader's first draw
        numbers = data.sample_indices(len(frames), T, 1, "train", rng=rng)[0]
        S, y, x0, flip = reference_draws(rng, H, W, new, crop)
        flips.add(flip)
        paths.add(bool((info["box"] == torch.tensor(data.IDENTITY_BOX)).all()))
        for t, n in enumerate(numbers):
            want = reference_crop(torch.from_numpy(frames[n - 1]), S, y, x0, crop, flip)
            # uint8 rounding at most
            assert (out[:, t] - want).abs().max() <= 0.5 + 1e-6, (epoch, S, y, x0, flip)
    assert flips == {False, True}
    # frames at new_size: mostly shipped as a window, finished on the device
    if H == new or W == new:
        assert False in paths


def test_short_side_twice_new_size_keeps_full_detail():
    """Frames with short side 2 x new_size: the crop is taken from the full-resolution pixels in one
    resample, so a high-frequency pattern comes out as in the reference's resize + crop (tight
    tolerance). Resampling twice (down to new_size, then the box up) would lose it: checked too."""
    new, crop = 64, 56
    H, W = 2 * new, 170
    yy, xx = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    # ~1.6 px period after scaling
    pattern = 128 + 100 * np.sin(2 * np.pi * xx / 3.1) * np.cos(2 * np.pi * yy / 3.3)
    frame = torch.from_numpy(np.repeat(pattern[..., None], 3, -1).round().astype(np.uint8))
    rng = np.random.default_rng(3)
    for _ in range(10):
        state = rng.bit_generator.state
        box = data.train_box(H, W, new, crop, rng)
        got, wbox = data.train_crop([frame], box, crop)
        assert wbox == data.IDENTITY_BOX  # a downscale: finished in the loader
        ref_rng = np.random.default_rng()
        ref_rng.bit_generator.state = state
        S, y, x, _ = reference_draws(ref_rng, H, W, new, crop)
        want = reference_crop(frame, S, y, x, crop)
        got = got[0].permute(2, 0, 1).double()
        assert (got - want).abs().max() <= 0.5 + 1e-6
        # the old way: the loader resizes to short side new_size, the device enlarges the box of
        # that
        small = (
            F.interpolate(
                frame.permute(2, 0, 1)[None].float(),
                size=(new, round(W * new / H)),
                mode="bilinear",
                align_corners=False,
                antialias=True,
            )[0]
            .permute(1, 2, 0)
            .round()
            .to(torch.uint8)
        )
        twice = (
            data.resample_box([small], [v * new / H for v in box], crop)[0]
            .permute(2, 0, 1)
            .double()
        )
        # detail lost: this test would catch double resampling
        assert (twice - want).abs().mean() > 10


def test_crop_resize_identity_and_bad_shapes():
    x = torch.rand(2, 3, 2, 8, 8)
    assert data.crop_resize(x, torch.tensor([data.IDENTITY_BOX] * 2)) is x
    half = data.crop_resize(x, torch.tensor([[0, 0, 0.5, 0.5], list(data.IDENTITY_BOX)]))
    # an identity box in a mixed batch samples pixel centres
    assert torch.allclose(half[1], x[1], atol=1e-5)
    assert torch.allclose(half[0, :, :, ::2, ::2].mean(), x[0, :, :, :4, :4].mean(), atol=0.1)
    with pytest.raises(RuntimeError):
        data.crop_resize(x, torch.zeros(3, 4))


# ---- test-clip placement -------------------------------------------------------------------------
def pyslowfast_clips(N, T, s, n):
    """slowfast/datasets/decoder.py, test (clip_idx = k of n, use_offset False, fps = target
    fps)."""
    out = []
    for k in range(n):
        clip_size = s * T
        delta = max(N - clip_size, 0)
        start = delta * k / n
        index = torch.linspace(start, start + clip_size - 1, T)
        out.append(torch.clamp(index, 0, N - 1).long().tolist())
    return np.array(out)


def pyslowfast_offset_clips(N, T, s, n):
    """slowfast/datasets/decoder.py get_start_end_idx(video_size, clip_size, clip_idx,
    num_clips_uniform, use_offset=True) then temporal_sampling; clip_size as its torchvision
    decode computes it, max(1.0, sampling_rate * num_frames / target_fps * fps), fps = target
    fps."""
    out = []
    for k in range(n):
        clip_size = np.maximum(1.0, s * T / 30 * 30)
        delta = max(N - clip_size, 0)
        if n == 1:
            start = math.floor(delta / 2)
        else:
            start = k * math.floor(delta / (n - 1))
        index = torch.linspace(start, start + clip_size - 1, T)
        out.append(torch.clamp(index, 0, N - 1).long().tolist())
    return np.array(out)


def mmaction2_clips(N, T, s, n):
    """mmaction/datasets/transforms/loading.py SampleFrames, test_mode, 3D, out_of_bound_opt
    'loop'."""
    ori = (T - 1) * s + 1
    max_offset = max(N - ori, 0)
    offsets = (
        np.round(np.arange(n) * (max_offset / float(n - 1)))
        if n > 1
        else np.array([max_offset // 2])
    )
    inds = np.concatenate(offsets[:, None] + np.arange(T)[None, :] * s).reshape(-1, T)
    return np.mod(inds, N)


CASES = [
    (300, 8, 8, 10),
    (300, 8, 8, 1),
    (64, 8, 8, 3),
    (20, 8, 4, 3),
    (5, 8, 4, 2),
    (1, 4, 2, 3),
    (100, 16, 4, 4),
    (101, 32, 3, 5),
    (250, 32, 3, 1),
    (90, 32, 3, 5),
]


@pytest.mark.parametrize("N,T,s,n", CASES)
def test_placement_matches_each_zoo(N, T, s, n):
    zoos = (
        ("pyslowfast", pyslowfast_clips),
        ("pyslowfast-offset", pyslowfast_offset_clips),
        ("mmaction2", mmaction2_clips),
    )
    for placement, ref in zoos:
        got = data.sample_indices(N, T, s, "test", num_clips=n, placement=placement, start_index=1)
        assert got.shape == (n, T) and got.dtype == np.int64
        assert np.array_equal(got, ref(N, T, s, n) + 1), placement
        assert got.min() >= 1 and got.max() <= N
        if n == 1:
            val = data.sample_indices(N, T, s, "val", placement=placement, start_index=1)
            assert np.array_equal(val, got)


def test_placement_spot_values():
    """Values worked out by hand from the zoos' formulas (start_index 0)."""
    ps = data.sample_indices(300, 8, 8, "test", num_clips=10, placement="pyslowfast", start_index=0)
    assert ps[0].tolist() == [0, 9, 18, 27, 36, 45, 54, 63]  # linspace(0, 63, 8): steps of 9, not 8
    # start 236 * 9 / 10 = 212.4, truncated: ends before the video does
    assert ps[-1][0] == 212 and ps[-1][-1] == 275
    mm = data.sample_indices(300, 8, 8, "test", num_clips=10, placement="mmaction2", start_index=0)
    # last clip ends at the last frame
    assert mm[:, 0].tolist() == list(range(0, 244, 27)) and mm[-1][-1] == 299
    one_clip = dict(num_clips=1, start_index=0)
    # loops
    assert data.sample_indices(20, 8, 4, "test", placement="mmaction2", **one_clip)[0].tolist() == [
        0,
        4,
        8,
        12,
        16,
        0,
        4,
        8,
    ]
    assert data.sample_indices(20, 8, 4, "test", placement="pyslowfast", **one_clip)[
        0
    ].tolist() == [0, 4, 8, 13, 17, 19, 19, 19]  # repeats the last frame
    # MVITv2_B_32x3.yaml's 5 clips, USE_OFFSET_SAMPLING: delta = 101 - 96 = 5, step floor(5 / 4) = 1
    off = data.sample_indices(101, 32, 3, "test", num_clips=5, placement="pyslowfast-offset")
    assert off[:, 0].tolist() == [1, 2, 3, 4, 5] and off[-1][-1] == 100  # 1-based: ends 1 early
    # one clip: the centre, floor(5 / 2)
    one = data.sample_indices(101, 32, 3, "test", placement="pyslowfast-offset", **one_clip)
    assert one[0][0] == 2 and one[0][-1] == 97
    ours = data.sample_indices(300, 8, 8, "test", num_clips=10, start_index=0)
    assert ours[0][0] == 0 and ours[-1][-1] == 299
    with pytest.raises(ValueError, match="placement"):
        data.sample_indices(300, 8, 8, "test", placement="tsn")


def test_dataset_reads_the_placed_frames(tmp_path):
    """test_sampling reaches the frames read: frame k is filled with the value k."""
    N = 23
    frames = np.broadcast_to(
        np.arange(1, N + 1, dtype=np.uint8)[:, None, None, None] * 10, (N, 8, 10, 3)
    ).copy()
    lst = one_video_list(tmp_path, frames)
    for placement in data.PLACEMENTS:
        ds = data.VideoFrameDataset(
            lst,
            image_tmpl="img_{:05d}.png",
            mode="test",
            t_length=4,
            t_stride=3,
            new_size=8,
            crop_size=8,
            num_clips=3,
            test_sampling=placement,
        )
        clip, _, _ = ds[0]  # (3, 3, T, 8, 8)
        want = data.sample_indices(N, 4, 3, "test", num_clips=3, placement=placement)
        assert torch.equal(clip[:, 0, :, 0, 0], torch.from_numpy(want * 10).to(torch.uint8)), (
            placement
        )
    with pytest.raises(ValueError, match="test_sampling"):
        data.VideoFrameDataset(
            lst, image_tmpl="img_{:05d}.png", mode="test", test_sampling="PySlowFast"
        )


# ---- 10-crop -------------------------------------------------------------------------------------
def test_ten_crop_views_are_group_oversample(tmp_path):
    """At short side new_size the 10 views are GroupOverSample's pixels exactly: upper-left,
    upper-right, lower-left, lower-right, centre at offsets in steps of (size - crop) // 4, each
    then mirrored."""
    H, W, new, crop = 40, 58, 40, 32  # w_step = 26 // 4 = 6: the "right" crops start at 24, not 26
    frames = np.random.default_rng(0).integers(0, 256, (6, H, W, 3), dtype=np.uint8)
    ds = data.VideoFrameDataset(
        one_video_list(tmp_path, frames),
        image_tmpl="img_{:05d}.png",
        mode="test",
        t_length=3,
        t_stride=1,
        new_size=new,
        crop_size=crop,
        num_clips=2,
        num_crops=10,
    )
    clip, _, _ = ds[0]
    assert clip.shape == (20, 3, 3, crop, crop)
    ws, hs = (W - crop) // 4, (H - crop) // 4
    # (x, y), fill_fix_offset
    offsets = [(0, 0), (4 * ws, 0), (0, 4 * hs), (4 * ws, 4 * hs), (2 * ws, 2 * hs)]
    idx = data.sample_indices(len(frames), 3, 1, "test", num_clips=2)
    for c in range(2):
        for k, (ox, oy) in enumerate(offsets):
            # (3, T, c, c)
            want = torch.from_numpy(frames[idx[c] - 1, oy : oy + crop, ox : ox + crop]).permute(
                3, 0, 1, 2
            )
            assert torch.equal(clip[c * 10 + 2 * k], want), (c, k)
            assert torch.equal(clip[c * 10 + 2 * k + 1], want.flip(-1)), (c, k)


def test_ten_crop_boxes_scale_with_the_frame():
    """Frames at 2x new_size: the same crops, in original pixels (resized to crop_size
    afterwards)."""
    one = data.crop_boxes(40, 58, "test", 40, 32, num_crops=10)
    two = data.crop_boxes(80, 116, "test", 40, 32, num_crops=10)
    assert [(2 * y, 2 * x, 2 * s) for y, x, s in one] == two
    portrait = data.crop_boxes(58, 40, "test", 40, 32, num_crops=10)
    assert sorted(portrait) == sorted((x, y, s) for y, x, s in one)
    three = data.crop_boxes(40, 58, "test", 40, 32, num_crops=3)  # unchanged: the whole short side
    assert three == [(0, 0, 40), (0, 9, 40), (0, 18, 40)]
