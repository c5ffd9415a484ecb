"""The transformers' recipe: AdamW and its parameter groups (layer decay, no decay on 1-D
parameters), the warmup + cosine lr, MixUp / CutMix with soft targets, per-clip RandAugment / colour
jitter / random erasing, repeated augmentation, drop path and the EMA -- each against torchvision's
own transforms or a formula written out here, and all of them at once through an exact mid-epoch
resume."""

import math
import signal
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn as nn
from torchvision.transforms import v2

import data
import flags
import model as models
import predict
import prepare
import rundir
import train
from conftest import (
    REPO,
    TINY,
    assert_same_weights,
    logs,
    one_line_error,
    run_dir,
    run_main,
    write_list,
)

# Every option of the recipe at once, on the tiny arch (drop path aside: resnet10_3d has none).
ALL = [
    "--opt",
    "adamw",
    "--wd",
    "0.05",
    "--norm-weight-decay",
    "0.01",
    "--lr_policy",
    "cosine",
    "--lr-min",
    "1e-5",
    "--warmup",
    "0.5",
    "--lr-warmup-start",
    "1e-6",
    "--layer-decay",
    "0.75",
    "--mixup-alpha",
    "0.8",
    "--cutmix-alpha",
    "1.0",
    "--label-smoothing",
    "0.1",
    "--auto-augment",
    "ra",
    "--ra-magnitude",
    "7",
    "--ra-num-ops",
    "4",
    "--random-erase",
    "0.25",
    "--color-jitter",
    "0.4",
    "--ra-reps",
    "2",
    "--model-ema",
    "--model-ema-decay",
    "0.9",
    "--use-ema",
    "--clip-grad",
    "1",
]


def mix_args(*flags, num_classes=5):
    a = train.parse_args(["ucf101", "t.txt", "v.txt", *flags])
    a.num_classes = num_classes
    return a


@pytest.mark.parametrize(
    "flags, kind", [(["--mixup-alpha", "0.8"], v2.MixUp), (["--cutmix-alpha", "1.0"], v2.CutMix)]
)
def test_mixing_is_torchvisions_with_one_box_for_every_frame(flags, kind):
    mix = train.mixing(mix_args(*flags))
    B, C, T, H, W = 4, 3, 3, 8, 10
    x, labels = torch.randn(B, C, T, H, W), torch.tensor([0, 1, 2, 4])
    for seed in range(6):
        torch.manual_seed(seed)
        ours, targets = mix(x, labels)
        # torchvision's op on the batch as (B, C*T, H, W) images: one lambda, and for CutMix one box
        # over every channel of every frame. Draws first: RandomApply's coin, RandomChoice's pick.
        torch.manual_seed(seed)
        torch.rand(1), torch.multinomial(torch.tensor([1.0]), 1)
        alpha = float(flags[1])
        ref, ref_targets = kind(alpha=alpha, num_classes=5)(x.reshape(B, C * T, H, W), labels)
        assert torch.equal(ours, ref.reshape(B, C, T, H, W)) and torch.equal(targets, ref_targets)
        assert targets.shape == (B, 5) and torch.allclose(targets.sum(1), torch.ones(B))
        if kind is v2.CutMix:  # the same pixels replaced in every frame
            changed = ours != x
            assert torch.equal(changed, changed[:, :1, :1].expand_as(changed))


def test_switch_and_prob_pick_between_mixup_cutmix_and_none():
    x, labels = torch.randn(4, 3, 2, 8, 8), torch.arange(4)
    kinds = set()
    mix = train.mixing(mix_args("--mixup-alpha", "0.8", "--cutmix-alpha", "1", "--mix-prob", "0.6"))
    for seed in range(30):
        torch.manual_seed(seed)
        out, t = mix(x, labels)
        changed = (out != x).all(1).all(1)  # (B, H, W): MixUp changes every pixel, CutMix a box
        kinds.add("none" if t.dim() == 1 else "mixup" if changed.all() else "cutmix")
    assert kinds == {"none", "mixup", "cutmix"}
    off = train.mixing(mix_args())
    assert off(x, labels)[0] is x


