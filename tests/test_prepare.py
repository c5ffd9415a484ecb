"""prepare.py commands: synth, lists (UCF101, HMDB51), check, extract; each run as a user runs
it."""

import os
import re
import subprocess
import sys

from PIL import Image
import numpy as np
import pytest
import torch

import data
import prepare
from conftest import NUM_FRAMES, REPO, copy_video, fake_hmdb51, fake_ucf101, write_list


def run_prepare(*commands):
    """Run `python prepare.py ARGS` for each ARGS tuple from the repository folder, all at once:
    each pays seconds of torch + torchvision imports, and CI has 2 cores. Returns (returncode,
    stdout, stderr) each."""
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
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append((proc.returncode, out, err))
    return results


def test_cli_synth(tmp_path):
    out = tmp_path / "synth"
    [(rc, stdout, stderr)] = run_prepare(
        ("synth", out, "--classes", 4, "--videos", 8, "--frames", 6, "--size", "48x40")
    )
    assert rc == 0, stderr
    for split in ("train", "val"):
        lines = (out / f"{split}.txt").read_text().splitlines()
        assert len(lines) == 8
        labels = []
        for line in lines:
            rel, n, label = line.rsplit(maxsplit=2)
            assert int(n) == 6 and not os.path.isabs(rel)
            labels.append(int(label))
            names = sorted(os.listdir(out / rel))
            assert names == [f"img_{i:05d}.jpg" for i in range(1, 7)]
            with Image.open(out / rel / names[-1]) as img:
                assert img.format == "JPEG" and img.size == (48, 40)
        assert sorted(labels) == [0, 0, 1, 1, 2, 2, 3, 3]
    ds = data.VideoFrameDataset(
        out / "train.txt", mode="val", t_length=4, t_stride=1, new_size=40, crop_size=32
    )
    clip, _, _ = ds[0]
    assert clip.shape == (3, 4, 32, 32) and not torch.equal(clip[:, 0], clip[:, 1])  # frames move


@pytest.mark.slow
def test_cli_lists_ucf101_and_hmdb51(tmp_path):
    ucf_frames, ucf_splits = fake_ucf101(tmp_path)
    hmdb_frames, hmdb_splits = fake_hmdb51(tmp_path)
    ucf, hmdb = run_prepare(
        ("lists", ucf_frames, "--ucf101", ucf_splits, "--split", 1),
        ("lists", hmdb_frames, "--hmdb51", hmdb_splits, "--split", 1, "--out", hmdb_frames),
    )

    assert ucf[0] == 0, ucf[2]
    assert "v_Biking_g09_c01" in ucf[2]  # the video without frames is named
    out = tmp_path / "ucf"  # default: FRAMES_DIR's parent, the lists' default root
    assert sorted(p.name for p in out.glob("*.txt")) == [
        "ucf101_classes.txt",
        "ucf101_train_split1_list.txt",
        "ucf101_val_split1_list.txt",
    ]
    train = (out / "ucf101_train_split1_list.txt").read_text().splitlines()
    val = (out / "ucf101_val_split1_list.txt").read_text().splitlines()
    # classInd is 1-based, labels 0-based
    assert train == [
        "RGB/v_ApplyEyeMakeup_g08_c01 3 0",
        "RGB/HandstandPushups/v_HandStandPushups_g08_c01 5 2",
        "RGB/v_Biking_g08_c01 4 1",
    ]
    assert val == ["RGB/v_ApplyEyeMakeup_g01_c01 6 0", "RGB/v_Biking_g01_c01 2 1"]
    videos = data.read_list(out / "ucf101_train_split1_list.txt", num_classes=3)
    assert all(os.path.isdir(v.path) for v in videos)

    assert hmdb[0] == 0, hmdb[2]
    train = (hmdb_frames / "hmdb51_train_split1_list.txt").read_text().splitlines()
    val = (hmdb_frames / "hmdb51_val_split1_list.txt").read_text().splitlines()
    # '1' train, '2' test, '0' unused; split 2 ignored. A '#' name must not read as a comment:
    assert sorted(train) == sorted(["Brushing_hair_1 4 0", "./#20_sword_fight 6 1"])
    assert sorted(val) == sorted(["Brushing_hair_2 3 0", "sword_2 2 1", "sword_ex_1 7 2"])
    videos = data.read_list(hmdb_frames / "hmdb51_train_split1_list.txt", num_classes=3)
    assert len(videos) == 2 and all(os.path.isdir(v.path) for v in videos)


