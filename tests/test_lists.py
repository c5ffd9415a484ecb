"""List formats, picked by the file (data.read_list): Something-Something v2's JSON lists with their
labels file and .webm videos, end to end (train, evaluate, predict), and Kinetics' CSV files."""

import csv
import json

import av
import numpy as np
import pytest
import torch

import data
import predict
import prepare
import train
from conftest import TINY, one_line_error, run_dir, run_main

FRAMES = 10
# Something-Something v2's labels file names classes by templates with '[something]' placeholders
TEMPLATES = {
    "Pushing [something] from left to right": "0",
    "Pushing [something] from right to left": "1",
}


def moving_square(path, direction, codec="libvpx", size=(48, 40)):
    """A video of a white square crossing a grey frame left to right (+1) or right to left (-1)."""
    W, H = size
    with av.open(str(path), "w") as out:
        s = out.add_stream(codec, rate=12, options={"deadline": "realtime", "b": "400k"})
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        for k in range(FRAMES):
            img = np.full((H, W, 3), 90, np.uint8)
            x = 4 + 3 * k if direction > 0 else W - 14 - 3 * k
            img[14:26, x : x + 10] = 240
            for packet in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in s.encode(None):
            out.mux(packet)
    return path


@pytest.fixture(scope="module")
def sthv2(tmp_path_factory):
    """Something-Something v2 as shipped: 20bn-something-something-v2/<id>.webm (VP8 in WebM) and
    the labels folder's three JSON files."""
    if "libvpx" not in av.codecs_available:
        pytest.skip("PyAV's FFmpeg has no libvpx (VP8) encoder")
    root = tmp_path_factory.mktemp("sthv2")
    videos, labels = root / "20bn-something-something-v2", root / "labels"
    videos.mkdir()
    labels.mkdir()
    templates = list(TEMPLATES)
    parts = {"train": range(1, 9), "validation": range(9, 13)}
    for part, ids in parts.items():
        entries = []
        for i in ids:
            label = i % 2
            moving_square(videos / f"{i}.webm", 1 if label == 0 else -1)
            template = templates[label]
            entries.append(
                {
                    "id": str(i),
                    "label": template.replace("[something]", "a cup"),
                    "template": template,
                    "placeholders": ["a cup"],
                }
            )
        (labels / f"something-something-v2-{part}.json").write_text(json.dumps(entries))
    (labels / "something-something-v2-labels.json").write_text(json.dumps(TEMPLATES))
    return videos, labels


def test_sthv2_json_list_reads_webm_videos_and_labels_file(sthv2):
    videos, labels = sthv2
    listed = data.read_list(labels / "something-something-v2-train.json", root=videos)
    assert [v.path for v in listed] == [str(videos / f"{i}.webm") for i in range(1, 9)]
    assert [v.label for v in listed] == [i % 2 for i in range(1, 9)]
    assert all(v.num_frames == FRAMES for v in listed)  # counted in the .webm files
    assert data.list_classes(labels / "something-something-v2-train.json") == list(TEMPLATES)