def test_soft_target_loss_is_the_hand_computed_cross_entropy():
    # The trainer's criterion (main's) on mixed targets, with label smoothing, in float64.
    torch.manual_seed(0)
    logits = torch.randn(6, 5, dtype=torch.float64)
    mix = train.mixing(mix_args("--mixup-alpha", "0.8", "--cutmix-alpha", "1.0"))
    _, targets = mix(torch.randn(6, 3, 2, 8, 8), torch.tensor([0, 1, 2, 3, 4, 0]))
    targets = targets.double()
    assert targets.dim() == 2 and (targets > 0).sum(1).max() == 2  # really mixed
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(logits, targets)
    # timm / PySlowFast: smooth each one-hot, then mix (linear: same)
    smoothed = targets * 0.9 + 0.1 / 5
    by_hand = -(smoothed * (logits - logits.exp().sum(1, keepdim=True).log())).sum(1).mean()
    assert abs(loss.item() - by_hand.item()) / by_hand.item() < 1e-6


AUGMENTS = {
    "ra": dict(rand_augment=True, num_ops=4, magnitude=9),
    "jitter": dict(color_jitter=0.4),
    "erase": dict(random_erase=1.0),
    "all": dict(rand_augment=True, num_ops=4, magnitude=7, color_jitter=0.4, random_erase=0.25),
}


@pytest.mark.parametrize("name", AUGMENTS)
def test_clip_augmentation_is_one_draw_per_clip_from_the_samples_generator(name):
    augment = data.clip_transforms(**AUGMENTS[name])
    frame = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (24, 28, 3), dtype=np.uint8))
    clip = frame.expand(5, -1, -1, -1).contiguous()  # (N, H, W, 3): identical frames
    outs = {}
    for epoch in (0, 1):
        for index in range(4):
            out = data.apply_transforms(clip, augment, np.random.default_rng([0, epoch, index]))
            assert out.shape == clip.shape and out.dtype == torch.uint8
            assert (out == out[:1]).all(), "frames of one clip got different draws"
            again = data.apply_transforms(clip, augment, np.random.default_rng([0, epoch, index]))
            assert torch.equal(out, again)
            outs[epoch, index] = out
    assert any(not torch.equal(outs[0, i], clip) for i in range(4))  # it augments
    assert any(not torch.equal(outs[0, i], outs[1, i]) for i in range(4))  # epochs draw anew
    state = torch.get_rng_state()
    data.apply_transforms(clip, augment, np.random.default_rng(1))
    assert torch.equal(torch.get_rng_state(), state)  # torch's global stream (dropout's) untouched


def still_video(tmp_path, n=8):
    """A one-video list whose frames are all the same picture."""
    prepare.make_synth(tmp_path / "s", classes=1, videos=1, frames=1, size=(48, 40))
    src = next((tmp_path / "s").rglob("img_00001.jpg"))
    folder = tmp_path / "still"
    folder.mkdir()
    for i in range(1, n + 1):
        (folder / f"img_{i:05d}.jpg").write_bytes(src.read_bytes())
    return write_list(tmp_path / "still.txt", [f"{folder} {n} 0"])


