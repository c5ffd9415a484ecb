"""Segments by time: a list line `<video> <start>s <end>s <label>` names the frames k whose time
k / fps lies in [start, end) of a long video file (its own frame rate) or frame folder (--fps);
clips are drawn inside them only. `prepare.py lists --segments` writes such lines from an
annotation CSV. Bad lines are one line naming the list and the line."""

import re

import numpy as np
import pytest
from PIL import Image

import data
import prepare
from conftest import TINY, one_line_error, run_main, write_list


def grey_frames(folder, n, size=(16, 12)):
    """img_00001.jpg .. : frame i a flat grey of value 2 i, its number readable after JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        Image.fromarray(np.full((size[1], size[0], 3), 2 * i, np.uint8)).save(
            folder / f"img_{i:05d}.jpg"
        )
    return folder


def frame_numbers(clip):
    return [round(float(f.float().mean()) / 2) for f in clip.unbind(1)]


def video_file(path, frames=60, rate=25):
    """An mpeg4 file whose frame k shows tests/videos.py's pattern k."""
    av = pytest.importorskip("av")
    import videos

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=rate)
        stream.width, stream.height, stream.pix_fmt = videos.W, videos.H, "yuv420p"
        stream.options = {"qscale": "1"}
        for k in range(frames):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(videos.pattern(k), format="rgb24")))
        out.mux(stream.encode())
    return path


SMALL = dict(t_length=4, t_stride=2, new_size=12, crop_size=12)


def test_time_segment_of_a_frame_folder_at_fps(tmp_path):
    # 2 s .. 3.5 s at 10 frames a second: frames 20 .. 34 counted from 0, img_00021 .. img_00035
    grey_frames(tmp_path / "long", 60)
    lst = write_list(tmp_path / "seg.txt", ["long 2s 3.5s 3", "long 0s 0.95s 1", "long 2.5s 6s 2"])
    ds = data.VideoFrameDataset(lst, data.DataSpec(**SMALL, fps=10), "train")
    assert [(v.offset, v.num_frames, v.label) for v in ds.videos] == [
        (20, 15, 3),
        (0, 10, 1),
        (25, 35, 2),
    ]
    seen = set()
    for epoch in range(30):
        ds.set_epoch(epoch)
        numbers = frame_numbers(ds[0][0])
        assert all(21 <= k <= 35 for k in numbers), numbers
        seen.update(numbers)
    assert min(seen) == 21 and max(seen) == 35
    # the same frames as the frame form of the line
    write_list(tmp_path / "frames.txt", ["long 20 15 3"])
    by_frames = data.VideoFrameDataset(tmp_path / "frames.txt", data.DataSpec(**SMALL), "val")
    val = data.VideoFrameDataset(lst, data.DataSpec(**SMALL, fps=10), "val")
    assert frame_numbers(val[0][0]) == frame_numbers(by_frames[0][0]) == [25, 27, 29, 31]


def test_time_segment_of_a_video_file_at_its_own_rate(tmp_path):
    import videos

    video_file(tmp_path / "long.mp4", 60, rate=25)
    # 1.2 s .. 1.6 s at the file's 25 fps: frames 30 .. 39; --fps (frame folders') is not used
    lst = write_list(tmp_path / "seg.txt", ["long.mp4 1.2s 1.6s 1"])
    ds = data.VideoFrameDataset(lst, data.DataSpec(t_length=4, t_stride=1, fps=7), "val")
    video = ds.videos[0]
    assert (video.offset, video.num_frames) == (30, 10)
    frames = ds.load_frames(video, ds.choose_frames(video, None)[0])
    assert [videos.frame_index(f) for f in frames] == [33, 34, 35, 36]
    # past the file's end (2.4 s): one line of `check`
    write_list(lst, ["long.mp4 2s 2.6s 1"])
    problems = prepare.check(lst)
    assert len(problems) == 1 and f"{lst}:1: 65 frames listed, the video has 60" in problems[0]


def test_bad_time_lines_are_one_line_each(tmp_path, capsys):
    grey_frames(tmp_path / "long", 20)
    lines = [
        "long 1s 2s 0",  # fine
        "long 3s 2s 0",  # ends before it starts
        "long 1s 2 0",  # one time, one frame count
        "long -1s 2s 0",  # negative
        "long 1.5s 2s x",  # no label
        "long 0.01s 0.05s 0",  # no frame inside at 10 fps
        "gone.mp4 1s 2s 0",  # no file to read the rate of: a bad video, as a missing file is
    ]
    lst = write_list(tmp_path / "seg.txt", lines)
    problems = prepare.check(lst, fps=10)
    form = f"a segment by time is '{data.TIME_FORM}' (seconds >= 0, like 12.5s)"
    messages = [
        "a segment's end must come after its start, got 3s, 2s",
        form,
        form,
        "the label must be an integer (labels: joined by commas, no spaces)",
        "no frame between 0.01s and 0.05s at 10 fps",
    ]
    assert problems[:-1] == [f"{lst}:{n}: {m}: {lines[n - 1]}" for n, m in enumerate(messages, 2)]
    assert problems[-1] == f"{lst}:7: missing file {tmp_path / 'gone.mp4'}"
    # a frame folder's times without --fps: the flag named
    write_list(lst, ["long 1s 2s 0"])
    needle = f"{lst}:1: a segment by time of a frame folder"
    with pytest.raises(ValueError, match=re.escape(needle)):
        data.VideoFrameDataset(lst, data.DataSpec(**SMALL), "val")
    assert prepare.main(["check", str(lst)]) == 1
    assert "needs its frame rate: --fps" in capsys.readouterr().out
    assert prepare.main(["check", str(lst), "--fps", "10"]) == 0
    with pytest.raises(SystemExit) as e:
        prepare.main(["check", str(lst), "--fps", "0"])
    one_line_error(capsys, "--fps: must be a number > 0, got '0'", exc=e)
    # training: one line, exit 2
    write_list(lst, ["long 1s 2s 0", "long 3s 2s 1"])
    with pytest.raises(SystemExit) as e:
        argv = ["x", str(lst), str(lst), *TINY, "--fps", "10", "--output_root", str(tmp_path)]
        run_main(argv)
    one_line_error(capsys, f"{lst}:2: a segment's end must come after its start", exc=e)
    with pytest.raises(SystemExit) as e:
        run_main(["x", str(lst), str(lst), "--fps", "-5"])
    one_line_error(capsys, "argument --fps: must be a number > 0, got '-5'", exc=e)


