"""Charades' training labels against PySlowFast's own code: a training clip takes the labels of the
frames it spans (slowfast/datasets/charades.py: aggregate_labels over the clip's frames, from the
per-frame labels of its frame list), val / test clips the video's (convert_to_video_level_labels).

The reference is facebookresearch/SlowFast's charades.py and datasets/utils.py, vendored unchanged
under tests/reference/pyslowfast (see its README); the fixtures are in its published layout (a frame
list `original_vido_id video_id frame_id path labels` over frame folders), and in Charades' own
(Charades_v1_train.csv over Charades_v1_rgb, 24 frames a second).
"""

import copy
import csv
import importlib.util
import os
import sys
import types

import numpy as np
from PIL import Image

import data
from conftest import REPO, write_list

REF = REPO / "tests" / "reference" / "pyslowfast"
C = 12  # classes


def _reference():
    """PySlowFast's Charades dataset module, with stand-ins for what it imports and its label code
    never calls: OpenCV, iopath's path manager (open() does), the registry, the augmentations."""
    stand_ins = {
        "cv2": types.ModuleType("cv2"),
        "slowfast.utils.env": types.ModuleType("slowfast.utils.env"),
        "slowfast.datasets.build": types.ModuleType("slowfast.datasets.build"),
        "slowfast.datasets.transform": types.ModuleType("slowfast.datasets.transform"),
        "slowfast.datasets.random_erasing": types.ModuleType("slowfast.datasets.random_erasing"),
    }
    stand_ins["slowfast.utils.env"].pathmgr = types.SimpleNamespace(
        open=open, exists=os.path.exists
    )
    stand_ins["slowfast.datasets.build"].DATASET_REGISTRY = types.SimpleNamespace(
        register=lambda: lambda c: c
    )
    stand_ins["slowfast.datasets.transform"].create_random_augment = None
    stand_ins["slowfast.datasets.random_erasing"].RandomErasing = None
    # only where missing (OpenCV may be installed), and only while the files import
    cv2 = importlib.util.find_spec("cv2") is not None
    added = [k for k in stand_ins if k not in sys.modules and not (k == "cv2" and cv2)]
    sys.modules.update({k: stand_ins[k] for k in added})
    sys.path.insert(0, str(REF))
    try:
        from slowfast.datasets import charades, utils
    finally:
        sys.path.remove(str(REF))
        for k in added:
            del sys.modules[k]
    return charades, utils


charades_ref, utils_ref = _reference()


