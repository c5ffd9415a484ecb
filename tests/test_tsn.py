"""TSN, 2D and TSM (--mode TSN / 2D, --num_segments, --shift): the networks against torchvision's
own ResNet run frame by frame and an independent temporal shift, mmaction2's TSN / TSM key layout,
the segment sampling rules (TSN's test indices, mmaction2's SampleFrames) and the original's
commands."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torchvision

import data
import flags
import model as models
import predict
import train
import zoo
from conftest import (
    assert_same_weights,
    copy_lists,
    one_line_error,
    run_dir,
    run_main,
    spoil_frames,
    weights,
)

SMALL = [
    "--new_size",
    "36",
    "--crop_size",
    "32",
    "-b",
    "4",
    "--lr",
    "0.01",
    "--dro",
    "0",
    "-j",
    "0",
    "-p",
    "1",
    "-ef",
    "1",
    "--device",
    "cpu",
]
TSN = ["--arch", "resnet18", "--mode", "TSN", "--num_segments", "3", "--t_length", "1"]


def randomise_bn(m):
    """Random BN statistics and affine parameters, so a BN wired wrongly shows in the logits."""
    g = torch.Generator().manual_seed(1)
    for bn in m.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            bn.running_mean.normal_(0, 0.2, generator=g)
            bn.running_var.uniform_(0.5, 1.5, generator=g)
            bn.weight.data.uniform_(0.5, 1.5, generator=g)
            bn.bias.data.normal_(0, 0.2, generator=g)
    return m.eval()


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


# ---- the networks --------------------------------------------------------------------------------
@pytest.mark.parametrize("arch, mode", [("resnet18", "TSN"), ("mobilenet_v2", "2D")])
def test_segment_logits_are_torchvision_per_frame_averaged(arch, mode):
    torch.manual_seed(0)
    net = randomise_bn(models.build_network(arch, 7, mode=mode, num_segments=3)).double()
    ref = randomise_bn(torchvision.models.get_model(arch, num_classes=7)).double()
    ref.load_state_dict(net.state_dict())  # the same names: torchvision's
    x = torch.randn(2, 3, 3, 32, 32, dtype=torch.float64)  # (B, C, N, H, W)
    want = torch.stack([ref(x[:, :, t]) for t in range(3)], 1).mean(1)
    assert rel_err(net(x), want) < 1e-6


def test_tsn_with_a_3d_arch_averages_its_clips():
    net = randomise_bn(
        models.build_network("resnet10_3d", 5, mode="TSN", t_length=4, num_segments=2)
    ).double()
    ref = randomise_bn(models.build_network("resnet10_3d", 5)).double()
    ref.load_state_dict(net.state_dict())
    x = torch.randn(2, 3, 8, 32, 32, dtype=torch.float64)
    assert rel_err(net(x), (ref(x[:, :, :4]) + ref(x[:, :, 4:])) / 2) < 1e-6


def shift_by_hand(x, segments, fold_div):
    """TSM's shift as the paper's code writes it: index assignment into a zero tensor."""
    nt, c, h, w = x.shape
    x = x.reshape(nt // segments, segments, c, h, w)
    fold = c // fold_div
    out = torch.zeros_like(x)
    out[:, :-1, :fold] = x[:, 1:, :fold]
    out[:, 1:, fold : 2 * fold] = x[:, :-1, fold : 2 * fold]
    out[:, :, 2 * fold :] = x[:, :, 2 * fold :]
    return out.reshape(nt, c, h, w)


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_tsm_equals_torchvision_with_a_hooked_shift(arch):
    torch.manual_seed(0)
    net = randomise_bn(models.build_network(arch, 6, mode="TSN", num_segments=4, shift=8)).double()
    ref = randomise_bn(torchvision.models.get_model(arch, num_classes=6)).double()
    ref.load_state_dict(net.state_dict())
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in ref.parameters())
    blocks = [
        m
        for m in ref.modules()
        if isinstance(
            m, (torchvision.models.resnet.BasicBlock, torchvision.models.resnet.Bottleneck)
        )
    ]
    for b in blocks:  # before conv1 only: the identity path keeps the unshifted input
        b.conv1.register_forward_pre_hook(lambda mod, inp: (shift_by_hand(inp[0], 4, 8),))
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    frames = x.transpose(1, 2).reshape(8, 3, 32, 32)
    want = ref(frames).view(2, 4, -1).mean(1)
    assert rel_err(net(x), want) < 1e-6
    no_shift = models.build_network(arch, 6, mode="TSN", num_segments=4).double().eval()
    no_shift.load_state_dict(net.state_dict())
    assert rel_err(no_shift(x), want) > 1e-3  # the shift changes the network


def to_mmaction2(state, shift):
    """Our (torchvision) names -> mmaction2's Recognizer2D + ResNet / ResNetTSM + TSNHead / TSMHead
    names (mmcv ConvModule: .conv / .bn; TemporalShift keeps the conv as .net)."""
    out = {}
    for k, v in state.items():
        parts = k.split(".")
        if parts[0] == "fc":
            out[f"cls_head.fc_cls.{parts[1]}"] = v
        elif parts[0] in ("conv1", "bn1"):
            out[f"backbone.conv1.{'conv' if parts[0] == 'conv1' else 'bn'}.{parts[1]}"] = v
        elif parts[2] == "downsample":
            layer = ["conv", "bn"][int(parts[3])]
            out[f"backbone.{parts[0]}.{parts[1]}.downsample.{layer}.{parts[4]}"] = v
        else:
            n = parts[2][-1]
            kind = "conv" if parts[2].startswith("conv") else "bn"
            net = ".net" if shift and kind == "conv" and n == "1" else ""
            out[f"backbone.{parts[0]}.{parts[1]}.conv{n}.{kind}{net}.{parts[3]}"] = v
    return out


@pytest.mark.parametrize("shift", [0, 8])
def test_mmaction2_tsn_tsm_checkpoints_give_the_saved_models_logits(shift, tmp_path, capsys):
    flags = dict(mode="TSN", num_segments=3, shift=shift)
    src = randomise_bn(models.build_network("resnet50", 400, **flags))
    path = tmp_path / "mm.pth"
    torch.save(
        {
            "meta": {"mmaction_version": "1.2.0"},
            "state_dict": to_mmaction2(src.state_dict(), shift),
        },
        path,
    )
    if shift:
        assert "backbone.layer4.2.conv1.conv.net.weight" in torch.load(path)["state_dict"]
    net = zoo.build_model("resnet50", 400, pretrained=str(path), **flags).eval()
    assert "(mmaction2, 2D): inflated 0, copied" in capsys.readouterr().out
    x = torch.randn(1, 3, 3, 32, 32)
    assert torch.equal(net(x), src(x))
    if shift:  # a TSM file into a TSN model would load and compute another network: refused
        with pytest.raises(ValueError, match="TSM checkpoint.*--shift 8"):
            zoo.build_model("resnet50", 400, pretrained=str(path), mode="TSN", num_segments=3)


def test_wrong_mode_and_arch_are_one_line(lists, tmp_path, capsys):
    for given, needle in [
        (["--mode", "3D", "--num_segments", "3"], "--num_segments 3"),
        (["--mode", "2D", "--arch", "resnet10_3d"], "--mode 2D takes a 2D arch"),
        (["--arch", "resnet18"], "--arch resnet18 is a 2D network"),
        (["--mode", "TSN", "--arch", "mobilenet_v2", "--shift", "8"], "--shift 8 needs"),
        (["--mode", "TSN", "--arch", "resnet18", "--shift", "1"], "--shift 1: must be"),
    ]:
        with pytest.raises(SystemExit) as exc:
            run_main(["ucf101", *lists, *SMALL, "--output_root", str(tmp_path), *given])
        one_line_error(capsys, needle, exc=exc)


# ---- sampling ------------------------------------------------------------------------------------
def test_train_snippets_fall_uniformly_one_per_segment():
    rng, N = np.random.default_rng(0), 3
    for n in (3, 7, 12, 30):
        # (draws, N), 0-based
        draws = np.stack(
            [
                data.sample_indices(n, 1, 1, "train", rng=rng, num_segments=N)[0] - 1
                for _ in range(3000)
            ]
        )
        for k in range(N):
            lo, hi = k * n // N, (k + 1) * n // N  # segment k: frames [lo, hi)
            counts = np.bincount(draws[:, k], minlength=n)
            assert counts[:lo].sum() == 0 and counts[hi:].sum() == 0, (n, k)
            inside = counts[lo:hi]
            assert inside.min() > 0.8 * inside.mean() and inside.max() < 1.2 * inside.mean(), (
                n,
                k,
                inside,
            )


def test_snippets_keep_their_frames_together():
    idx = data.sample_indices(40, 4, 2, "train", rng=np.random.default_rng(1), num_segments=3)[0]
    assert idx.shape == (12,) and all((np.diff(idx.reshape(3, 4), axis=1) == 2).ravel())


def tsn_test_indices(n, N, new_length=1):
    """yjxiong/tsn-pytorch dataset.py, TSNDataSet._get_test_indices, transcribed: tick = (n -
    new_length + 1) / float(N), offsets int(tick / 2.0 + tick * x) for x in range(N) -- in that
    float order -- plus 1; each snippet reads new_length consecutive frames from its offset."""
    tick = (n - new_length + 1) / float(N)
    offsets = np.array([int(tick / 2.0 + tick * x) for x in range(N)]) + 1
    return (offsets[:, None] + np.arange(new_length)).ravel()


def mmaction2_sampleframes_test(n, N):
    """open-mmlab/mmaction2 mmaction/datasets/transforms/loading.py (1.x), SampleFrames(clip_len=1,
    frame_interval=1, num_clips=N, test_mode=True), start_index 1, transcribed: _get_test_clips' 2D
    branch (clip_len == 1): avg_interval = n / float(N), offsets np.arange(N) * avg_interval +
    avg_interval / 2.0; transform() loops them modulo n and casts to int32."""
    avg_interval = n / float(N)
    offsets = np.arange(N) * avg_interval + avg_interval / 2.0
    return np.mod(offsets, n).astype(np.int32) + 1


@pytest.mark.parametrize("N", [3, 8, 25])
def test_test_indices_follow_tsn_and_mmaction2(N):
    """Every length 1..3N: our val / test snippets are TSN's, and placement mmaction2 is mmaction2's
    (both the segment centres; 30 frames at N = 25 is a length where the float order of the sum
    matters)."""
    for n in range(1, 3 * N + 1):
        for mode in ("val", "test"):
            got = data.sample_indices(n, 1, 1, mode, num_segments=N)[0]
            assert (got == tsn_test_indices(n, N)).all(), (n, got)
        mm = data.sample_indices(n, 1, 1, "test", placement="mmaction2", num_segments=N)[0]
        assert (mm == mmaction2_sampleframes_test(n, N)).all(), (n, mm)
        if n >= 5:  # snippets of 5 consecutive frames (TSN's new_length for its flow stream)
            got = data.sample_indices(n, 5, 1, "test", num_segments=N)[0]
            assert (got == tsn_test_indices(n, N, 5)).all(), (n, got)
    if N == 25:
        # 1-based: frame 14
        assert data.sample_indices(30, 1, 1, "test", num_segments=25)[0][12] == 15


def test_multiscale_crops():
    rng, H, W = np.random.default_rng(0), 240, 320
    sizes = [int(240 * s) for s in data.MULTISCALE]
    seen = set()
    for _ in range(500):
        y, x, h, w = data.multiscale_box(H, W, 256, 224, rng)
        assert h in sizes and w in sizes and abs(sizes.index(h) - sizes.index(w)) <= 1
        assert (y, x) in {
            (0, 0),
            (0, 4 * ((W - w) // 4)),
            (4 * ((H - h) // 4), 0),
            (4 * ((H - h) // 4), 4 * ((W - w) // 4)),
            (2 * ((H - h) // 4), 2 * ((W - w) // 4)),
        }
        seen.add((h, w, y == 0, x == 0))
    assert len(seen) > 20


def transcribed_crop_pairs(
    image_w, image_h, input_size, scales=(1, 0.875, 0.75, 0.66), max_distort=1
):
    """tsn-pytorch transforms.py GroupMultiScaleCrop._sample_crop_size's pairs (VideoMAE's copy and
    mmaction2's MultiScaleCrop snap the same way), transcribed, as (h, w)."""
    base_size = min(image_w, image_h)
    crop_sizes = [int(base_size * x) for x in scales]
    crop_h = [input_size[1] if abs(x - input_size[1]) < 3 else x for x in crop_sizes]
    crop_w = [input_size[0] if abs(x - input_size[0]) < 3 else x for x in crop_sizes]
    pairs = []
    for i, h in enumerate(crop_h):
        for j, w in enumerate(crop_w):
            if abs(i - j) <= max_distort:
                pairs.append((w, h))
    return {(h, w) for w, h in pairs}