def test_the_dataset_augments_every_rep_of_a_clip_alike_over_its_frames(tmp_path):
    augment = data.clip_transforms(**AUGMENTS["all"])
    ds = data.VideoFrameDataset(
        still_video(tmp_path),
        t_length=4,
        t_stride=2,
        new_size=36,
        crop_size=32,
        augment=augment,
        reps=3,
    )
    clip, _, info = ds[0]
    assert clip.shape == (3, 3, 4, 32, 32) and info["box"].shape == (3, 4)  # (reps, C, T, H, W)
    assert (clip == clip[:, :, :1]).all()  # identical frames stay identical
    assert not torch.equal(clip[0], clip[1])  # the reps differ
    assert torch.equal(ds[0][0], clip)
    ds.set_epoch(1)
    assert not torch.equal(ds[0][0], clip)
    # rep 0 draws what a plain clip draws first: without the augmentation it is today's clip
    plain = data.VideoFrameDataset(
        still_video(tmp_path / "p"),
        t_length=4,
        t_stride=2,
        new_size=36,
        crop_size=32,
        finish_crop=True,
    )
    reps = data.VideoFrameDataset(
        still_video(tmp_path / "r"),
        t_length=4,
        t_stride=2,
        new_size=36,
        crop_size=32,
        finish_crop=True,
        reps=2,
    )
    assert torch.equal(reps[0][0][0], plain[0][0])


def test_lr_follows_warmup_from_start_then_cosine_to_the_floor():
    a = train.parse_args(
        [
            "ucf101",
            "t",
            "v",
            "--lr",
            "0.1",
            "--lr_policy",
            "cosine",
            "--epochs",
            "5",
            "--warmup",
            "2",
            "--lr-warmup-start",
            "0.001",
            "--lr-min",
            "0.01",
        ]
    )
    n = 3  # steps per epoch
    for step in range(5 * n + 2):
        cos = 0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * min(1, step / n / 5))) / 2
        want = 0.001 + (cos - 0.001) * (step + 1) / 6 if step < 6 else cos
        assert abs(train.lr_at(a, step, n) - want) < 1e-15, step
    assert train.lr_at(a, 0, n) > 0.001 and abs(train.lr_at(a, 5 * n, n) - 0.01) < 1e-15


def test_mvit_groups_take_layer_decay_and_no_decay_on_1d_parameters():
    a = train.parse_args(
        [
            "ucf101",
            "t",
            "v",
            "--arch",
            "mvit_v2_s",
            "--opt",
            "adamw",
            "--wd",
            "0.05",
            "--layer-decay",
            "0.75",
        ]
    )
    m = models.build_network("mvit_v2_s", 10)
    groups = train.param_groups(m, a)
    where = {id(p): g for g in groups for p in g["params"]}
    L = 16
    for name, p in m.named_parameters():
        i = (
            0
            if name.startswith(("conv_proj.", "pos_encoding."))
            else L + 1
            if name.startswith(("norm.", "head."))
            else int(name.split(".")[1]) + 1
        )
        g = where[id(p)]
        assert g["lr_scale"] == 0.75 ** (L + 1 - i), name
        assert g["weight_decay"] == (0.0 if p.ndim == 1 else 0.05), name
    assert sum(len(g["params"]) for g in groups) == len(list(m.parameters()))
    assert groups[0]["lr_scale"] == 1  # the head's: the log's lr


class TokenNet(nn.Module):
    """A new arch with a learned class token and a position table beside its weights."""

    def __init__(self, num_classes):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos_table = nn.Parameter(torch.zeros(1, 4, 8))
        self.fc = nn.Linear(8, num_classes)


def test_the_tokens_an_arch_entry_names_take_no_weight_decay(monkeypatch):
    """Weight decay: a new arch's token named in its model.ARCHS entry (Arch.no_decay) joins the 1-D
    parameters (--norm-weight-decay, default 0); its other matrices keep --wd, and no list elsewhere
    needs the name."""
    entry = models.Arch(lambda spec: TokenNet(spec.num_classes), ("3D",), no_decay=("cls_token",))
    monkeypatch.setitem(models.ARCHS, "token_net", entry)
    a = train.parse_args(["ucf101", "t", "v", "--arch", "token_net", "--wd", "0.05"])
    m = models.build_network("token_net", 10)
    where = {id(p): g["weight_decay"] for g in train.param_groups(m, a) for p in g["params"]}
    decay = {name: where[id(p)] for name, p in m.named_parameters()}
    assert decay == {"cls_token": 0.0, "pos_table": 0.05, "fc.weight": 0.05, "fc.bias": 0.0}


