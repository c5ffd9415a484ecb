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
    reader = vid.open_video(path, decoder)
    assert reader.num_frames == len(seq)
    rng = np.random.default_rng(0)
    for sets in index_sets(len(seq), rng):
        for indices in (sets if isinstance(sets, tuple) else (sets,)):
            got = reader.frames(indices)
            want = [videos.frame_index(seq[i]) for i in indices]
            assert [videos.frame_index(f) for f in got] == want, indices
            for f, i in zip(got, indices):
                assert f.dtype == torch.uint8 and f.shape == (videos.H, videos.W, 3)
                assert torch.equal(f, torch.from_numpy(seq[i])), (indices, i)
    reader.close()


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.TRAPS))
def test_past_the_end_is_one_line(name, decoder, made):
    path, seq = made[name]
    reader = vid.open_video(path, decoder)
    n = len(seq)
    with pytest.raises(RuntimeError, match=f"frame {n + 5} asked for, the video has {n} frames"):
        reader.frames([0, len(seq) + 4])


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", sorted(videos.BAD))
def test_bad_videos_are_one_line_errors(name, decoder, bad):
    """Opening or reading raises RuntimeError with a one-line reason (never hangs, never wrong frames)."""
    with pytest.raises(RuntimeError) as err:
        reader = vid.open_video(bad[name], decoder)
        reader.frames(list(range(reader.num_frames)))
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