@pytest.mark.parametrize(
    "H, W, crop", [(258, 344, 224), (240, 320, 224), (48, 64, 40), (256, 340, 224)]
)
def test_multiscale_crop_sizes_snap_as_group_multiscale_crop(H, W, crop):
    """A crop side within 3 px of the input size is the input size (258 px: 225 -> 224; 48 px: 42 ->
    40)."""
    rng = np.random.default_rng(0)
    drawn = {data.multiscale_box(H, W, 256, crop, rng)[2:] for _ in range(400)}
    assert drawn == {(float(h), float(w)) for h, w in transcribed_crop_pairs(W, H, (crop, crop))}


# ---- the trainer ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_original_tsn_and_2d_commands_train_evaluate_predict(lists, tmp_path, capsys):
    tsn = [
        "ucf101",
        *lists,
        *TSN,
        "--epochs",
        "1",
        *SMALL,
        "--output_root",
        str(tmp_path),
        "--train_crop",
        "multiscale",
    ]
    run_main(tsn)
    folder = run_dir(tmp_path, tsn)
    assert folder.name == "ucf101_resnet18_TSN_segments3_length1_stride4_dropout0.0"
    ckpt = str(folder / "checkpoint.pth")
    # --evaluate rebuilds the TSN model from the checkpoint's flags: 2 views x 3 crops of 3 segments
    run_main(
        [
            "ucf101",
            *lists,
            "--evaluate",
            "--resume",
            ckpt,
            "--test_clips",
            "2",
            "--test_crops",
            "3",
            "--device",
            "cpu",
            "-j",
            "0",
            "--output_root",
            str(tmp_path / "e"),
        ]
    )
    assert "(8 videos, 2x3 views)" in capsys.readouterr().out
    video = str(Path(lists[1]).parent / Path(lists[1]).read_text().split()[0])  # a val frame folder
    assert predict.main(["--resume", ckpt, video, "--device", "cpu"]) in (0, None)
    assert " 1. " in capsys.readouterr().out.split(video)[-1]  # its top-5 lines
    two_d = [
        "ucf101",
        *lists,
        "--arch",
        "resnet18",
        "--mode",
        "2D",
        "--epochs",
        "1",
        *SMALL,
        "--output_root",
        str(tmp_path),
    ]
    run_main(two_d)
    assert run_dir(tmp_path, two_d).name == "ucf101_resnet18_2D_length1_stride4_dropout0.0"