@pytest.mark.slow
def test_adamw_decays_only_weights_and_the_step_scales_each_layers_lr(lists, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        torch.optim.AdamW,
        "step",
        lambda self, *a, **k: seen.append([(g["lr"], g["lr_scale"]) for g in self.param_groups]),
    )
    run_main(
        [
            "ucf101",
            *lists,
            *TINY,
            "--opt",
            "adamw",
            "--layer-decay",
            "0.5",
            "--epochs",
            "1",
            "--lr_policy",
            "cosine",
            "--output_root",
            str(tmp_path),
        ]
    )
    a = train.parse_args(["ucf101", *lists, *TINY, "--lr_policy", "cosine", "--epochs", "1"])
    assert len(seen) == 2 and {s for _, s in seen[0]} == {0.5**k for k in range(6)}
    for step, groups in enumerate(seen):
        assert all(lr == train.lr_at(a, step, 2) * s for lr, s in groups)
    # zero gradients: AdamW moves a parameter by lr x wd x it only (decoupled decay), never a 1-D
    # one
    a = train.parse_args(["ucf101", *lists, *TINY, "--opt", "adamw", "--wd", "0.1"])
    a.num_classes = 4
    rt = SimpleNamespace(
        device=torch.device("cpu"),
        memory_format=torch.contiguous_format,
        local_rank=0,
        rank=0,
        mean=None,
        std=None,
    )
    net = train.build_net(a, rt)
    monkeypatch.undo()
    before = {n: p.detach().clone() for n, p in net.bare.named_parameters()}
    for p in net.bare.parameters():
        p.grad = torch.zeros_like(p)
    for g in net.optimizer.param_groups:
        g["lr"] = 1.0
    net.optimizer.step()
    for n, p in net.bare.named_parameters():
        assert torch.allclose(p, before[n] * (0.9 if p.ndim > 1 else 1.0)), n


def test_drop_path_sets_torchvisions_stochastic_depth():
    m = models.build_network("swin3d_t", 5, drop_path=0.3)
    ps = [mod.p for mod in m.modules() if type(mod).__name__ == "StochasticDepth"]
    assert ps[0] == 0 and abs(max(ps) - 0.3) < 1e-12 and ps == sorted(ps)
    assert max(
        mod.p
        for mod in models.build_network("mvit_v2_s", 5).modules()
        if type(mod).__name__ == "StochasticDepth"
    ) == pytest.approx(0.2)  # the builder's default


@pytest.mark.parametrize(
    "given, needle",
    [
        (["--drop-path", "0.2", "--arch", "resnet50_3d"], "--drop-path"),
        (["--drop-path", "1.5", "--arch", "mvit_v2_s"], "--drop-path"),
        (["--layer-decay", "0.75", "--arch", "s3d"], "--layer-decay"),
        (["--layer-decay", "0"], "--layer-decay"),
        (["--layer-decay", "1.5"], "--layer-decay"),
        (["--opt", "lamb"], "--opt"),
        (["--lr-min", "0.1"], "--lr-min"),
        (["--lr-min", "1e-5"], "--lr-min"),  # step policy: no floor
        (["--lr-warmup-start", "1e-6"], "--lr-warmup-start"),
        (["--norm-weight-decay", "0.1", "--bn_bias_wd"], "--norm-weight-decay"),
        (["--mixup-alpha", "-1"], "--mixup-alpha"),
        (["--mix-prob", "1.5"], "--mix-prob"),
        (["--mix-switch-prob", "nan"], "--mix-switch-prob"),
        (["--auto-augment", "aa"], "--auto-augment"),
        (["--ra-magnitude", "31"], "--ra-magnitude"),
        (["--ra-num-ops", "0"], "--ra-num-ops"),
        (["--random-erase", "2"], "--random-erase"),
        (["--color-jitter", "-0.1"], "--color-jitter"),
        (["--ra-reps", "0"], "--ra-reps"),
        (["--model-ema-decay", "1"], "--model-ema-decay"),
        (["--model-ema-steps", "0"], "--model-ema-steps"),
        (["--use-ema"], "--use-ema"),
        (
            ["--random-erase", "0.25", "--decode_device", "cuda", "--device", "cpu"],
            "--decode_device",
        ),
    ],
)
def test_bad_recipe_flags_are_refused_in_one_line_before_anything_is_read(given, needle, capsys):
    with pytest.raises(SystemExit) as e:
        flags.check_args(train.parse_args(["ucf101", "/no/train.txt", "/no/val.txt", *given]))
    one_line_error(capsys, needle, exc=e)


