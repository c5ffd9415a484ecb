"""The README's "Train on UCF101, end to end" block, run as written: from the download to
--evaluate.

The commands are read from README.md's code block itself, so a README edit that breaks the path a
new user follows fails here. The download and unpacking lines (wget, unrar, unzip) are the only ones
not run: no network in tests. In their place the test makes what they unpack, under the names the
block uses: a UCF101-shaped stand-in of real .avi files (MPEG-4 part 2 with B-frames, UCF101's
codec) in UCF-101/<Class>/v_<Class>_gGG_cCC.avi, and ucfTrainTestlist/ with classInd.txt,
trainlist01.txt and testlist01.txt in the official formats (CRLF lines, 1-based labels in the train
list, none in the test list). Every other command runs as written, in that folder, with tiny-model
flags appended (flags after a recipe override it) and the run folder's path substituted in the
evaluation.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ENV, REPO, TINY

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import videos  # noqa: E402  (tests/videos.py, beside this file)

CLASSES = ["ApplyEyeMakeup", "Biking", "YoYo"]
TRAIN_GROUPS, TEST_GROUPS = (8, 9), (1,)  # split 1: groups 8-25 train, 1-7 test
UNPACKED_BY_DOWNLOAD = ("wget", "unrar", "unzip")
# A few seconds on CPU: one epoch of the tiny arch, an optimizer step per batch (no accumulation),
# the stand-in's 3 classes (its ucf101_classes.txt names 3: UCF101's 101 would be refused).
TRAIN_FLAGS = [*TINY, "--epochs", "1", "--iter_size", "1", "--num_classes", str(len(CLASSES))]
TRAIN_FLAGS += ["--pretrained", "none"]  # no ImageNet twin for the tiny arch (and no download)
EVAL_FLAGS = ["--crop_size", "32", "-j", "0", "--device", "cpu"]


def readme_walkthrough():
    """The shell commands of the README's UCF101 block: continuation lines joined, comments
    dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Train on UCF101, end to end") :]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if shlex.split(line, comments=True)]


def make_ucf101_download(root):
    """What unrar and unzip leave: UCF-101/ (videos by class) and ucfTrainTestlist/ (split
    files)."""
    splits = root / "ucfTrainTestlist"
    splits.mkdir()
    train, test = [], []
    for label, name in enumerate(CLASSES, 1):
        for group in TRAIN_GROUPS + TEST_GROUPS:
            rel = f"{name}/v_{name}_g{group:02d}_c01.avi"
            (root / "UCF-101" / name).mkdir(parents=True, exist_ok=True)
            videos.mpeg4_avi(str(root / "UCF-101" / rel), frames=20)
            (train if group in TRAIN_GROUPS else test).append(
                f"{rel} {label}" if group in TRAIN_GROUPS else rel
            )
    crlf = lambda lines: "".join(line + "\r\n" for line in lines).encode()  # noqa: E731
    (splits / "classInd.txt").write_bytes(crlf(f"{k} {n}" for k, n in enumerate(CLASSES, 1)))
    (splits / "trainlist01.txt").write_bytes(crlf(train))
    (splits / "testlist01.txt").write_bytes(crlf(test))


def run(argv, cwd):
    env = dict(ENV)
    while "=" in argv[0]:  # VAR=value before the command
        key, value = argv.pop(0).split("=", 1)
        env[key] = value
    assert argv[0] == "python" and argv[1] in ("prepare.py", "train.py"), argv
    r = subprocess.run(
        [sys.executable, str(REPO / argv[1]), *argv[2:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=240,
    )
    assert r.returncode == 0, f"{shlex.join(argv)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.slow
def test_the_readme_walkthrough_runs_from_the_download_to_evaluate(tmp_path):
    commands = readme_walkthrough()
    downloads = [c for c in commands if c[0] in UNPACKED_BY_DOWNLOAD]
    named = " ".join(" ".join(c) for c in downloads)
    for official in ("UCF101.rar", "UCF101TrainTestSplits-RecognitionTask.zip"):
        assert official in named, named
    make_ucf101_download(tmp_path)
    ran, run_folder = [], None
    for argv in commands:
        if argv[0] in UNPACKED_BY_DOWNLOAD:
            continue
        # the README names the full recipe's run folder; this run's is tiny
        if "--evaluate" in argv:
            k = argv.index("--resume") + 1
            assert run_folder and argv[k].endswith("/model_best.pth"), argv
            argv[k] = os.path.join(run_folder, "model_best.pth")
            out = run(argv + EVAL_FLAGS, tmp_path)
        elif argv[-1] == "train.py" or "train.py" in argv[:3]:
            out = run(argv + TRAIN_FLAGS, tmp_path)
            run_folder = re.search(r"^run folder (\S+):", out, re.M).group(1)
        else:
            out = run(argv, tmp_path)
        ran.append((argv, out))
    steps = [" ".join(argv[:3]) for argv, _ in ran]
    assert steps == [
        "python prepare.py extract",
        "python prepare.py lists",
        "python prepare.py check",
        "python prepare.py check",
        "python train.py ucf101",
        "python train.py ucf101",
    ], steps
    assert len(os.listdir(tmp_path / "frames")) >= 1
    lists = (tmp_path / "ucf101_train_split1_list.txt").read_text().splitlines()
    assert len(lists) == len(CLASSES) * len(TRAIN_GROUPS)
    assert re.search(r"^ \* Acc@1 [\d.]+ Acc@5 [\d.]+$", ran[-1][1], re.M), ran[-1][1]
