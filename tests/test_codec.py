"""TorchCodec decoding, the bytes mode of --decode_device (EncodedClip, collate_encoded,
decode_batch), and bench.py data's rows from the dataset's own sampling. CPU only, except one test
that needs CUDA.

python -m pytest -q test_codec.py
"""

import json
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import bench
import data
import decode
import gpudecode
import prepare
from conftest import REPO

needs_codec = pytest.mark.skipif(
    decode.codec_decode_image is None, reason="TorchCodec is not installed"
)
needs_tv = pytest.mark.skipif(
    decode.decode_image is None, reason="torchvision has no image decoders here"
)
# torchvision 0.29, as data.py
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
BadFrame = (decode.BadVideo,) if hasattr(decode, "BadVideo") else (FileNotFoundError, RuntimeError)


def textured(h, w, seed=0):
    """A smooth RGB texture with noise: real JPEG work (flat images decode unrealistically
    easily)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 8 + 2, w // 8 + 2, 3), dtype=np.uint8)
    img = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float32)
    return np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)


def jpeg_variants(folder):
    """Frames as they come from the wild: q95 / q75, 4:2:0 / 4:4:4, progressive, grayscale, odd
    sizes, an EXIF block before the frame header. name -> path."""
    img, odd = textured(64, 96), textured(17, 33, seed=1)
    exif = Image.Exif()
    exif[0x010F] = "camera"  # Make
    variants = {
        "q95_420": (img, dict(quality=95)),
        "q75_420": (img, dict(quality=75)),
        "q95_444": (img, dict(quality=95, subsampling=0)),
        "progressive": (img, dict(quality=90, progressive=True)),
        "odd_33x17": (odd, dict(quality=95)),
        "exif": (img, dict(quality=90, exif=exif.tobytes())),
    }
    out = {}
    for name, (a, kw) in variants.items():
        out[name] = os.path.join(folder, f"{name}.jpg")
        Image.fromarray(a).save(out[name], **kw)
    out["gray"] = os.path.join(folder, "gray.jpg")
    Image.fromarray(img[..., 0]).save(out["gray"], quality=95)
    return out


# ---- TorchCodec is the decoder -------------------------------------------------------------------
@needs_codec
@needs_tv
@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_torchcodec_decode_is_bit_identical_to_torchvision(tmp_path):
    """decode_frame (TorchCodec) gives exactly torchvision's decode_image pixels on every kind of
    JPEG, and on the project's own synthetic frames, from a path and from the file's bytes."""
    from torchvision.io import ImageReadMode, decode_image, read_file

    paths = list(jpeg_variants(tmp_path).values())
    prepare.make_synth(str(tmp_path / "synth"), classes=2, videos=1, frames=3, size=(340, 256))
    paths += [str(p) for p in sorted((tmp_path / "synth" / "train" / "video_0000").glob("*.jpg"))]
    for path in paths:
        ours = decode.decode_frame(path, "torchcodec")
        ref = decode_image(read_file(path), mode=ImageReadMode.RGB).permute(1, 2, 0)
        assert ours.dtype == torch.uint8 and ours.dim() == 3 and ours.shape[2] == 3, path
        assert ours.shape == ref.shape and torch.equal(ours, ref), path
        assert torch.equal(decode.decode_frame(decode.read_encoded(path), "torchcodec"), ref), path
        assert ours.float().std() > 10  # not trivially equal: textured frames
        # Pillow (the fallback) decodes the same frame to the same size, pixels close (other
        # IDCT/upsampling)
        pil = decode.decode_frame(path, "pil")
        assert pil.shape == ours.shape and (pil.float() - ours.float()).abs().mean() < 2, path


@needs_codec
def test_default_decoder_is_torchcodec_and_the_dataset_uses_it(tmp_path, monkeypatch):
    """data.py's clips are decoded by TorchCodec's decode_jpeg: one call per distinct frame."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=2, frames=8, size=(48, 32))
    assert decode.DECODER == "torchcodec" and decode.available_decoders()[0] == "torchcodec"
    calls = []
    real = decode.codec_decode_jpeg
    monkeypatch.setattr(
        decode, "codec_decode_jpeg", lambda x, **kw: calls.append(1) or real(x, **kw)
    )
    ds = data.VideoFrameDataset(
        train_list, mode="val", t_length=4, t_stride=2, new_size=32, crop_size=24
    )
    ds[0]
    assert len(calls) == 4


