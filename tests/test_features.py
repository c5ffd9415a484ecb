"""features.py and export.py: every window's feature is the model's own pooled output on that clip
(float64), for frame folders and video files, one process or two (torchrun, gloo), after a killed
run restarted; long videos stream in bounded memory; ONNX and .pt2 exports compute what the PyTorch
model computes.

python -m pytest -q tests/test_features.py
"""

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn as nn
import torchvision
import torchvision.transforms.v2.functional as TF

import data
import decode
import export
import features
import predict
import prepare
from conftest import ENV, REPO, cuda, one_line_error, tiny_checkpoint, write_list

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import videos  # noqa: E402  (tests/videos.py, beside this file)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A checkpoint (resnet10_3d, 48 -> 40 px), 6 frame folders of 13 frames 64x48 and their list, a
    video file of 75 frames (h264, B-frames, one keyframe) and a truncated one."""
    root = tmp_path_factory.mktemp("features")
    _, val = prepare.make_synth(str(root), classes=2, videos=6, frames=13, size=(64, 48))
    made = videos.make_all(root / "videos", ["h264_long_gop.mp4", "truncated.mp4"])
    return {
        "ckpt": tiny_checkpoint(root / "ck.pth"),
        "list": val,
        "root": root,
        "video": made["h264_long_gop.mp4"],
        "bad": made["truncated.mp4"],
    }


def direct(model, clip, layer=None):
    """ResNet3D's pooled output (or a stage's, averaged over T, H, W) and logits, written out by
    hand."""
    x = model.maxpool(model.relu(model.bn1(model.conv1(clip))))
    stages = {}
    for name in ("layer1", "layer2", "layer3", "layer4"):
        x = stages[name] = getattr(model, name)(x)
        x = model.pool2(x) if name == "layer1" else x
    pooled = model.avgpool(x).flatten(1)
    return (stages[layer].mean((2, 3, 4)) if layer else pooled), model.fc(pooled)


def expected(ckpt, frames, idx, layer=None, crop="center"):
    """The features and logits of windows `idx` of `frames` (uint8 arrays), computed directly in
    float64 with the checkpoint's val crop (or torchvision's resize of the whole frame) and
    normalisation."""
    model, args, _ = predict.load_checkpoint(ckpt, "cpu", 1, 1)
    model.double()
    feats, logits = [], []
    for window in idx:
        f = [torch.from_numpy(np.asarray(frames[i])) for i in window]
        if crop == "center":
            box = data.crop_boxes(*f[0].shape[:2], "val", args.new_size, args.crop_size)[0]
            clip = data.resized_crop(f, box, args.crop_size).permute(3, 0, 1, 2)[None].contiguous()
        else:  # short side to crop_size
            clip = TF.resize(torch.stack(f).permute(0, 3, 1, 2), [args.crop_size], antialias=True)
            clip = clip.permute(1, 0, 2, 3)[None].contiguous()
        with torch.no_grad():
            y = direct(model, data.normalize(clip, args.mean, args.std, torch.float64), layer)
        feats.append(y[0][0])
        logits.append(y[1][0])
    return torch.stack(feats).numpy(), torch.stack(logits).numpy()


def rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def folder_frames(folder):
    return [
        decode.decode_frame(decode.read_encoded(os.path.join(folder, f"img_{k:05d}.jpg")))
        for k in range(1, prepare.count_frames(folder) + 1)
    ]


def test_window_frames_cover_the_video_and_pad_with_the_last_frame():
    w = features.window_frames(40, 16, 16, 1)
    assert w[:, 0].tolist() == [0, 16, 32] and w[-1].tolist() == list(range(32, 40)) + [39] * 8
    # nothing left: no padded one
    assert features.window_frames(32, 16, 16, 1)[:, 0].tolist() == [0, 16]
    assert features.window_frames(5, 4, 2, 2).tolist() == [[0, 2, 4, 4]]  # shorter than a window
    assert features.window_frames(30, 4, 32, 1)[:, 0].tolist() == [0]  # never a window past the end
    assert features.window_frames(13, 4, 3, 1)[:, 0].tolist() == [0, 3, 6, 9]


@pytest.mark.slow
def test_features_equal_the_direct_forward_for_folders_and_video_files(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    flags = [
        "--resume",
        inputs["ckpt"],
        "--out",
        str(out),
        "--window",
        "4",
        "--stride",
        "3",
        "--t_stride",
        "2",
        "-b",
        "3",
        "--dtype",
        "float64",
        "--logits",
        "--device",
        "cpu",
        "-j",
        "0",
        "--video_decoder",
        "pyav",
    ]
    folder = str(inputs["root"] / "val" / "video_0001")
    code = features.main([folder, inputs["video"], inputs["bad"], *flags])
    assert code == 2  # the truncated video: reported, the others written
    failed = (out / "failed.txt").read_text().splitlines()
    assert len(failed) == 1 and "truncated.mp4" in failed[0], failed
    for vid, frames in (
        ("video_0001", folder_frames(folder)),
        ("h264_long_gop", videos.sequential(inputs["video"])),
    ):
        got, starts = np.load(out / f"{vid}.npy"), np.load(out / f"{vid}.starts.npy")
        idx = features.window_frames(len(frames), 4, 3, 2)
        assert starts.tolist() == idx[:, 0].tolist() and got.shape == (len(idx), 512)
        want, logits = expected(inputs["ckpt"], frames, idx)
        assert (
            rel_err(got, want) < 1e-6 and rel_err(np.load(out / f"{vid}.logits.npy"), logits) < 1e-6
        )
        assert json.loads((out / f"{vid}.json").read_text())["frames"] == len(frames)
    index = (out / "index.csv").read_text().splitlines()
    assert index[0] == "video,input,frames,windows" and len(index) == 3
    # --layer: another stage's output, averaged over (T, H, W)
    assert (
        features.main([folder, *flags[:3], str(tmp_path / "l3"), *flags[4:], "--layer", "layer3"])
        == 0
    )
    want, _ = expected(
        inputs["ckpt"], folder_frames(folder), features.window_frames(13, 4, 3, 2), "layer3"
    )
    assert rel_err(np.load(tmp_path / "l3" / "video_0001.npy"), want) < 1e-6
    # --crop resize: the whole frame, short side to crop_size
    assert (
        features.main([folder, *flags[:3], str(tmp_path / "rs"), *flags[4:], "--crop", "resize"])
        == 0
    )
    idx = features.window_frames(13, 4, 3, 2)
    want, _ = expected(inputs["ckpt"], folder_frames(folder), idx, crop="resize")
    assert rel_err(np.load(tmp_path / "rs" / "video_0001.npy"), want) < 1e-6
    # other settings into the same folder: refused, nothing mixed
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        features.main([folder, *flags[:3], str(out), "--window", "8"])
    one_line_error(capsys, "--out", "window 4 -> 8", exc=e)


@pytest.mark.slow
def test_a_segment_has_the_features_of_its_own_frames(inputs, tmp_path):
    """A list's segments, by frames of a frame folder and by time of a video file, and a PySlowFast
    frame list naming its frames from 6: the features of the same frames given alone (a folder of
    those frames, the whole video's windows at the same starts); starts count from the video's
    first frame."""
    src = inputs["root"] / "val" / "video_0001"  # 13 frames
    own, named = tmp_path / "own", tmp_path / "X"
    own.mkdir(), named.mkdir()
    for k in range(6, 14):  # frames 6..13 (5..12 counted from 0): a folder of their own
        blob = (src / f"img_{k:05d}.jpg").read_bytes()
        (own / f"img_{k - 5:05d}.jpg").write_bytes(blob)
        (named / f"X-{k:06d}.jpg").write_bytes(blob)
    assert decode.video_fps(inputs["video"]) == 25  # 0.8 s .. 1.44 s: frames 20 .. 35
    segments = write_list(
        tmp_path / "segments.txt", [f"{src} 5 8 0", f"{inputs['video']} 0.8s 1.44s 1"]
    )
    frame_list = ["original_vido_id video_id frame_id path labels"]
    frame_list += [f'X 0 {k} X/X-{k:06d}.jpg "3"' for k in range(6, 14)]
    frame_list = write_list(tmp_path / "frames.csv", frame_list)
    out = tmp_path / "out"
    flags = ["--resume", inputs["ckpt"], "--window", "4", "--stride", "4", "--t_stride", "1"]
    flags += ["-b", "3", "--dtype", "float64", "--device", "cpu", "-j", "0"]
    inputs_ = [str(own), str(segments), str(frame_list), inputs["video"]]
    assert features.main([*inputs_, *flags, "--video_decoder", "pyav", "--out", str(out)]) == 0
    want = np.load(out / "own.npy")
    for vid in ("video_0001_5-12", "X"):
        assert rel_err(np.load(out / f"{vid}.npy"), want) < 1e-9, vid
        assert np.load(out / f"{vid}.starts.npy").tolist() == [5, 9]
        meta = json.loads((out / f"{vid}.json").read_text())
        assert (meta["frames"], meta["first_frame"]) == (8, 5)
    whole, starts = (np.load(out / f"h264_long_gop{x}.npy") for x in ("", ".starts"))
    got = np.load(out / "h264_long_gop_20-35.npy")
    assert np.load(out / "h264_long_gop_20-35.starts.npy").tolist() == [20, 24, 28, 32]
    assert starts[5:9].tolist() == [20, 24, 28, 32] and rel_err(got, whole[5:9]) < 1e-9


def test_a_segment_by_time_of_a_frame_folder_needs_fps_in_one_line(inputs, tmp_path, capsys):
    """The one list form features cannot place without a rate: refused naming the list, its line
    and --fps, before anything is written; with --fps, its frames by number."""
    folder = inputs["root"] / "val" / "video_0001"
    lst = write_list(tmp_path / "t.txt", [f"{folder} 13 0", f"{folder} 0.2s 0.4s 0"])
    argv = [str(lst), "--resume", inputs["ckpt"], "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as e:
        features.main(argv)
    one_line_error(capsys, f"{lst}:2", "--fps", exc=e)
    assert not os.path.exists(tmp_path / "o")
    videos_ = data.read_list(lst, fps=25)
    assert [features.video_id(v) for v in videos_] == ["video_0001", "video_0001_5-9"]


class Segments(nn.Module):
    """A TSN-style model: a 2D torchvision backbone on every frame, the segments' logits
    averaged."""

    def __init__(self):
        super().__init__()
        self.base = torchvision.models.resnet18(num_classes=3)

    def forward(self, x):
        B, C, T, H, W = x.shape
        return self.base(x.transpose(1, 2).flatten(0, 1)).view(B, T, -1).mean(1)


@cuda
def test_features_on_a_gpu_match_the_cpu(inputs, tmp_path):
    flags = [inputs["list"], "--resume", inputs["ckpt"], "--window", "4", "-j", "2"]
    assert features.main([*flags, "--out", str(tmp_path / "gpu"), "--device", "cuda"]) == 0
    assert features.main([*flags, "--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    for k in range(6):
        gpu, cpu = (np.load(tmp_path / d / f"video_{k:04d}.npy") for d in ("gpu", "cpu"))
        assert rel_err(gpu, cpu) < 1e-3


def test_torchvision_and_segment_models_pool_the_classifier_input():
    torch.manual_seed(0)
    r3d = torchvision.models.get_model("r3d_18", num_classes=3).eval()
    x = torch.randn(2, 3, 4, 32, 32)
    f, y = features.Extractor(r3d)(x)
    s = r3d.layer4(r3d.layer3(r3d.layer2(r3d.layer1(r3d.stem(x)))))
    assert torch.allclose(f, r3d.avgpool(s).flatten(1), atol=1e-6) and torch.equal(y, r3d(x))

    tsn = Segments().eval()
    f, y = features.Extractor(tsn)(x)
    b = tsn.base
    frames = x.transpose(1, 2).flatten(0, 1)
    per_frame = b.avgpool(
        b.layer4(b.layer3(b.layer2(b.layer1(b.maxpool(b.relu(b.bn1(b.conv1(frames))))))))
    )
    assert torch.allclose(f, per_frame.flatten(1).view(2, 4, -1).mean(1), atol=1e-6)
    assert torch.allclose(b.fc(f), y, atol=1e-5)


@pytest.mark.slow
def test_a_long_video_streams_in_memory_independent_of_its_length(tmp_path, monkeypatch):
    """A 300- and a 3,000-frame video: at most --batch windows of frames decoded at a time, and a
    peak of traced memory (numpy: PyAV's frames) that grows by far less than a frame per frame: only
    the demuxer's index of timestamps (~100 bytes a frame) grows with the video."""
    ckpt = tiny_checkpoint(tmp_path / "ck.pth", new_size=32, crop_size=32, t_length=2)
    peaks, most = {}, []
    real = features.frame_reader

    def counting(ds, video):
        n, read = real(ds, video)
        return n, lambda idx: most.append(len(idx)) or read(idx)

    monkeypatch.setattr(features, "frame_reader", counting)
    for n in (300, 3000):
        path = videos._encode(
            str(tmp_path / f"v{n}.mp4"), "mpeg4", range(n), {"g": "12", "qscale": "3"}
        )
        tracemalloc.start()
        assert (
            features.main(
                [
                    path,
                    "--resume",
                    ckpt,
                    "--out",
                    str(tmp_path / f"o{n}"),
                    "--window",
                    "2",
                    "--stride",
                    "16",
                    "-b",
                    "8",
                    "--video_decoder",
                    "pyav",
                    "--device",
                    "cpu",
                    "-j",
                    "0",
                ]
            )
            == 0
        )
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert np.load(tmp_path / f"o{n}" / f"v{n}.npy").shape == (-(-n // 16), 512)
    assert max(most) <= 8 * 2  # frames alive: one batch of windows
    frame_bytes = videos.W * videos.H * 3
    # holding them: 2700 x frame_bytes
    assert (peaks[3000] - peaks[300]) / 2700 < 0.02 * frame_bytes, peaks


def torchrun(*argv, nproc=2, timeout=240):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        str(REPO / "features.py"),
        *argv,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=timeout)


@pytest.mark.slow
def test_killed_run_restarted_on_two_processes_writes_every_video_once(inputs, tmp_path):
    out = tmp_path / "out"
    flags = [
        inputs["list"],
        inputs["video"],
        "--resume",
        inputs["ckpt"],
        "--out",
        str(out),
        "--window",
        "4",
        "--stride",
        "2",
        "-b",
        "2",
        "--dtype",
        "float64",
        "--device",
        "cpu",
        "-j",
        "0",
    ]
    p = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), "features", *flags],
        env=ENV,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not list(out.glob("video_????.npy")) and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    first = {f.name: f.stat().st_mtime_ns for f in out.glob("video_????.npy")}
    assert 1 <= len(first) and not (out / "h264_long_gop.npy").exists(), first  # killed midway
    # as a kill during a write leaves it
    (out / ".video_0005.npy.99999.tmp").write_bytes(b"half a file")
    r = torchrun(*flags, "--ddp")
    assert r.returncode == 0, r.stderr[-2000:]
    done = sorted(f.name for f in out.glob("video_????.npy"))
    assert (
        done == [f"video_{k:04d}.npy" for k in range(6)] and (out / "h264_long_gop.npy").is_file()
    )
    # skipped, not rewritten
    assert all((out / name).stat().st_mtime_ns == t for name, t in first.items())
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]
    windows = len(features.window_frames(13, 4, 2, 1)) * (6 - len(first)) + len(
        features.window_frames(75, 4, 2, 1)
    )
    assert f"({windows} windows written" in r.stdout  # each remaining video once
    assert len((out / "index.csv").read_text().splitlines()) == 8
    # the same features as one process computes with 2 loader workers, and as the direct forward
    one = tmp_path / "one"
    # with the subprocesses' one thread (conftest.ENV): a float64 conv sums in another order on
    # another thread count, and the files must be equal to the bit
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert features.main([*flags[:5], str(one), *flags[6:], "-j", "2"]) == 0
    finally:
        torch.set_num_threads(threads)
    for vid in [f"video_{k:04d}" for k in range(6)] + ["h264_long_gop"]:
        assert np.array_equal(np.load(out / f"{vid}.npy"), np.load(one / f"{vid}.npy"))
    folder = str(inputs["root"] / "val" / "video_0005")
    want, _ = expected(inputs["ckpt"], folder_frames(folder), features.window_frames(13, 4, 2, 1))
    assert rel_err(np.load(out / "video_0005.npy"), want) < 1e-6


