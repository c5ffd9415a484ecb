"""Video files: every frame read -- by decode.open_video and by the Dataset in every mode -- is the
frame a plain decode gives at that index, for each decoder, on videos made to catch the classic bugs
(tests/videos.py); bad videos are replaced in training and one line in evaluation; preparation keeps
every frame in order.

python -m pytest -q tests/test_video.py
"""

import os
import re
import subprocess
import sys

import av
import numpy as np
import pytest
import torch
from PIL import Image

import data
import decode
import gpudecode
from conftest import REPO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import videos  # noqa: E402  (tests/videos.py, beside this file)

DECODERS = ["pyav"] + (["torchcodec"] if decode.pick_video_decoder() == "torchcodec" else [])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{name: (path, the sequential decode's frames)} for every trap video."""
    folder = tmp_path_factory.mktemp("videos")
    paths = videos.make_all(folder, videos.TRAPS)
    return {name: (path, videos.sequential(path)) for name, path in paths.items()}


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return videos.make_all(tmp_path_factory.mktemp("bad"), videos.BAD)


def index_sets(n, rng):
    """Clips as the sampler asks for them: sorted runs at a stride, the first and last frames,
    repeats (short videos), a single frame, random sets, and every frame."""
    yield [0], [n - 1], list(range(n))
    for stride in (1, 2, 4):
        for _ in range(4):
            start = int(rng.integers(0, max(1, n - 8 * stride)))
            yield list(range(start, min(n, start + 8 * stride), stride))
    for _ in range(6):
        yield sorted(rng.choice(n, 5, replace=False).tolist())
    yield [n - 1, n - 1, n - 1], [3, 3, 4], [n - 2, 1]  # unsorted is fine too


@pytest.mark.parametrize("decoder", DECODERS)
def test_webm_and_mov_named_relative_to_data_root(decoder, tmp_path):
    """The other listed containers, .webm (VP9) and .mov (h264 starting at 2.5 s), in a list whose
    paths are relative to --data_root, not to the list's folder: val and test clips are the
    sequential decode's."""
    root, lists = tmp_path / "videos", tmp_path / "lists"
    root.mkdir(), lists.mkdir()
    paths = {
        name: make(str(root / name))
        for name, make in (("a.webm", videos.vp9_webm), ("b.mov", videos.start_offset))
    }
    seqs = [videos.sequential(paths[name]) for name in ("a.webm", "b.mov")]
    # two- and three-column lines
    (lists / "l.txt").write_text(f"a.webm 1\nb.mov {len(seqs[1])} 0\n")
    for mode, views in (("val", {}), ("test", dict(num_clips=2, num_crops=3))):
        kw = dict(root=str(root), mode=mode, video_decoder=decoder, **SIZES, **views)
        ds, ref = (
            data.VideoFrameDataset(lists / "l.txt", **kw),
            data.VideoFrameDataset(lists / "l.txt", **kw),
        )
        assert [v.num_frames for v in ds.videos] == [len(s) for s in seqs]
        for i, seq in enumerate(seqs):
            ref.load_frames = sequential_reader(seq)
            assert torch.equal(ds[i][0], ref[i][0]), (mode, i)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.TRAPS))
def test_every_frame_is_the_sequential_decodes(name, decoder, made):
    path, seq = made[name]
    assert len(seq) == videos.FRAMES - 3 * (name == "edit_list.mp4")
    assert [videos.frame_index(f) for f in seq] == list(
        range(3 * (name == "edit_list.mp4"), videos.FRAMES)
    )
    num_frames, read = decode.open_video(path, decoder)
    assert num_frames == len(seq)
    rng = np.random.default_rng(0)
    for sets in index_sets(len(seq), rng):
        for indices in sets if isinstance(sets, tuple) else (sets,):
            got = read(indices)
            want = [videos.frame_index(seq[i]) for i in indices]
            assert [videos.frame_index(f) for f in got] == want, indices
            for f, i in zip(got, indices):
                assert f.dtype == torch.uint8 and f.shape == (videos.H, videos.W, 3)
                assert torch.equal(f, torch.from_numpy(seq[i])), (indices, i)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.TRAPS))