@pytest.mark.slow
@pytest.mark.parametrize("blocked, expected", [("", "torchcodec"), ("torchcodec", "pil")])
def test_pillow_is_the_fallback_only_without_torchcodec(blocked, expected, tmp_path):
    """In a fresh interpreter: TorchCodec when importable, Pillow when it is missing -- and then
    decode_frame still gives (H, W, 3) uint8 frames."""
    if decode.codec_decode_image is None and expected == "torchcodec":
        pytest.skip("TorchCodec is not installed")
    img = tmp_path / "f.jpg"
    Image.fromarray(textured(32, 48)).save(img, quality=95)
    code = (
        f"import sys; sys.modules.update({{m: None for m in {[blocked] if blocked else []}}})\n"
        f"import decode; x = decode.decode_frame({str(img)!r})\n"
        "print(decode.DECODER, tuple(x.shape), x.dtype, decode.available_decoders())"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:4] == [expected, "(32,", "48,", "3)"], p.stdout
    assert ("'torchcodec'" in p.stdout) == (expected == "torchcodec")


def test_unknown_or_unavailable_decoder_is_one_clear_error(tmp_path):
    img = tmp_path / "f.jpg"
    Image.fromarray(textured(16, 16)).save(img)
    with pytest.raises(ValueError, match=r"decoder 'nvdec' is not available here; choose from \["):
        decode.decode_frame(str(img), "nvdec")