def test_lists_writes_segment_lines_from_an_annotation_csv(tmp_path, capsys):
    # video,start,end,label,split rows (seconds, or EPIC's HH:MM:SS.ff) -> '<video> <start>s
    # <end>s <label>' lines, the videos found by name under FRAMES_DIR (files or frame folders)
    media = tmp_path / "media"
    media.mkdir()
    video_file(media / "long.mp4", 60, rate=25)
    grey_frames(media / "cam1", 60)
    rows = [
        "video,start,end,label,split",
        "long,0.4,1.2,wave,train",
        "cam1,00:00:01.00,00:00:02.50,jump,train",
        "long,1.2,2.0,jump,val",
        "cam1,0.5,1.5,wave,validation",
        "long,0,1,wave,test",  # no labels published: left out
    ]
    ann = write_list(tmp_path / "ann.csv", rows)
    assert prepare.main(["lists", str(media), "--segments", str(ann), "--out", str(tmp_path)]) == 0
    train, val = tmp_path / "ann_train_list.txt", tmp_path / "ann_val_list.txt"
    assert train.read_text().splitlines() == ["media/long.mp4 0.4s 1.2s 1", "media/cam1 1s 2.5s 0"]
    assert val.read_text().splitlines() == ["media/long.mp4 1.2s 2s 0", "media/cam1 0.5s 1.5s 1"]
    assert (tmp_path / "ann_classes.txt").read_text().split() == ["jump", "wave"]
    # read back: the file at its 25 fps, the folder at --fps 20
    ds = data.VideoFrameDataset(train, data.DataSpec(**SMALL, fps=20), "val")
    assert [(v.offset, v.num_frames, v.label) for v in ds.videos] == [(10, 20, 1), (20, 30, 0)]
    assert prepare.check(train, fps=20) == [] and prepare.check(val, fps=20) == []
    # a bad row: one line naming the CSV and its line, exit 2, nothing written
    write_list(ann, [*rows[:3], "long,1.2,0:01,jump,val"])
    capsys.readouterr()
    assert prepare.main(["lists", str(media), "--segments", str(ann), "--force"]) == 2
    one_line_error(capsys, f"{ann}:4: end 0:01 is not after start 1.2")
    assert train.read_text().splitlines()[0] == "media/long.mp4 0.4s 1.2s 1"
    write_list(ann, ["video,begin,end,label,split", "long,0,1,wave,train"])
    assert prepare.main(["lists", str(media), "--segments", str(ann), "--force"]) == 2
    one_line_error(capsys, f"{ann}:1: expected the columns video,start,end,label,split")


@pytest.mark.slow
def test_training_on_segments_by_time_and_charades_frame_labels(tmp_path):
    # a run on a time-segment list of frame folders (--fps), and a --multi-label run on Charades'
    # CSV (training clips labelled by their frames): each trains an epoch and evaluates
    from conftest import logs

    for k in range(2):
        grey_frames(tmp_path / f"long{k}", 40, size=(48, 40))
    lst = write_list(
        tmp_path / "seg.txt",
        [f"long{k % 2} {k * 0.3:.1f}s {k * 0.3 + 1:.1f}s {k % 3}" for k in range(4)],
    )
    csv_file = tmp_path / "Charades_v1_train.csv"
    lines = ["id,actions,length"]
    for k in range(4):
        grey_frames(tmp_path / f"CH{k}", 30, size=(48, 40))
        for f in sorted((tmp_path / f"CH{k}").iterdir()):
            f.rename(tmp_path / f"CH{k}" / f"CH{k}-{int(f.stem[4:]):06d}.jpg")
        lines.append(f"CH{k},c{k:03d} 0.10 0.60;c{k + 1:03d} 0.50 1.20,1.25")
    write_list(csv_file, lines)
    for name, lst_, extra in (
        ("seg", lst, ["--fps", "20"]),
        ("ch", csv_file, ["--multi-label", "--num_classes", "5"]),
    ):
        out = tmp_path / name
        argv = [
            "x",
            str(lst_),
            str(lst_),
            *TINY,
            *extra,
            "--epochs",
            "1",
            "--output_root",
            str(out),
        ]
        run_main(argv)
        (run,) = out.iterdir()
        assert logs(run)[-1]["val_loss"] is not None