def test_sthv2_trains_evaluates_and_predicts_with_its_class_names_and_no_flips(
    sthv2, tmp_path, capsys
):
    videos, labels = sthv2
    argv = [
        "sthv2",
        str(labels / "something-something-v2-train.json"),
        str(labels / "something-something-v2-validation.json"),
        "--data_root",
        str(videos),
        *TINY,
        "--num_classes",
        "2",
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path),
    ]
    args = train.parse_args(argv)
    assert not train.make_dataset(args, args.train_list, "train").flip  # directions in the labels
    assert train.make_dataset(
        train.parse_args(["ucf101", *argv[1:]]), args.train_list, "train"
    ).flip
    run_main(argv)
    folder = run_dir(tmp_path, argv)
    ckpt = torch.load(folder / "checkpoint.pth", map_location="cpu", weights_only=False)
    assert ckpt["class_names"] == list(TEMPLATES)
    out = capsys.readouterr().out  # .webm files: the decoder named, AVI files not mentioned
    assert "video files: decoded with" in out and "AVI" not in out
    run_main([*argv, "--evaluate", "--resume", str(folder / "model_best.pth")])
    out = capsys.readouterr().out
    assert "top-1" in out and "Pushing [something] from right to left" in out  # the class table
    assert (
        predict.main(["--resume", str(folder / "model_best.pth"), str(videos / "9.webm"), "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["frames"] == FRAMES
    assert {e["name"] for e in result["top"]} == set(TEMPLATES)


def test_prepare_lists_writes_sthv2_text_lists_with_frame_counts(sthv2, tmp_path):
    videos, labels = sthv2
    written = prepare.make_lists(str(videos), "sthv2", str(labels), out_dir=str(tmp_path))
    assert [p.split("/")[-1] for p in written] == ["sthv2_train_list.txt", "sthv2_val_list.txt"]
    json_list = data.read_list(labels / "something-something-v2-validation.json", root=videos)
    text_list = data.read_list(tmp_path / "sthv2_val_list.txt")
    assert [(v.path, v.num_frames, v.label) for v in text_list] == [
        (v.path, v.num_frames, v.label) for v in json_list
    ]
    assert data.read_class_names(tmp_path / "sthv2_classes.txt") == list(TEMPLATES)


def test_sthv2_json_entry_without_a_known_template_names_the_entry(sthv2, tmp_path):
    videos, labels = sthv2
    bad = tmp_path / "something-something-v2-train.json"
    (tmp_path / "something-something-v2-labels.json").write_text(json.dumps(TEMPLATES))
    bad.write_text(json.dumps([{"id": "1", "template": "Pushing [something]"}, {"id": "2"}]))
    with pytest.raises(
        ValueError, match=r"train.json:1: template not in \S*something-something-v2-labels.json"
    ):
        data.read_list(bad, root=videos)
    problems = []
    data.read_list(bad, root=videos, problems=problems)
    assert [n for n, _ in problems] == [1, 2] and "test split has no labels" in problems[1][1]


def test_kinetics_csv_is_a_list_with_sorted_class_names(tmp_path):
    rows = [
        ("riding a bike", "abc", 10, 20),
        ("abseiling", "xyz", 0, 10),
        ("riding a bike", "q", 5, 15),
    ]
    path = tmp_path / "validate.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(data.KINETICS_COLUMNS)
        for label, yid, start, end in rows:
            w.writerow([label, yid, start, end, "val"])
            (tmp_path / label).mkdir(exist_ok=True)
            moving_square(tmp_path / label / f"{yid}_{start:06d}_{end:06d}.mp4", 1, "libx264")
    listed = data.read_list(path)
    assert [v.label for v in listed] == [1, 0, 1] and [v.line for v in listed] == [2, 3, 4]
    assert listed[0].path == str(tmp_path / "riding a bike" / "abc_000010_000020.mp4")
    assert all(v.num_frames == FRAMES for v in listed)
    assert data.list_classes(path) == ["abseiling", "riding a bike"]


def test_sthv2_entries_with_a_null_template_or_an_integer_label(sthv2, tmp_path, capsys):
    """ "template": null is one line (training, `prepare.py check`, `prepare.py lists`), never a
    traceback; an entry with an integer "label" and no template takes that label."""
    videos, labels = sthv2
    entries = [
        {"id": "1", "label": 1},
        {"id": "2", "template": None, "label": "pushing a cup"},
        {"id": "3", "template": "Pushing [something] from left to right"},
    ]
    bad = tmp_path / "something-something-v2-train.json"
    (tmp_path / "something-something-v2-labels.json").write_text(json.dumps(TEMPLATES))
    bad.write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=r'train.json:2: "template" is null') as e:
        data.read_list(bad, root=videos)
    assert "\n" not in str(e.value)
    problems = []
    listed = data.read_list(bad, root=videos, problems=problems)
    assert [(v.path, v.label) for v in listed] == [
        (str(videos / "1.webm"), 1),
        (str(videos / "3.webm"), 0),
    ]
    assert [n for n, _ in problems] == [2]
    capsys.readouterr()
    assert prepare.main(["check", str(bad), "--root", str(videos)]) == 1
    err = capsys.readouterr()
    assert "Traceback" not in err.err and 'train.json:2: "template" is null' in err.out + err.err
    (tmp_path / "something-something-v2-validation.json").write_text(json.dumps(entries))
    assert (
        prepare.main(["lists", str(videos), "--sthv2", str(tmp_path), "--out", str(tmp_path)]) == 2
    )
    one_line_error(capsys, 'train.json:2: "template" is null')


def test_sthv2_labels_file_named_by_the_labels_flag(sthv2, tmp_path):
    """--labels FILE: the labels file anywhere, under any name (default: beside the list)."""
    videos, labels = sthv2
    lists = tmp_path / "lists"
    lists.mkdir()
    for part in ("train", "validation"):
        name = f"something-something-v2-{part}.json"
        (lists / name).write_text((labels / name).read_text())
    mine = tmp_path / "my_labels.json"
    mine.write_text(json.dumps(TEMPLATES))
    train_json = str(lists / "something-something-v2-train.json")
    with pytest.raises(ValueError, match="no labels file .*--labels FILE"):
        data.read_list(train_json, root=videos)
    argv = ["sthv2", train_json, train_json, "--data_root", str(videos), "--labels", str(mine)]
    args = train.parse_args([*argv, *TINY])
    ds = train.make_dataset(args, args.train_list, "train")
    assert [v.label for v in ds.videos] == [i % 2 for i in range(1, 9)]
    assert data.class_names(train.data_spec(args, "train"), train_json) == list(TEMPLATES)


def test_a_frame_folder_with_one_number_needs_its_label_or_pretraining(tmp_path):
    """'<frame_dir> N' (a count without a label, or a label without the count) is refused in
    training naming the form it needs, read as '<frame_dir> <num_frames>' for pretraining; a frame
    folder named like a video file listed without a count is refused saying the count is missing."""
    for name in ("v1", "v2.avi"):
        folder = tmp_path / name
        folder.mkdir()
        for k in range(1, 6):
            (folder / f"img_{k:05d}.jpg").write_bytes(b"")
    (tmp_path / "l.txt").write_text("v1 5\n")
    with pytest.raises(ValueError, match=r"l.txt:1: a frame folder and one number: .*pretrain"):
        data.read_list(tmp_path / "l.txt")
    (video,) = data.read_list(tmp_path / "l.txt", unlabelled=True)
    assert (video.path, video.num_frames, video.label) == (str(tmp_path / "v1"), 5, 0)
    (tmp_path / "avi.txt").write_text("v2.avi 3\n")
    with pytest.raises(ValueError, match=r"avi.txt:1: a frame folder without its frame count"):
        data.read_list(tmp_path / "avi.txt")