# ---- bad frames: still one line ------------------------------------------------------------------
def bad_frames_dataset(tmp_path, kind, encoded=False):
    """A 1-video val list whose second read frame (of 1, 3, 5) is `kind`; returns (dataset, its
    path)."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=1, videos=1, frames=6, size=(48, 32))
    path = tmp_path / "train" / "video_0000" / "img_00003.jpg"
    good = path.read_bytes()
    if kind == "missing":
        path.unlink()
    # no image magic at all: TorchCodec's ValueError must become a frame error
    elif kind == "garbage":
        path.write_bytes(b"this is not an image" * 10)
    elif kind == "bad_marker":
        path.write_bytes(b"\xff\xd8\xff" + b"garbage" * 30)
    elif kind == "truncated":  # the header is fine: bytes mode ships it, the decoder fails later
        path.write_bytes(good[: len(good) // 2])
    elif kind == "other_size":
        Image.fromarray(textured(40, 48)).save(path, quality=95)
    ds = data.VideoFrameDataset(
        train_list, mode="val", t_length=3, t_stride=2, new_size=32, crop_size=24, encoded=encoded
    )
    return ds, str(path)


@pytest.mark.parametrize("decoder", ["torchcodec", "torchvision", "pil"])
@pytest.mark.parametrize("kind", ["missing", "garbage", "bad_marker", "truncated", "other_size"])
@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_bad_frame_is_one_line_naming_it(kind, decoder, tmp_path, monkeypatch):
    if decoder not in decode.available_decoders():
        pytest.skip(f"{decoder} not available")
    monkeypatch.setattr(decode, "DECODER", decoder)
    ds, path = bad_frames_dataset(tmp_path, kind)
    with pytest.raises(BadFrame) as e:
        ds[0]
    msg = str(e.value)
    assert "\n" not in msg and path in msg and "Traceback" not in msg, msg
    assert not re.search(r"\.cpp:\d+", msg), msg  # no decoder source locations


@pytest.mark.parametrize("kind", ["missing", "garbage", "bad_marker", "other_size"])
def test_bytes_mode_raises_the_dataset_error_in_the_loader(kind, tmp_path):
    """Bytes mode reads headers, not pixels; a frame it cannot read or size raises the error the
    normal path raises, in the loader (so train mode can replace the video there)."""
    ds, path = bad_frames_dataset(tmp_path, kind)
    enc, _ = bad_frames_dataset(tmp_path / "enc", kind, encoded=True)
    with pytest.raises(BadFrame) as normal:
        ds[0]
    with pytest.raises(BadFrame) as deferred:
        enc[0]
    assert type(deferred.value) is type(normal.value)
    assert str(deferred.value) == str(normal.value).replace(str(tmp_path), str(tmp_path / "enc"))


def test_bytes_mode_truncated_frame_fails_in_decode_batch_naming_it(tmp_path):
    enc, path = bad_frames_dataset(tmp_path, "truncated", encoded=True)
    batch = gpudecode.collate_encoded([enc[0]])  # the header parses: the loader ships it
    bad = (decode.BadVideo,) if hasattr(decode, "BadVideo") else RuntimeError
    with pytest.raises(bad) as e:
        gpudecode.decode_batch(batch, "cpu", enc)
    msg = str(e.value)
    assert (
        "\n" not in msg and path in msg and "truncated" in msg and not re.search(r"\.cpp:\d+", msg)
    ), msg


@pytest.mark.slow
def test_check_cli_reports_a_garbage_frame_in_one_line(tmp_path):
    """`prepare.py check --full` on a frame without image magic (TorchCodec raises ValueError for
    it): one line naming the frame, exit 1, in a subprocess with a timeout."""
    ds, path = bad_frames_dataset(tmp_path, "garbage")
    p = subprocess.run(
        [sys.executable, str(REPO / "prepare.py"), "check", ds.list_file, "--full"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = [line for line in p.stdout.splitlines() if path in line]
    assert len(lines) == 1 and "unreadable frame" in lines[0] and "Traceback" not in p.stderr, (
        p.stdout,
        p.stderr,
    )


def test_encoded_size_reads_jpeg_headers(tmp_path):
    """The loader's header parser agrees with Pillow on every JPEG variant, and on a PNG (via
    Pillow)."""
    paths = jpeg_variants(tmp_path)
    paths["png"] = str(tmp_path / "f.png")
    Image.fromarray(textured(21, 13)).save(paths["png"])
    for name, path in paths.items():
        with open(path, "rb") as f:
            blob = f.read()
        with Image.open(path) as img:
            assert gpudecode._encoded_size(blob) == (img.height, img.width), name
    assert gpudecode._encoded_size(b"\xff\xd8\xff" + b"\x00" * 20) is None


# ---- bytes mode == the normal path ---------------------------------------------------------------
def both(list_file, **kw):
    return data.VideoFrameDataset(list_file, **kw), data.VideoFrameDataset(
        list_file, encoded=True, **kw
    )


@pytest.mark.parametrize("mode", ["train", "val", "test"])
def test_bytes_mode_decode_batch_cpu_equals_normal_path(mode, tmp_path):
    """collate_encoded + decode_batch(device="cpu") give exactly data.collate's batch: values,
    shape, channels_last_3d strides, labels -- over two epochs, with a short video whose clip
    repeats frames and (test) several clips and 3 crops; with the default decoder and with
    Pillow."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=3, frames=10, size=(64, 40))
    with open(train_list, "a") as f:
        f.write("train/video_0000 3 1\n")  # 3 frames for a 4-frame clip: repeats
    kw = dict(mode=mode, t_length=4, t_stride=2, new_size=48, crop_size=32)
    if mode == "test":
        kw.update(num_clips=2, num_crops=3)
    ds, enc = both(train_list, **kw)
    for epoch, decoder in ((0, decode.DECODER), (1, "pil")):
        ds.set_epoch(epoch)
        enc.set_epoch(epoch)
        old, decode.DECODER = decode.DECODER, decoder
        try:
            normal = data.collate([ds[i] for i in range(len(ds))])
            items = [enc[i] for i in range(len(enc))]
            assert all(isinstance(it[0], gpudecode.EncodedClip) for it in items)
            deferred = gpudecode.decode_batch(gpudecode.collate_encoded(items), "cpu", enc)
        finally:
            decode.DECODER = old
        assert len(deferred) == len(normal) and torch.equal(deferred[1], normal[1])
        a, b = normal[0], deferred[0]
        assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b), (mode, epoch)
        # test mode: (B, V, ...)
        assert b.dim() == 6 or b.is_contiguous(memory_format=torch.channels_last_3d)
    # repeats read once
    assert items[-1][0].numbers == (1, 2, 3) and len(items[-1][0].frames()) == 3


