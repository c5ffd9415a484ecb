# ruff: noqa: F811 -- the `lists` fixture is imported from test_train, then taken as an argument
"""I/O faults: a read that never returns, a disk that fills mid-save, a SIGKILL at each write of a
save, bad videos across a resume and ranks."""

import errno
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import checkpoint
import rundir
import train
from conftest import (
    ENV,
    REPO,
    TINY,
    assert_same_weights,
    copy_lists,
    one_line_error,
    run_cli,
    run_dir,
    run_main,
    spoil_frames,
    weights,
)


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_frame_read_that_never_returns_ends_the_run_naming_the_file(lists, tmp_path, workers):
    folder, video = copy_lists(lists, tmp_path)
    for k in range(1, 11):  # every frame a FIFO with no writer: open() blocks forever
        frame = folder / video / f"img_{k:05d}.jpg"
        frame.unlink()
        os.mkfifo(frame)
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "-j",
        workers,
        "--read_timeout",
        "3",
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path / "out"),
    ]
    r = run_cli(args, timeout=200)  # a hang would be subprocess.TimeoutExpired
    err = r.stderr.strip()
    assert r.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "--read_timeout 3" in err and str(folder / video) in err and "img_" in err, err


@pytest.mark.slow
def test_a_video_file_read_that_never_returns_ends_the_run_naming_it(lists, tmp_path):
    """The same for a listed video file (a three-column line: nothing opens it before training)."""
    folder, _ = copy_lists(lists, tmp_path)
    os.mkfifo(folder / "stalled.mp4")
    with open(folder / "train.txt", "a") as f:
        f.write("stalled.mp4 10 0\n")
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "-j",
        "2",
        "-b",
        "9",
        "--read_timeout",
        "3",
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path / "out"),
    ]
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


@pytest.mark.slow
@pytest.mark.parametrize("room", [0, 64, 5000, 400_000, 2_000_000])
def test_disk_filling_at_any_point_of_a_save_is_one_line_and_resume_auto_works(
    lists, tmp_path, monkeypatch, capsys, room
):
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
    # space is back: it continues from epoch 1
    run_main([*args, "--epochs", "2", "--resume", "auto"])
    assert torch.load(folder / "checkpoint.pth", weights_only=False)["epoch"] == 2


@pytest.mark.slow
def test_bad_videos_seen_survive_a_resume_and_are_not_reported_again(lists, tmp_path, capsys):
    folder, bad_video = copy_lists(lists, tmp_path)
    spoil_frames(folder, bad_video)
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "--output_root",
        str(tmp_path),
    ]
    run_main([*args, "--epochs", "1"])
    assert capsys.readouterr().err.count("bad video replaced") == 1
    run_main([*args, "--epochs", "2", "--resume", "auto"])  # epoch 1 replaces it again, silently
    assert capsys.readouterr().err.count("bad video replaced") == 0
    out = run_dir(tmp_path, args)
    assert len((out / "bad_videos.txt").read_text().splitlines()) == 1
    assert torch.load(out / "checkpoint.pth", weights_only=False)["bad_seen"] == [
        f"{folder / 'train.txt'}:1"
    ]


def _rank(rank, init, run_dir):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    rt = train.Runtime(rank, 2, rank, torch.device("cpu"), run_dir, None, torch.contiguous_format)
    lines = [f"list:{rank + 1}: frame: garbage", "list:9: frame: garbage"]  # list:9 on both ranks
    rundir.record_bad_videos(lines, rt, checkpoint.Progress())
    dist.destroy_process_group()


@pytest.mark.slow
def test_only_rank_0_writes_bad_videos_one_line_per_video(tmp_path):
    init = f"file://{tempfile.mktemp(dir=tmp_path)}"
    mp.spawn(_rank, args=(init, str(tmp_path)), nprocs=2, join=True)
    lines = (tmp_path / "bad_videos.txt").read_text().splitlines()
    assert sorted(line.split(": ")[0] for line in lines) == ["list:1", "list:2", "list:9"], lines


