"""VideoMAE pretraining (pretrain.py): the masks, model and loss against the official code, the
picture, a run that fine-tunes, and the one-line refusals.

The reference is OpenGVLab/VideoMAEv2 (MIT; tests/reference/videomaev2, vendored unchanged with its
LICENSE): models/modeling_pretrain.py (PretrainVisionTransformer) and dataset/masking_generator.py
(TubeMaskingGenerator). engine_for_pretraining.py's target and loss lines need einops and its utils
module, so `official_loss` below transcribes them, the rearranges as explicit per-patch slices.
Resume and worker-count exactness: tests/test_exact.py with --trainer-flags (docs/pretrain.md).
"""

import argparse
import importlib
import itertools
import json
from functools import partial

import math
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
import torch
import torch.nn as nn
from PIL import Image

import data
import decode
import flags
import model as models
import pretrain
import report
import train
import vit
from conftest import ENV, REPO, TINY, one_line_error, run_main, tiny_checkpoint

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # IMAGENET_DEFAULT_MEAN / STD


def reference(name):
    """A module of the vendored official code. Its models import timm: a test needing them skips
    without it (every other test here runs after `pip install -r requirements.txt` alone)."""
    if name.startswith("modeling"):
        pytest.importorskip("timm", reason="the vendored VideoMAEv2 models import timm")
    return importlib.import_module(f"tests.reference.videomaev2.{name}")


def official_model(depth=4, decoder_depth=4):
    """modeling_pretrain.py's PretrainVisionTransformer at vit_t16's size (192 wide, 3 heads), its
    pretrain_videomae_* arguments (qkv_bias, LayerNorm eps 1e-6), for 4 x 64 x 64 clips."""
    return reference("modeling_pretrain").PretrainVisionTransformer(
        img_size=64,
        patch_size=16,
        encoder_embed_dim=192,
        encoder_depth=depth,
        encoder_num_heads=3,
        decoder_num_classes=1536,
        decoder_embed_dim=96,
        decoder_depth=decoder_depth,
        decoder_num_heads=3,
        mlp_ratio=4,
        qkv_bias=True,
        norm_layer=partial(nn.LayerNorm, eps=1e-6),
        all_frames=4,
        tubelet_size=2,
    )


