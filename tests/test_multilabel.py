"""Beyond one label a clip: segments of long videos (a list line's offset), multi-label lists
(plain text, Charades' CSV, PySlowFast's Charades frame lists) and verb + noun lists
(EPIC-Kitchens-100's CSV), each read, checked, and refused in one line naming the list and line."""

import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import data
import prepare
from conftest import REPO, write_frames, write_list


def grey_frames(folder, n, tmpl="img_{:05d}.jpg", start=1, size=(16, 12)):
    """Frames start .. start + n - 1, frame i a flat grey of value 2 i: its number readable after
    JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        Image.fromarray(np.full((size[1], size[0], 3), 2 * i, np.uint8)).save(
            folder / tmpl.format(i)
        )
    return folder


def frame_numbers(clip):
    """uint8 (3, T, H, W) clip of grey_frames -> the frame number of each of its T frames."""
    return [round(float(f.float().mean()) / 2) for f in clip.unbind(1)]


SMALL = dict(t_length=4, t_stride=2, new_size=12, crop_size=12)


# ---- segments ------------------------------------------------------------------------------------
def test_segment_clips_stay_inside_the_segment(tmp_path):
    # frames 41 .. 60 of a 100-frame folder: every train and val clip reads only them
    grey_frames(tmp_path / "long", 100)
    path = write_list(tmp_path / "seg.txt", ["long 40 20 3", "long 100 0"])
    ds = data.VideoFrameDataset(path, data.DataSpec(**SMALL), "train")
    assert (ds.videos[0].offset, ds.videos[0].num_frames, ds.videos[0].label) == (40, 20, 3)
    seen = set()
    for epoch in range(40):
        ds.set_epoch(epoch)
        numbers = frame_numbers(ds[0][0])
        assert all(41 <= k <= 60 for k in numbers), numbers
        seen.update(numbers)
    assert min(seen) == 41 and max(seen) == 60  # the draws reach both ends of the segment
    val = data.VideoFrameDataset(path, data.DataSpec(**SMALL), "val")
    assert frame_numbers(val[0][0]) == [47, 49, 51, 53]  # the segment's centred clip


def test_segment_of_a_video_file(tmp_path):
    # the same line form over a video file: its frames offset .. offset + num_frames - 1
    av = pytest.importorskip("av")
    import videos

    path = tmp_path / "long.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = videos.W, videos.H, "yuv420p"
        stream.options = {"qscale": "1"}
        for k in range(60):
            frame = av.VideoFrame.from_ndarray(videos.pattern(k), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    lst = write_list(tmp_path / "seg.txt", ["long.mp4 30 10 1"])
    ds = data.VideoFrameDataset(lst, data.DataSpec(t_length=4, t_stride=1), "val")
    video = ds.videos[0]
    numbers = ds.choose_frames(video, None)[0]  # the val clip: the segment's centre
    frames = ds.load_frames(video, numbers)  # whole decoded frames, to read their pattern
    assert [videos.frame_index(f) for f in frames] == [33, 34, 35, 36]
    # a segment past the video's end is a one-line problem of `check`
    write_list(lst, ["long.mp4 55 10 1"])
    problems = prepare.check(lst)
    assert len(problems) == 1 and f"{lst}:1: 65 frames listed, the video has 60" in problems[0]


def test_check_reads_segments_and_names_a_missing_frame(tmp_path):
    grey_frames(tmp_path / "long", 50)
    lst = write_list(tmp_path / "seg.txt", ["long 10 20 0", "long 40 20 1", "long -3 5 0"])
    problems = prepare.check(lst)
    assert len(problems) == 2
    assert problems[0].startswith(f"{lst}:2: 20 frames listed, 10 on disk (first missing: ")
    assert problems[0].endswith("img_00051.jpg)")
    assert problems[1].startswith(f"{lst}:3: a segment's offset must be >= 0, got -3")
    with pytest.raises(ValueError, match=re.escape(f"{lst}:3: a segment's offset must be >= 0")):
        data.VideoFrameDataset(lst, data.DataSpec(**SMALL), "val")
