"""Faults in data.py (and the classes file and progress bars): bad list/split files, bad templates,
nothing to list or extract, stale partial extractions, unreadable videos (train mode replaces them
deterministically, val/test raise), the fail-early folder check. CLI cases run in a subprocess with
a timeout: a hang fails the test instead of hanging CI.

    python -m pytest -q test_faults.py
"""

import fcntl
import json
import os
import pickle
import pty
import re
import struct
import subprocess
import termios
import threading
import sys
import time

import numpy as np
import pytest
import torch
from PIL import Image

import data
import decode
import prepare
from conftest import H, REPO, UCF101_LISTS, W, fake_hmdb51, fake_ucf101, write_frames, write_list

CLIP = dict(t_length=4, t_stride=1, new_size=40, crop_size=32)  # tiny clips: (3, 4, 32, 32)


# ---- helpers -------------------------------------------------------------------------------------
def run_data(*commands, timeout=120):
    """`python prepare.py ARGS` for each ARGS tuple, all at once (each pays the torch import); a
    command still running after `timeout` s is killed and fails the test: nothing may loop
    forever."""
    procs = [
        subprocess.Popen(
            [sys.executable, "prepare.py", *map(str, args)],
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for args in commands
    ]
    results = []
    for args, proc in zip(commands, procs):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail(f"prepare.py {' '.join(map(str, args))} still running after {timeout} s")
        results.append((proc.returncode, out, err))
    return results


_DRIVER = r"""
import contextlib, io, json, sys, traceback
import prepare
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = prepare.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else print(e.code, file=sys.stderr) or 1
        except BaseException:
            traceback.print_exc()
            rc = "exception"
    results.append((rc, out.getvalue(), err.getvalue()))
print(json.dumps(results))
"""


def run_commands(*commands, timeout=120):
    """prepare.main(ARGS) for each ARGS tuple, in ONE subprocess (one torch import: CI has 2 cores)
    with a timeout; what `python prepare.py ARGS` would exit with and print, as (rc, stdout, stderr)
    each."""
    argvs = [[str(a) for a in args] for args in commands]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _DRIVER, json.dumps(argvs)],
            cwd=REPO,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"prepare.main still running after {timeout} s on one of {argvs}")
    assert proc.returncode == 0, proc.stderr
    return [tuple(r) for r in json.loads(proc.stdout.splitlines()[-1])]


def assert_one_line_error(result, *names):
    """exit 2, stderr is exactly one line, naming every one of `names`; no traceback."""
    rc, out, err = result
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (rc, out, err)
    for name in names:
        assert str(name) in err, (name, err)
    return err


