"""Beyond one label a clip: segments of long videos (a list line's offset), multi-label lists
(plain text, Charades' CSV, PySlowFast's Charades frame lists) and verb + noun lists
(EPIC-Kitchens-100's CSV), each read, checked, and refused in one line naming the list and line."""

import csv
import os
import re

import numpy as np
import pytest
import torch
from PIL import Image

import data
import prepare
from conftest import TINY, one_line_error, run_main, tiny_checkpoint, write_list


def grey_frames(folder, n, tmpl="img_{:05d}.jpg", start=1, size=(16, 12)):
    """Frames start .. start + n - 1, frame i a flat grey of value 2 i: its number readable after
    JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        Image.fromarray(np.full((size[1], size[0], 3), 2 * i, np.uint8)).save(
            folder / tmpl.format(i)
        )
    return folder


def frame_numbers(clip):
    """uint8 (3, T, H, W) clip of grey_frames -> the frame number of each of its T frames."""
    return [round(float(f.float().mean()) / 2) for f in clip.unbind(1)]


SMALL = dict(t_length=4, t_stride=2, new_size=12, crop_size=12)


# ---- segments ------------------------------------------------------------------------------------
def test_segment_clips_stay_inside_the_segment(tmp_path):
    # frames 41 .. 60 of a 100-frame folder: every train and val clip reads only them
    grey_frames(tmp_path / "long", 100)
    path = write_list(tmp_path / "seg.txt", ["long 40 20 3", "long 100 0"])
    ds = data.VideoFrameDataset(path, data.DataSpec(**SMALL), "train")
    assert (ds.videos[0].offset, ds.videos[0].num_frames, ds.videos[0].label) == (40, 20, 3)
    seen = set()
    for epoch in range(40):
        ds.set_epoch(epoch)
        numbers = frame_numbers(ds[0][0])
        assert all(41 <= k <= 60 for k in numbers), numbers
        seen.update(numbers)
    assert min(seen) == 41 and max(seen) == 60  # the draws reach both ends of the segment
    val = data.VideoFrameDataset(path, data.DataSpec(**SMALL), "val")
    assert frame_numbers(val[0][0]) == [47, 49, 51, 53]  # the segment's centred clip


def test_segment_of_a_video_file(tmp_path):
    # the same line form over a video file: its frames offset .. offset + num_frames - 1
    av = pytest.importorskip("av")
    import videos

    path = tmp_path / "long.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = videos.W, videos.H, "yuv420p"
        stream.options = {"qscale": "1"}
        for k in range(60):
            frame = av.VideoFrame.from_ndarray(videos.pattern(k), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    lst = write_list(tmp_path / "seg.txt", ["long.mp4 30 10 1"])
    ds = data.VideoFrameDataset(lst, data.DataSpec(t_length=4, t_stride=1), "val")
    video = ds.videos[0]
    numbers = ds.choose_frames(video, None)[0]  # the val clip: the segment's centre
    frames = ds.load_frames(video, numbers)  # whole decoded frames, to read their pattern
    assert [videos.frame_index(f) for f in frames] == [33, 34, 35, 36]
    # a segment past the video's end is a one-line problem of `check`
    write_list(lst, ["long.mp4 55 10 1"])
    problems = prepare.check(lst)
    assert len(problems) == 1 and f"{lst}:1: 65 frames listed, the video has 60" in problems[0]


def test_check_reads_segments_and_names_a_missing_frame(tmp_path):
    grey_frames(tmp_path / "long", 50)
    lst = write_list(tmp_path / "seg.txt", ["long 10 20 0", "long 40 20 1", "long -3 5 0"])
    problems = prepare.check(lst)
    assert len(problems) == 2
    assert problems[0].startswith(f"{lst}:2: 20 frames listed, 10 on disk (first missing: ")
    assert problems[0].endswith("img_00051.jpg)")
    assert problems[1].startswith(f"{lst}:3: a segment's offset must be >= 0, got -3")
    with pytest.raises(ValueError, match=re.escape(f"{lst}:3: a segment's offset must be >= 0")):
        data.VideoFrameDataset(lst, data.DataSpec(**SMALL), "val")


# ---- the numbers ---------------------------------------------------------------------------------
def test_map_equals_sklearn_as_pyslowfast_calls_it():
    # PySlowFast's get_map: drop the classes without a positive, then average_precision_score
    # (average=None) and the mean; random scores, some tied (rounded), some classes absent
    metrics = pytest.importorskip("sklearn.metrics")
    import report

    rng = np.random.default_rng(0)
    for trial in range(5):
        scores = rng.random((60, 12)).round(1 + trial % 3)  # ties at 1 or 2 decimals
        targets = (rng.random((60, 12)) < 0.2).astype(np.float32)
        targets[:, [3, 7]] = 0
        keep = ~np.all(targets == 0, axis=0)
        aps = metrics.average_precision_score(targets[:, keep], scores[:, keep], average=None)
        expected = np.mean(aps)
        ours = report.multilabel_metrics(scores, targets)
        assert ours["mAP"] == pytest.approx(100 * expected, abs=1e-9)
        assert list(ours["absent"]) == [3, 7] and np.isnan(ours["per_class_ap"][[3, 7]]).all()


def test_epic_action_accuracy_is_the_evaluation_codes():
    # EPIC-100's evaluate.py: action scores = the outer product of the softmaxes of the top-100
    # verb and noun scores; a segment's action right at k when one of the k best (verb, noun)
    # pairs is its own. Checked against every pair ranked directly.
    import report

    rng = np.random.default_rng(1)
    N, V, M = 40, 97, 300
    verb, noun = rng.standard_normal((N, V)), rng.standard_normal((N, M))
    labels = np.stack([rng.integers(0, V, N), rng.integers(0, M, N)], 1)
    # make some segments right: their label pair at the top
    labels[:10, 0], labels[:10, 1] = verb[:10].argmax(1), noun[:10].argmax(1)
    # and some right at 5 only: the best verb with the second noun
    labels[10:20, 0], labels[10:20, 1] = verb[10:20].argmax(1), np.argsort(-noun[10:20])[:, 1]
    hits1 = hits5 = 0
    for i in range(N):
        tv, tn = np.argsort(-verb[i])[:100], np.argsort(-noun[i])[:100]
        pv = np.exp(verb[i, tv]) / np.exp(verb[i, tv]).sum()
        pn = np.exp(noun[i, tn]) / np.exp(noun[i, tn]).sum()
        pairs = [(pv[a] * pn[b], tv[a], tn[b]) for a in range(len(tv)) for b in range(len(tn))]
        pairs = sorted(pairs)[::-1]
        ranked = [(v, n) for _, v, n in pairs[:5]]
        hits1 += ranked[0] == tuple(labels[i])
        hits5 += tuple(labels[i]) in ranked
    out = report.heads_metrics(np.concatenate([verb, noun], 1), labels, (V, M))
    assert out["action_acc1"] == pytest.approx(100 * hits1 / N)
    assert out["action_acc5"] == pytest.approx(100 * hits5 / N)
    assert hits1 >= 10 and hits5 >= hits1 + 5
    assert out["verb_acc1"] == pytest.approx(100 * np.mean(verb.argmax(1) == labels[:, 0]))
    assert out["noun_acc1"] == pytest.approx(100 * np.mean(noun.argmax(1) == labels[:, 1]))


def test_each_head_has_its_confusion_matrix(tmp_path):
    # --heads: per head (verb, noun) the single-label report's per-class table and picture, and the
    # confusion matrix's counts as CSV: rows the true class, columns the predicted top-1
    import report

    rng = np.random.default_rng(2)
    N, heads = 60, (3, 4)
    scores = rng.random((N, sum(heads)))
    labels = np.stack([rng.integers(0, 3, N), rng.integers(0, 4, N)], 1)
    names = ["cut", "open", "wash", "knife", "door", "tap", "pan"]
    out, paths = report.write_heads_evaluation(tmp_path, scores, labels, heads, names, 2, 3, "t")
    assert len(paths) == 6 and all(map(os.path.isfile, paths))
    for h, (head, columns) in enumerate((("verb", [0, 1, 2]), ("noun", [3, 4, 5, 6]))):
        pred = scores[:, columns].argmax(1)
        with open(tmp_path / f"confusion_{head}_t.csv", newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["true \\ predicted", *(names[c] for c in columns)]
        assert [r[0] for r in rows[1:]] == [names[c] for c in columns]
        expected = [
            [int(np.sum((labels[:, h] == i) & (pred == j))) for j in range(len(columns))]
            for i in range(len(columns))
        ]
        assert [[int(x) for x in r[1:]] for r in rows[1:]] == expected
        assert sum(map(sum, expected)) == N and (tmp_path / f"confusion_{head}_t.png").is_file()
        with open(tmp_path / f"per_class_{head}_t.csv", newline="") as f:
            per_class = list(csv.DictReader(f))
        assert [r["name"] for r in per_class] == [names[c] for c in columns]
        assert out[head]["top1"] == pytest.approx(100 * np.mean(pred == labels[:, h]))


# ---- list formats --------------------------------------------------------------------------------
def test_plain_multilabel_list(tmp_path):
    # '<frame_dir> <num_frames> <label>,<label>,...': 0/1 targets with --multi-label; refused
    # without it, and a malformed label column is one line naming list and line
    grey_frames(tmp_path / "a", 12)
    lst = write_list(tmp_path / "ml.txt", ["a 12 0,2", "a 12 3", "a 2 4 1,3"])
    ds = data.VideoFrameDataset(lst, data.DataSpec(**SMALL, multi_label=True), "val")
    assert [v.label for v in ds.videos] == [(0, 2), 3, (1, 3)]
    assert ds.num_classes == 4 and ds.videos[2].offset == 2
    assert ds[0][1].tolist() == [1.0, 0.0, 1.0, 0.0] and ds[1][1].tolist() == [0, 0, 0, 1.0]
    with pytest.raises(
        ValueError, match=re.escape(f"{lst}:1: 2 labels: a multi-label list trains")
    ):
        data.VideoFrameDataset(lst, data.DataSpec(**SMALL), "val")
    bad = write_list(tmp_path / "bad.txt", ["a 12 0,2", "a 12 0,,2"])
    with pytest.raises(ValueError, match=re.escape(f"{bad}:2: num_frames and label must be")):
        data.VideoFrameDataset(bad, data.DataSpec(**SMALL, multi_label=True), "val")


CHARADES_HEADER = (
    "id,subject,scene,quality,relevance,verified,script,objects,descriptions,actions,length"
)


def charades(root, rows, frames=20):
    """Charades' layout: Charades_v1_train.csv, Charades_v1_classes.txt and the frame folders of
    Charades_v1_rgb (<id>/<id>-000001.jpg)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "Charades_v1_train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CHARADES_HEADER.split(","))
        for vid, actions in rows:
            w.writerow(
                [vid, "HR43", "Kitchen", 6, 7, "Yes", "A person cooks.", "food", "", actions, 30.0]
            )
            grey_frames(root / vid, frames, f"{vid}-{{:06d}}.jpg")
    names = [f"c{k:03d} Action number {k}" for k in range(157)]
    (root / "Charades_v1_classes.txt").write_text("\n".join(names) + "\n")
    return root / "Charades_v1_train.csv"