def official_loss(model, images, bool_masked_pos, normlize_target=True, patch_size=16):
    """engine_for_pretraining.py train_one_epoch's loss (no decoder masking: decode_masked_pos =
    ~bool_masked_pos), its rearranges written as slices."""
    decode_masked_pos = ~bool_masked_pos
    mean = torch.as_tensor(MEAN, dtype=images.dtype)[None, :, None, None, None]
    std = torch.as_tensor(STD, dtype=images.dtype)[None, :, None, None, None]
    unnorm_images = images * std + mean
    B, C, T, H, W = images.shape
    squeeze = torch.stack(  # 'b c (t p0) (h p1) (w p2) -> b (t h w) (p0 p1 p2) c'
        [
            unnorm_images[:, :, 2 * t : 2 * t + 2, 16 * h : 16 * h + 16, 16 * w : 16 * w + 16]
            .permute(0, 2, 3, 4, 1)
            .reshape(B, -1, C)
            for t, h, w in itertools.product(range(T // 2), range(H // 16), range(W // 16))
        ],
        1,
    )
    if normlize_target:
        images_norm = (squeeze - squeeze.mean(dim=-2, keepdim=True)) / (
            squeeze.var(dim=-2, unbiased=True, keepdim=True).sqrt() + 1e-6
        )
        images_patch = images_norm.reshape(B, squeeze.shape[1], -1)  # 'b n p c -> b n (p c)'
    else:
        images_patch = squeeze.reshape(B, squeeze.shape[1], -1)  # '... (p0 p1 p2 c)'
    B, N, C = images_patch.shape
    labels = images_patch[~decode_masked_pos].reshape(B, -1, C)
    outputs = model(images, bool_masked_pos, decode_masked_pos)
    loss = (outputs - labels) ** 2
    loss = loss.mean(dim=-1)
    cal_loss_mask = bool_masked_pos[~decode_masked_pos].reshape(B, -1)
    return (loss * cal_loss_mask).sum() / cal_loss_mask.sum()


def random_pair(seed=0):
    """Our vit_t16 pretraining model (4 x 64 px clips) with random weights (every q/v bias
    non-zero), and the official model holding the same weights through official_state, strictly."""
    torch.manual_seed(seed)
    ours = pretrain.PretrainViT("vit_t16", 4, 64, decoder_depth=2)
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.05)
    official = official_model(depth=4, decoder_depth=2)
    official.load_state_dict(pretrain.official_state(ours.state_dict()), strict=True)
    return ours.double().eval(), official.double().eval()


def test_mask_is_the_official_tube_mask():
    grid = (2, 4, 4)
    for seed, ratio in itertools.product(range(5), (0.9, 0.75, 0.6)):  # 0.6: 9.6 -> 9
        np.random.seed(seed)
        # np.random.shuffle of [0] * (n - k) + [1] * k
        ref = reference("masking_generator").TubeMaskingGenerator(grid, ratio)()
        np.random.seed(seed)
        perm = np.random.permutation(16)  # the same draws as that shuffle
        ours = pretrain.tube_mask(grid, ratio, perm)
        assert np.array_equal(ours.numpy(), ref.reshape(-1).astype(bool))
        frames = ours.view(2, 16)
        assert (frames.sum(1) == int(ratio * 16)).all() and (frames[0] == frames[1]).all()


def test_masks_come_from_the_sample_generator():
    grid = (4, 7, 7)
    a = pretrain.draw_mask(grid, 0.9, 0, 3, 5)
    assert torch.equal(a, pretrain.draw_mask(grid, 0.9, 0, 3, 5))  # any worker, any resume
    assert a.sum() == 4 * int(0.9 * 49)
    others = [pretrain.draw_mask(grid, 0.9, *k) for k in ((1, 3, 5), (0, 4, 5), (0, 3, 6))]
    assert all(not torch.equal(a, b) for b in others)


def step_views(clip, info):
    """An item's K views as the step sees them: the loader's finished views, or (whole frames with
    info["size"]: a device model's multi-scale crops) each box cut from them by crop_resize."""
    if "size" not in info:
        return clip if clip.dim() == 5 else clip[None]
    return data.crop_resize(clip[None].double(), info["box"].view(1, -1, 4), info["size"])


# the frames and boxes of a CUDA model / a CPU model's finished crops
@pytest.mark.parametrize("finish", [False, True])
def test_num_sample_views_are_separate_decodes_with_the_same_draws(tiny_data, monkeypatch, finish):
    """--num_sample K (VideoMAEv2's pretrain_datasets.py: the transform, crop and mask, called K
    times on one decode): view k of a sample equals the view made from a decode of its own with the
    k-th draws of the sample's generators (box, flip, then mask), and the K views cost one decode of
    each frame. A device model's item is the decoded frames, shipped once, and K boxes."""
    K, grid, ratio = 3, (2, 2, 2), 0.5
    spec = data.DataSpec(
        t_length=4, t_stride=2, new_size=36, crop_size=32, train_crop="multiscale13", seed=3
    )
    spec = data.dataclasses.replace(spec, finish_crop=finish)
    many = pretrain.MaskedClips(
        data.VideoFrameDataset(tiny_data[0], spec, "train", reps=K), grid, ratio
    )
    one = pretrain.MaskedClips(data.VideoFrameDataset(tiny_data[0], spec, "train"), grid, ratio)
    decoded, real = [], decode.decode_frame
    monkeypatch.setattr(decode, "decode_frame", lambda blob: decoded.append(1) or real(blob))
    many.set_epoch(1), one.set_epoch(1)
    ds = many.ds
    assert ds.ship_frames != finish
    for index in range(4):
        decoded.clear()
        clip, _, info = many[index]
        views = step_views(clip, info)
        assert views.shape == (K, 3, 4, 32, 32) and info["mask"].shape == (K, 8)
        video, rng = ds.videos[index], np.random.default_rng([spec.seed, 1, index])
        numbers, inverse = np.unique(ds.choose_frames(video, rng), return_inverse=True)
        assert len(decoded) == len(numbers)  # one decode per frame for all K views
        masks = np.random.default_rng([spec.seed, 1, index, pretrain.MASK_STREAM])
        for k in range(K):  # the reference: a decode per view
            frames = ds.load_frames(video, numbers)
            crop, box, _ = ds.train_view(frames, rng)
            if finish:
                crop = crop[torch.from_numpy(inverse.reshape(-1))].permute(3, 0, 1, 2)
            else:  # the step cuts this view's box out of this decode's frames
                x = torch.stack(frames)[torch.from_numpy(inverse.reshape(-1))].permute(3, 0, 1, 2)
                assert crop is None and torch.equal(clip, x)
                crop = step_views(x, {"box": torch.tensor([box]), "size": 32})[0]
            assert torch.equal(views[k], crop)
            assert info["box"][k].tolist() == list(torch.tensor(box).tolist())
            mask = pretrain.tube_mask(grid, ratio, masks.permutation(4))
            assert torch.equal(info["mask"][k], mask)
        assert len(decoded) == (K + 1) * len(numbers)
        assert any(not torch.equal(views[0], views[k]) for k in range(1, K))  # each its own draws
        single, _, first = one[index]  # --num_sample 1: the first view and mask
        assert torch.equal(step_views(single, first)[0], views[0])
        assert torch.equal(first["mask"], info["mask"][0])


def test_num_sample_loss_takes_each_view_with_its_mask():
    """The step's (B, K, N) masks are B x K rows, each video's K views together as its clips."""
    torch.manual_seed(0)
    model = pretrain.PretrainViT("vit_t16", 4, 64, decoder_depth=1).double().eval()
    x = torch.randn(2, 2, 3, 4, 64, 64, dtype=torch.float64)
    masks = torch.stack([pretrain.draw_mask(model.grid, 0.75, 0, 0, i, views=2) for i in range(2)])
    objective = pretrain.reconstruction(MEAN, STD, model.spec)

    def loss_fn(x, info):
        return objective.loss(objective.forward(model, x, info), None, x, info)

    with torch.no_grad():
        loss = loss_fn(x.flatten(0, 1), {"mask": masks})
        each = [
            loss_fn(x[b, k][None], {"mask": masks[b, k][None]}) for b in range(2) for k in range(2)
        ]
    assert torch.allclose(loss, torch.stack(each).mean(), rtol=1e-12)


@pytest.mark.parametrize("raw", [False, True])
def test_loss_equals_the_official_computation(raw):
    ours, official = random_pair()
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 64, 64, dtype=torch.float64)
    mask = torch.stack([pretrain.draw_mask(ours.grid, 0.75, 0, 0, i) for i in range(2)])
    with torch.no_grad():
        ref = official_loss(official, x, mask, normlize_target=not raw)
        objective, info = pretrain.reconstruction(MEAN, STD, ours.spec, raw), {"mask": mask}
        loss = objective.loss(objective.forward(ours, x, info), None, x, info)
        assert torch.allclose(ours(x, mask), official(x, mask), rtol=1e-9, atol=1e-12)
    assert abs(loss.item() - ref.item()) / ref.item() < 1e-6, (loss.item(), ref.item())