@pytest.mark.slow
def test_tsm_resume_is_exact(lists, tmp_path):
    argv = [
        "ucf101",
        *lists,
        *TSN,
        "--shift",
        "8",
        *SMALL,
        "--dro",
        "0.5",
        "-b",
        "2",
        "--iter_size",
        "2",
    ]
    run_main([*argv, "--epochs", "2", "--output_root", str(tmp_path / "a")])
    run_main([*argv, "--epochs", "1", "--output_root", str(tmp_path / "b")])
    run_main([*argv, "--epochs", "2", "--output_root", str(tmp_path / "b"), "--resume", "auto"])
    name = flags.run_dir_name(train.parse_args([*argv, "--epochs", "2"]))
    assert_same_weights(
        weights(tmp_path / "a" / name / "checkpoint.pth"),
        weights(tmp_path / "b" / name / "checkpoint.pth"),
    )


@pytest.mark.slow
def test_bench_compare_rows_for_tsn_and_tsm():
    import bench

    out = bench.main(["model", "--compare", "--iters", "0"])["compare"]
    tsn, tsm, i3d = out["TSN-R50 8 segments"], out["TSM-R50 8 segments"], out["I3D-R50 16x4"]
    resnet50 = torchvision.models.resnet50(num_classes=400)
    # no shift params
    assert tsn["params"] == tsm["params"] == sum(p.numel() for p in resnet50.parameters())
    per_frame = bench.count("resnet50", 400, 1, 224, mode="2D")[1]
    assert (
        abs(tsn["gmacs_per_video"] - 8 * per_frame) < 1e-6
        and abs(i3d["gmacs_per_video"] - 56.8) < 0.1
    )