def test_past_the_end_is_one_line(name, decoder, made):
    path, seq = made[name]
    _, read = decode.open_video(path, decoder)
    n = len(seq)
    with pytest.raises(RuntimeError, match=f"frame {n + 5} asked for, the video has {n} frames"):
        read([0, n + 4])


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.BAD))
def test_bad_videos_are_one_line_errors(name, decoder, bad):
    """Opening or reading raises RuntimeError with a one-line reason (never hangs, never wrong
    frames)."""
    with pytest.raises(RuntimeError) as err:
        num_frames, read = decode.open_video(bad[name], decoder)
        read(list(range(num_frames)))
    assert "\n" not in str(err.value) and str(err.value)


def test_decoder_choice(monkeypatch):
    assert decode.pick_video_decoder("pyav") == "pyav"
    assert decode.pick_video_decoder("auto") == DECODERS[-1]
    with pytest.raises(ValueError, match="--video_decoder must be one of"):
        decode.pick_video_decoder("nvdec")
    monkeypatch.setattr(decode, "_NO_VIDEO_CODEC", "no FFmpeg libraries")
    assert decode.pick_video_decoder("auto") == "pyav"
    with pytest.raises(
        ValueError, match="torchcodec: TorchCodec.s video decoder is not available here"
    ):
        decode.pick_video_decoder("torchcodec")


# ---- the Dataset ---------------------------------------------------------------------------------
def one_video_list(folder, path, n=None, label=0):
    """A list naming one video: three columns (n given) or mmaction2's two."""
    list_file = folder / f"list_{os.path.basename(path)}_{n}.txt"
    list_file.write_text(f"{os.path.relpath(path, folder)}{'' if n is None else f' {n}'} {label}\n")
    return list_file


MODES = {
    "train": {},
    "val": {},
    "test 2x3": dict(num_clips=2, num_crops=3),
    "test 10-crop": dict(num_crops=10),
}
SIZES = dict(t_length=8, t_stride=3, new_size=64, crop_size=48)


def sequential_reader(seq, start_index=1):
    return lambda video, numbers: [torch.from_numpy(seq[int(i) - start_index]) for i in numbers]


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.TRAPS))
def test_dataset_clips_are_the_sequential_decodes(name, decoder, made, tmp_path, monkeypatch):
    """Every mode (seeded train clips, val, multi-view and 10-crop test): the clip from the video
    file equals the clip the same code makes from the frames of a plain decode; two- and
    three-column lines give the same video."""
    path, seq = made[name]
    two, three = one_video_list(tmp_path, path), one_video_list(tmp_path, path, len(seq))
    for mode, views in MODES.items():
        kw = dict(mode=mode.split()[0], video_decoder=decoder, **SIZES, **views)
        ds, ref = data.VideoFrameDataset(three, **kw), data.VideoFrameDataset(two, **kw)
        assert ds.videos == [data.Video(os.path.normpath(path), len(seq), 0, 1, str(three))]
        assert ref.videos[0].num_frames == len(seq)
        monkeypatch.setattr(ref, "load_frames", sequential_reader(seq))
        for epoch in range(3 if mode == "train" else 1):
            ds.set_epoch(epoch)
            ref.set_epoch(epoch)
            (clip, _, info), (want, _, want_info) = ds[0], ref[0]
            assert torch.equal(clip, want), (mode, epoch)
            assert info["bad"] == want_info["bad"] == ""
            assert ("box" in info) == (mode == "train")
            assert mode != "train" or torch.equal(info["box"], want_info["box"])