# ---- export --------------------------------------------------------------------------------------
# a 3D arch, and TSM (a 2D ResNet over 3 segments with the temporal shift: the TSN family's hardest
# case)
EXPORTED = {
    "resnet50_3d": dict(arch="resnet50_3d"),
    "tsm_resnet18": dict(arch="resnet18", mode="TSN", num_segments=3, shift=8, t_length=1),
    "vit_t16": dict(arch="vit_t16"),  # VideoMAE's ViT (SDPA attention, the fixed position table)
    "vjepa2_vitt16": dict(arch="vjepa2_vitt16"),  # V-JEPA 2's (3D RoPE, the attentive head)
    # PySlowFast's two families: SlowFast takes its slow pathway from the one clip; X3D's SiLU
    "slowfast_tiny": dict(arch="slowfast_tiny"),
    # mmaction2's SlowFast: every alpha-th frame (a strided slice), laterals without BN
    "slowfast_tiny_mmaction2": dict(arch="slowfast_tiny", slowfast_variant="mmaction2"),
    "x3d_xs": dict(arch="x3d_xs"),
}


# V-JEPA 2's arch: .pt2 only (each export takes about a minute on 2 CPU cores)
@pytest.mark.slow
@pytest.mark.parametrize(
    "name, fmt",
    [(n, f) for n in EXPORTED for f in ("onnx", "pt2") if (n, f) != ("vjepa2_vitt16", "onnx")],
)
def test_export_matches_the_model(name, fmt, tmp_path):
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime", reason="no onnxruntime (pip install onnxruntime)")
        pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript")
    ckpt = tiny_checkpoint(tmp_path / "ck.pth", new_size=32, crop_size=32, **EXPORTED[name])
    out = str(tmp_path / f"model.{fmt}")
    assert export.main(["--resume", ckpt, "--format", fmt, out, "--dynamic-batch"]) == 0
    model, _, _ = predict.load_checkpoint(ckpt, "cpu", 1, 1)
    frames = json.loads(open(out + ".json").read())["input"]["frames"]  # TSN: all segments' frames
    assert frames == (3 if "mode" in EXPORTED[name] else 4)
    x = torch.randn(3, 3, frames, 32, 32)
    if fmt == "onnx":
        session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
        y = session.run(None, {"clips": x.numpy()})[0]
    else:
        y = torch.export.load(out).module()(x).detach().numpy()
    with torch.no_grad():
        assert np.abs(y - model(x).numpy()).max() < 1e-4
    meta = json.loads(open(out + ".json").read())
    assert meta["input"]["layout"] == "B, 3, T, H, W" and meta["input"]["batch"] == "any"
    assert meta["normalisation"]["mean"] == list(data.MEAN) and meta["output"]["classes"] == 4