def test_bytes_mode_through_dataloader_workers_equals_normal_path(tmp_path):
    """EncodedClips survive worker processes (shared memory, the pickled generator): a 2-worker
    loader in bytes mode gives what the 0-worker normal loader gives."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=4, frames=10, size=(64, 40))
    ds, enc = both(train_list, mode="train", t_length=4, t_stride=2, new_size=48, crop_size=32)
    normal = list(
        torch.utils.data.DataLoader(ds, batch_size=2, num_workers=0, collate_fn=data.collate)
    )
    loader = torch.utils.data.DataLoader(
        enc, batch_size=2, num_workers=2, collate_fn=gpudecode.collate_encoded
    )
    deferred = [gpudecode.decode_batch(b, "cpu", enc) for b in loader]
    assert len(deferred) == len(normal) == 2
    for a, b in zip(normal, deferred):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_bytes_mode_replays_the_crop_it_sampled(tmp_path):
    """The replay is not a re-draw: shipping another generator state changes the clip (so the
    equality above is not trivially true for any crop)."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=1, frames=10, size=(96, 64))
    ds, enc = both(train_list, mode="train", t_length=2, t_stride=2, new_size=64, crop_size=32)
    item = enc[0]
    good = gpudecode.decode_batch(gpudecode.collate_encoded([item]), "cpu", enc)[0]
    assert torch.equal(good, data.collate([ds[0]])[0])
    changed = []
    for seed in range(4):
        item[0].rng = np.random.default_rng([99, seed])
        try:
            decoded = gpudecode.decode_batch(gpudecode.collate_encoded([item]), "cpu", enc)[0]
            changed.append(not torch.equal(decoded, good))
        except RuntimeError as e:  # another start frame: the replay refuses to use the wrong frames
            changed.append("chose other frames" in str(e))
    assert all(changed)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", ["train", "test"])
def test_decode_batch_cuda_matches_cpu(mode, tmp_path):
    """nvJPEG decoding of the whole batch on the GPU, then load_clip's crops/flips on the device:
    the batch lies on CUDA in channels_last_3d and matches the CPU path up to decoder differences
    (nvJPEG vs libjpeg-turbo IDCT/upsampling, float vs fixed-point resize): a wrong crop or flip
    would not."""
    train_list, _ = prepare.make_synth(
        str(tmp_path), classes=2, videos=4, frames=12, size=(340, 256)
    )
    kw = dict(mode=mode, t_length=4, t_stride=2, new_size=256, crop_size=112)
    if mode == "test":
        kw.update(num_clips=2, num_crops=3)
    ds, enc = both(train_list, **kw)
    cpu = data.collate([ds[i] for i in range(len(ds))])
    batch = gpudecode.collate_encoded([enc[i] for i in range(len(enc))])
    batch = ([e.pin_memory() for e in batch[0]], *batch[1:])  # as DataLoader(pin_memory=True) does
    gpu = gpudecode.decode_batch(batch, "cuda", enc)
    x, y = cpu[0], gpu[0]
    assert y.device.type == "cuda" and y.dtype == torch.uint8 and y.shape == x.shape
    assert y.stride() == x.stride()  # collate's layout: channels_last_3d for (B, 3, T, H, W)
    diff = (y.cpu().float() - x.float()).abs()
    assert diff.mean() < 2.0 and (diff > 16).float().mean() < 0.01, (diff.mean(), diff.max())
    mirrored = (y.cpu().float().flip(-1) - x.float()).abs().mean()
    assert mirrored > 4 * diff.mean() + 1  # the tolerance is far below what a wrong flip costs
    if mode == "train":  # the device's crop, and a window's flip (a mirrored box), as the CPU's
        assert torch.equal(gpu[2]["box"], cpu[2]["box"])


