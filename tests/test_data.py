"""data.py: frame sampling, list files, clips and their exact content, reproducibility, collate and
normalize, bad input. CPU only, synthetic frames (the `synth` fixture), nothing downloads.
"""

import os
import random
import re

from PIL import Image
import numpy as np
import pytest
import torch

import data
import decode
from conftest import H, NUM_FRAMES, UCF101_LISTS, W, copy_video, write_list


# ---- helpers -------------------------------------------------------------------------------------
SMALL = dict(t_length=4, t_stride=2, new_size=40, crop_size=32)  # tiny clips: (3, 4, 32, 32)


def frames_of(folder, numbers, tmpl="img_{:05d}.jpg"):
    """Reference decode: uint8 (3, len(numbers), H, W) of the given frame numbers."""
    frames = [decode.decode_frame(os.path.join(folder, tmpl.format(int(i)))) for i in numbers]
    return torch.stack(frames).permute(3, 0, 1, 2)


def assert_interleaved(clip):
    """Clips are (.., 3, T, c, c) views of (.., T, c, c, 3) memory -- the decoder's layout, by
    design."""
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
    assert np.array_equal(
        data.sample_indices(nf, L, s, "test", num_clips=1), data.sample_indices(nf, L, s, "val")
    )


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
        idx = data.sample_indices(
            1, 6, 3, mode, num_clips=clips, rng=np.random.default_rng(0), start_index=1
        )
        assert idx.shape == (clips, 6) and (idx == 1).all()
        idx0 = data.sample_indices(
            1, 6, 3, mode, num_clips=clips, rng=np.random.default_rng(0), start_index=0
        )
        assert (idx0 == 0).all()


@pytest.mark.parametrize("start_index", [0, 1, 7])
def test_indices_never_leave_the_video(start_index):
    """Sweep sizes; check the documented rule as properties of the output, not by re-deriving it."""
    rng = np.random.default_rng(0)
    for nf in range(1, 13):
        for L in range(1, 7):
            for s in range(1, 5):
                for mode, clips in [("train", 4), ("val", 1), ("test", 1), ("test", 3)]:
                    idx = data.sample_indices(
                        nf, L, s, mode, num_clips=clips, rng=rng, start_index=start_index
                    )
                    first, last = start_index, start_index + nf - 1
                    assert idx.shape == (clips, L), (nf, L, s, mode)
                    assert idx.min() >= first and idx.max() <= last, (nf, L, s, mode, idx)
                    for clip in idx:
                        d = np.diff(clip)
                        steps = set(d[d > 0].tolist())
                        assert len(steps) <= 1 and all(1 <= x <= s for x in steps), (nf, L, s, clip)
                        if (L - 1) * s + 1 <= nf:  # fits: the exact stride, no repeats
                            assert (d == s).all(), (nf, L, s, clip)
                        elif L <= nf:  # shrunk to the largest stride that fits, no repeats
                            (step,) = steps or {1}
                            assert (d > 0).all() and (L - 1) * (step + 1) + 1 > nf, (nf, L, s, clip)
                        else:  # every frame, then repeats of the last
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
    # root = the list's folder
    assert all(os.path.dirname(v.path).startswith(str(UCF101_LISTS)) for v in videos)
    ds = data.VideoFrameDataset(path, mode="val")  # construction decodes nothing
    assert len(ds) == count and ds.num_classes == 101


def test_list_parsing_spaces_comments_root(tmp_path):
    listdir = tmp_path / "lists"
    listdir.mkdir()
    absolute = tmp_path / "elsewhere" / "abs video"
    path = write_list(
        listdir / "list.txt",
        [
            "# a comment line",
            "",
            "my video/with spaces 10 2",
            "   ",
            "   # indented comment",
            "dir#1 3 0",  # '#' inside a path is not a comment
            f"{absolute} 5 1",
            "plain 7 3   ",
        ],
    )
    videos = data.read_list(path)
    assert [(v.num_frames, v.label, v.line) for v in videos] == [
        (10, 2, 3),
        (3, 0, 6),
        (5, 1, 7),
        (7, 3, 8),
    ]
    assert videos[0].path == os.path.join(str(listdir), "my video", "with spaces")
    assert videos[1].path == os.path.join(str(listdir), "dir#1")
    assert videos[2].path == str(absolute)  # absolute paths ignore the root
    other = tmp_path / "root"
    videos = data.read_list(path, root=other)
    assert videos[0].path == os.path.join(str(other), "my video", "with spaces")
    assert videos[2].path == str(absolute)
    ds = data.VideoFrameDataset(path, root=other, mode="val", **SMALL)
    assert (
        len(ds) == 4
        and ds.num_classes == 4
        and ds.videos[3].path == os.path.join(str(other), "plain")
    )
    assert data.VideoFrameDataset(path, num_classes=10, mode="val", **SMALL).num_classes == 10