@pytest.mark.slow
def test_everything_on_resumes_mid_epoch_exactly_ema_included(lists, tmp_path, monkeypatch):
    # The cheap twin of tests/test_exact.py --trainer-flags="<ALL>": a SIGTERM after the first
    # optimizer step, then --resume, equals the run never stopped: weights, EMA weights, optimizer
    # state.
    common = ["ucf101", *lists, *TINY, *ALL, "--epochs", "2", "-j", "2", "--dro", "0.5"]
    run_main([*common, "--output_root", str(tmp_path / "whole")])
    original = train.lr_at

    def stop_at(a, step, n):
        if step == 2:  # epoch 1's first step: it saves after it, mid-epoch
            rundir.STOP["signal"] = signal.SIGTERM
        return original(a, step, n)

    monkeypatch.setattr(train, "lr_at", stop_at)
    with pytest.raises(SystemExit) as e:
        run_main([*common, "--output_root", str(tmp_path / "cut")])
    rundir.STOP["signal"] = 0
    monkeypatch.undo()
    assert e.value.code == 128 + signal.SIGTERM
    cut = run_dir(tmp_path / "cut", common)
    saved = torch.load(cut / "checkpoint.pth", weights_only=False)
    assert (saved["epoch"], saved["iter"], saved["model_ema_updates"]) == (1, 1, 3)
    run_main([*common, "--output_root", str(tmp_path / "cut"), "--resume", "auto"])
    a, b = (
        torch.load(run_dir(tmp_path / r, common) / "checkpoint.pth", weights_only=False)
        for r in ("whole", "cut")
    )
    assert_same_weights(a["model"], b["model"])
    assert_same_weights(a["model_ema"], b["model_ema"])
    assert a["model_ema_updates"] == b["model_ema_updates"] == 4
    assert not all(torch.equal(a["model"][k], a["model_ema"][k]) for k in a["model"])
    log = logs(run_dir(tmp_path / "whole", common))[-1]
    assert log["mixed"] and log["val_top1_ema"] is not None


@pytest.mark.slow
def test_evaluate_and_predict_use_the_ema_weights_when_asked(lists, tmp_path, capsys):
    common = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*common, "--epochs", "1", "--model-ema", "--model-ema-decay", "0.5"])
    ckpt = run_dir(tmp_path, common) / "checkpoint.pth"
    saved = torch.load(ckpt, weights_only=False)
    log = logs(run_dir(tmp_path, common))[-1]
    raw = run_main([*common, "--evaluate", "--resume", str(ckpt)])
    ema = run_main([*common, "--evaluate", "--resume", str(ckpt), "--use-ema"])
    assert raw[0] == pytest.approx(log["val_top1"]) and ema[0] == pytest.approx(log["val_top1_ema"])
    # one file each
    assert len(list(run_dir(tmp_path, common).glob("per_class_1x1_ours_*.csv"))) == 2
    model, _, _ = predict.load_checkpoint(str(ckpt), "cpu", 1, 1, use_ema=True)
    assert_same_weights(model.state_dict(), saved["model_ema"])
    capsys.readouterr()
    for given, needle in (
        (["--opt", "adamw"], "--opt"),
        (["--layer-decay", "0.5"], "--layer-decay"),
    ):
        with pytest.raises(SystemExit) as e:  # they shape the optimizer's state and groups
            run_main([*common, "--epochs", "2", "--resume", "auto", "--model-ema", *given])
        one_line_error(capsys, needle, "cannot change", exc=e)
    plain = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path / "plain"), "--epochs", "1"]
    run_main(plain)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main(
            [
                *plain,
                "--evaluate",
                "--use-ema",
                "--resume",
                str(run_dir(tmp_path / "plain", plain) / "checkpoint.pth"),
            ]
        )
    one_line_error(capsys, "--use-ema", "no EMA weights", exc=e)