def test_one_open_per_sample_each_frame_once_and_no_open_at_start(made, tmp_path, monkeypatch):
    """A three-column list opens no file when read; a sample opens its file once and asks for each
    frame its views need once (10 clips x 3 crops overlap on a 72-frame video)."""
    path, seq = made["edit_list.mp4"]
    opened, real = [], decode.open_video

    def counting(source, *args, **kw):
        n, read = real(source, *args, **kw)
        opened.append([])
        return n, lambda indices: opened[-1].extend(int(i) for i in indices) or read(indices)

    monkeypatch.setattr(decode, "open_video", counting)
    ds = data.VideoFrameDataset(
        one_video_list(tmp_path, path, len(seq)), mode="test", num_clips=10, num_crops=3, **SIZES
    )
    assert opened == []
    assert ds[0][0].shape == (30, 3, 8, 48, 48)
    assert len(opened) == 1 and len(opened[0]) == len(set(opened[0])) < 10 * 8


def test_video_list_and_its_extracted_twin_pick_the_same_frames(made, tmp_path):
    """Frame k of a video is img_{k+1:05d}.jpg of `prepare.py extract`: for the same seed, a video
    list and its frame-folder twin ask for the same frame numbers, and those show the same
    pictures."""
    import prepare

    src = tmp_path / "src"
    src.mkdir()
    for name in ("edit_list.mp4", "vfr.mkv", "mpeg4.avi"):
        os.link(made[name][0], src / name)
    prepare.extract(str(src), str(tmp_path / "frames"), short_side=0, jobs=1)
    for name in ("edit_list.mp4", "vfr.mkv", "mpeg4.avi"):
        path, seq = made[name]
        folder = tmp_path / "frames" / os.path.splitext(name)[0]
        twin = one_video_list(tmp_path, folder, len(os.listdir(folder)))
        for mode, views in MODES.items():
            asked = {}
            for key, list_file in (("video", one_video_list(tmp_path, path)), ("frames", twin)):
                ds = data.VideoFrameDataset(list_file, mode=mode.split()[0], **SIZES, **views)
                calls, load = [], ds.load_frames
                ds.load_frames = lambda video, numbers, calls=calls, load=load: (
                    calls.append([int(i) for i in numbers]) or load(video, numbers)
                )
                ds[0]
                asked[key] = (
                    calls[0],
                    [videos.frame_index(f) for f in load(ds.videos[0], calls[0])],
                )
            assert asked["video"] == asked["frames"], (name, mode)
            assert asked["video"][1] == [videos.frame_index(seq[i - 1]) for i in asked["video"][0]]


@pytest.fixture
def mixed_list(made, bad, tmp_path):
    """A list of 2 good videos, a frame folder, every bad video and a good video listed with more
    frames than it has; three- and two-column lines mixed. -> (list file, {line: name})."""
    folder = tmp_path / "frames_0"
    folder.mkdir()
    for k in range(20):
        Image.fromarray(videos.pattern(k)).save(folder / f"img_{k + 1:05d}.jpg", quality=95)
    good = made["h264_long_gop.mp4"][0], made["mpeg4.avi"][0]
    lines = {
        2: (good[0], f"{len(made['h264_long_gop.mp4'][1])} 0"),
        3: (good[1], "1"),
        4: (folder, "20 1"),
    }
    for k, name in enumerate(sorted(bad), 5):
        lines[k] = (bad[name], "75 0" if k % 2 else "0")
    lines[k + 1] = (made["vfr.mkv"][0], f"{videos.FRAMES + 10} 1")
    text = "# video, label (two columns) or video, frames, label\n" + "".join(
        f"{p} {rest}\n" for p, rest in lines.values()
    )
    (tmp_path / "mixed.txt").write_text(text)
    return tmp_path / "mixed.txt", {k: os.path.basename(str(p)) for k, (p, _) in lines.items()}


@pytest.mark.parametrize("decoder", DECODERS)
def test_bad_videos_replaced_in_training_one_line_in_evaluation(mixed_list, decoder):
    list_file, names = mixed_list
    train = data.VideoFrameDataset(list_file, mode="train", video_decoder=decoder, **SIZES)
    val = data.VideoFrameDataset(list_file, mode="val", video_decoder=decoder, **SIZES)
    bad_lines = [line for line, name in names.items() if line > 4]
    for i, video in enumerate(train.videos):
        if video.line not in bad_lines:
            assert train[i][2]["bad"] == "" and val[i][0].shape == (3, 8, 48, 48)
            continue
        clip, label, info = train[i]  # replaced by a good video, and recorded
        first = info["bad"].splitlines()[0]
        assert first.startswith(f"{list_file}:{video.line}: ") and names[video.line] in first, first
        assert clip.shape == (3, 8, 48, 48)
        with pytest.raises(decode.BadVideo) as e:
            val[i]
        assert "\n" not in str(e.value) and str(e.value).startswith(
            f"{list_file}:{video.line}: "
        ), e.value
    assert "85 frames listed, the video has 75" in str(
        pytest.raises(decode.BadVideo, val.__getitem__, 7).value
    )