def test_bad_flags_are_one_line_before_anything_is_read(inputs, tmp_path, capsys):
    out = ["--out", str(tmp_path / "o")]
    for argv, needle in (
        (["--resume", inputs["ckpt"], "--arch", "r3d_18"], "--resume CKPT"),
        (["--resume", inputs["ckpt"], "--crop_size", "64"], "--crop_size"),
        (["--arch", "nope"], "--arch nope"),
        (["--resume", inputs["ckpt"], "--layer", "layer9"], "--layer layer9"),
        (["--resume", inputs["ckpt"], "--window", "1"], "--window 1"),
    ):
        with pytest.raises(SystemExit) as e:
            features.main([inputs["list"], *out, *argv])
        one_line_error(capsys, needle, exc=e)
    assert not os.path.exists(tmp_path / "o")
    with pytest.raises(SystemExit) as e:
        export.main(["--resume", inputs["ckpt"], str(tmp_path)])
    one_line_error(capsys, "is a folder", exc=e)


@pytest.mark.slow
def test_export_refuses_an_arch_it_cannot_trace_in_one_line(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path / "ck.pth", arch="s3d", new_size=32, crop_size=32)
    with pytest.raises(SystemExit) as e:
        export.main(["--resume", ckpt, "--format", "pt2", str(tmp_path / "s3d.pt2")])
    one_line_error(capsys, "--arch s3d", "--format pt2", exc=e)
    assert not os.path.exists(tmp_path / "s3d.pt2")