def test_charades_csv(tmp_path):
    lst = charades(
        tmp_path,
        [("46GP8", "c092 11.90 21.20;c147 0.00 12.60"), ("N11GT", ""), ("0IH69", "c003 1.0 2.0")],
    )
    ds = data.VideoFrameDataset(
        lst, data.DataSpec(**SMALL, multi_label=True, num_classes=157), "val"
    )
    assert [v.label for v in ds.videos] == [(92, 147), (), (3,)]
    assert [v.num_frames for v in ds.videos] == [20, 20, 20]  # counted in the folders
    clip, target, _ = ds[0]
    assert frame_numbers(clip) == [7, 9, 11, 13] and target.nonzero().flatten().tolist() == [
        92,
        147,
    ]
    assert ds[1][1].sum() == 0  # a video without actions: no positive
    names = data.class_names(data.DataSpec(), lst)
    assert len(names) == 157 and names[92] == "Action number 92"
    assert prepare.check(lst) == []
    charades(tmp_path, [("46GP8", "c092 11.90 21.20"), ("N11GT", "c1 2 3")])
    problems = prepare.check(lst)
    assert len(problems) == 1 and problems[0].startswith(f"{lst}:3: actions must be 'c<3 digits>")


def pyslowfast_frame_list(root, videos):
    """PySlowFast's Charades frame list: `original_vido_id video_id frame_id path labels`, a line a
    frame, space-separated, labels quoted."""
    lines = ["original_vido_id video_id frame_id path labels"]
    for k, (vid, labels) in enumerate(videos):
        grey_frames(root / vid, len(labels), f"{vid}-{{:06d}}.jpg")
        for i, frame_labels in enumerate(labels):
            lines.append(f'{vid} {k} {i} {vid}/{vid}-{i + 1:06d}.jpg "{frame_labels}"')
    return write_list(root / "train.csv", lines)


