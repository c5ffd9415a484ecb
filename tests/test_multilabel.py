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


# ---- the numbers ---------------------------------------------------------------------------------
def test_map_equals_sklearn_as_pyslowfast_calls_it():
    # PySlowFast's get_map: drop the classes without a positive, then average_precision_score
    # (average=None) and the mean; random scores, some tied (rounded), some classes absent
    metrics = pytest.importorskip("sklearn.metrics")
    import report

    rng = np.random.default_rng(0)
    for trial in range(5):
        scores = rng.random((60, 12)).round(1 + trial % 3)  # ties at 1 or 2 decimals
        targets = (rng.random((60, 12)) < 0.2).astype(np.float32)
        targets[:, [3, 7]] = 0
        keep = ~np.all(targets == 0, axis=0)
        expected = np.mean(metrics.average_precision_score(targets[:, keep], scores[:, keep], average=None))
        ours = report.multilabel_metrics(scores, targets)
        assert ours["mAP"] == pytest.approx(100 * expected, abs=1e-9)
        assert list(ours["absent"]) == [3, 7] and np.isnan(ours["per_class_ap"][[3, 7]]).all()


def test_epic_action_accuracy_is_the_evaluation_codes():
    # EPIC-100's evaluate.py: action scores = the outer product of the softmaxes of the top-100
    # verb and noun scores; a segment's action right at k when one of the k best (verb, noun)
    # pairs is its own. Checked against every pair ranked directly.
    import report

    rng = np.random.default_rng(1)
    N, V, M = 40, 97, 300
    verb, noun = rng.standard_normal((N, V)), rng.standard_normal((N, M))
    labels = np.stack([rng.integers(0, V, N), rng.integers(0, M, N)], 1)
    # make some segments right: their label pair at the top
    labels[:10, 0], labels[:10, 1] = verb[:10].argmax(1), noun[:10].argmax(1)
    # and some right at 5 only: the best verb with the second noun
    labels[10:20, 0], labels[10:20, 1] = verb[10:20].argmax(1), np.argsort(-noun[10:20])[:, 1]
    hits1 = hits5 = 0
    for i in range(N):
        tv, tn = np.argsort(-verb[i])[:100], np.argsort(-noun[i])[:100]
        pv = np.exp(verb[i, tv]) / np.exp(verb[i, tv]).sum()
        pn = np.exp(noun[i, tn]) / np.exp(noun[i, tn]).sum()
        pairs = [(pv[a] * pn[b], tv[a], tn[b]) for a in range(len(tv)) for b in range(len(tn))]
        pairs = sorted(pairs)[::-1]
        ranked = [(v, n) for _, v, n in pairs[:5]]
        hits1 += ranked[0] == tuple(labels[i])
        hits5 += tuple(labels[i]) in ranked
    out = report.heads_metrics(np.concatenate([verb, noun], 1), labels, (V, M))
    assert out["action_acc1"] == pytest.approx(100 * hits1 / N)
    assert out["action_acc5"] == pytest.approx(100 * hits5 / N)
    assert hits1 >= 10 and hits5 >= hits1 + 5
    assert out["verb_acc1"] == pytest.approx(100 * np.mean(verb.argmax(1) == labels[:, 0]))
    assert out["noun_acc1"] == pytest.approx(100 * np.mean(noun.argmax(1) == labels[:, 1]))