@pytest.mark.slow
def test_mvit_v2_s_with_its_recipe_trains_a_step_and_evaluates_on_cpu(tmp_path):
    # The Kinetics recipe as written (AdamW, drop path, mixing, RandAugment, 2 reps...) on one
    # 16-frame video: one optimizer step of 2 clips, then one validation, on CPU.
    prepare.make_synth(tmp_path, classes=1, videos=1, frames=16, size=(64, 48))
    recipe = f"@{REPO / 'recipes' / 'kinetics_mvitv2_s.txt'}"
    common = [
        "ucf101",
        str(tmp_path / "train.txt"),
        str(tmp_path / "val.txt"),
        recipe,
        "-b",
        "1",
        "--epochs",
        "1",
        "-j",
        "0",
        "--device",
        "cpu",
        "--output_root",
        str(tmp_path / "o"),
    ]
    top1 = run_main(common)
    log = logs(run_dir(tmp_path / "o", common))[-1]
    assert math.isfinite(log["train_loss"]) and log["val_top1"] == top1 and log["mixed"]


@pytest.mark.slow
def test_a_small_arch_with_every_option_on_learns_the_demo_motions(tmp_path):
    # The demo's synthetic clips (2 classes: a patch moving right or left), resnet10_3d from scratch
    # with AdamW, layer decay, warmup from a start lr, mixing, smoothing, RandAugment, jitter,
    # erasing, 2 reps and the EMA: the loss falls and validation beats chance (50%). Measured: 67%
    # after 6 epochs.
    prepare.make_synth(tmp_path, classes=2, videos=48, frames=12, size=(48, 40))
    common = [
        "demo",
        str(tmp_path / "train.txt"),
        str(tmp_path / "val.txt"),
        "-j",
        "0",
        "-b",
        "8",
        "--t_length",
        "6",
        "--t_stride",
        "2",
        "--new_size",
        "36",
        "--crop_size",
        "32",
        "--epochs",
        "6",
        "--opt",
        "adamw",
        "--lr",
        "1e-3",
        "--wd",
        "0.05",
        "--auto-augment",
        "ra",
        "--ra-magnitude",
        "5",
        "--ra-num-ops",
        "2",
        "--random-erase",
        "0.25",
        "--color-jitter",
        "0.4",
        "--ra-reps",
        "2",
        "--mixup-alpha",
        "0.2",
        "--cutmix-alpha",
        "0.2",
        "--label-smoothing",
        "0.1",
        "--layer-decay",
        "0.9",
        "--model-ema",
        "--model-ema-decay",
        "0.8",
        "--lr-warmup-start",
        "1e-3",
        "--output_root",
        str(tmp_path / "o"),
    ]
    run_main(common)
    log = logs(run_dir(tmp_path / "o", common))
    assert log[-1]["train_loss"] < log[0]["train_loss"]
    assert max(r["val_top1"] for r in log) >= 60 and max(r["val_top1_ema"] for r in log) >= 60