def frames(folder, n, tmpl):
    """n frames, frame i (from 1) a flat grey of value 2 i: its number readable after JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        Image.fromarray(np.full((6, 8, 3), 2 * i, np.uint8)).save(folder / tmpl.format(i))


def frame_list(path, videos, prefix):
    """PySlowFast's published frame list (DATASET.md, Charades): a line a frame, `original_vido_id
    video_id frame_id path labels`, labels quoted, over <prefix>/<id>/<id>-000001.jpg."""
    lines = ["original_vido_id video_id frame_id path labels"]
    for k, (vid, per_frame) in enumerate(videos.items()):
        frames(prefix / vid, len(per_frame), f"{vid}-{{:06d}}.jpg")
        for i, labels in enumerate(per_frame):
            text = ",".join(map(str, labels))
            lines.append(f'{vid} {k} {i} {vid}/{vid}-{i + 1:06d}.jpg "{text}"')
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_list(path, lines)


def random_videos(rng, count=6):
    """Videos of 20 .. 60 frames whose frames carry runs of labels that start and stop inside."""
    videos = {}
    for v in range(count):
        n = int(rng.integers(20, 61))
        per_frame = [set() for _ in range(n)]
        for _ in range(int(rng.integers(1, 5))):
            k, first = int(rng.integers(0, C)), int(rng.integers(0, n))
            for j in range(first, min(n, first + int(rng.integers(1, 25)))):
                per_frame[j].add(k)
        videos[f"V{v:04d}"] = [sorted(labels) for labels in per_frame]
    return videos


def pyslowfast(tmp_path, mode):
    """PySlowFast's Charades dataset over tmp_path/lists/{train,val}.csv: its _labels are its
    per-frame labels (train) or the video's on every frame (val: convert_to_video_level_labels)."""
    cfg = types.SimpleNamespace(
        DATA=types.SimpleNamespace(
            PATH_TO_DATA_DIR=str(tmp_path / "lists"), PATH_PREFIX=str(tmp_path / "rgb")
        )
    )
    return charades_ref.Charades(cfg, mode)


def assert_train_labels_are_pyslowfasts(ds, ref, epochs=6):
    """Every train clip's target = PySlowFast's label for a clip of the same frames: its
    aggregate_labels over seq[0] .. seq[-1] (charades.py __getitem__), as_binary_vector'd."""
    differ = 0
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for i, video in enumerate(ds.videos):
            rng = np.random.default_rng([ds.spec.seed, epoch, i])
            seq = ds.choose_frames(video, copy.deepcopy(rng))[0] - 1 - video.offset
            expected = utils_ref.as_binary_vector(
                utils_ref.aggregate_labels([ref._labels[i][j] for j in range(seq[0], seq[-1] + 1)]),
                C,
            )
            assert ds.target(video, rng).numpy().tolist() == expected.tolist(), (epoch, i, seq)
            differ += expected.sum() != len(video.label)
    # the fixture's clips see part of their video's labels: the test tells the two apart
    assert differ > epochs


def test_frame_list_train_labels_are_pyslowfasts(tmp_path):
    videos = random_videos(np.random.default_rng(0))
    lst = frame_list(tmp_path / "lists" / "train.csv", videos, tmp_path / "rgb")
    write_list(tmp_path / "lists" / "val.csv", lst.read_text().splitlines())
    spec = data.DataSpec(
        t_length=4, t_stride=3, new_size=6, crop_size=6, multi_label=True, num_classes=C
    )
    ds = data.VideoFrameDataset(lst, spec, "train", root=tmp_path / "rgb")
    ref = pyslowfast(tmp_path, "train")
    assert [len(p) for p in ref._path_to_videos] == [v.num_frames for v in ds.videos]
    assert_train_labels_are_pyslowfasts(ds, ref)
    # the clip read is the clip labelled: its frames are those the label was taken over
    rng = np.random.default_rng([ds.spec.seed, 0, 2])
    ds.set_epoch(0)
    clip, target, _ = ds[2]
    numbers = ds.choose_frames(ds.videos[2], rng)[0]
    assert [round(float(f.float().mean()) / 2) for f in clip.unbind(1)] == numbers.tolist()
    # val: the video's labels, whichever clip (convert_to_video_level_labels)
    val = data.VideoFrameDataset(lst, spec, "val", root=tmp_path / "rgb")
    ref_val = pyslowfast(tmp_path, "val")
    for i, video in enumerate(val.videos):
        expected = utils_ref.as_binary_vector(ref_val._labels[i][0], C)
        assert val[i][1].numpy().tolist() == expected.tolist()


def test_charades_csv_train_labels_are_its_frames_at_24_fps(tmp_path):
    # Charades_v1_train.csv's actions (class, start s, end s) label the frames at 24 a second
    # strictly inside them (gsig/charades-algorithms charadesrgb.py: start < ii / 24 < end for
    # frame ii + 1): the same labels as PySlowFast's code over a frame list holding those frames'
    # labels
    rng = np.random.default_rng(1)
    rows, per_video = [], {}
    for v in range(6):
        vid, n = f"C{v:04d}", int(rng.integers(20, 61))
        actions = []
        for _ in range(int(rng.integers(1, 4))):
            start = round(float(rng.uniform(0, n / 24)), 2)
            end = round(start + float(rng.uniform(0.05, 1.2)), 2)
            actions.append((int(rng.integers(0, C)), start, end))
        # one action from and to a frame's exact time (0.5 s: frame 13): strict at both ends
        actions.append((C - 1, 0.0, 0.5))
        rows.append((vid, ";".join(f"c{k:03d} {s:.2f} {e:.2f}" for k, s, e in actions)))
        per_video[vid] = [
            sorted({k for k, s, e in actions if s < ii / float(24) < e}) for ii in range(n)
        ]
    frame_list(tmp_path / "lists" / "train.csv", per_video, tmp_path / "rgb")
    with open(tmp_path / "rgb" / "Charades_v1_train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "subject", "scene", "actions", "length"])
        w.writerows([vid, "HR43", "Kitchen", actions, 30.0] for vid, actions in rows)
    spec = data.DataSpec(
        t_length=4, t_stride=3, new_size=6, crop_size=6, multi_label=True, num_classes=C
    )
    ds = data.VideoFrameDataset(tmp_path / "rgb" / "Charades_v1_train.csv", spec, "train")
    assert ds.videos[0].label_frames and all(a <= b for _, a, b in ds.videos[0].label_frames)
    assert_train_labels_are_pyslowfasts(ds, pyslowfast(tmp_path, "train"))
    # frames 1 and 13 are at 0 and 0.5 s: outside (0, 0.5), the action spans frames 2 .. 12
    assert (C - 1, 1, 11) in ds.videos[0].label_frames