def test_targets_are_normalised_per_patch_with_unbiased_variance():
    pixels = torch.rand(1, 3, 2, 16, 16, dtype=torch.float64)
    t = pretrain.targets(pixels, 16).view(1, 1, 512, 3)
    p = pixels[0].permute(1, 2, 3, 0).reshape(512, 3)  # the one patch, (pixels, channel)
    assert torch.allclose(t[0, 0], (p - p.mean(0)) / (p.std(0, unbiased=True) + 1e-6))


def test_reconstruction_keeps_the_visible_patches():
    ours, _ = random_pair()
    torch.manual_seed(2)
    pixels = torch.rand(2, 3, 4, 64, 64, dtype=torch.float64)
    mask = torch.stack([pretrain.draw_mask(ours.grid, 0.75, 0, 0, i) for i in range(2)])
    x = (pixels - torch.tensor(MEAN).view(1, 3, 1, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1, 1)
    with torch.no_grad():
        out = ours(x, mask)
    visible, rec = pretrain.reconstruct(pixels, mask, out, 16)
    keep = pretrain.unpatch(
        (~mask)[:, :, None, None].expand(-1, -1, 512, 3).double(), ours.grid, 16
    ).bool()
    assert torch.equal(rec[keep], pixels[keep]) and torch.equal(visible[keep], pixels[keep])
    assert (visible[~keep] == 0).all()  # hidden: black, as run_videomae_vis.py's masked frames
    assert not torch.allclose(rec[~keep], pixels[~keep], atol=1e-3)  # predicted there
    image = pretrain.picture(pixels, visible, rec)
    assert image.shape == (3, 2 * 3 * 66 + 2, 2 * 66 + 2)  # 3 rows per video, a column per tubelet
    assert torch.equal(image[:, 2:66, 2:66], pixels[0, :, 0])  # the first input frame, as it came


def pretrain_args(data, root, *extra):
    return [
        "ucf101",
        *data,
        *TINY,
        "--pretrain",
        "--arch",
        "vit_t16",
        "--opt",
        "adamw",
        "--lr",
        "1e-3",
        "--output_root",
        str(root),
        *extra,
    ]


@pytest.mark.slow
def test_pretraining_run_writes_its_picture_and_fine_tunes(tiny_data, tmp_path, capsys):
    args = pretrain_args(tiny_data, tmp_path, "--epochs", "2", "-ef", "1", "--vis-videos", "2")
    run_main(args)
    run = tmp_path / flags.run_dir_name(train.parse_args(args))
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1] and all(r["val_loss"] > 0 for r in log)
    assert Image.open(run / "reconstruction_e001.png").size == (2 * 34 + 2, 2 * 3 * 34 + 2)
    state = torch.load(run / "checkpoint.pth", weights_only=False)["model"]
    assert "decoder.head.weight" in state and "encoder.blocks.0.attn.q_bias" in state
    # --pretrained: the encoder in, its last norm and the decoder out, a new fc_norm and head
    capsys.readouterr()
    ft = ["ucf101", *tiny_data, *TINY, "--arch", "vit_t16", "--epochs", "1"]
    ft += ["--pretrained", str(run / "checkpoint.pth"), "--output_root", str(tmp_path / "ft")]
    run_main(ft)
    assert "new 4 (fc_norm.weight" in capsys.readouterr().out
    name = flags.run_dir_name(train.parse_args(ft))
    tuned = torch.load(tmp_path / "ft" / name / "checkpoint.pth", weights_only=False)
    assert (
        tuned["model"]["patch_embed.proj.weight"].shape
        == state["encoder.patch_embed.proj.weight"].shape
    )
    # a pretraining checkpoint given to --resume of a fine-tuning run: one line
    with pytest.raises(SystemExit) as e:
        run_main([*ft[:-1], str(tmp_path / "ft2"), "--resume", str(run / "checkpoint.pth")])
    one_line_error(capsys, "is a pretraining checkpoint", "--pretrained", exc=e)


