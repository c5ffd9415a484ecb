"""Video files: every frame read is the frame a plain decode gives at that index, for each decoder, on
videos made to catch the classic bugs (tests/videos.py); bad videos are one-line errors.

python -m pytest -q tests/test_video.py
"""
import os
import sys

import numpy as np
import pytest
import torch

import _video_scratch as vid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import videos  # noqa: E402  (tests/videos.py, beside this file)

DECODERS = ["pyav"] + (["torchcodec"] if vid._NO_VIDEO_CODEC is None and vid.VideoDecoder is not None else [])


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
    """Clips as the sampler asks for them: sorted runs at a stride, the first and last frames, repeats
    (short videos), a single frame, random sets, and every frame."""
    yield [0], [n - 1], list(range(n))
    for stride in (1, 2, 4):
        for _ in range(4):
            start = int(rng.integers(0, max(1, n - 8 * stride)))
            yield list(range(start, min(n, start + 8 * stride), stride))
    for _ in range(6):
        yield sorted(rng.choice(n, 5, replace=False).tolist())
    yield [n - 1, n - 1, n - 1], [3, 3, 4], [n - 2, 1]  # unsorted is fine too


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.TRAPS))
def test_every_frame_is_the_sequential_decodes(name, decoder, made):
    path, seq = made[name]
    assert len(seq) == videos.FRAMES - 3 * (name == "edit_list.mp4")
    assert [videos.frame_index(f) for f in seq] == list(range(3 * (name == "edit_list.mp4"), videos.FRAMES))
    num_frames, read = vid.open_video(path, decoder)
    assert num_frames == len(seq)
    rng = np.random.default_rng(0)
    for sets in index_sets(len(seq), rng):
        for indices in (sets if isinstance(sets, tuple) else (sets,)):
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
    _, read = vid.open_video(path, decoder)
    n = len(seq)
    with pytest.raises(RuntimeError, match=f"frame {n + 5} asked for, the video has {n} frames"):
        read([0, n + 4])


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.BAD))
def test_bad_videos_are_one_line_errors(name, decoder, bad):
    """Opening or reading raises RuntimeError with a one-line reason (never hangs, never wrong frames)."""
    with pytest.raises(RuntimeError) as err:
        num_frames, read = vid.open_video(bad[name], decoder)
        read(list(range(num_frames)))
    assert "\n" not in str(err.value) and str(err.value)


def test_decoder_choice(monkeypatch):
    assert vid.video_decoder("pyav") == "pyav"
    assert vid.video_decoder("auto") == DECODERS[-1]
    with pytest.raises(ValueError, match="--video_decoder must be one of"):
        vid.video_decoder("nvdec")
    monkeypatch.setattr(vid, "_NO_VIDEO_CODEC", "no FFmpeg libraries")
    assert vid.video_decoder("auto") == "pyav"
    with pytest.raises(ValueError, match="torchcodec: not available here"):
        vid.video_decoder("torchcodec")


# ---- preparation -----------------------------------------------------------------------------------
def test_reencode_keeps_every_frame_in_order_and_lists_failures(made, bad, tmp_path):
    """Every trap video re-encoded (short side 128, so resized): frame k of the output shows what frame
    k of a plain decode of the input shows -- variable frame rates and edit lists included. Bad videos
    are failures (listed, not written); a second run skips the finished files."""
    import _prepare_scratch as prep
    src = tmp_path / "src"
    src.mkdir()
    for name, (path, _) in made.items():
        os.link(path, src / name)
    os.link(bad["truncated.mp4"], src / "truncated.mp4")
    os.link(bad["audio_only.mp4"], src / "audio_only.mp4")
    failed = prep.reencode(src, tmp_path / "dst", short_side=128, jobs=1)
    assert sorted(os.path.basename(f) for f, _ in failed) == ["audio_only.mp4", "truncated.mp4"]
    assert all("\n" not in why for _, why in failed)
    for name, (path, seq) in made.items():
        out = tmp_path / "dst" / (os.path.splitext(name)[0] + ".mp4")
        frames = videos.sequential(out)
        assert frames[0].shape == (128, 192, 3), name
        assert [videos.frame_index(f) for f in frames] == [videos.frame_index(f) for f in seq], name
        assert vid.open_video(str(out), DECODERS[-1])[0] == len(seq)
    assert not list((tmp_path / "dst").glob("*.part*"))
    assert prep.reencode(src, tmp_path / "dst", short_side=128) == failed  # the finished ones skipped


def test_kinetics_entries_names_and_labels(tmp_path):
    import _prepare_scratch as prep
    (tmp_path / "train.csv").write_text("label,youtube_id,time_start,time_end,split\n"
                                        "zumba,abc,14,24,train\nabseiling,x_y-z,0,10,train\n")
    (tmp_path / "validate.csv").write_text("label,youtube_id,time_start,time_end,split\nzumba,q,3,13,val\n")
    classes, entries = prep.kinetics_entries([tmp_path / "train.csv", tmp_path / "validate.csv"])
    assert classes == ["abseiling", "zumba"]
    assert [e[:2] for e in entries["train"]] == [("abc_000014_000024", 1), ("x_y-z_000000_000010", 0)]
    assert entries["val"] == [("q_000003_000013", 1, f"{tmp_path / 'validate.csv'}:2")]
    (tmp_path / "bad.csv").write_text("label,youtube_id,time_start,time_end,split\nnew,q,3,13,val\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: class 'new' has no train video"):
        prep.kinetics_entries([tmp_path / "train.csv", tmp_path / "bad.csv"])