def test_pyslowfast_charades_frame_list(tmp_path):
    # a video's labels: the union over its frames (convert_to_video_level_labels)
    lst = pyslowfast_frame_list(tmp_path, [("AAA", ["", "5", "5,9", ""] * 3), ("BBB", ["1"] * 10)])
    ds = data.VideoFrameDataset(lst, data.DataSpec(**SMALL, multi_label=True), "val")
    assert [(v.label, v.num_frames, v.line) for v in ds.videos] == [((5, 9), 12, 2), ((1,), 10, 14)]
    assert frame_numbers(ds[0][0]) == [3, 5, 7, 9] and ds[0][1].nonzero().flatten().tolist() == [
        5,
        9,
    ]
    lines = lst.read_text().splitlines()
    lines[5] = " ".join(lines[5].split()[:2] + lines[5].split()[3:])  # no frame_id: 4 columns
    write_list(lst, lines)
    with pytest.raises(
        ValueError, match=re.escape(f"{lst}:6: 4 columns, expected 'original_vido_id")
    ):
        data.VideoFrameDataset(lst, data.DataSpec(**SMALL, multi_label=True), "val")


EPIC_HEADER = (
    "narration_id,participant_id,video_id,narration_timestamp,start_timestamp,stop_timestamp,"
    "start_frame,stop_frame,narration,verb,verb_class,noun,noun_class,all_nouns,all_noun_classes"
)