# ---- a SIGKILL at each write of a best epoch's save ----------------------------------------------
# train.py in a subprocess that SIGKILLs itself at one write of checkpoint.save: while the temp file
# is written, or just before / after the n-th rename onto a .pth (1: checkpoint.pth, 2:
# model_best.pth).
KILL_AT = """
import os, runpy, signal, sys, torch
point, n = sys.argv[1].split(":")
renames, real_replace, real_save = [], os.replace, torch.save
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
def replace(src, dst, *a, **k):
    renames.append(dst) if str(dst).endswith(".pth") else None
    at = str(dst).endswith(".pth") and len(renames) == int(n)
    die() if at and point == "before" else None
    real_replace(src, dst, *a, **k)
    die() if at and point == "after" else None
def save(obj, f, *a, **k):
    f.write(b"half a checkpoint")
    f.flush()
    die()
os.replace, torch.save = replace, (save if point == "during" else real_save)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def one_epoch(lists, tmp_path_factory):
    """A run of one epoch, uninterrupted: (its train.py arguments, its run folder). Epoch 0 is its
    best."""
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path_factory.mktemp("whole")),
    ]
    run_main(args)
    folder = run_dir(args[-1], args)
    # a best save
    assert torch.load(folder / "checkpoint.pth", weights_only=False)["best_epoch"] == 0
    return args, folder


@pytest.mark.slow
@pytest.mark.parametrize("point", ["during:1", "before:1", "after:1", "before:2", "after:2"])
def test_a_kill_at_any_write_of_a_save_leaves_model_best_holding_the_recorded_best(
    one_epoch, tmp_path, point, capsys
):
    args = [*one_epoch[0][:-1], str(tmp_path)]
    p = subprocess.run(
        [sys.executable, "-c", KILL_AT, point, str(REPO / "train.py"), *args],
        env=ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    run_main([*args, "--resume", "auto"])  # the epoch again, or nothing left but the checks
    folder = run_dir(tmp_path, args)
    ckpt = torch.load(folder / "checkpoint.pth", weights_only=False)
    best = torch.load(folder / "model_best.pth", weights_only=False)
    # a one-epoch run: checkpoint.pth is epoch 0's
    assert (ckpt["epoch"], ckpt["best_epoch"]) == (1, 0)
    assert (best["best_epoch"], best["best_score"]) == (0, ckpt["best_score"])
    assert_same_weights(best["model"], ckpt["model"])  # epoch 0's weights, not merely its score
    assert not [f.name for f in folder.iterdir() if "tmp" in f.name]
    repaired = "copied it from" in capsys.readouterr().out
    # checkpoint.pth renamed, model_best.pth not
    assert repaired == (point in ("after:1", "before:2")), point


@pytest.mark.slow
def test_a_best_score_without_its_weights_is_forgotten_in_one_line(
    one_epoch, tmp_path, monkeypatch, capsys
):
    """model_best.pth gone and checkpoint.pth from a later, unfinished epoch: nothing holds the best
    epoch's weights, so its score must not stand against later epochs."""
    args, whole = one_epoch
    folder = tmp_path / whole.name
    shutil.copytree(whole, folder)
    args = [*args[:-1], str(tmp_path), "--epochs", "2"]
    original = train.lr_at

    def stop_in_epoch_1(a, step, n):
        rundir.STOP["signal"] = signal.SIGTERM  # saves at the end of this step: epoch 1, mid-epoch
        return original(a, step, n)

    monkeypatch.setattr(train, "lr_at", stop_in_epoch_1)
    with pytest.raises(SystemExit):
        run_main([*args, "--resume", "auto"])
    rundir.STOP["signal"] = 0
    monkeypatch.setattr(train, "lr_at", original)
    (folder / "model_best.pth").unlink()
    capsys.readouterr()
    run_main([*args, "--resume", "auto"])
    lines = [line for line in capsys.readouterr().out.splitlines() if "model_best.pth" in line]
    assert "does not hold epoch 0" in lines[0] and "forgotten" in lines[0], lines
    ckpt = torch.load(folder / "checkpoint.pth", weights_only=False)
    # epoch 1 scored above 0: it is the best, and model_best.pth holds it
    if ckpt["best_epoch"] >= 0:
        assert ckpt["best_epoch"] == 1 and "saved to" in lines[-1]
        assert_same_weights(weights(folder / "model_best.pth"), ckpt["model"])
    else:
        assert not (folder / "model_best.pth").exists() and "no best epoch" in lines[-1]


# ---- a full disk: named first, with the folder and its free space --------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only, as in CI), unmounted afterwards."""
    folder = tmp_path / "small"
    folder.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({(r.stderr or 'not root').strip()}): the simulated "
            "ENOSPC test covers the message"
        )
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_real_full_disk_is_named_first(small_disk, capsys):
    """torch.save on a full tmpfs fails with its own words ('[enforce fail at inline_container.cc]
    unexpected pos'), no errno: the line still starts with the full disk."""
    path = small_disk / "checkpoint.pth"
    with pytest.raises(SystemExit) as e:
        checkpoint.atomic_save({"w": torch.zeros(2**20)}, str(path))  # 4 MiB
    err = one_line_error(capsys, "disk full", str(path), f"MiB free in {small_disk}", code=1, exc=e)
    assert err.startswith("train.py: error: disk full:"), err
    assert os.listdir(small_disk) == []  # the partial temp file is gone


def test_enospc_is_named_first(tmp_path, monkeypatch, capsys):
    def full(obj, f, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(SystemExit) as e:
        checkpoint.atomic_save({}, str(tmp_path / "checkpoint.pth"))
    err = one_line_error(
        capsys, str(tmp_path / "checkpoint.pth"), f"MiB free in {tmp_path}", code=1, exc=e
    )
    assert err.startswith("train.py: error: disk full:"), err