def test_dataset_reads_folder_with_spaces_and_start_index_0(synth, tmp_path):
    root, train, _ = synth
    src = root / "train" / "video_0001"
    copy_video(src, tmp_path / "a video dir", tmpl="{:d}.jpg", dst_start=0)
    path = write_list(tmp_path / "list.txt", [f"a video dir {NUM_FRAMES} 1"])
    ds = data.VideoFrameDataset(
        path,
        image_tmpl="{:d}.jpg",
        start_index=0,
        mode="val",
        t_length=NUM_FRAMES,
        t_stride=1,
        new_size=40,
        crop_size=40,
    )
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
    assert (
        clip.shape == (6, 3, 4, 32, 32)
        and clip.dtype == torch.uint8
        and type(label) is int
        and label == 1
    )
    assert_interleaved(clip)
    # crops and clips differ
    assert not torch.equal(clip[0], clip[1]) and not torch.equal(clip[0], clip[3])


def test_val_clip_content_exact(synth):
    """crop_size == new_size == short side: nothing is resized, so a clip is an exact crop of
    decoded frames."""
    root, _, val = synth
    clip, _, _ = data.VideoFrameDataset(
        val, mode="val", t_length=4, t_stride=2, new_size=40, crop_size=40
    )[2]
    idx = data.sample_indices(NUM_FRAMES, 4, 2, "val")[0]
    # centre of 48 wide
    assert torch.equal(clip, frames_of(root / "val" / "video_0002", idx)[..., 4:44])


# clips 1,3,5 | 6,8,10: disjoint
# clips 1,3,5,7 | 3,5,7,9 | 4,6,8,10: they share frames
# clips 1,3,5,7 | 4,6,8,10: interleave without sharing a frame (decode order != clip order)
@pytest.mark.parametrize("num_clips,t_length,t_stride", [(2, 3, 2), (3, 4, 2), (2, 4, 2)])
def test_test_views_content_exact(synth, num_clips, t_length, t_stride):
    """Views are clip-major (view = clip * num_crops + crop); three crops along the long side."""
    root, _, val = synth
    video = root / "val" / "video_0002"
    ds = data.VideoFrameDataset(
        val,
        mode="test",
        num_clips=num_clips,
        num_crops=3,
        t_length=t_length,
        t_stride=t_stride,
        new_size=40,
        crop_size=40,
    )
    clip, _, _ = ds[2]
    idx = data.sample_indices(NUM_FRAMES, t_length, t_stride, "test", num_clips=num_clips)
    assert idx[0, 0] == 1 and idx[-1, -1] == NUM_FRAMES
    assert clip.shape == (num_clips * 3, 3, t_length, 40, 40)
    for c in range(num_clips):
        ref = frames_of(video, idx[c])
        for k, x0 in enumerate((0, 4, 8)):  # start, centre, end of the 48 wide frames
            assert torch.equal(clip[c * 3 + k], ref[..., x0 : x0 + 40]), (c, k)


def test_train_clip_is_a_strided_crop_maybe_flipped(synth):
    root, train, _ = synth
    video = root / "train" / "video_0003"
    ds = data.VideoFrameDataset(
        train, mode="train", t_length=4, t_stride=2, new_size=40, crop_size=40
    )
    full = frames_of(video, range(1, NUM_FRAMES + 1))
    windows = 0
    for epoch in range(6):
        ds.set_epoch(epoch)
        clip, _, info = ds[3]
        if torch.equal(info["box"], torch.tensor(data.IDENTITY_BOX)):
            continue  # resampled in the loader (test_protocols.py checks those pixels)
        windows += 1
        matches = [
            (start, x0, flip)
            for start in range(NUM_FRAMES - 6)
            for x0 in range(W - 40 + 1)
            for flip in (False, True)
            if torch.equal(
                clip,
                (lambda r: r.flip(-1) if flip else r)(
                    full[:, start : start + 7 : 2, :, x0 : x0 + 40]
                ),
            )
        ]
        assert len(matches) == 1, (epoch, matches)
    assert windows >= 3