def epic100(root, rows, frames=60):
    """EPIC-KITCHENS-100's layout: EPIC_100_train.csv, the verb and noun class files, and
    P01/rgb_frames/P01_01/frame_0000000001.jpg."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "EPIC_100_train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(EPIC_HEADER.split(","))
        for k, (video, start, stop, verb, noun) in enumerate(rows):
            w.writerow(
                [
                    f"{video}_{k}",
                    video[:3],
                    video,
                    "00:00:01.00",
                    "00:00:01.00",
                    "00:00:02.00",
                    start,
                    stop,
                    "open tap",
                    "open",
                    verb,
                    "tap",
                    noun,
                    "['tap']",
                    f"[{noun}]",
                ]
            )
            folder = root / video[:3] / "rgb_frames" / video
            if not folder.exists():
                grey_frames(folder, frames, "frame_{:010d}.jpg")
    for name, count in (("verb", 97), ("noun", 300)):
        lines = ["id,key,instances,category"] + [
            f"{i},{name}{i},\"['{name}{i}']\",x" for i in range(count)
        ]
        write_list(root / f"EPIC_100_{name}_classes.csv", lines)
    return root / "EPIC_100_train.csv"


def test_epic100_csv(tmp_path):
    lst = epic100(
        tmp_path, [("P01_01", 11, 30, 3, 299), ("P01_01", 41, 60, 96, 0), ("P02_07", 1, 8, 0, 5)]
    )
    spec = data.DataSpec(**SMALL, heads=data.EPIC_HEADS)
    ds = data.VideoFrameDataset(lst, spec, "val")
    assert ds.num_classes == 397
    assert [(v.offset, v.num_frames, v.label) for v in ds.videos] == [
        (10, 20, (3, 299)),
        (40, 20, (96, 0)),
        (0, 8, (0, 5)),
    ]
    clip, target, _ = ds[0]
    assert frame_numbers(clip) == [17, 19, 21, 23] and target.tolist() == [3, 299]
    names = data.class_names(data.DataSpec(), lst)
    assert len(names) == 397 and (names[3], names[97 + 299]) == ("verb3", "noun299")
    assert prepare.check(lst) == []
    # a segment past the folder's frames, a noun outside its head, a missing class: one line each
    lst = epic100(
        tmp_path, [("P01_01", 11, 30, 3, 299), ("P01_01", 41, 70, 96, 0), ("P01_01", 1, 5, 3, "")]
    )
    problems = prepare.check(lst)
    assert problems[0].startswith(f"{lst}:3: 30 frames listed, 20 on disk (first missing: ")
    assert problems[1].startswith(f"{lst}:4: start_frame, stop_frame, verb_class, noun_class")
    lst = epic100(tmp_path, [("P01_01", 11, 30, 3, 300)])
    with pytest.raises(ValueError, match=re.escape(f"{lst}:2: labels 3,300: --heads 97 300 takes")):
        data.VideoFrameDataset(lst, spec, "val")


def test_bad_line_is_one_line_exit_2_in_training(tmp_path, capsys):
    # the trainer: a Charades list with a bad actions cell stops in one line naming it
    lst = charades(tmp_path, [("46GP8", "c092 11.90 21.20"), ("N11GT", "c1 2 3")])
    with pytest.raises(SystemExit) as e:
        run_main(["charades", str(lst), str(lst), *TINY, "--output_root", str(tmp_path / "o")])
    one_line_error(capsys, f"{lst}:3: actions must be", exc=e)


# ---- predict -------------------------------------------------------------------------------------
def test_predict_prints_a_verb_a_noun_and_actions(tmp_path, capsys):
    import json

    import predict

    names = ["cut", "open", "tap", "knife", "door"]  # 2 verbs, then 3 nouns
    ckpt = tiny_checkpoint(tmp_path / "ck.pth", names, num_classes=5, heads=[2, 3])
    grey_frames(tmp_path / "v", 12, size=(48, 40))
    assert predict.main([str(tmp_path / "v"), "--resume", ckpt, "--device", "cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    heads = result["heads"]
    assert [e["name"] for e in heads["verb"]] and {e["name"] for e in heads["verb"]} == {
        "cut",
        "open",
    }
    assert {e["name"] for e in heads["noun"]} == {"tap", "knife", "door"}
    assert sum(e["prob"] for e in heads["verb"]) == pytest.approx(1, abs=1e-5)  # a softmax a head
    top = heads["action"][0]
    assert top["name"] == f"{heads['verb'][0]['name']} {heads['noun'][0]['name']}"
    assert top["prob"] == pytest.approx(heads["verb"][0]["prob"] * heads["noun"][0]["prob"])
    assert len(heads["action"]) == 5 and result["top"] == heads["action"]
    predict.main([str(tmp_path / "v"), "--resume", ckpt, "--device", "cpu", "-k", "2"])
    text = capsys.readouterr().out
    assert "  verb:\n  1. " in text and "  noun:\n" in text and "  action:\n  1. " in text


def test_predict_multilabel_is_the_max_of_the_views_sigmoids(tmp_path, capsys):
    import json

    import predict
    import train

    ckpt = tiny_checkpoint(tmp_path / "ck.pth", num_classes=6, multi_label=True)
    grey_frames(tmp_path / "v", 30, size=(48, 40))
    argv = [str(tmp_path / "v"), "--resume", ckpt, "--device", "cpu", "--json", "--test_clips", "3"]
    assert predict.main(argv) == 0
    probs = json.loads(capsys.readouterr().out)["results"][0]["probs"]
    model, args, _ = predict.load_checkpoint(ckpt, "cpu", 3, 1)
    views = train.make_dataset(
        args, write_list(tmp_path / "l.txt", [f"{tmp_path / 'v'} 30 0"]), "test"
    )[0][0]
    with torch.no_grad():
        logits = model(data.normalize(views.contiguous()))
    expected = logits.sigmoid().amax(0)
    assert torch.allclose(torch.tensor(probs), expected, atol=1e-6)
    assert not torch.allclose(expected, logits.sigmoid().mean(0))  # the views differ: max, not mean


# ---- the demos' data -----------------------------------------------------------------------------
def test_synth_kinds_write_lists_the_trainer_reads(tmp_path):
    # `prepare.py synth --kind`: two directions a video (multi-label), a direction and a colour
    # (verb, noun: every pair once in 12 videos)
    train_list, _ = prepare.make_synth_labels(tmp_path / "ml", "multilabel", 6, 4, (32, 24))
    ds = data.VideoFrameDataset(train_list, data.DataSpec(**SMALL, multi_label=True), "val")
    assert all(len(v.label) == 2 and v.label[0] < v.label[1] < 4 for v in ds.videos)
    assert ds[0][1].sum() == 2
    train_list, _ = prepare.make_synth_labels(tmp_path / "vn", "verbnoun", 12, 4, (32, 24))
    ds = data.VideoFrameDataset(train_list, data.DataSpec(**SMALL, heads=(4, 3)), "val")
    assert sorted(v.label for v in ds.videos) == [(v, n) for v in range(4) for n in range(3)]
    names = (tmp_path / "vn" / "demo_vn_classes.txt").read_text().split()
    assert names == ["right", "down", "left", "up", "red", "green", "blue"]
    # the noun is the patch's colour: red patches are redder than blue ones
    red = ds[[v.label for v in ds.videos].index((0, 0))][0].float()
    blue = ds[[v.label for v in ds.videos].index((0, 2))][0].float()
    assert red[0].max() > blue[0].max() and blue[2].max() > red[2].max()


# ---- the trainer ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, needle",
    [
        (
            ["--multi-label", "--mixup-alpha", "0.8"],
            "--mixup-alpha / --cutmix-alpha are not defined",
        ),
        (["--multi-label", "--label-smoothing", "0.1"], "--label-smoothing is not defined"),
        (["--heads", "2", "2", "--multi-label"], "--multi-label and --heads: one or the other"),
        (["--heads", "2", "2", "--num_classes", "5"], "--num_classes 5, --heads [2, 2] sum to 4"),
    ],
)
def test_undefined_combinations_are_one_line(tmp_path, capsys, flags, needle):
    lst = write_list(tmp_path / "l.txt", ["a 3 0"])
    with pytest.raises(SystemExit) as e:
        run_main(["x", str(lst), str(lst), *TINY, *flags, "--output_root", str(tmp_path)])
    one_line_error(capsys, needle, exc=e)


@pytest.mark.slow
def test_multilabel_and_heads_train_evaluate_and_log_their_names(tmp_path):
    # a multi-label run and a two-head run: their logged names, the per-class APs, and --evaluate's
    # numbers recomputed from its saved scores
    import report
    from conftest import logs

    grey = [grey_frames(tmp_path / f"v{k}", 10, size=(48, 40)) for k in range(4)]
    ml = write_list(
        tmp_path / "ml.txt", [f"{g} 10 {k % 3},{(k + 1) % 3}" for k, g in enumerate(grey)]
    )
    hd = write_list(tmp_path / "hd.txt", [f"{g} 10 {k % 2},{k % 3}" for k, g in enumerate(grey)])
    for lst, extra, names in (
        (ml, ["--multi-label"], ["val_mAP", "val_loss"]),
        (hd, ["--heads", "2", "3"], ["val_action_acc1", "val_action_acc5", "val_verb_acc1"]),
    ):
        out = tmp_path / lst.stem
        argv = ["x", str(lst), str(lst), *TINY, *extra, "--epochs", "1", "--output_root", str(out)]
        run_main(argv)
        (run,) = out.iterdir()
        rows = logs(run)
        assert all(rows[-1][n] is not None for n in names)
        evaluate = [*argv, "--evaluate", "--resume", str(run / "checkpoint.pth"), "--save_scores"]
        res = run_main([*evaluate, "--test_clips", "2"])
        saved = np.load(next(run.glob("scores_*.npz")))
        if extra[0] == "--multi-label":
            assert res[0] == pytest.approx(
                report.multilabel_metrics(saved["scores"], saved["labels"])["mAP"]
            )
            assert (run / "per_class_ap_1x1.csv").exists()
        else:
            m = report.heads_metrics(saved["scores"], saved["labels"], (2, 3))
            assert res == pytest.approx((m["action_acc1"], m["action_acc5"]))
            # each head's confusion matrix, of the saved scores
            (verbs,) = run.glob("confusion_verb_2x1_*.csv")
            with open(verbs, newline="") as f:
                rows = [[int(x) for x in r[1:]] for r in list(csv.reader(f))[1:]]
            pred = saved["scores"][:, :2].argmax(1)
            assert rows == [
                [int(np.sum((saved["labels"][:, 0] == i) & (pred == j))) for j in range(2)]
                for i in range(2)
            ]
            assert len(list(run.glob("confusion_noun_2x1_*.png"))) == 1