def test_bad_videos_through_workers_and_bytes_mode(mixed_list):
    """Two DataLoader workers, the normal path and bytes mode (--decode_device: the loader reads and
    opens the file, decode_batch decodes): the same clips and the same bad-video lines, and no hang.
    A video whose packets fail only when decoded cannot be replaced in bytes mode (its loader has
    moved on): decode_batch names it, as it does a frame that fails only on the GPU."""
    list_file, names = mixed_list
    broken = next(line for line, name in names.items() if name == "broken_middle.avi")
    text = list_file.read_text().splitlines(keepends=True)
    (list_file.parent / "no_broken.txt").write_text(
        "".join(text[: broken - 1] + ["#\n"] + text[broken:])
    )
    out = {}
    for encoded in (False, True):
        ds = data.VideoFrameDataset(
            list_file.parent / "no_broken.txt", mode="train", encoded=encoded, **SIZES
        )
        loader = torch.utils.data.DataLoader(
            ds,
            batch_size=3,
            num_workers=2,
            timeout=120,
            collate_fn=gpudecode.collate_encoded if encoded else data.collate,
        )
        batches = [gpudecode.decode_batch(b, "cpu", ds) if encoded else b for b in loader]
        out[encoded] = torch.cat([b[0] for b in batches]), [b[2]["bad"] for b in batches]
    assert torch.equal(out[False][0], out[True][0]) and out[False][1] == out[True][1]
    assert sum(bool(line) for lines in out[False][1] for line in lines) == 4
    ds = data.VideoFrameDataset(list_file, mode="train", encoded=True, **SIZES)
    with pytest.raises(
        decode.BadVideo, match=f"^{list_file}:{broken}: .*broken_middle.avi: unreadable video"
    ):
        gpudecode.decode_batch(gpudecode.collate_encoded([ds[broken - 2]]), "cpu", ds)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", ["train", "test"])
def test_decode_device_cuda_decodes_videos_on_the_gpu(made, tmp_path, mode):
    """--decode_device cuda: TorchCodec's CUDA decoder (NVDEC) gives the CPU decoder's clips, up to
    colour conversion rounding."""
    lines = "".join(
        f"{made[n][0]} {len(made[n][1])} 0\n"
        for n in ("h264_long_gop.mp4", "start_offset.mp4", "vfr.mkv", "mpeg4.avi")
    )
    (tmp_path / "l.txt").write_text(lines)
    views = dict(num_clips=2, num_crops=3) if mode == "test" else {}
    ds = data.VideoFrameDataset(tmp_path / "l.txt", mode=mode, encoded=True, **views, **SIZES)
    batch = gpudecode.collate_encoded([ds[i] for i in range(len(ds))])
    cpu, gpu = (
        gpudecode.decode_batch(batch, "cpu", ds)[0],
        gpudecode.decode_batch(batch, "cuda", ds)[0],
    )
    assert gpu.device.type == "cuda" and gpu.shape == cpu.shape
    diff = (gpu.cpu().float() - cpu.float()).abs()
    assert diff.mean() < 3 and diff.max() < 40, (diff.mean(), diff.max())


# ---- train.py ------------------------------------------------------------------------------------
VIDEO_TINY = [
    "--arch",
    "resnet10_3d",
    "--t_length",
    "4",
    "--t_stride",
    "2",
    "--new_size",
    "64",
    "--crop_size",
    "48",
    "-b",
    "2",
    "--lr",
    "0.01",
    "--dro",
    "0",
    "-j",
    "2",
    "-p",
    "1",
    "--device",
    "cpu",
    "--epochs",
    "1",
]