def test_short_and_one_frame_videos_through_dataset(synth, tmp_path):
    root, _, _ = synth
    copy_video(root / "val" / "video_0000", tmp_path / "one", count=1)  # only img_00001.jpg on disk
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
    # Per epoch, as train.py does: set_epoch, then a fresh loader (workers only see the epoch they
    # start with).
    root, train, _ = synth
    batches = {}
    for workers in (0, 2):
        ds = data.VideoFrameDataset(train, mode="train", seed=1, **SMALL)
        for epoch in (2, 3):
            ds.set_epoch(epoch)
            sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
            loader = torch.utils.data.DataLoader(
                ds, batch_size=2, sampler=sampler, num_workers=workers, collate_fn=data.collate
            )
            batches[workers, epoch] = list(loader)
    assert len(batches[0, 2]) == 2
    for epoch in (2, 3):
        for (x0, y0, i0), (x2, y2, i2) in zip(batches[0, epoch], batches[2, epoch]):
            assert x0.shape == (2, 3, 4, 32, 32) and torch.equal(x0, x2) and torch.equal(y0, y2)
            assert torch.equal(i0["box"], i2["box"])  # the device crop too
    for workers in (0, 2):  # same sampler order, another epoch: other clips
        assert not torch.equal(
            torch.cat([x for x, *_ in batches[workers, 2]]),
            torch.cat([x for x, *_ in batches[workers, 3]]),
        )
    # and equal to the samples read directly in the sampler's order
    order = list(torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0)))
    direct = torch.stack([ds[i][0] for i in order])
    assert torch.equal(torch.cat([x for x, *_ in batches[2, 3]]), direct)


@pytest.mark.parametrize("size", [{}, dict(new_size=24, crop_size=16)])
def test_flip_mirrors_along_width(synth, size):
    """What reaches the model (the device's crop_resize of the loader's clip and box) is the plain
    clip or its mirror image: a window is mirrored by its box (a width below 0, the loader's pixels
    unchanged; float rounding apart), a clip finished in the loader (a downscale, identity box) by
    the loader, exactly."""
    root, train, _ = synth
    flipping, plain = (
        data.VideoFrameDataset(train, mode="train", flip=f, **SMALL | size) for f in (True, False)
    )
    same = mirrored = 0
    for epoch in range(3):
        flipping.set_epoch(epoch), plain.set_epoch(epoch)
        for i in range(len(plain)):
            (a, _, fa), (b, _, fb) = flipping[i], plain[i]
            a, b = (
                data.crop_resize(x.float()[None], f["box"][None]) for x, f in ((a, fa), (b, fb))
            )
            if torch.equal(a, b):
                same += 1
            elif torch.equal(fa["box"], torch.tensor(data.IDENTITY_BOX)):
                assert torch.equal(a, b.flip(-1)), (epoch, i)
                mirrored += 1
            else:  # a window: the box mirrored, the same pixels
                assert torch.equal(flipping[i][0], plain[i][0]), (epoch, i)
                assert (a - b.flip(-1)).abs().max() < 5e-3, (epoch, i)
                mirrored += 1
    assert same >= 1 and mirrored >= 1