# ---- bench.py data: the dataset's own sampling ---------------------------------------------------
def decoded_paths(monkeypatch, fn):
    """The frame files read for decoding (decode.read_encoded: the loader's reads and decode_frame's
    own) while fn() runs."""
    seen, real = [], decode.read_encoded
    monkeypatch.setattr(
        decode, "read_encoded", lambda path, count=-1: seen.append(path) or real(path, count)
    )
    fn()
    monkeypatch.setattr(decode, "read_encoded", real)
    return seen


def test_bench_reads_exactly_the_frames_the_dataset_reads(tmp_path, monkeypatch):
    """bench.clip_files / the decode-only rows read the files data.py's own __getitem__ decodes --
    in a later epoch, and with a forked sampler (here TSN-style: one frame per segment, at random)
    -- not a copy of the sampling (the old bench always read epoch 0's frames)."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=3, frames=24, size=(48, 32))
    ds = data.VideoFrameDataset(
        train_list, mode="train", t_length=4, t_stride=2, new_size=32, crop_size=24
    )

    def tsn(
        num_frames, t_length, t_stride, mode, num_clips=1, rng=None, start_index=1, *placement, **kw
    ):
        seg = num_frames // t_length
        return (np.arange(t_length) * seg + rng.integers(0, seg, t_length))[None] + start_index

    for epoch, sampler in ((0, data.sample_indices), (3, data.sample_indices), (1, tsn)):
        monkeypatch.setattr(data, "sample_indices", sampler)
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            truth = decoded_paths(monkeypatch, lambda: ds[i])
            files = bench.clip_files(ds, i)
            assert files == truth, (epoch, i)
            row = bench.DecodeOnly([files], decode.DECODER)
            assert decoded_paths(monkeypatch, lambda: row[0]) == truth
    epochs = [bench.clip_files(ds, 0)]
    ds.set_epoch(4)
    assert bench.clip_files(ds, 0) != epochs[0]  # the epoch matters: a copy pinned to epoch 0 fails


@pytest.fixture(scope="module")
def tiny_frames(tmp_path_factory):
    out = tmp_path_factory.mktemp("codec_bench")
    prepare.make_synth(str(out), classes=2, videos=2, frames=12, size=(48, 32))
    return str(out)


def test_bench_data_rows_per_decoder_and_share_of_limit(tiny_frames, tmp_path, capsys):
    """bench.py data: decode-only and data.py rows for each decoder, the bytes-only row, and each
    data.py row's share of the fastest decode-only row, in the JSON and the printed line."""
    path = tmp_path / "d.json"
    decoder = decode.DECODER
    bench.main(
        [
            "data",
            "--frames",
            tiny_frames,
            "--t_length",
            "4",
            "--t_stride",
            "2",
            "--new_size",
            "32",
            "--crop_size",
            "24",
            "--videos",
            "2",
            "--iters",
            "2",
            "--repeats",
            "1",
            "--workers",
            "0",
            "--json",
            str(path),
        ]
    )
    assert decode.DECODER == decoder  # restored after timing each decoder
    out = capsys.readouterr().out
    res = json.loads(path.read_text())
    decoders = decode.available_decoders()
    assert res["settings"]["decoders"] == decoders
    shares = re.findall(r"loader's share of the limit \((.+?)\), 1 core: (.+)", out)
    assert len(shares) == 2, out
    for (limit, line), mode in zip(shares, ("train", "val")):
        r, one = res["modes"][mode], res["modes"][mode]["per_core"]
        rows = (
            [bench.DECODE.format(d) for d in decoders]
            + [bench.NAIVE]
            + [bench.PIPELINE.format(d) for d in decoders]
        )
        extra = [
            bench.CPU_BEFORE,
            bench.CPU_NOW,
            bench.FINISHED,
            bench.AUGMENTED,
            bench.AUG_BATCH,
        ] * (mode == "train")
        assert list(one) == rows + [bench.BYTES] + extra
        a_rows = [bench.DECODE.format(d) for d in decoders]
        assert r["limit"] == limit == max(a_rows, key=one.get)
        share = {
            bench.PIPELINE.format(d): one[bench.PIPELINE.format(d)] / one[limit] for d in decoders
        }
        assert r["share_of_limit"] == pytest.approx(share, rel=1e-12)
        printed = dict(re.findall(r"(\w+) ([\d.]+)", line))
        assert list(printed) == decoders
        for d in decoders:
            assert float(printed[d]) == pytest.approx(
                r["share_of_limit"][bench.PIPELINE.format(d)], abs=0.006
            )
        assert r["c_over_best_a"] == pytest.approx(one[bench.OURS] / one[limit], rel=1e-12)