def flat_video(folder, value, n=6, size=(W, H)):
    """n JPEG frames of one flat grey value: the decoded clip says which video it came from."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        Image.new("RGB", size, (value,) * 3).save(folder / f"img_{i:05d}.jpg")
    return folder


def which_video(clip):
    """The k of flat_video(value=30 k + 15) a clip was cut from."""
    return round((clip.float().mean().item() - 15) / 30)


def make_video_file(path, n, size=(32, 24)):
    av = pytest.importorskip("av")
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for _ in range(n):
            img = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        container.mux(stream.encode())
    return path


# ---- list files: BOM, encodings, Windows paths ---------------------------------------------------
def test_list_with_bom_and_crlf_and_backslashes(tmp_path):
    write_frames(tmp_path / "sub" / "vid", 3)
    path = tmp_path / "list.txt"
    path.write_bytes("\ufeffsub\\vid 3 0\r\nsub/vid 3 1\r\n".encode("utf-8"))  # Notepad on Windows
    videos = data.read_list(path)
    assert [v.path for v in videos] == [str(tmp_path / "sub" / "vid")] * 2
    assert [(v.label, v.line, v.list_file) for v in videos] == [
        (0, 1, str(path)),
        (1, 2, str(path)),
    ]
    clip, label, info = data.VideoFrameDataset(
        path, mode="val", t_length=2, new_size=12, crop_size=8
    )[0]
    assert clip.shape == (3, 2, 8, 8) and label == 0 and info["bad"] == ""


@pytest.mark.parametrize(
    "content,line",
    [
        ("good 3 0\ncaf\u00e9 3 1\n".encode("latin-1"), 2),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), 1),
        (b"good 3 0\nbad\x00\x00 3 0\n", 2),
    ],
)
def test_undecodable_list_names_file_and_line(tmp_path, content, line):
    path = tmp_path / "list.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(f"{path}:{line}: ")):
        data.read_list(path)
    with pytest.raises(ValueError, match=re.escape(f"{path}:{line}: ")):
        data.VideoFrameDataset(path)


@pytest.mark.slow
def test_extra_column_is_one_line_naming_list_line_and_form(tmp_path):
    """A line with a column too many ('<dir> <x> <offset> <num_frames> <label>') fails as it is
    read, naming the list, the line and the expected form -- not read into the folder name, to fail
    later as a missing folder. A folder name with spaces still reads. `python prepare.py check`
    reports it the same."""
    write_frames(tmp_path / "vid", 3)
    write_frames(tmp_path / "my vid", 3)
    path = write_list(tmp_path / "list.txt", ["vid 3 0", "vid 1 1 2 0", "my vid 3 1"])
    expected = (
        f"{path}:2: 5 columns, expected '<video> <label>' or "
        "'<frame_dir or video> <num_frames> <label>' or "
        "'<frame_dir or video> <offset> <num_frames> <label>'"
    )
    with pytest.raises(ValueError, match=re.escape(expected)) as e:
        data.VideoFrameDataset(path, mode="val")
    assert "\n" not in str(e.value)
    p = subprocess.run(
        [sys.executable, "prepare.py", "check", path],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 1 and p.stdout.startswith(expected), (p.stdout, p.stderr)
    assert "missing folder" not in p.stdout and "2 videos" in p.stdout.splitlines()[-1]


@pytest.mark.slow
def test_cli_undecodable_list_and_bad_flags_one_line(tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("good 3 0\ncaf\u00e9 3 1\n".encode("latin-1"))
    ok = write_list(tmp_path / "ok.txt", ["good 3 0"])
    # used to loop forever
    named, no_field = run_data(
        ("check", ok, "--image_tmpl", "img_{idx:05d}.jpg"),
        ("check", ok, "--image_tmpl", "img_00001.jpg"),
    )
    assert_one_line_error(named, "--image_tmpl", "img_{idx:05d}.jpg")
    assert_one_line_error(no_field, "--image_tmpl", "img_00001.jpg")
    latin_rc, no_list, bogus, nowhere = run_commands(
        ("check", latin), ("check",), ("check", ok, "--bogus"), ("check", tmp_path / "nowhere.txt")
    )
    assert_one_line_error(latin_rc, f"{latin}:2:", "UTF-8")
    assert_one_line_error(no_list, "list")
    assert_one_line_error(bogus, "--bogus")
    assert_one_line_error(nowhere, "nowhere.txt")


def test_count_frames_ends_whatever_the_template(tmp_path):
    """A template without a field names the same file for every number: counting must still end."""
    result = []
    thread = threading.Thread(
        target=lambda: result.append(
            prepare.count_frames(tmp_path, "img_00001.jpg", 1, ["img_00001.jpg", "x"])
        ),
        daemon=True,
    )
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and result[0] <= 2


# ---- lists: split files, classes file, nothing matched -------------------------------------------
@pytest.mark.slow
def test_lists_reads_bom_split_files_and_writes_classes_in_classind_order(tmp_path):
    frames, splits = fake_ucf101(tmp_path)
    # classInd in a non-alphabetical order, saved with a BOM, as are the split files
    (splits / "classInd.txt").write_bytes(
        "\ufeff1 Biking\r\n2 HandstandPushups\r\n3 ApplyEyeMakeup\r\n".encode()
    )
    for name in ("trainlist01.txt", "testlist01.txt"):
        (splits / name).write_bytes(b"\xef\xbb\xbf" + (splits / name).read_bytes())
    hmdb_frames, hmdb_splits = fake_hmdb51(tmp_path)
    ucf, hmdb = run_commands(
        ("lists", frames, "--ucf101", splits), ("lists", hmdb_frames, "--hmdb51", hmdb_splits)
    )
    assert ucf[0] == 0 and "Traceback" not in ucf[2], ucf
    names = data.read_class_names(tmp_path / "ucf" / "ucf101_classes.txt")
    assert names == ["Biking", "HandstandPushups", "ApplyEyeMakeup"]
    lines = 0
    for part in ("train", "val"):
        for v in data.read_list(tmp_path / "ucf" / f"ucf101_{part}_split1_list.txt", num_classes=3):
            assert f"v_{names[v.label].lower()}_" in os.path.basename(v.path).lower(), (v, names)
            lines += 1
    assert lines == 5  # the BOM'd first line of each split file was not lost

    assert hmdb[0] == 0, hmdb
    names = data.read_class_names(tmp_path / "hmdb" / "hmdb51_classes.txt")
    assert names == ["brush_hair", "sword", "sword_exercise"]
    val = data.read_list(tmp_path / "hmdb" / "hmdb51_val_split1_list.txt")
    assert {os.path.basename(v.path): names[v.label] for v in val} == {
        "Brushing_hair_2": "brush_hair",
        "sword_2": "sword",
        "sword_ex_1": "sword_exercise",
    }


@pytest.mark.slow
def test_lists_errors_one_line_and_nothing_written(tmp_path):
    frames, splits = fake_ucf101(tmp_path)
    bad_ind = tmp_path / "bad_ind"
    bad_ind.mkdir()
    for name in ("trainlist01.txt", "testlist01.txt"):
        (bad_ind / name).write_bytes((splits / name).read_bytes())
    (bad_ind / "classInd.txt").write_text("1 ApplyEyeMakeup\n2 Biking HandstandPushups\n")
    latin_ind = tmp_path / "latin_ind"
    latin_ind.mkdir()
    for name in ("trainlist01.txt", "testlist01.txt"):
        (latin_ind / name).write_bytes((splits / name).read_bytes())
    (latin_ind / "classInd.txt").write_bytes("1 ApplyEyeMakeup\n2 Bik\u00efng\n".encode("latin-1"))
    empty = tmp_path / "empty_frames"
    write_frames(empty / "unrelated_video", 3)
    out = tmp_path / "out"
    out.mkdir()
    results = run_commands(
        ("lists", tmp_path / "no_such_dir", "--ucf101", splits, "--out", out),
        ("lists", empty, "--ucf101", splits, "--out", out),
        ("lists", frames, "--ucf101", splits, "--out", out, "--image_tmpl", "frame.jpg"),
        ("lists", frames, "--ucf101", bad_ind, "--out", out),
        ("lists", frames, "--ucf101", latin_ind, "--out", out),
        ("lists", frames, "--ucf101", splits, "--out", out, "--image_tmpl", "img_{n:05d}.jpg"),
    )
    assert_one_line_error(results[0], "no_such_dir")
    assert_one_line_error(results[1], str(empty), "split 1")
    assert_one_line_error(results[2], "--image_tmpl", "frame.jpg")
    assert_one_line_error(results[3], f"{bad_ind / 'classInd.txt'}:2:")
    assert_one_line_error(results[4], f"{latin_ind / 'classInd.txt'}:2:")
    assert_one_line_error(results[5], "--image_tmpl")
    assert os.listdir(out) == []  # no empty (or any) lists written


def test_read_class_names(tmp_path):
    path = tmp_path / "classes.txt"
    path.write_bytes("\ufeffrun\r\njump\r\n\r\n".encode())  # BOM, CRLF, trailing blank line
    assert data.read_class_names(path) == ["run", "jump"]
    for text, line in [("run\n\njump\n", 2), ("run\njump\nrun\n", 3)]:
        path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(f"{path}:{line}: ")):
            data.read_class_names(path)
    path.write_text("\n")
    with pytest.raises(ValueError, match=re.escape(str(path))):
        data.read_class_names(path)


# ---- extract: nothing to extract, stale partial folders ------------------------------------------
@pytest.mark.slow
def test_extract_errors_one_line(tmp_path):
    pytest.importorskip("av")
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "notes.txt").write_text("not a video")
    missing, empty = run_commands(
        ("extract", tmp_path / "no_videos_here", tmp_path / "f1"),
        ("extract", tmp_path / "videos", tmp_path / "f2"),
    )
    assert_one_line_error(missing, "no_videos_here")
    assert_one_line_error(empty, str(tmp_path / "videos"), "no video")
    assert not (tmp_path / "f1").exists() and not (tmp_path / "f2").exists()


def test_reextract_never_keeps_stale_frames_of_an_interrupted_run(tmp_path):
    videos, frames = tmp_path / "videos", tmp_path / "frames"
    videos.mkdir()
    make_video_file(videos / "clip.avi", 120)
    stale = frames / "clip.part"  # an interrupted run of a longer video: 150 frames
    stale.mkdir(parents=True)
    for i in range(1, 151):
        (stale / f"img_{i:05d}.jpg").write_bytes(b"")
    assert prepare.extract(videos, frames, short_side=0, jobs=1) == 0
    assert sorted(os.listdir(frames)) == ["clip"]
    assert sorted(os.listdir(frames / "clip")) == [f"img_{i:05d}.jpg" for i in range(1, 121)]
    assert prepare.count_frames(frames / "clip") == 120


# ---- progress bars -------------------------------------------------------------------------------
def run_with_tty_stderr(args, timeout=120):
    """prepare.py ARGS with stderr on a pseudo-terminal (as in an interactive shell); returns (rc,
    stderr)."""
    master, slave = pty.openpty()
    # a fresh pty is 0 columns wide
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "prepare.py", *map(str, args)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks, t0 = [], time.time()
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
        assert time.time() - t0 < timeout, "still running"
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_progress_bars_on_a_terminal_only(tmp_path):
    pytest.importorskip("av")
    for k in range(3):
        flat_video(tmp_path / f"v{k}", 30 * k + 15)
    path = write_list(tmp_path / "list.txt", [f"v{k} 6 {k}" for k in range(3)])
    videos = tmp_path / "videos"
    videos.mkdir()
    make_video_file(videos / "a.avi", 4)
    make_video_file(videos / "b.avi", 4)
    rc, err = run_with_tty_stderr(("check", path))
    # count, rate and ETA
    assert rc == 0 and "check" in err and "3/3" in err and "video/s" in err, err
    rc, err = run_with_tty_stderr(("extract", videos, tmp_path / "frames", "-j", 1))
    assert rc == 0 and "extract" in err and "2/2" in err and "video/s" in err, err
    # not a terminal (a log file, a pipe): no bar at all
    (rc, out, err), (rc2, out2, err2) = run_data(
        ("check", path), ("extract", videos, tmp_path / "frames2", "-j", 1)
    )
    assert rc == 0 and err == "" and "OK" in out, (out, err)
    assert rc2 == 0 and err2 == "" and "extracted 2 videos" in out2, (out2, err2)


# ---- bad videos: train replaces, val/test raise --------------------------------------------------
def break_video(folder, how):
    """Break a flat_video folder the way `how` says; returns the path an error must name."""
    frame = folder / "img_00003.jpg"
    if how == "missing folder":
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
        return folder
    if how == "missing frame":
        frame.unlink()
    elif how == "empty file":
        frame.write_bytes(b"")
    elif how == "truncated":
        frame.write_bytes(frame.read_bytes()[: len(frame.read_bytes()) // 2])
    elif how == "garbage":
        frame.write_bytes(np.random.default_rng(0).bytes(300))
    elif how == "size":
        Image.new("RGB", (W + 4, H), (0, 0, 0)).save(frame)
    return frame


REASONS = {
    "missing folder": "missing folder",
    "missing frame": "missing frame",
    "empty file": "empty file",
    "truncated": "unreadable frame",
    "garbage": "unreadable frame",
    "size": "frame is",
}


@pytest.fixture
def six_videos(tmp_path):
    """Six flat videos v0..v5 (value 30 k + 15, label k) in a list, a comment first: video k is on
    line k + 2."""
    for k in range(6):
        flat_video(tmp_path / f"v{k}", 30 * k + 15)
    return write_list(
        tmp_path / "list.txt", ["# six flat videos"] + [f"v{k} 6 {k}" for k in range(6)]
    )


@pytest.mark.parametrize("how", list(REASONS))
def test_val_and_test_raise_bad_video_naming_frame_and_line(six_videos, how):
    named = break_video(six_videos.parent / "v2", how)
    for mode, extra in (("val", {}), ("test", dict(num_clips=2, num_crops=3))):
        ds = data.VideoFrameDataset(six_videos, mode=mode, **CLIP, **extra)
        with pytest.raises(decode.BadVideo) as e:
            ds[2]
        message = str(e.value)
        assert "\n" not in message and message.startswith(
            f"{six_videos}:4: {named}: {REASONS[how]}"
        ), message
        assert str(six_videos.parent / "v2") in message
        assert ds[1][1] == 1  # the others still read


@pytest.mark.parametrize("how", list(REASONS))
def test_train_replaces_a_bad_video_and_reports_it(six_videos, how):
    named = break_video(six_videos.parent / "v2", how)
    ds = data.VideoFrameDataset(six_videos, mode="train", seed=5, **CLIP)
    for epoch in range(4):
        ds.set_epoch(epoch)
        clip, label, info = ds[2]
        k = which_video(clip)
        assert k != 2 and label == k, (k, label)  # the replacement's clip AND its label
        if how == "size":  # the frame named is the first one of another size than the clip's first
            named = six_videos.parent / "v2"
        assert info["bad"].startswith(f"{six_videos}:4: {named}") and "\n" not in info["bad"]
        assert (
            f": {REASONS[how]}" in info["bad"]
            and f"(video {six_videos.parent / 'v2'})" in info["bad"]
        )
        clip, label, info = ds[3]
        assert which_video(clip) == label == 3 and info["bad"] == ""


def test_replacement_is_deterministic_for_workers_and_dataset_objects(six_videos):
    for k in (1, 4):
        break_video(six_videos.parent / f"v{k}", "garbage")
    make = lambda: data.VideoFrameDataset(six_videos, mode="train", seed=3, **CLIP)  # noqa: E731
    a, b = make(), make()
    picks = set()
    for epoch in range(6):
        a.set_epoch(epoch), b.set_epoch(epoch)
        for i in range(6):
            (ca, la, ia), (cb, lb, ib) = a[i], b[i]
            assert torch.equal(ca, cb) and la == lb and ia["bad"] == ib["bad"]
            assert torch.equal(ia["box"], ib["box"])
            if i in (1, 4):
                picks.add((i, la))
    assert len(picks) > 2  # replacements depend on (epoch, index): not always the same video

    batches = {}
    for workers in (0, 2):
        ds = make()
        ds.set_epoch(2)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=3, num_workers=workers, collate_fn=data.collate
        )
        batches[workers] = list(loader)
    for (x0, y0, i0), (x2, y2, i2) in zip(batches[0], batches[2]):
        assert torch.equal(x0, x2) and torch.equal(y0, y2) and i0["bad"] == i2["bad"]
        assert torch.equal(i0["box"], i2["box"])
    labels = torch.cat([y for _, y, _ in batches[0]]).tolist()
    bad = [line for _, _, info in batches[0] for line in info["bad"]]
    assert labels[1] not in (1, 4) and labels[4] not in (1, 4)
    assert [bool(b) for b in bad] == [False, True, False, False, True, False]
    assert bad[1].startswith(f"{six_videos}:3: ") and bad[4].startswith(f"{six_videos}:6: ")


def test_chains_of_bad_videos_and_giving_up(six_videos):
    for k in range(1, 6):  # only v0 is readable
        break_video(six_videos.parent / f"v{k}", "missing frame")
    ds = data.VideoFrameDataset(six_videos, mode="train", seed=0, **CLIP)
    lengths = set()
    for epoch in range(5):
        ds.set_epoch(epoch)
        for i in range(1, 6):
            try:
                clip, label, info = ds[i]
            except decode.BadVideo as e:  # every replacement bad too: give up, one line
                assert "\n" not in str(e) and f"unreadable videos in a row for sample {i}" in str(e)
                lengths.add("gave up")
                continue
            lines = info["bad"].split("\n")
            assert label == which_video(clip) == 0
            assert lines[0].startswith(f"{six_videos}:{i + 2}: ")
            pattern = re.escape(f"{six_videos}:") + r"[3-7]: .*missing frame"
            assert all(re.match(pattern, ln) for ln in lines), lines
            lengths.add(len(lines))
    # chains happen and are all reported
    assert 1 in lengths and max(n for n in lengths if n != "gave up") >= 2


def test_bad_video_from_a_worker_is_one_line(six_videos):
    named = break_video(six_videos.parent / "v0", "garbage")
    ds = data.VideoFrameDataset(six_videos, mode="val", **CLIP)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2, collate_fn=data.collate)
    with pytest.raises(decode.BadVideo) as e:
        list(loader)
    assert "\n" not in str(e.value), str(e.value)
    assert str(e.value).startswith(f"{six_videos}:2: {named}: unreadable frame"), str(e.value)
    # pickles as it is
    for err in (e.value, decode.BadVideo(data.read_list(six_videos)[0], str(named), "why")):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is decode.BadVideo and str(again) == str(err) and again.path == err.path


# ---- check_folders: the fail-early check ---------------------------------------------------------
def test_check_folders_reports_missing_folders_and_frames(six_videos):
    root = six_videos.parent
    break_video(root / "v1", "missing folder")
    (root / "v3" / "img_00006.jpg").unlink()  # the last frame
    (root / "v4" / "img_00001.jpg").unlink()  # the first frame
    # a middle frame: not checked here (stat first and last only)
    (root / "v5" / "img_00003.jpg").unlink()
    videos = data.read_list(six_videos)
    problems, count = prepare.check_folders(videos, "img_{:05d}.jpg")
    assert count == 3 and problems == [
        f"{six_videos}:3: missing folder {root / 'v1'}",
        f"{six_videos}:5: missing frame {root / 'v3' / 'img_00006.jpg'}",
        f"{six_videos}:6: missing frame {root / 'v4' / 'img_00001.jpg'}",
    ]
    problems, count = prepare.check_folders(videos, "img_{:05d}.jpg", max_report=2)
    assert count == 3 and len(problems) == 2
    assert prepare.check_folders([videos[0], videos[2], videos[5]], "img_{:05d}.jpg") == ([], 0)
    with pytest.raises(ValueError, match="--image_tmpl"):
        prepare.check_folders(videos, "img.jpg")


@pytest.mark.slow
@pytest.mark.skipif(
    not (UCF101_LISTS / "ucf101_train_split1_list.txt").is_file(), reason="../shared not here"
)
def test_check_folders_on_the_real_ucf101_list(tmp_path):
    """The 9537-line UCF101 list against a tree holding (empty) first and last frames of every
    video."""
    videos = data.read_list(UCF101_LISTS / "ucf101_train_split1_list.txt", root=tmp_path)
    assert len(videos) == 9537
    for v in videos:
        os.makedirs(v.path, exist_ok=True)
        for i in (1, v.num_frames):
            open(os.path.join(v.path, f"img_{i:05d}.jpg"), "w").close()
    assert prepare.check_folders(videos, "img_{:05d}.jpg") == ([], 0)
    os.remove(os.path.join(videos[100].path, f"img_{videos[100].num_frames:05d}.jpg"))
    os.remove(os.path.join(videos[7000].path, "img_00001.jpg"))
    problems, count = prepare.check_folders(videos, "img_{:05d}.jpg")
    assert count == 2 and [p.split(":")[1] for p in problems] == [
        str(videos[100].line),
        str(videos[7000].line),
    ]
    problems, count = prepare.check_folders(
        data.read_list(UCF101_LISTS / "ucf101_train_split1_list.txt", root=tmp_path / "wrong_root"),
        "img_{:05d}.jpg",
    )
    assert count == 9537 and len(problems) == 10 and all("missing folder" in p for p in problems)