@pytest.mark.slow
@pytest.mark.parametrize("decoder", DECODERS)
def test_train_and_evaluate_from_video_files(made, bad, tmp_path, decoder, capsys):
    """train.py on a list of video files (two- and three-column lines, a frame folder, a bad video),
    with 2 loader workers: one line names the decoder; the bad video is replaced and written to
    bad_videos.txt; evaluation with 2 clips x 3 crops runs on the video list."""
    import train

    folder = tmp_path / "frames_0"
    folder.mkdir()
    for k in range(20):
        Image.fromarray(videos.pattern(k)).save(folder / f"img_{k + 1:05d}.jpg", quality=95)
    lines = [
        f"{made['h264_long_gop.mp4'][0]} 0",
        f"{made['mpeg4.avi'][0]} 75 1",
        f"{folder} 20 0",
        f"{made['vfr.mkv'][0]} 75 1",
        f"{bad['truncated.mp4']} 75 0",
        f"{made['start_offset.mp4'][0]} 1",
    ]
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "val.txt").write_text("\n".join(lines[:4]) + "\n")
    args = [
        "ucf101",
        str(tmp_path / "train.txt"),
        str(tmp_path / "val.txt"),
        *VIDEO_TINY,
        "--num_classes",
        "2",
        "--video_decoder",
        decoder,
        "--output_root",
        str(tmp_path / "out"),
    ]
    train.main(train.parse_args(args))
    out = capsys.readouterr()
    assert f"video files: decoded with {decoder} (AVI files: pyav; --video_decoder)" in out.out
    (run,) = (tmp_path / "out").iterdir()
    assert (
        "truncated.mp4" in (run / "bad_videos.txt").read_text()
        and f"{tmp_path / 'train.txt'}:5: " in (run / "bad_videos.txt").read_text()
    )
    train.main(
        train.parse_args(
            [
                *args,
                "--evaluate",
                "--resume",
                str(run / "checkpoint.pth"),
                "--test_clips",
                "2",
                "--test_crops",
                "3",
            ]
        )
    )
    assert "video files: decoded with" in capsys.readouterr().out


# ---- bench.py video ------------------------------------------------------------------------------
def test_bench_video_rows(made, tmp_path, capsys):
    """bench.py video on a folder of originals: JPEG frames and re-encoded videos made beside them,
    a row per source and decoder for train and val clips, disk sizes, preparation and start-up
    times."""
    import bench

    linked(tmp_path / "original", [made[n][0] for n in ("h264_long_gop.mp4", "vfr.mkv")])
    out = bench.main(
        [
            "video",
            "--videos_dir",
            str(tmp_path),
            "--iters",
            "2",
            "--repeats",
            "1",
            "--t_length",
            "4",
            "--new_size",
            "48",
            "--crop_size",
            "32",
        ]
    )
    rows = ["(a) JPEG frames"] + [
        f"({k}) {src}, {d}"
        for k, src in (("b", "re-encoded"), ("c", "original"))
        for d in DECODERS[::-1]
    ]
    assert sorted(os.listdir(tmp_path / "reencoded")) == ["h264_long_gop.mp4", "vfr.mp4"]
    for mode in ("train", "val"):
        assert list(out["modes"][mode]) == rows and all(v > 0 for v in out["modes"][mode].values())
    assert (
        set(out["disk"]) == {"frames", "reencoded", "original"}
        and out["startup"]["list_240k_s"] > 0
    )
    text = capsys.readouterr().out
    assert "(b) re-encoded, pyav" in text and "a 240k-line three-column list reads in" in text
    # where a re-encoded train clip's time goes, per decoder
    split = out["split"]["pyav"]
    assert split["frames decoded"] >= 4 and all(split[k] > 0 for k in ("decode", "index", "open"))
    assert "a train clip re-encoded, pyav, CPU ms per clip: read" in text
    # the loader's stages around the decoder, for videos and for their JPEG frames
    for name in ("pyav", "JPEG frames"):
        assert all(out["split"][name][k] > 0 for k in ("read", "crop / resize", "collate"))
    assert out["split"]["JPEG frames"]["decode"] > 0
    # the page faults a clip: a count (the heap's history shows in the ms), printed as one
    assert all(out["split"][name]["page faults"] >= 0 for name in out["split"])
    assert re.search(r"JPEG frames, CPU ms per clip: .*, page faults \d+$", text, re.M), text
    # re-encoded over JPEG frames, side by side: one ratio per round, their median and range
    for mode in ("train", "val"):
        p = out["paired"][mode]
        assert len(p["rounds"]) == 5 and p["min"] <= p["median"] <= p["max"]
        assert p["median"] == pytest.approx(np.median(p["rounds"]))
        line = f"re-encoded ({DECODERS[-1]}) / JPEG frames, {mode} clips, per core, side by side: "
        assert f"{line}median {p['median']:.3f}x, range {p['min']:.3f}-{p['max']:.3f}" in text
    assert out["source"] == "yours" and "originals: yours" in text


