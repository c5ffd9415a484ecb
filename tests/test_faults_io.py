# ruff: noqa: F811 -- the `lists` fixture is imported from test_train, then taken as an argument
"""I/O faults: a read that never returns, a disk that fills mid-save, bad videos across a resume and ranks."""
import errno
import io
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import checkpoint
import rundir
import train
from conftest import TINY, copy_lists, run_cli, run_dir, run_main, spoil_frames


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_frame_read_that_never_returns_ends_the_run_naming_the_file(lists, tmp_path, workers):
    folder, video = copy_lists(lists, tmp_path)
    for k in range(1, 11):  # every frame a FIFO with no writer: open() blocks forever
        frame = folder / video / f"img_{k:05d}.jpg"
        frame.unlink()
        os.mkfifo(frame)
    args = ["ucf101", str(folder / "train.txt"), str(folder / "val.txt"), *TINY, "-j", workers,
            "--read_timeout", "3", "--epochs", "1", "--output_root", str(tmp_path / "out")]
    r = run_cli(args, timeout=200)  # a hang would be subprocess.TimeoutExpired
    err = r.stderr.strip()
    assert r.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "--read_timeout 3" in err and str(folder / video) in err and "img_" in err, err


def test_a_video_file_read_that_never_returns_ends_the_run_naming_it(lists, tmp_path):
    """The same for a listed video file (a three-column line: nothing opens it before training)."""
    folder, _ = copy_lists(lists, tmp_path)
    os.mkfifo(folder / "stalled.mp4")
    with open(folder / "train.txt", "a") as f:
        f.write("stalled.mp4 10 0\n")
    args = ["ucf101", str(folder / "train.txt"), str(folder / "val.txt"), *TINY, "-j", "2", "-b", "9",
            "--read_timeout", "3", "--epochs", "1", "--output_root", str(tmp_path / "out")]
    r = run_cli(args, timeout=200)  # a hang would be subprocess.TimeoutExpired
    err = r.stderr.strip()
    assert r.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "--read_timeout 3" in err and str(folder / "stalled.mp4") in err, err


class FullDisk(io.FileIO):
    """A file on a disk with `room` bytes left: the write that would pass it raises ENOSPC."""
    room = 0

    def write(self, b):
        n = memoryview(b).nbytes
        if n > FullDisk.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        FullDisk.room -= n
        return super().write(b)


@pytest.mark.parametrize("room", [0, 64, 5000, 400_000, 2_000_000])
def test_disk_filling_at_any_point_of_a_save_is_one_line_and_resume_auto_works(lists, tmp_path, monkeypatch,
                                                                              capsys, room):
    args = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    folder = run_dir(tmp_path, args)
    FullDisk.room = room

    def full_open(path, mode="r", *a, **k):  # the checkpoint's temp file lands on the full disk
        if "w" in mode and str(path).endswith(".tmp"):
            return FullDisk(path, mode.replace("b", ""))
        return open(path, mode, *a, **k)
    monkeypatch.setattr(checkpoint, "open", full_open, raising=False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*args, "--epochs", "2", "--resume", "auto"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "checkpoint.pth" in err and "MiB free" in err, err
    assert not [p.name for p in folder.iterdir() if ".tmp" in p.name]
    assert torch.load(folder / "checkpoint.pth", weights_only=False)["epoch"] == 1
    monkeypatch.undo()
    run_main([*args, "--epochs", "2", "--resume", "auto"])  # space is back: it continues from epoch 1
    assert torch.load(folder / "checkpoint.pth", weights_only=False)["epoch"] == 2


def test_bad_videos_seen_survive_a_resume_and_are_not_reported_again(lists, tmp_path, capsys):
    folder, bad_video = copy_lists(lists, tmp_path)
    spoil_frames(folder, bad_video)
    args = ["ucf101", str(folder / "train.txt"), str(folder / "val.txt"), *TINY,
            "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    assert capsys.readouterr().err.count("bad video replaced") == 1
    run_main([*args, "--epochs", "2", "--resume", "auto"])  # epoch 1 replaces it again, silently
    assert capsys.readouterr().err.count("bad video replaced") == 0
    out = run_dir(tmp_path, args)
    assert len((out / "bad_videos.txt").read_text().splitlines()) == 1
    assert torch.load(out / "checkpoint.pth", weights_only=False)["bad_seen"] == [f"{folder / 'train.txt'}:1"]


def _rank(rank, init, run_dir):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    rt = train.Runtime(rank, 2, rank, torch.device("cpu"), run_dir, None, torch.contiguous_format)
    lines = [f"list:{rank + 1}: frame: garbage", "list:9: frame: garbage"]  # list:9 on both ranks
    rundir.record_bad_videos(lines, rt, checkpoint.Progress())
    dist.destroy_process_group()


def test_only_rank_0_writes_bad_videos_one_line_per_video(tmp_path):
    init = f"file://{tempfile.mktemp(dir=tmp_path)}"
    mp.spawn(_rank, args=(init, str(tmp_path)), nprocs=2, join=True)
    lines = (tmp_path / "bad_videos.txt").read_text().splitlines()
    assert sorted(line.split(": ")[0] for line in lines) == ["list:1", "list:2", "list:9"], lines
