"""Tests for report.py (per-class metrics, pictures) and predict.py (labelling videos and frame
folders)."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import decode
import prepare
import model as models
import predict
import report
import train
from conftest import REPO, tiny_checkpoint

NAMES = ["moving right", "moving down", "moving left", "moving up"]


# ---- report.py -----------------------------------------------------------------------------------
def test_class_metrics_match_plain_loops():
    rng = np.random.default_rng(0)
    N, C = 300, 7
    labels = rng.integers(0, C - 1, N)  # class C-1 has no videos: left out of the mean
    scores = rng.random((N, C))
    # accuracies differ per class
    scores[np.arange(N), labels] += rng.random(N) * 0.6 * (labels + 1) / C
    m = report.class_metrics(torch.from_numpy(scores), torch.from_numpy(labels), C)
    # independent computation, plain loops
    per, counts = {}, {}
    for c in range(C):
        idx = [i for i in range(N) if labels[i] == c]
        counts[c] = len(idx)
        if idx:
            per[c] = 100.0 * sum(int(np.argmax(scores[i]) == c) for i in idx) / len(idx)
    top5 = (
        100.0
        * sum(labels[i] in sorted(range(C), key=lambda k: -scores[i][k])[:5] for i in range(N))
        / N
    )
    assert m["mean_class_acc"] == pytest.approx(sum(per.values()) / len(per))
    assert m["top5"] == pytest.approx(top5)
    assert m["top1"] == pytest.approx(100.0 * np.mean(scores.argmax(1) == labels))
    for c in range(C):
        assert m["per_class_count"][c] == counts[c]
        if c in per:
            assert m["per_class_acc"][c] == pytest.approx(per[c])
        else:
            assert np.isnan(m["per_class_acc"][c])
    assert m["confusion"].sum() == N and m["confusion"][labels[0], scores[0].argmax()] >= 1
    assert len(set(per.values())) > 3  # the test data really has different per-class accuracies
    assert abs(m["mean_class_acc"] - m["top1"]) > 0.01  # and mean class accuracy is not top-1


def _three_class_case():
    """class 0: 4/4 right; class 1: 1/4 right, 3 taken for class 2; class 2: 1/2 right, 1 taken for
    0."""
    truth_pred = [(0, 0)] * 4 + [(1, 1), (1, 2), (1, 2), (1, 2)] + [(2, 2), (2, 0)]
    labels = np.array([t for t, _ in truth_pred])
    scores = np.full((len(labels), 3), 0.1)
    scores[np.arange(len(labels)), [p for _, p in truth_pred]] = 0.8
    return report.class_metrics(scores, labels, 3)


def test_per_class_table_worst_first_and_most_confused():
    m = _three_class_case()
    assert list(m["per_class_acc"]) == [100.0, 25.0, 50.0]
    assert list(m["confused_with"]) == [-1, 2, 0] and list(m["confused_count"]) == [0, 3, 1]
    lines = report.per_class_table(m, ["run", "jump", "swim"]).splitlines()
    # header + one row per class, nothing after
    assert len(lines) == 4 and lines[0].startswith("class")
    assert [line.split()[0] for line in lines[1:]] == ["jump", "swim", "run"]  # worst first
    assert lines[1].split()[1:] == ["25.0", "4", "swim", "(3)"]
    assert lines[2].split()[1:] == ["50.0", "2", "run", "(1)"]
    assert lines[3].split()[1:] == ["100.0", "4", "-"]
    # without names: label numbers
    assert [line.split()[0] for line in report.per_class_table(m).splitlines()[1:]] == [
        "1",
        "2",
        "0",
    ]


def test_confusion_png_shape_scales_with_classes(tmp_path):
    sizes = {}
    for C in (4, 101):
        cm = np.random.default_rng(C).integers(0, 5, (C, C)) + np.eye(C, dtype=np.int64) * 20
        path = tmp_path / f"cm{C}.png"
        report.save_confusion_png(cm, [f"Class{c:03d}" for c in range(C)], str(path))
        with Image.open(path) as img:
            assert img.format == "PNG"
            sizes[C] = img.size
            w, h = img.size
            assert w == h  # square: one row per true class, one column per prediction
            pixels = np.asarray(img.convert("L"))
        assert pixels.std() > 10  # something is drawn
    assert sizes[101][0] >= 101 * 12  # at 101 classes a row is >= 12 px: room for an 8 pt name
    assert sizes[4][0] < sizes[101][0]


def test_curves_png_shape(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [
        {
            "epoch": e,
            "lr": 0.02 if e < 3 else 0.002,
            "train_loss": 1.5 - 0.2 * e,
            "train_top1": 30 + 10 * e,
            "val_top1": 40 + 9 * e if e % 2 else None,
            "val_top5": None,
            "val_loss": None,
            "epoch_time": 3.0,
        }
        for e in range(5)
    ]
    # epoch 1 logged twice (a resumed run): the last line wins
    rows.insert(1, dict(rows[1], train_loss=9.0))
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    png = tmp_path / "curves.png"
    report.save_curves_png(str(log), str(png))
    # loss, top1, lr, epoch_time (val_top5 and val_loss are null in every line): two rows of panels
    width, height = report.CURVES_FIGSIZE
    with Image.open(png) as img:
        assert img.size == (round(width * report.DPI), round(2 * height * report.DPI))
        assert np.asarray(img.convert("L")).std() > 10
    assert [r["train_loss"] for r in report.read_log(str(log))][:2] == [1.5, 1.3]
    log.write_text(json.dumps(rows[0]) + "\nnot json\n")
    with pytest.raises(ValueError, match=r"log.jsonl:2:"):
        report.save_curves_png(str(log), str(png))


def test_every_logged_number_is_a_panel_by_its_name(tmp_path):
    """curves.png's panels follow the keys' naming rule, from the log alone: a number no code knows
    (train_scratch, val_scratch) is a panel with its train and val series; pretraining's log (no
    top-1) draws no top-1 panel; the epoch and a flag (mixed) are no curves."""
    rows = [
        {"epoch": e, "lr": 0.1, "train_loss": 1.0, "train_top1": 50.0, "val_top1": None}
        | {"train_scratch": 2.0 + e, "val_scratch": 3.0, "val_top1_ema": 1.0, "mixed": True}
        for e in range(3)
    ]
    assert report.curve_panels(rows) == {
        "loss": [("train_loss", "train")],
        "top1": [("train_top1", "train"), ("val_top1_ema", "EMA")],
        "scratch": [("train_scratch", "train"), ("val_scratch", "val")],
        "lr": [("lr", None)],
    }
    pretraining = [{"epoch": 0, "lr": 1e-3, "train_loss": 0.9, "val_loss": 0.8, "epoch_time": 2.0}]
    assert list(report.curve_panels(pretraining)) == ["loss", "lr", "epoch_time"]
    log, png = tmp_path / "log.jsonl", tmp_path / "curves.png"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report.save_curves_png(str(log), str(png))
    with Image.open(png) as img:
        # four panels: a second row
        assert img.size[1] == round(2 * report.CURVES_FIGSIZE[1] * report.DPI)


def test_meter_totals_are_the_logged_numbers():
    """Meter.totals: the mean per clip of loss and top-1 and the mean of a number a fork adds (here
    per step), as train_<name>; None for a declared number with no clip (resumed at the epoch's
    end); all_sum sums the values over ranks before the means (two equal ranks: the same means)."""
    meter = report.Meter(0)
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    meter.update(torch.tensor(1.5), logits, torch.tensor([0, 0, 0]), 0)
    meter.update(torch.tensor(0.5), logits[:1], torch.tensor([1]), 1)
    meter.add("grad_norm", torch.tensor(3.0), 1)
    meter.add("grad_norm", 5.0, 1)
    means = {"train_loss": 1.25, "train_top1": 50.0, "train_grad_norm": 4.0}
    assert meter.totals(0) == means
    assert meter.totals(0, lambda values: [2 * v for v in values]) == means
    assert report.Meter(0).totals(0) == {"train_loss": None, "train_top1": None}
    assert report.Meter(0, ("loss",)).totals(0) == {"train_loss": None}


def test_write_evaluation_files(tmp_path):
    m0 = _three_class_case()
    scores = np.zeros((10, 3))
    # rebuild the same case from its confusion
    labels = np.repeat(np.arange(3), m0["per_class_count"])
    preds = [p for t in range(3) for p in range(3) for _ in range(m0["confusion"][t, p])]
    scores[np.arange(10), preds] = 1.0
    m, paths = report.write_evaluation(
        str(tmp_path), scores, labels, ["run", "jump", "swim"], 10, 3, [f"v{i}" for i in range(10)]
    )
    assert {os.path.basename(p) for p in paths.values()} == {
        "per_class_10x3.csv",
        "confusion_10x3.png",
        "scores_10x3.npz",
    }
    with open(paths["per_class"]) as f:
        rows = list(csv.DictReader(f))
    assert [float(r["accuracy"]) for r in rows] == [100.0, 25.0, 50.0]
    assert rows[1]["confused_with_name"] == "swim" and rows[1]["confused_count"] == "3"
    z = np.load(paths["scores"])
    assert list(z["class_names"]) == ["run", "jump", "swim"] and z["scores"].shape == (10, 3)
    Image.open(paths["confusion"]).verify()


# ---- predict.py ----------------------------------------------------------------------------------
def save_checkpoint(path, class_names=NAMES, **override):
    return tiny_checkpoint(path, class_names, **override)


@pytest.fixture(scope="module")
def one_folder(tmp_path_factory):
    """A synthetic frame folder: 12 JPEG frames of 64x48 (prepare.make_synth)."""
    root = tmp_path_factory.mktemp("one_folder")
    prepare.make_synth(str(root), classes=4, videos=1, frames=12, size=(64, 48))
    return {"root": root, "folder": str(root / "train" / "video_0000")}


@pytest.fixture(scope="module")
def media(one_folder):
    """The synthetic frame folder, the same frames as an .avi (PyAV, mpeg4), and a lossless PNG
    folder of the video's decoded frames."""
    av = pytest.importorskip("av")
    root, folder = one_folder["root"], one_folder["root"] / "train" / "video_0000"
    video = root / "clip.avi"
    with av.open(str(video), "w") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for t in range(1, 13):
            frame = av.VideoFrame.from_ndarray(
                np.asarray(Image.open(folder / f"img_{t:05d}.jpg")), format="rgb24"
            )
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    n, read = decode.open_video(str(video))
    decoded = read(list(range(n)))  # every frame, as the dataset decodes them
    png = root / "decoded_png"
    png.mkdir()
    for t, f in enumerate(decoded, 1):
        Image.fromarray(f.numpy()).save(png / f"img_{t:05d}.png")
    return {
        "root": root,
        "folder": str(folder),
        "video": str(video),
        "png": str(png),
        "frames": len(decoded),
    }