@pytest.mark.slow
def test_bench_train_decode_device_cuda_without_cuda_is_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present")
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench.py"),
            "train",
            "--decode_device",
            "cuda",
            "--device",
            "cpu",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "--decode_device cuda but no CUDA GPU" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bench_train_decode_device_cuda_runs(tiny_frames, tmp_path):
    """bench.py train with the loader shipping bytes and nvJPEG decoding each batch."""
    path = tmp_path / "t.json"
    out = bench.main(
        [
            "train",
            "--frames",
            tiny_frames,
            "--arch",
            "resnet10_3d",
            "--num_classes",
            "2",
            "--t_length",
            "4",
            "--t_stride",
            "2",
            "--new_size",
            "32",
            "--crop_size",
            "24",
            "-b",
            "2",
            "--workers",
            "0",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--device",
            "cuda",
            "--decode_device",
            "cuda",
            "--json",
            str(path),
        ]
    )
    assert out["real_clips_s"] > 0 and out["settings"]["decode_device"] == "cuda"


@pytest.mark.skipif(
    not hasattr(decode, "BadVideo"),
    reason="needs decode.BadVideo (train-mode replacement of bad videos)",
)
def test_bytes_mode_replaces_a_bad_video_like_the_normal_path(tmp_path):
    """Train mode: a video with a missing frame is replaced in the loader in bytes mode too -- the
    same replacement, clip, label and info["bad"] line as the normal path."""
    train_list, _ = prepare.make_synth(str(tmp_path), classes=2, videos=4, frames=8, size=(64, 40))
    for k in range(1, 9):  # every frame but the first: whatever clip is drawn, a frame is missing
        if k > 1:
            os.remove(tmp_path / "train" / "video_0001" / f"img_{k:05d}.jpg")
    ds, enc = both(train_list, mode="train", t_length=3, t_stride=2, new_size=48, crop_size=32)
    normal = data.collate([ds[i] for i in range(len(ds))])
    deferred = gpudecode.decode_batch(
        gpudecode.collate_encoded([enc[i] for i in range(len(enc))]), "cpu", enc
    )
    assert torch.equal(normal[0], deferred[0]) and torch.equal(normal[1], deferred[1])
    assert normal[2]["bad"] == deferred[2]["bad"] and "video_0001" in normal[2]["bad"][1], normal[
        2
    ]["bad"]


def test_jpeg_draft_is_opt_in_and_close_to_the_exact_clip(tmp_path):
    """--jpeg-draft (DataSpec.jpeg_draft): off by default; on, frames of short side >= 2x new_size
    decode at a reduced scale inside libjpeg (here 1/2: 128x96 frames for new_size 48) and the
    clips stay close to the exact ones, not equal; frames that cannot be reduced decode exactly."""
    assert data.DataSpec().jpeg_draft is False
    train_list, _ = prepare.make_synth(str(tmp_path), 2, 2, 16, size=(128, 96), quality=95)
    clip = dict(t_length=4, t_stride=2, crop_size=40, seed=0)
    frame = os.path.join(tmp_path, "train", "video_0000", "img_00001.jpg")
    assert tuple(decode.decode_draft(frame, 48).shape) == (48, 64, 3)
    assert torch.equal(decode.decode_draft(frame, 49), decode.decode_frame(frame))
    # train clips finished in the loader (a CPU model's): final pixels, comparable
    for mode in ("val", "train"):
        exact, draft = (
            data.VideoFrameDataset(
                train_list, mode=mode, new_size=48, jpeg_draft=d, finish_crop=True, **clip
            )
            for d in (False, True)
        )
        for i in range(len(exact)):
            a, b = exact[i][0].float(), draft[i][0].float()
            assert a.shape == b.shape and not torch.equal(a, b)
            assert (a - b).abs().mean() < 6, (mode, i, (a - b).abs().mean())
    # the short side is below twice new_size: nothing to reduce, the exact clips
    exact, draft = (
        data.VideoFrameDataset(train_list, mode="val", new_size=49, jpeg_draft=d, **clip)
        for d in (False, True)
    )
    assert torch.equal(exact[0][0], draft[0][0])