# ---- preparation ---------------------------------------------------------------------------------
def linked(folder, paths):
    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        os.link(path, folder / os.path.basename(path))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("keyint", [1, 5])
def test_reencode_keyint_sets_the_keyframe_interval(made, tmp_path, keyint):
    """`prepare.py reencode --keyint N`: a keyframe every N frames (1: every frame, all-intra),
    every frame still in its place, read exactly through the Dataset; --keyint 0 is one line, exit
    2, nothing written."""
    import prepare

    src = linked(tmp_path / "src", [made["h264_long_gop.mp4"][0]])
    argv = ["reencode", str(src), str(tmp_path / "dst"), "-j", "1", "--keyint", str(keyint)]
    assert prepare.main(argv) == 0
    out = tmp_path / "dst" / "h264_long_gop.mp4"
    with av.open(str(out)) as c:
        keys = [p.is_keyframe for p in c.demux(video=0) if p.size]
    assert [k for k, key in enumerate(keys) if key] == list(range(0, len(keys), keyint))
    seq = made["h264_long_gop.mp4"][1]
    assert [videos.frame_index(f) for f in videos.sequential(out)] == [
        videos.frame_index(f) for f in seq
    ]
    (tmp_path / "list.txt").write_text(f"{out} {len(seq)} 0\n")
    ds = data.VideoFrameDataset(tmp_path / "list.txt", mode="val", new_size=64, crop_size=64)
    numbers = ds.choose_frames(ds.videos[0], np.random.default_rng(0)).reshape(-1)
    got = ds.load_frames(ds.videos[0], numbers)
    assert [videos.frame_index(f.numpy()) for f in got] == [int(n) - 1 for n in numbers]
    p = subprocess.run(
        [sys.executable, str(REPO / "prepare.py"), *argv[:-1], "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "--keyint must be >= 1 (1: every frame a keyframe), got 0" in p.stderr


def test_reencode_keeps_every_frame_in_order_and_lists_failures(made, bad, tmp_path, capsys):
    """`prepare.py reencode` (short side 128, so resized): frame k of each output shows what frame k
    of a plain decode of its input shows -- variable frame rates and edit lists included -- with a
    keyframe every REENCODE["gop"] frames and no B-frames. Bad videos: exit 1, each listed on one
    line, nothing written for them; a second run skips the finished files."""
    import prepare

    made = {n: v for n, v in made.items() if n != "start_offset.mkv"}  # its name twin: tried below
    broken = [bad["truncated.mp4"], bad["audio_only.mp4"]]
    src = linked(tmp_path / "src", [p for p, _ in made.values()] + broken)
    assert (
        prepare.main(
            ["reencode", str(src), str(tmp_path / "dst"), "--short-side", "128", "-j", "2"]
        )
        == 1
    )
    err = capsys.readouterr().err.splitlines()
    assert sorted(line.split(": ")[1] for line in err if line.startswith("failed: ")) == [
        str(src / "audio_only.mp4"),
        str(src / "truncated.mp4"),
    ]
    gop = prepare.REENCODE["gop"]
    for name, (path, seq) in made.items():
        out = tmp_path / "dst" / (os.path.splitext(name)[0] + ".mp4")
        frames = videos.sequential(out)
        assert frames[0].shape == (128, 192, 3), name
        assert [videos.frame_index(f) for f in frames] == [videos.frame_index(f) for f in seq], name
        with av.open(str(out)) as c:
            packets = [(p.pts, p.dts, p.is_keyframe) for p in c.demux(video=0) if p.size]
        keys = [k for k, (_, _, key) in enumerate(packets) if key] + [len(seq)]
        assert keys[0] == 0 and max(np.diff(keys)) <= gop, keys  # scene cuts may add keyframes
        # no B-frames: decode order is presentation order
        assert all(pts == dts for pts, dts, _ in packets)
        assert decode.video_frames(str(out)) == len(seq)
    assert sorted(os.listdir(tmp_path / "dst")) == sorted(
        os.path.splitext(n)[0] + ".mp4" for n in made
    )
    os.link(made["start_offset.mp4"][0], src / "start_offset.mkv")
    assert prepare.main(["reencode", str(src), str(tmp_path / "dst"), "--short-side", "128"]) == 1
    out, err = capsys.readouterr()
    assert (
        f"re-encoded 0 videos (0 frames) to {tmp_path / 'dst'}; {len(made)} already there, 3 failed"
        in out
    )
    assert (
        f"failed: {src / 'start_offset.mp4'}: {src / 'start_offset.mkv'} is re-encoded to the same"
        in err
    )


def test_lists_on_videos_ucf101_split_and_kinetics_csv(made, bad, tmp_path, capsys):
    """`lists` on a folder of video files: UCF101 splits and Kinetics CSV files -> lists naming the
    videos with their frame counts, the classes file; missing and unreadable videos reported one
    line each, never dropped silently. The lists load and `check` passes them."""
    import prepare

    clips = {
        "abc_000014_000024.mp4": "h264_long_gop.mp4",
        "x-y_000000_000010.avi": "mpeg4.avi",
        "q_000003_000013.mkv": "vfr.mkv",
    }
    videos_dir = tmp_path / "kinetics" / "videos"
    (videos_dir / "zumba").mkdir(parents=True)
    for clip, name in clips.items():
        os.link(made[name][0], videos_dir / ("zumba" if clip.startswith("abc") else "") / clip)
    os.link(bad["truncated.mp4"], videos_dir / "bad_000001_000011.mp4")
    header = "label,youtube_id,time_start,time_end,split\n"
    (tmp_path / "train.csv").write_text(
        header + "zumba,abc,14,24,train\nabseiling,x-y,0,10,train\n"
        "abseiling,gone,5,15,train\nzumba,bad,1,11,train\n"
    )
    (tmp_path / "validate.csv").write_text(header + "zumba,q,3,13,val\n")
    assert (
        prepare.main(
            [
                "lists",
                str(videos_dir),
                "--kinetics",
                str(tmp_path / "train.csv"),
                str(tmp_path / "validate.csv"),
                "-j",
                "2",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert f"{tmp_path / 'train.csv'}:4: no frame folder or video for gone_000005_000015" in err
    assert f"{tmp_path / 'train.csv'}:5: no frame folder or video for bad_000001_000011" in err
    assert "bad_000001_000011.mp4: unreadable video" in err
    root = tmp_path / "kinetics"
    assert (root / "kinetics2_classes.txt").read_text() == "abseiling\nzumba\n"
    assert (root / "kinetics2_train_list.txt").read_text() == (
        f"videos/zumba/abc_000014_000024.mp4 {videos.FRAMES} 1\n"
        f"videos/x-y_000000_000010.avi {videos.FRAMES} 0\n"
    )
    assert (
        root / "kinetics2_val_list.txt"
    ).read_text() == f"videos/q_000003_000013.mkv {videos.FRAMES} 1\n"
    assert "2 videos, 2 classes (2 missing, listed above)" in out
    assert prepare.main(["check", str(root / "kinetics2_train_list.txt"), "--full"]) == 0
    ds = data.VideoFrameDataset(root / "kinetics2_val_list.txt", mode="val", **SIZES)
    assert ds[0][0].shape == (3, 8, 48, 48)
    # UCF101's official split files, naming .avi files, on a folder of videos (any container)
    splits = tmp_path / "splits"
    splits.mkdir()
    (splits / "classInd.txt").write_text("1 Biking\n2 Zumba\n")
    (splits / "trainlist01.txt").write_text("Biking/v_Biking_g01_c01.avi 1\n")
    (splits / "testlist01.txt").write_text("Zumba/v_Zumba_g02_c01.avi\n")
    ucf = tmp_path / "ucf" / "videos"
    for cls, name, clip in (
        ("Biking", "mpeg4.avi", "v_Biking_g01_c01.avi"),
        ("Zumba", "edit_list.mp4", "v_Zumba_g02_c01.mp4"),
    ):
        linked(ucf / cls, [made[name][0]]).joinpath(name).rename(ucf / cls / clip)
    assert prepare.main(["lists", str(ucf), "--ucf101", str(splits)]) == 0
    assert (
        tmp_path / "ucf" / "ucf101_val_split1_list.txt"
    ).read_text() == f"videos/Zumba/v_Zumba_g02_c01.mp4 {videos.FRAMES - 3} 1\n"


def test_check_reports_every_bad_video_in_one_line(mixed_list, capsys):
    import prepare

    list_file, names = mixed_list
    for full in ([], ["--full"]):
        assert prepare.main(["check", str(list_file), *full]) == 1
        out = capsys.readouterr().out.splitlines()
        problems = [
            line for line in out if line.startswith(f"{list_file}:") and "problem(s)" not in line
        ]
        assert [int(p.split(":")[1]) for p in problems] == [k for k in names if k > 4], problems
    assert f"85 frames listed, the video has {videos.FRAMES}" in problems[-1]


def test_pyav_reads_skip_the_frames_between_keyframes(made, tmp_path, monkeypatch):
    """PyAV on a re-encoded video (`--keyint 12`, no B-frames): a 16 x 4 clip seeks to
    a keyframe whenever one lies past the last frame decoded, so it decodes fewer frames than the
    62 from its first keyframe on (52 at exactly 12 apart), and gets the frames a plain decode
    gives."""
    import prepare

    src = linked(tmp_path / "src", [made["start_offset.mp4"][0]])
    argv = ["reencode", str(src), str(tmp_path / "dst"), "--short-side", "64", "--keyint", "12"]
    prepare.main(argv)
    path = str(tmp_path / "dst" / "start_offset.mp4")
    seq = videos.sequential(path)
    decoded, real_open = [0], decode._av_open

    class Counted:  # the container, its decoded frames counted
        def __init__(self, c):
            self.c = c

        def __getattr__(self, name):
            return getattr(self.c, name)

        def decode(self, *a, **k):
            for frame in self.c.decode(*a, **k):
                decoded[0] += 1
                yield frame

    monkeypatch.setattr(decode, "_av_open", lambda source: Counted(real_open(source)))
    n, read = decode.open_video(path, "pyav")
    need = list(range(1, 62, 4))
    got = read(need)
    assert [videos.frame_index(f) for f in got] == [videos.frame_index(seq[i]) for i in need]
    assert all(torch.equal(f, torch.from_numpy(seq[i])) for f, i in zip(got, need))
    with av.open(path) as c:
        keys = [i for i, p in enumerate(c.demux(video=0)) if p.size and p.is_keyframe]
    assert all(b - a <= 12 for a, b in zip(keys, keys[1:]))  # and scene cuts: more keyframes
    last, want = -1, 0  # each frame from its keyframe, or on from the last decoded one
    for k in need:
        key = max(i for i in keys if i <= k)
        want, last = want + k - max(key - 1, last), k
    assert decoded[0] == want < 62  # 62: frames 0 .. 61, decoded on from the first keyframe