# ---- collate, normalize (crop_resize: test_protocols.py) -----------------------------------------
@pytest.mark.parametrize(
    "mode, kw",
    [
        ("train", {}),
        ("train", dict(num_segments=2)),  # TSN: T = 2 x t_length
        # a downscale: resampled in the loader, copied into place
        ("train", dict(new_size=24, crop_size=16)),
        ("train", dict(augment=data.clip_transforms(color_jitter=0.4))),  # finished in the loader
        ("train", dict(train_crop="multiscale")),  # whole frames: the items as they are
        ("train", dict(reps=2)),
        ("val", {}),
        ("test", dict(num_clips=2, num_crops=3)),
    ],
)
def test_a_fetched_batch_is_its_items_collated(synth, tmp_path, monkeypatch, mode, kw):
    """What the DataLoader fetches (VideoFrameDataset.__getitems__, then collate) is, bit for bit,
    collate of the items ds[i] gives, in every mode, a short video's repeated frames included; a
    train window is cut straight into the batch, which collate then copies no more."""
    root, train, _ = synth
    for k in range(3):
        copy_video(root / "train" / f"video_000{k}", tmp_path / f"v{k}")
    copy_video(root / "train" / "video_0003", tmp_path / "short", count=3)  # frames repeated
    lines = [f"v{k} {NUM_FRAMES} {k}" for k in range(3)] + ["short 3 3"]
    ds = data.VideoFrameDataset(write_list(tmp_path / "l.txt", lines), mode=mode, **SMALL | kw)
    ds.set_epoch(2)
    indices = [3, 0, 2, 1]
    handed = []  # the crops' out: a batch's memory, or None
    for name, at in (("train_crop", 4), ("resized_crop", 3)):
        crop = getattr(data, name)
        spy = lambda *a, crop=crop, at=at: (
            handed.append(len(a) > at and a[at] is not None) or crop(*a)
        )
        monkeypatch.setattr(data, name, spy)
    fetched = ds.__getitems__(indices)
    (x, y, info), (want, want_y, want_info) = (
        data.collate(items) for items in (fetched, [ds[i] for i in indices])
    )
    assert torch.equal(x, want) and torch.equal(y, want_y) and x.stride() == want.stride()
    assert info.keys() == want_info.keys()
    assert all(torch.equal(info[k], want_info[k]) for k in info if torch.is_tensor(info[k]))
    cut = mode != "test" and not kw.get("reps") and "train_crop" not in kw
    assert isinstance(fetched, data.Batch) == cut
    if cut:
        assert x.data_ptr() == fetched.clips.data_ptr()
    # a crop got the batch's memory for the 3 videos whose frames are in clip order (TSN
    # segments overlap here: copied into place)
    windows = mode != "test" and not {"augment", "train_crop", "reps", "num_segments"} & set(kw)
    assert sum(handed) == (3 if windows else 0)


def test_a_subclass_s_own_items_are_what_the_dataloader_fetches(synth):
    """A fork's subclass that makes its own items (its __getitem__) gets them from the DataLoader:
    __getitems__ then fetches them one by one, through it."""

    class Indexed(data.VideoFrameDataset):
        def __getitem__(self, index):
            clip, label, info = super().__getitem__(index)
            return clip, label, {**info, "index": index}

    root, train, _ = synth
    ds = Indexed(train, mode="train", **SMALL)
    assert not isinstance(ds.__getitems__([0, 1]), data.Batch)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, collate_fn=data.collate)
    assert [info["index"].tolist() for _, _, info in loader] == [[0, 1], [2, 3]]


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
    # documented: keeps the format
    assert data.normalize(x).is_contiguous(memory_format=torch.channels_last_3d)