def test_reps_reach_the_step_as_b_times_k_clips_with_their_own_boxes(lists):
    # A GPU model's path (the crop finished in the step from each rep's box): the batch of b videos
    # x K reps is b*K clips, video-major, labels repeated; rep 0 of each video is the clip a plain
    # run draws.
    kw = dict(t_length=4, t_stride=2, new_size=36, crop_size=32)
    plain, reps = (data.VideoFrameDataset(lists[0], reps=k, **kw) for k in (1, 3))
    rt = SimpleNamespace(
        device=torch.device("cpu"),
        memory_format=torch.contiguous_format,
        mean=data.MEAN,
        std=data.STD,
    )
    x1, y1 = train.to_model_input(*data.collate([plain[0], plain[1]]), rt)
    x3, y3 = train.to_model_input(*data.collate([reps[0], reps[1]]), rt)
    assert x3.shape == (6, 3, 4, 32, 32) and y3.tolist() == [
        y for y in y1.tolist() for _ in range(3)
    ]
    assert torch.equal(x3[0], x1[0]) and torch.equal(x3[3], x1[1])
    assert not torch.equal(x3[0], x3[1])


def test_features_and_export_take_use_ema(tmp_path, capsys):
    import export
    import features

    a = export.get_parser().parse_args(
        ["--resume", "c.pth", "--use-ema", "--format", "onnx", "m.onnx"]
    )
    assert a.use_ema
    # features: the EMA of what? refused before anything is read
    with pytest.raises(SystemExit) as e:
        features.main(
            ["/no/v.txt", "--arch", "resnet10_3d", "--use-ema", "--out", str(tmp_path / "f")]
        )
    one_line_error(capsys, "--use-ema", exc=e)


def test_a_recipe_is_found_from_any_folder_and_its_pretrained_can_be_turned_off(
    tmp_path, monkeypatch
):
    """`@recipes/x.txt` from another working folder reads the project's recipe (a file of that name
    in the working folder comes first); `--pretrained none` after a recipe trains from scratch."""
    monkeypatch.chdir(tmp_path)
    parse = train.get_args_parser().parse_args
    args = parse(["ucf101", "a.txt", "b.txt", "@recipes/ucf101_i3d.txt"])
    assert (args.arch, args.epochs, args.pretrained) == ("resnet50_3d", 95, "imagenet")
    for off in ("none", "None", ""):
        args = parse(["ucf101", "a.txt", "b.txt", "@recipes/ucf101_i3d.txt", "--pretrained", off])
        assert args.pretrained is None and args.epochs == 95
        assert "--pretrained" not in rundir.args_file(train.get_args_parser(), args)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "ucf101_i3d.txt").write_text("--epochs 3\n")
    assert parse(["ucf101", "a.txt", "b.txt", "@recipes/ucf101_i3d.txt"]).epochs == 3


@pytest.mark.parametrize("recipe", ["demo_multilabel", "demo_verbnoun"])
def test_the_label_demos_commands_make_data_their_recipe_reads(recipe, tmp_path, monkeypatch):
    """The two commands in the demo recipe's header, as written (a tenth of the videos): `prepare.py
    synth --kind` writes the lists and class names of the dataset the train line names, and the
    train line with the recipe passes the checks and reads clips of the recipe's size, spanning the
    synthetic videos without running past their end, with their labels (two directions; a verb and a
    noun)."""
    header = (REPO / "recipes" / f"{recipe}.txt").read_text().splitlines()
    synth, run = (line.split()[3:] for line in header if line.startswith("#     python"))
    s = prepare._parser().parse_args(synth)
    monkeypatch.chdir(tmp_path)
    prepare.make_synth_labels(s.out, s.kind, s.videos // 10, s.frames, s.size)
    assert (
        run[0] == prepare.SYNTH_KINDS[s.kind]
        and (tmp_path / s.out / f"{run[0]}_classes.txt").exists()
    )
    args = train.parse_args([*run, "--device", "cpu", "--output_root", str(tmp_path / "o")])
    flags.check_args(args)
    assert args.t_length * args.t_stride <= s.frames and args.crop_size <= min(s.size)
    x, y, _ = train.make_dataset(args, args.val_list, "val")[0]
    assert x.shape[-3:] == (args.t_length, args.crop_size, args.crop_size)
    if s.kind == "multilabel":
        assert args.multi_label and y.shape == (4,) and y.sum() == 2
    else:
        assert args.heads == [4, len(prepare.SYNTH_COLOURS)] and len(y) == 2