def unlabelled(data, folder):
    """The lists of `data` as '<frame_dir> <num_frames>' lines (no label column), in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in data:
        lines = Path(path).read_text().splitlines()
        root = Path(path).parent
        new = folder / Path(path).name
        new.write_text("".join(f"{root / ln.split()[0]} {ln.split()[1]}\n" for ln in lines))
        out.append(str(new))
    return out


def test_a_new_vit_entry_pretrains_with_no_pretrain_edit(tiny_data, tmp_path, monkeypatch):
    """A ViT added as one vit.VIT_SPECS line (model.ARCHS derives its entry) pretrains: its decoder
    comes from the entry (here the published sizes' rule, half the width at 64 per head), and the
    run's log and curves hold the train and val loss, no top-1."""
    monkeypatch.setitem(vit.VIT_SPECS, "vit_n16", vit.ViTSpec(128, 1, 2, 2.0, 16))
    monkeypatch.setitem(models.ARCHS, "vit_n16", models.ARCHS["vit_t16"])
    args = pretrain_args(tiny_data, tmp_path, "--epochs", "1", "--arch", "vit_n16")
    run_main(args)
    run = tmp_path / flags.run_dir_name(train.parse_args(args))
    state = torch.load(run / "checkpoint.pth", weights_only=False)["model"]
    assert state["encoder_to_decoder.weight"].shape == (64, 128)
    assert state["decoder.head.weight"].shape == (3 * 2 * 16 * 16, 64)
    (log,) = report.read_log(str(run / "log.jsonl"))
    assert list(log) == ["epoch", "lr", "train_loss", "val_loss", "epoch_time"]
    assert list(report.curve_panels([log])) == ["loss", "lr", "epoch_time"]


@pytest.mark.slow
def test_pretraining_under_amp(tiny_data, tmp_path, capsys):
    """--amp bf16 (CPU autocast here, as on a GPU): the pretraining step runs under autocast; the
    epoch's train and val losses are the float32 run's within 5 %, and the weights differ from it
    (so autocast was on). Both read unlabelled '<frame_dir> <num_frames>' lists (pretraining uses no
    labels) and draw no picture (--vis-videos 0: no path printed)."""
    runs = []
    lists = unlabelled(tiny_data, tmp_path / "lists")
    for amp in ("off", "bf16"):
        args = pretrain_args(
            lists, tmp_path / amp, "--epochs", "1", "--amp", amp, "--vis-videos", "0"
        )
        run_main(args)
        line = [ln for ln in capsys.readouterr().out.splitlines() if "val reconstruction" in ln]
        assert line and "None" not in line[0] and ".png" not in line[0], line
        run = tmp_path / amp / flags.run_dir_name(train.parse_args(args))
        log = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
        runs.append((log, torch.load(run / "checkpoint.pth", weights_only=False)["model"]))
    (log32, w32), (log16, w16) = runs
    assert log16["train_loss"] == pytest.approx(log32["train_loss"], rel=0.05)
    assert log16["val_loss"] == pytest.approx(log32["val_loss"], rel=0.05)
    assert all(torch.isfinite(v).all() for v in w16.values())
    assert any(not torch.equal(w16[k], w32[k]) for k in w32)


@pytest.mark.slow
def test_a_refused_pretraining_start_leaves_no_run_folder(tiny_data, tmp_path):
    """`train.py pretrain --resume <a fine-tuning checkpoint> --run_name X`: refused in one line
    after the run folder was made; the folder (holding only args.txt) is removed, as train.py
    removes its own."""
    ckpt = tiny_checkpoint(tmp_path / "ft.pth", arch="vit_t16", t_length=4, crop_size=32)
    argv = pretrain_args(tiny_data, tmp_path / "out", "--resume", ckpt, "--run_name", "X")
    # pretrain.py as `train.py pretrain` runs it (one interpreter fewer)
    cmd = [sys.executable, str(REPO / "pretrain.py"), *[a for a in argv if a != "--pretrain"]]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    one_line_error(r.stderr, "is not a pretraining checkpoint")
    assert r.returncode == 2 and not (tmp_path / "out" / "X").exists()


def test_pretrain_help_is_the_pretraining_usage(capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["-h", "--pretrain"])  # what `train.py pretrain -h` parses
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: train.py pretrain [-h] [--pretrain]")
    assert out.index("--mask-ratio") < out.index("--arch")  # its group first


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--arch", "resnet10_3d"], "pretraining takes a video ViT"),
        (["--mask-ratio", "1"], "--mask-ratio 1.0: must be in (0, 1)"),
        (["--mask-ratio", "0"], "--mask-ratio 0.0: must be in (0, 1)"),
        (["--crop_size", "40"], "--crop_size 40"),
        (["--t_length", "5"], "--t_length 5"),
        (["--num_sample", "0"], "--num_sample"),
        (["--num_sample", "2", "--decode_device", "cuda"], "--decode_device cuda"),
    ],
)
def test_bad_inputs_one_line(tiny_data, tmp_path, capsys, flags, needle):
    with pytest.raises(SystemExit) as e:
        run_main(pretrain_args(tiny_data, tmp_path, *flags))
    one_line_error(capsys, needle, exc=e)
    assert not any(tmp_path.iterdir())  # refused before any work