def test_tsn_snippets_from_a_video_file_are_the_indexed_frames(tmp_path):
    import videos  # tests/videos.py: frames that carry their index in their pixels

    videos.mpeg4_avi(str(tmp_path / "v.avi"))
    (tmp_path / "list.txt").write_text(f"v.avi {videos.FRAMES} 0\n")
    ds = data.VideoFrameDataset(
        tmp_path / "list.txt",
        mode="test",
        t_length=2,
        t_stride=3,
        num_segments=5,
        num_clips=2,
        new_size=64,
        crop_size=64,
        video_decoder="pyav",
    )
    got = {}

    def read(video, numbers):  # the real decode, watched
        frames = ds.load_frames(video, numbers)
        got.update(numbers=list(numbers), index=[videos.frame_index(f) for f in frames])
        return frames

    clip, _ = ds.load_clip(ds.videos[0], np.random.default_rng(0), read=read)
    assert clip.shape == (2, 3, 10, 64, 64)  # 2 views of 5 snippets x 2 frames
    want = data.sample_indices(videos.FRAMES, 2, 3, "test", num_clips=2, num_segments=5)
    assert got["numbers"] == sorted(set(want.ravel().tolist()))
    # frame n of the list is the file's frame n - 1
    assert got["index"] == [n - 1 for n in got["numbers"]]


def test_readme_tsn_command_parses_as_the_original(tmp_path):
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = text[text.index("--mode TSN \\") - 80 :]
    cmd = (
        block[block.index("python train.py") : block.index("```")].replace("\\\n", " ").split()[2:]
    )
    args = train.parse_args([*cmd, "--output_root", str(tmp_path)])
    flags.check_args(args)
    assert (args.mode, args.arch, args.num_segments, args.t_length, args.pretrained) == (
        "TSN",
        "resnet50",
        3,
        1,
        "imagenet",
    )


def test_bad_video_is_replaced_in_tsn_mode(lists, tmp_path, capsys):
    folder, bad_video = copy_lists(lists, tmp_path)
    spoil_frames(folder, bad_video)  # frames 2..9 of 10: every segment's snippet hits one
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TSN,
        *SMALL,
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path),
    ]
    run_main(args)
    (line,) = (run_dir(tmp_path, args) / "bad_videos.txt").read_text().splitlines()
    assert "train.txt:1:" in line and bad_video in line
    assert capsys.readouterr().err.count("bad video replaced") == 1
