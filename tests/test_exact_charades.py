"""tests/test_exact.py's checks (resume at an epoch boundary, SIGTERM mid-epoch then resume, DDP
evaluation vs one process) with --multi-label over PySlowFast's Charades frame lists
(`original_vido_id video_id frame_id path labels`, a frame a line) whose labels change within each
video: a training clip's target is the labels of the frames it spans (data.span_labels), drawn
from the clip's own generator, so it must follow the clip through workers, resumes and processes.
And the worker count: the same run with -j 0 and -j 2 gives the same weights, bit for bit.

    RUN_SLOW=1 python -m pytest -q tests/test_exact_charades.py
"""

import shlex
from pathlib import Path

import pytest
import torch

import data
import flags
import prepare
import train
from conftest import TINY, run_main, write_list
from test_exact import (  # noqa: F401  (collected here, with this module's fixtures)
    assert_same_run,
    test_ddp_trains_and_evaluates_exactly,
    test_resume_is_exact,
    test_sigterm_saves_and_resumes_exactly,
)

MULTI = ["--multi-label"]


def frame_labels(i, c):
    """Video i of synth class c, 10 frames: c on frames 0-2, nothing on 3-6, c + 4 and 8 + i % 3 on
    7-9. TINY's clips span 7 frames (4 x stride 2), so a clip holds c, the others, or both."""
    return [(c,)] * 3 + [()] * 4 + [(c + 4, 8 + i % 3)] * 3


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """conftest's tiny_data's videos (12 train, an odd val list of 7), listed as PySlowFast's
    Charades frame lists with labels by frame (`frame_labels`)."""
    out = tmp_path_factory.mktemp("tiny_charades")
    lists = prepare.make_synth(out, classes=4, videos=12, frames=10, size=(48, 40))
    made = []
    for path, keep in zip(lists, (12, 7)):
        rows = [line.split() for line in Path(path).read_text().splitlines()[:keep]]
        lines = ["original_vido_id video_id frame_id path labels"]
        for i, (folder, _, c) in enumerate(rows):
            for j, labels in enumerate(frame_labels(i, int(c))):
                text = ",".join(map(str, labels))
                lines.append(f'v{i} {i} {j} {folder}/img_{j + 1:05d}.jpg "{text}"')
        made.append(str(write_list(Path(path).with_suffix(".csv"), lines)))
    return tuple(made)


@pytest.fixture
def trainer_flags(request):
    return [*MULTI, *shlex.split(request.config.getoption("--trainer-flags"))]


def test_training_targets_follow_the_clip_and_repeat_exactly(tiny_data):
    """The fixture exercises labels by frame: a video's training targets change with its clip
    (some clips hold fewer labels than the video), and each (epoch, index) draws the same target
    again in a fresh dataset (what a worker or a resumed run builds)."""
    args = train.parse_args(["ucf101", *tiny_data, *TINY, *MULTI])
    ds = train.make_dataset(args, tiny_data[0], "train")
    assert all(v.label_frames for v in ds.videos)
    targets = {}
    for epoch in range(4):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            targets[epoch, i] = ds[i][1]
    per_video = [{tuple(targets[e, i].tolist()) for e in range(4)} for i in range(len(ds))]
    assert sum(len(t) > 1 for t in per_video) >= len(ds) // 2, per_video
    whole = [data.labels(v) for v in ds.videos]
    assert any(targets[k].sum() < len(whole[k[1]]) for k in targets)
    again = train.make_dataset(args, tiny_data[0], "train")
    again.set_epoch(3)
    assert all(torch.equal(again[i][1], targets[3, i]) for i in range(len(ds)))


@pytest.mark.slow
def test_worker_counts_train_the_same_weights(tiny_data, tmp_path, trainer_flags):
    """Two epochs with the clips (and their targets) decoded in the main process, then in two
    loader workers: the same weights, bit for bit."""
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "2", "--dro", "0.5"]
    runs = []
    for j in ("0", "2"):
        argv = [*args, "-j", j, "--output_root", str(tmp_path / j), *trainer_flags]
        run_main(argv)
        runs.append(tmp_path / j / flags.run_dir_name(train.parse_args(argv)) / "checkpoint.pth")
    assert_same_run(*runs)