@pytest.mark.slow
def test_cli_check(synth, tmp_path):
    root, train, _ = synth
    src = root / "train" / "video_0000"
    copy_video(src, tmp_path / "good")
    copy_video(src, tmp_path / "short", count=6)
    copy_video(src, tmp_path / "corrupt")
    # the last frame
    (tmp_path / "corrupt" / f"img_{NUM_FRAMES:05d}.jpg").write_bytes(os.urandom(300))
    path = write_list(
        tmp_path / "list.txt",
        [
            f"good {NUM_FRAMES} 0",  # 1: fine
            f"nowhere {NUM_FRAMES} 1",  # 2: missing folder
            f"short {NUM_FRAMES} 2",  # 3: 6 frames on disk
            "# comment",
            f"corrupt {NUM_FRAMES} 3",  # 5: unreadable frame
            f"good {NUM_FRAMES} 9",  # 6: bad label
            "good x 1",  # 7: malformed
            f"good {NUM_FRAMES} 1",  # 8: fine
        ],
    )
    good, bad = run_prepare(("check", train), ("check", path, "--num_classes", 4))

    assert good[0] == 0 and "OK" in good[1], good
    assert f"{len(data.read_list(train))} videos" in good[1]

    rc, out, err = bad
    assert rc == 1, out + err
    for line, what in [
        (2, "missing folder"),
        (3, "6 on disk"),
        (5, "unreadable frame"),
        (6, "label 9"),
        (7, "integers"),
    ]:
        assert re.search(re.escape(f"{path}:{line}: ") + ".*" + what, out), (line, out)
    for line in (1, 4, 8):
        assert f"{path}:{line}:" not in out
    assert str(tmp_path / "nowhere") in out
    assert str(tmp_path / "corrupt" / f"img_{NUM_FRAMES:05d}.jpg") in out
    assert str(tmp_path / "short" / "img_00007.jpg") in out  # the first missing frame


@pytest.mark.slow
def test_cli_extract(tmp_path):
    av = pytest.importorskip("av")
    videos, frames = tmp_path / "videos", tmp_path / "frames"
    (videos / "classA").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, n in [("classA/clip one.avi", 8), ("two.avi", 5)]:
        with av.open(str(videos / name), "w") as container:
            stream = container.add_stream("mpeg4", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            for _ in range(n):
                img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
                container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
            container.mux(stream.encode())  # flush the encoder
    (videos / "notes.txt").write_text("not a video")
    [(rc, out, err)] = run_prepare(("extract", videos, frames, "--short-side", 32, "-j", 2))
    assert rc == 0, out + err
    for rel, n in [("classA/clip one", 8), ("two", 5)]:  # same relative path, without the extension
        names = sorted(os.listdir(frames / rel))
        assert names == [f"img_{i:05d}.jpg" for i in range(1, n + 1)], rel
        for name in (names[0], names[-1]):
            with Image.open(frames / rel / name) as img:
                assert img.format == "JPEG" and img.size == (43, 32)  # 64x48 -> short side 32
    # no .part folders, nothing for notes.txt
    assert sorted(os.listdir(frames)) == ["classA", "two"]
    assert os.listdir(frames / "classA") == ["clip one"]


def test_extract_without_pyav_says_how_to_install(tmp_path, monkeypatch):
    real = prepare.importlib.util.find_spec
    monkeypatch.setattr(
        prepare.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "av" else real(name, *a),
    )
    with pytest.raises(SystemExit, match="pip install av"):
        prepare.extract(tmp_path, tmp_path / "frames")
    assert not (tmp_path / "frames").exists()


def test_lists_never_overwrites_existing_lists_unless_forced(tmp_path, capsys):
    frames, splits = fake_ucf101(tmp_path)
    argv = ["lists", str(frames), "--ucf101", str(splits), "-j", "1"]
    assert prepare.main(argv) == 0
    out = tmp_path / "ucf"
    mine = out / "ucf101_train_split1_list.txt"
    mine.write_text("RGB/v_ApplyEyeMakeup_g08_c01 3 0\n")  # the user's own list of that name
    before = {p.name: p.read_bytes() for p in out.glob("*.txt")}
    capsys.readouterr()
    assert prepare.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(mine) in err and "--force" in err, err
    assert {p.name: p.read_bytes() for p in out.glob("*.txt")} == before  # nothing written
    # the same classes file is no conflict; another one is
    for p in out.glob("ucf101_*_list.txt"):
        p.unlink()
    assert prepare.main(argv) == 0
    classes = out / "ucf101_classes.txt"
    classes.write_text("run\njump\nwalk\n")
    for p in out.glob("ucf101_*_list.txt"):
        p.unlink()
    capsys.readouterr()
    assert prepare.main(argv) == 2 and str(classes) in capsys.readouterr().err
    assert classes.read_text() == "run\njump\nwalk\n" and not list(out.glob("ucf101_*_list.txt"))
    assert prepare.main([*argv, "--force"]) == 0  # asked for: overwritten
    assert mine.read_bytes() != before[mine.name] and data.read_class_names(classes)[0] != "run"