def test_jpeg_draft_with_nvjpeg_is_refused(capsys):
    """--jpeg-draft acts in the CPU loader's decoder; with --decode_device cuda nvJPEG decodes at
    full size: refused in one line (flags.ACTS_WITH), accepted with --decode_device cpu."""
    import flags
    import train
    from conftest import one_line_error

    argv = ["ucf101", "a.txt", "b.txt", "--device", "cuda", "--jpeg-draft"]
    with pytest.raises(SystemExit) as e:
        flags.check_flags_act(train.parse_args([*argv, "--decode_device", "cuda"]))
    one_line_error(capsys, "--jpeg-draft does nothing without --decode_device cpu", exc=e)
    flags.check_flags_act(train.parse_args(argv))
    # the flag reaches the dataset by name; off without it
    assert train.data_spec(train.parse_args(argv), "val").jpeg_draft is True
    assert train.data_spec(train.parse_args(argv[:-1]), "val").jpeg_draft is False


HEAP = """
import ctypes, pickle, sys, torch
import data

class Mallinfo2(ctypes.Structure):  # glibc's malloc.h
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks "
                "uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
how, path = sys.argv[1:]
if how == "made":  # a dataset made in this process (a loader)
    data.VideoFrameDataset(path)
if how == "unpickled":  # a dataset sent to this process (a spawn / forkserver worker)
    with open(path, "rb") as f:
        pickle.load(f)
for size in (460_000, 2_400_000, 15_000_000):  # a decoded frame, a 16x224 crop, a batch of 6
    before = libc.mallinfo2().hblkhd
    buffer = torch.empty(size, dtype=torch.uint8)
    print("mapped" if libc.mallinfo2().hblkhd > before else "heap", end=" ")
    del buffer
frames = [torch.empty(460_000, dtype=torch.uint8) for _ in range(80)]  # 37 MB, then freed
del frames
print("kept" if libc.mallinfo2().fordblks > 30_000_000 else "trimmed")
"""


@pytest.mark.skipif(
    not hasattr(__import__("ctypes").CDLL(None), "mallinfo2"), reason="glibc >= 2.33"
)
def test_keep_heap_takes_a_clips_buffers_from_the_heap(tmp_path):
    """decode.keep_heap, in a process that makes a VideoFrameDataset or is sent one (a loader
    worker): a clip's buffers come from the heap, and freed heap is kept for the next clip, not
    mapped afresh from the kernel (every page then faults in again: ~540 faults a clip measured
    with glibc's defaults, docs/performance.md). In a fresh process glibc's defaults map a first
    2.4 MB buffer and hand 37 MB of freed frames back; kept, neither."""
    (tmp_path / "v").mkdir()
    Image.fromarray(textured(32, 32)).save(tmp_path / "v" / "img_00001.jpg")
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'v'} 1 0\n")
    ds = data.VideoFrameDataset(tmp_path / "list.txt")
    (tmp_path / "ds.pkl").write_bytes(pickle.dumps(ds))
    where = {
        how: subprocess.run(
            [sys.executable, "-c", HEAP, how, str(tmp_path / path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        for how, path in (("made", "list.txt"), ("unpickled", "ds.pkl"), ("default", "-"))
    }
    assert where["made"] == where["unpickled"] == ["heap"] * 3 + ["kept"], where
    assert "mapped" in where["default"] and where["default"][-1] == "trimmed", where