@pytest.mark.parametrize(
    "recipe, ratio, stride, lr, batch",
    [
        ("kinetics_videomae_pretrain", 0.9, 4, 1.5e-4, 32),
        ("sthv2_videomae_pretrain", 0.9, 2, 1.5e-4, 32),
        ("ucf101_videomae_pretrain", 0.75, 4, 3e-4, 24),
    ],
)
def test_recipes_are_the_official_scripts(recipe, ratio, stride, lr, batch):
    args = train.parse_args(["ucf101", "t.txt", "v.txt", f"@recipes/{recipe}.txt"])
    assert args.pretrain and args.arch == "vit_b16" and args.decoder_depth == 4
    assert (args.mask_ratio, args.t_stride, args.lr, args.batch_size) == (ratio, stride, lr, batch)
    assert (args.opt, args.opt_betas, args.weight_decay) == ("adamw", [0.9, 0.95], 0.05)
    assert args.train_crop == "multiscale13" and args.no_flip
    assert args.ra_reps == 1  # pretrain.sh sets no --num_sample: one view per decoded video
    # lr x global batch / 256: K400's 64 GPUs x 32 clips give 1.2e-3 once warm
    args.world_size = 64 if batch == 32 else 8
    total = batch * args.world_size
    assert train.lr_batch_scale(args) == total / 256
    # the whole schedule, shorter: 40 warmup epochs then 20 of cosine, 10 steps each; the lrs scaled
    # as run_mae_pretraining.py scales them (args.lr * total_batch_size / 256)
    args.epochs = 60
    lrs = [v * total / 256 for v in (args.lr, args.lr_min, args.lr_warmup_start)]
    want = cosine_scheduler(lrs[0], lrs[1], 60, 10, int(args.warmup), lrs[2])
    ours = [train.lr_at(args, step, 10) for step in range(600)]
    assert ours == want.tolist()  # to the last bit
    # warm at the warmup's last step
    assert ours[399] == lr * total / 256 and ours[400] == ours[399]