def test_predict_video_and_folder_json(media, tmp_path, capsys):
    ckpt = save_checkpoint(tmp_path / "ck.pth")
    assert (
        predict.main(
            [
                "--resume",
                ckpt,
                media["video"],
                media["folder"],
                "--json",
                "--device",
                "cpu",
                "--test_clips",
                "2",
                "--test_crops",
                "3",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [r["input"] for r in doc["results"]] == [media["video"], media["folder"]]
    assert media["frames"] == 12
    for r in doc["results"]:
        assert r["frames"] == 12 and r["views"] == 6
        assert sum(r["probs"]) == pytest.approx(1.0, abs=1e-5) and len(r["probs"]) == 4
        assert [e["name"] for e in r["top"]] == [NAMES[e["label"]] for e in r["top"]]
        # top-5 of 4 = all, ordered
        assert [e["prob"] for e in r["top"]] == sorted(r["probs"], reverse=True)
    assert doc["results"][0]["probs"] != doc["results"][1]["probs"]  # two inputs, two computations


def test_predict_video_equals_its_frames(media, tmp_path, capsys):
    """A video file goes through the same sampling as a frame folder: a lossless folder of the
    video's own decoded frames gives the same probabilities."""
    ckpt = save_checkpoint(tmp_path / "ck.pth", image_tmpl="img_{:05d}.png")
    assert (
        predict.main(
            [
                "--resume",
                ckpt,
                media["video"],
                media["png"],
                "--json",
                "--device",
                "cpu",
                "--test_clips",
                "3",
            ]
        )
        == 0
    )
    video, folder = json.loads(capsys.readouterr().out)["results"]
    assert video["probs"] == pytest.approx(folder["probs"], abs=1e-6)


def test_predict_text_output_names_and_labels(one_folder, tmp_path, capsys):
    ckpt = save_checkpoint(tmp_path / "ck.pth")
    assert predict.main(["--resume", ckpt, one_folder["folder"], "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(one_folder["folder"] + ": 12 frames, 1 views")
    ranks = out[1:]
    assert len(ranks) == 4 and all(any(n in line for n in NAMES) for line in ranks)
    probs = [float(line.split()[-1]) for line in ranks]
    assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=1e-3)
    # no class names in the checkpoint: label numbers, and a note saying so
    bare = save_checkpoint(tmp_path / "bare.pth", class_names=None)
    assert predict.main(["--resume", bare, one_folder["folder"], "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "no class names" in captured.err
    assert sorted(line.split()[1] for line in captured.out.splitlines()[1:]) == ["0", "1", "2", "3"]


def run_predict(*argv):
    return subprocess.run(
        [sys.executable, str(REPO / "train.py"), "predict", *argv, "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def error_lines(r):
    assert "Traceback" not in r.stderr, r.stderr
    return [line for line in r.stderr.strip().splitlines() if "error:" in line]


@pytest.mark.slow
def test_predict_errors_one_line_exit_2(media, tmp_path, capsys):
    ckpt = save_checkpoint(tmp_path / "ck.pth")
    # a missing input and an undecodable video among good ones: one line each, the good one still
    # labelled
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"this is not a video\n" * 10)
    r = run_predict("--resume", ckpt, str(tmp_path / "nope.avi"), str(bad), media["folder"])
    assert r.returncode == 2
    nope, undecodable = error_lines(r)
    assert "nope.avi" in nope and "bad.mp4" in undecodable and "cannot decode" in undecodable
    assert r.stdout.startswith(media["folder"]) and any(n in r.stdout for n in NAMES)
    torch.save(
        {"model": models.build_network("resnet10_3d", 4).state_dict()}, tmp_path / "noargs.pth"
    )
    r = run_predict("--resume", str(tmp_path / "noargs.pth"), media["folder"])
    assert r.returncode == 2 and r.stdout == ""
    assert len(error_lines(r)) == 1 and "noargs.pth" in r.stderr and "'args'" in r.stderr
    # missing and unreadable checkpoints (in-process: nothing that could hang runs before these
    # errors)
    (tmp_path / "text.pth").write_text("hello")
    for name in ("missing.pth", "text.pth"):
        assert (
            predict.main(["--resume", str(tmp_path / name), media["folder"], "--device", "cpu"])
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and name in err and "error:" in err


def test_predict_folder_without_frames_and_wrong_weights(one_folder, tmp_path, capsys):
    ckpt = save_checkpoint(tmp_path / "ck.pth", image_tmpl="frame{:04d}.jpg")
    assert predict.main(["--resume", ckpt, one_folder["folder"], "--device", "cpu"]) == 2
    assert "no frames named frame0001.jpg" in capsys.readouterr().err
    wrong = save_checkpoint(tmp_path / "wrong.pth")
    ck = torch.load(wrong, weights_only=False)
    ck["args"]["num_classes"], ck["class_names"] = 5, None
    torch.save(ck, wrong)
    assert predict.main(["--resume", wrong, one_folder["folder"], "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "do not load" in err and len(err.splitlines()) == 1


def test_predict_reads_a_video_as_evaluate_does(media, tmp_path):
    """predict's views of a video file are --evaluate's (train.make_dataset on a list naming the
    file), larger frames resized by the dataset's own crops: no decoder or resize of its own to
    drift."""
    ckpt = save_checkpoint(tmp_path / "ck.pth", new_size=24, crop_size=20)
    model, a, _ = predict.load_checkpoint(ckpt, "cpu", 2, 3)
    ds, n = predict.one_video_dataset(media["video"], a)
    (tmp_path / "val.txt").write_text(f"{media['video']} 12 0\n")
    want = train.make_dataset(a, str(tmp_path / "val.txt"), "test")[0][0]
    assert n == 12 and want.shape == (6, 3, 4, 20, 20) and torch.equal(ds[0][0], want)
    with pytest.raises(predict.PredictError, match="neither a frame folder nor a video file"):
        predict.one_video_dataset(ckpt, a)