@pytest.mark.slow
def test_a_window_the_model_cannot_take_is_refused_before_anything_is_written(
    inputs, tmp_path, capsys
):
    """TSM is built for its own clip length and TSN-3D for multiples of its snippet: a wrong
    --window is one line with nothing written, so the corrected command is not refused for "other
    settings"; left out, the window is the checkpoint's (TSM) or THUMOS14's 16 frames (where the
    model takes them)."""
    tsm = tiny_checkpoint(
        tmp_path / "tsm.pth", arch="resnet18", mode="TSN", num_segments=3, shift=8, t_length=1
    )
    tsn3d = tiny_checkpoint(tmp_path / "tsn3d.pth", mode="TSN", num_segments=2, t_length=4)
    run = ["-j", "0", "--device", "cpu", "-b", "4"]
    for ckpt, window, needles in (
        (tsm, "16", ("--window 16", "exactly 3 frames", "--window 3")),
        (tsn3d, "6", ("--window 6", "multiple of 4")),
        (inputs["ckpt"], "1", ("--window 1", "too short")),
    ):
        with pytest.raises(SystemExit) as e:
            features.main(
                [
                    inputs["list"],
                    "--resume",
                    ckpt,
                    "--out",
                    str(tmp_path / "o"),
                    *run,
                    "--window",
                    window,
                ]
            )
        one_line_error(capsys, *needles, exc=e)
        assert not os.path.exists(tmp_path / "o")
    for ckpt, window in ((tsm, 3), (tsn3d, 16)):
        out = tmp_path / f"o{window}"
        assert features.main([inputs["list"], "--resume", ckpt, "--out", str(out), *run]) == 0
        assert json.loads((out / "settings.json").read_text())["window"] == window
        starts = features.window_frames(13, window, 16, 1)[:, 0]
        assert np.load(out / "video_0001.starts.npy").tolist() == starts.tolist()