def cosine_scheduler(
    base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0
):
    """MCG-NJU/VideoMAE utils.py cosine_scheduler (BEiT's), transcribed (warmup_steps unused
    there)."""
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = np.array(
        [
            final_value
            + 0.5 * (base_value - final_value) * (1 + math.cos(math.pi * i / (len(iters))))
            for i in iters
        ]
    )
    return np.concatenate((warmup_schedule, schedule))


@pytest.mark.parametrize("recipe", ["kinetics_videomae_b", "sthv2_videomae_b", "ucf101_videomae_b"])
def test_finetuning_recipes_follow_the_official_cosine_scheduler(recipe):
    """The fine-tuning recipes' lr at every step of a 12-epoch run (5 warmup) is
    cosine_scheduler's."""
    args = train.parse_args(
        ["ucf101", "t.txt", "v.txt", f"@recipes/{recipe}.txt", "--epochs", "12"]
    )
    assert args.lr_policy == "cosine_after_warmup"
    want = cosine_scheduler(args.lr, args.lr_min, 12, 7, 5, args.lr_warmup_start)
    ours = [train.lr_at(args, step, 7) for step in range(84)]
    assert ours == want.tolist()  # to the last bit
    assert ours[4 * 7] < args.lr and ours[5 * 7 - 1] == args.lr  # warm at the last warmup step