def test_normalize():
    x = torch.randint(
        0, 256, (2, 3, 4, 5, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    mean = torch.tensor(data.MEAN).view(3, 1, 1, 1)
    std = torch.tensor(data.STD).view(3, 1, 1, 1)
    out = data.normalize(x)
    assert out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out, (x / 255 - mean) / std, rtol=1e-5, atol=1e-5)
    assert data.normalize(x, dtype=torch.float64).dtype == torch.float64
    torch.testing.assert_close(data.normalize(x[0]), out[0])  # one clip (3, T, H, W) too
    # PySlowFast / pytorchvideo weights' statistics
    kinetics = data.normalize(x, (0.45,) * 3, (0.225,) * 3)
    torch.testing.assert_close(kinetics, (x / 255 - 0.45) / 0.225, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        data.normalize(x.float())
    with pytest.raises(ValueError):
        data.normalize(torch.zeros(2, 4, 4, 5, 6, dtype=torch.uint8))  # 4 channels
    with pytest.raises(ValueError):
        data.normalize(x.movedim(1, -1))  # channels last dim, not dim -4


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad,what",
    [
        ("lonely", "expected"),  # one field
        ("two fields", "expected"),
        ("vid x 0", "integers"),
        ("vid 3 1.5", "integers"),
        ("vid 0 1", "num_frames must be >= 1"),
        ("vid -2 1", "num_frames must be >= 1"),
        ("vid 3 4", r"label 4 outside \[0, 4\)"),
        ("vid 3 -1", "label -1 outside"),
    ],
)
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
    ds = data.VideoFrameDataset(
        path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32
    )
    with pytest.raises(decode.BadVideo) as err:
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
    ds = data.VideoFrameDataset(
        path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32
    )
    with pytest.raises(decode.BadVideo) as err:
        ds[0]
    message = str(err.value)
    assert str(bad) in message and str(video) in message and f"{path}:1" in message


def test_frame_size_change_names_frame_and_line(synth, tmp_path):
    root, _, _ = synth
    video = copy_video(root / "val" / "video_0000", tmp_path / "vid")
    odd = video / "img_00004.jpg"
    Image.new("RGB", (W + 2, H)).save(odd)
    path = write_list(tmp_path / "list.txt", [f"vid {NUM_FRAMES} 0"])
    ds = data.VideoFrameDataset(
        path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32
    )
    with pytest.raises(decode.BadVideo, match=re.escape(f"{path}:1: {odd}")):
        ds[0]


def test_pillow_fallback_decoder(synth, tmp_path, monkeypatch):
    """Without TorchCodec, data.py decodes with Pillow: same clips (up to decoder rounding), same
    errors."""
    root, _, val = synth
    ds = data.VideoFrameDataset(val, mode="val", **SMALL)
    fast = ds[1][0]
    frame = decode.decode_frame(str(root / "val" / "video_0001" / "img_00001.jpg"))
    gray = tmp_path / "gray.jpg"
    Image.fromarray(np.full((12, 16), 77, np.uint8)).save(gray)
    assert decode.decode_frame(str(gray)).shape == (12, 16, 3)

    monkeypatch.setattr(decode, "DECODER", "pil")  # what data.py picks when TorchCodec is missing
    slow = ds[1][0]
    assert slow.shape == fast.shape and slow.dtype == torch.uint8
    assert_interleaved(slow)
    assert (slow.int() - fast.int()).abs().max() <= 2
    pil = decode.decode_frame(str(root / "val" / "video_0001" / "img_00001.jpg"))
    assert pil.shape == frame.shape == (H, W, 3) and pil.dtype == torch.uint8
    assert (pil.int() - frame.int()).abs().max() <= 2
    assert decode.decode_frame(str(gray)).shape == (12, 16, 3)  # grayscale JPEG -> RGB

    corrupt = copy_video(root / "val" / "video_0000", tmp_path / "corrupt")
    (corrupt / "img_00002.jpg").write_bytes(os.urandom(200))
    holed = copy_video(root / "val" / "video_0000", tmp_path / "holed")
    (holed / "img_00004.jpg").unlink()
    path = write_list(tmp_path / "list.txt", [f"corrupt {NUM_FRAMES} 0", f"holed {NUM_FRAMES} 1"])
    ds = data.VideoFrameDataset(
        path, mode="val", t_length=NUM_FRAMES, t_stride=1, new_size=40, crop_size=32
    )
    with pytest.raises(decode.BadVideo, match=re.escape(f"{path}:1: {corrupt / 'img_00002.jpg'}")):
        ds[0]
    with pytest.raises(decode.BadVideo, match=re.escape(f"{path}:2: {holed / 'img_00004.jpg'}")):
        ds[1]


# ============================== data.py: regression
# ===================================================


def test_multi_clip_test_views_hold_their_own_frames(tmp_path):
    # Frame k has pixel value k. 10 test clips of 16x4 over 214 frames interleave without sharing
    # frames: each view must still hold exactly its clip's frames, in order (decoding each frame
    # once must not mix them).
    os.makedirs(tmp_path / "v")
    for k in range(1, 215):
        Image.fromarray(np.full((40, 48, 3), k, np.uint8)).save(tmp_path / "v" / f"img_{k:05d}.png")
    (tmp_path / "l.txt").write_text("v 214 0\n")
    ds = data.VideoFrameDataset(
        tmp_path / "l.txt",
        image_tmpl="img_{:05d}.png",
        mode="test",
        num_clips=10,
        num_crops=3,
        t_length=16,
        t_stride=4,
        new_size=40,
        crop_size=40,
    )
    clip, _, _ = ds[0]
    got = clip[:, 0, :, 20, 20].numpy().reshape(10, 3, 16)  # (clips, crops, T)
    want = data.sample_indices(214, 16, 4, "test", 10)
    assert (got == want[:, None, :]).all()