def test_an_out_folder_that_cannot_be_written_is_one_line(inputs, tmp_path, capsys):
    (tmp_path / "a_file").write_text("mine")
    bad = [(tmp_path / "a_file" / "feats", "is a file")]  # refused for root too
    if os.geteuid() != 0:  # root writes anywhere: a read-only folder stops only other users
        (tmp_path / "ro").mkdir(mode=0o500)
        bad.append((tmp_path / "ro" / "feats", "no permission"))
    for out, needle in bad:
        with pytest.raises(SystemExit) as e:
            features.main(
                [
                    inputs["list"],
                    "--resume",
                    inputs["ckpt"],
                    "--out",
                    str(out),
                    "-j",
                    "0",
                    "--device",
                    "cpu",
                ]
            )
        one_line_error(capsys, f"--out {out}", needle, exc=e)
    assert (tmp_path / "a_file").read_text() == "mine"


def test_the_progress_bar_stays_out_of_a_log_file(inputs, tmp_path, capsys):
    """stderr is no terminal here (as in `... 2> log`): no bar, so no '\\r' redraws in the log."""
    out = str(tmp_path / "o")
    argv = [inputs["list"], "--resume", inputs["ckpt"], "--out", out, "-j", "0", "--device", "cpu"]
    assert features.main([*argv, "--window", "4"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "features" not in err, repr(err)


@pytest.mark.slow
def test_export_makes_a_missing_folder_and_names_a_missing_exporter_package(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path / "ck.pth", new_size=32, crop_size=32)
    out = tmp_path / "exported" / "today" / "model.pt2"  # folders that do not exist yet
    assert export.main(["--resume", ckpt, "--format", "pt2", str(out)]) == 0
    assert out.is_file() and (tmp_path / "exported" / "today" / "model.pt2.json").is_file()
    (tmp_path / "a_file").write_text("mine")
    with pytest.raises(SystemExit) as e:
        export.main(["--resume", ckpt, "--format", "pt2", str(tmp_path / "a_file" / "m.pt2")])
    err = one_line_error(capsys, "cannot make its folder", exc=e)
    assert "cannot export this model" not in err
    # right after `pip install -r requirements.txt` neither exporter package is installed: both are
    # made unimportable here, so the message is the same whether this machine has them or not
    code = (
        "import runpy, sys; sys.modules['onnx'] = sys.modules['onnxscript'] = None; "
        f"sys.argv = ['export.py', '--resume', {ckpt!r}, '--format', 'onnx', "
        f"{str(tmp_path / 'm.onnx')!r}]; "
        "runpy.run_path('export.py', run_name='__main__')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120
    )
    assert r.returncode == 2
    err = one_line_error(r.stderr, "--format onnx", "pip install onnx onnxscript")
    assert "cannot export this model" not in err and not (tmp_path / "m.onnx").exists()