def places(more):
    """The (y, x) places, in quarters of the slack, that multiscale_box draws on a 100 x 140
    frame."""
    rng, out = np.random.default_rng(0), set()
    for _ in range(2000):
        y, x, h, w = data.multiscale_box(100, 140, 0, 64, rng, more)
        dy, dx = (100 - int(h)) // 4, (140 - int(w)) // 4
        if dy and dx:
            out.add((round(y / dy), round(x / dx)))
    return out


def test_the_pretraining_crop_has_13_places():
    # VideoMAE's GroupMultiScaleCrop(more_fix_crop=True): corners, centre, edge centres, quarter
    # points
    assert len(places(False)) == 5 and len(places(True)) == 13
    assert places(True) == set(data.FIX_PLACES + data.MORE_FIX_PLACES)


def test_grad_ckpt_gives_the_same_gradients():
    torch.manual_seed(0)
    plain = pretrain.PretrainViT("vit_t16", 4, 64, decoder_depth=2)
    ckpt = pretrain.PretrainViT("vit_t16", 4, 64, decoder_depth=2, grad_ckpt=True)
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 4, 64, 64)
    mask = torch.stack([pretrain.draw_mask(plain.grid, 0.75, 0, 0, i) for i in range(2)])
    objective, info = pretrain.reconstruction(MEAN, STD, plain.spec), {"mask": mask}
    grads, calls = [], []
    for m in (plain, ckpt):
        m.train()
        seen = []
        # count the forwards (recomputed too)
        for blk in (m.encoder.blocks[0], m.decoder.blocks[0]):
            blk.forward = lambda x, f=blk.forward: (seen.append(1), f(x))[1]
        objective.loss(objective.forward(m, x, info), None, x, info).backward()
        grads.append([p.grad for p in m.parameters()])
        calls.append(len(seen))
    assert calls == [2, 4]  # --grad-ckpt: each block runs again in the backward
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@pytest.mark.slow
@pytest.mark.parametrize("what", ["pretrain", "finetune"])
def test_compiled_steps_never_recompile_nor_break_the_graph(what):
    """--compile (train.build_net: dynamic=False) of the pretraining model (encoder, the
    visible-token gather, decoder) and of the fine-tuning ViT: one whole graph (fullgraph), and
    training steps with new masks, weights and clips reuse it (error_on_recompile). The eager
    backend keeps it CPU-cheap: graph breaks and recompilations are dynamo's, whatever backend
    compiles the graph."""
    import vit  # noqa: PLC0415

    torch._dynamo.reset()
    torch.manual_seed(0)
    if what == "pretrain":
        model = pretrain.PretrainViT("vit_t16", 4, 32, decoder_depth=1, mask_ratio=0.5)
        objective = pretrain.reconstruction(MEAN, STD, model.spec)
    else:
        model = vit.build("vit_t16", 5, 4, 32, depth=1)
        objective = train.classification(
            argparse.Namespace(label_smoothing=0.0, probe=None, multi_label=False, heads=None)
        )

    def loss_fn(model, x, labels, info):
        return objective.loss(objective.forward(model, x, info), labels, x, info)

    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend="eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(3):
        x, labels = torch.randn(2, 3, 4, 32, 32), torch.tensor([step, 4 - step])
        mask = torch.stack([pretrain.draw_mask(model.grid, 0.5, 0, step, i) for i in range(2)])
        with torch.no_grad():  # the compiled step computes the eager one
            eager = loss_fn(model, x, labels, {"mask": mask})
        with torch._dynamo.config.patch(error_on_recompile=step > 0):
            loss = loss_fn(compiled, x, labels, {"mask": mask})
            loss.backward()
        opt.step()
        opt.zero_grad()
        assert torch.allclose(loss, eager, rtol=1e-5), (loss, eager)
        losses.append(loss.item())
    assert len(set(losses)) == 3
