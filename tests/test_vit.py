"""The VideoMAE ViTs (vit.py) and their checkpoints in every layout (vit_zoo.py), against the
reference code.

References: OpenGVLab/VideoMAEv2 models/modeling_finetune.py and modeling_pretrain.py (vendored
unchanged under tests/reference/videomaev2, MIT; they need timm), and transformers'
VideoMAEForVideoClassification / VideoMAEModel (installed). The mmaction2 file is written here from
the official keys by mmaction2's own names (mmaction/models/backbones/vit_mae.py: mmcv PatchEmbed
`projection`, FFN `layers.0.0` / `layers.1`, pos_embed buffer from its get_sinusoid_encoding;
Recognizer3D backbone. / cls_head.fc_cls), independently of vit_zoo's tables. Every comparison is
float64 with random weights, every q_bias / v_bias non-zero, on 2-block networks at 4 frames x 32 px
(8 tokens) unless a test says otherwise.
"""

import dataclasses
import functools
import math
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

import flags
import model
import train
import vit
import zoo
from conftest import REPO, logs, one_line_error, run_dir, run_main, tiny_videomae_config

timm = pytest.importorskip("timm")  # the official files import it
sys.path.insert(0, str(REPO / "tests" / "reference"))
_registry = dict(timm.models._registry._model_entrypoints)
from videomaev2 import modeling_finetune, modeling_pretrain  # noqa: E402

# Their @register_model overwrites timm's own vit_*_patch16_224 entries: put timm's back.
timm.models._registry._model_entrypoints.update(_registry)

LN = functools.partial(nn.LayerNorm, eps=1e-6)  # the official constructors' norm_layer
# modeling_finetune.py's vit_small / vit_base_patch16_224 arguments (their constructors fix depth).
ARGS = {
    "vit_s16": dict(patch_size=16, embed_dim=384, num_heads=6, mlp_ratio=4, qkv_bias=True),
    "vit_b16": dict(patch_size=16, embed_dim=768, num_heads=12, mlp_ratio=4, qkv_bias=True),
}


def randomise(m, seed=0):
    """Every parameter random (biases, q_bias / v_bias, norms, layer scale): nothing stays 0 or
    1."""
    g = torch.Generator().manual_seed(seed)
    for p in m.parameters():
        p.data.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    return m.eval()


def official(arch="vit_s16", frames=4, size=32, classes=5, **kw):
    m = modeling_finetune.VisionTransformer(
        img_size=size,
        all_frames=frames,
        depth=2,
        num_classes=classes,
        norm_layer=LN,
        **ARGS[arch],
        **kw,
    )
    return randomise(m.double())


def clip(frames=4, size=32, batch=2):
    g = torch.Generator().manual_seed(3)
    return torch.randn(batch, 3, frames, size, size, generator=g, dtype=torch.float64)


def ours(arch="vit_s16", frames=4, size=32, classes=5, src=None, **kw):
    """vit.py's network (2 blocks, float64), filled by vit_zoo from `src` through
    zoo.load_pretrained."""
    m = vit.build(arch, classes, frames, size, depth=2, **kw).double()
    if src is not None:
        zoo.load_pretrained(m, str(src))
    return m.eval()


def rel_err(a, b):
    return ((a - b).abs().max() / a.abs().max()).item()


@pytest.mark.parametrize(
    "arch, wrapper",
    [("vit_s16", "model"), ("vit_s16", "module"), ("vit_s16", None), ("vit_b16", "module")],
)
def test_official_finetuned_checkpoint_gives_the_official_logits(tmp_path, capsys, arch, wrapper):
    ref = official(arch)
    state = ref.state_dict()
    torch.save({wrapper: state, "epoch": 3} if wrapper else state, tmp_path / "ft.pth")
    x = clip()
    with torch.no_grad():
        want, got = ref(x), ours(arch, src=tmp_path / "ft.pth")(x)
    assert rel_err(want, got) < 1e-6
    line = capsys.readouterr().out.strip()
    assert "(videomae): loaded" in line and "new 0" in line and "fixed sinusoid table" in line, line
    assert "LayerNorm eps 1e-06 (blocks), 1e-06 (fc_norm)" in line, line  # the official norm_layer
    # The parity has the power to see the biases: without q_bias the logits move far beyond 1e-6.
    with torch.no_grad():
        ref.blocks[0].attn.q_bias.zero_()
        assert rel_err(want, ref(x)) > 1e-4


def test_layer_scale_and_the_table(tmp_path):
    ref = official(init_values=0.1)  # gamma_1 / gamma_2, randomised
    torch.save({"model": ref.state_dict()}, tmp_path / "ls.pth")
    with torch.no_grad():
        got = ours(src=tmp_path / "ls.pth", init_values=0.1)(clip())
        assert rel_err(ref(clip()), got) < 1e-6
    # vit.py's table is the official one, float32 rounding included, for a 16 x 224 grid too
    assert torch.equal(
        modeling_finetune.get_sinusoid_encoding_table(1568, 384), vit.sinusoid_table(1568, 384)
    )


def test_transformers_folder_gives_its_logits(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    config = tiny_videomae_config(transformers, layer_norm_eps=1e-6)
    # fc_norm runs at transformers' 1e-5 and the blocks at layer_norm_eps, here as in the folder
    # (tests/test_hf.py: the eps parity itself, at 1e-12)
    hf = randomise(transformers.VideoMAEForVideoClassification(config).double())
    hf.save_pretrained(tmp_path / "hf", safe_serialization=True)
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    import safetensors.torch

    saved = safetensors.torch.load_file(tmp_path / "hf" / "model.safetensors")
    biases = [k for k in saved if k.endswith(("q_bias", "v_bias", "query.bias", "value.bias"))]
    assert len(biases) == 4 and all(saved[k].abs().sum() > 0 for k in biases), biases
    x = clip()
    with torch.no_grad():
        want = hf(pixel_values=x.transpose(1, 2)).logits  # transformers: (B, T, C, H, W)
        got = ours(src=tmp_path / "hf")(x)
    assert rel_err(want, got) < 1e-6
    assert "(transformers): loaded" in capsys.readouterr().out
    # VideoMAEModel alone (a backbone folder): the same tokens, a new fc_norm and head
    hf.videomae.save_pretrained(tmp_path / "backbone")
    m = ours(src=tmp_path / "backbone")
    assert "new 4 (fc_norm.weight, fc_norm.bias, head.weight" in capsys.readouterr().out
    with torch.no_grad():
        assert rel_err(hf.videomae(x.transpose(1, 2)).last_hidden_state, m.tokens(x)) < 1e-6


def mmaction2_name(k):
    """An official key in mmaction2's VisionTransformer / Recognizer3D names (vit_mae.py)."""
    if k.startswith("head."):
        return "cls_head.fc_cls." + k[5:]
    k = k.replace("patch_embed.proj.", "patch_embed.projection.")
    k = k.replace(".mlp.fc1.", ".mlp.layers.0.0.").replace(".mlp.fc2.", ".mlp.layers.1.")
    return "backbone." + k


def mmaction2_table(n, dims):
    """vit_mae.py get_sinusoid_encoding (torch, float64, then float32)."""
    vec = torch.arange(dims, dtype=torch.float64)
    vec = torch.pow(10000, -((vec - vec % 2) / dims)).view(1, -1)
    table = torch.arange(n).view(-1, 1) * vec
    table[:, 0::2].sin_()
    table[:, 1::2].cos_()
    return table.float().unsqueeze(0)


@pytest.mark.parametrize("learned", [False, True])
def test_mmaction2_file_gives_the_official_logits(tmp_path, capsys, learned):
    ref = official(use_learnable_pos_emb=learned)
    state = {mmaction2_name(k): v for k, v in ref.state_dict().items() if k != "pos_embed"}
    state["backbone.pos_embed"] = ref.pos_embed.data if learned else mmaction2_table(8, 384)
    torch.save({"state_dict": state, "meta": {"epoch": 1}}, tmp_path / "mm.pth")
    with torch.no_grad():
        got = ours(src=tmp_path / "mm.pth")(clip())
        assert rel_err(ref(clip()), got) < 1e-6
    line = capsys.readouterr().out
    assert "(mmaction2): loaded" in line
    assert ("learned table 2x2x2 copied" if learned else "file's fixed table dropped") in line


def test_pretraining_checkpoint_gives_the_encoders_tokens(tmp_path, capsys):
    pre = modeling_pretrain.PretrainVisionTransformer(
        img_size=32,
        all_frames=4,
        encoder_embed_dim=384,
        encoder_depth=2,
        encoder_num_heads=6,
        decoder_embed_dim=192,
        decoder_depth=1,
        decoder_num_heads=3,
        decoder_num_classes=1536,
        qkv_bias=True,
        norm_layer=LN,
    )
    pre = randomise(pre.double())
    torch.save({"model": pre.state_dict()}, tmp_path / "pt.pth")
    m, x = ours(src=tmp_path / "pt.pth"), clip()
    line = capsys.readouterr().out
    assert "(videomae-pretrain): loaded" in line and "new 4" in line and "decoder" in line, line
    with torch.no_grad():
        want = pre.encoder(x, torch.zeros(2, 8, dtype=torch.bool))  # every token visible
        # the encoder ends in its own norm, which fine-tuning drops (mean pooling + fc_norm instead)
        n = pre.encoder.norm
        got = nn.functional.layer_norm(m.tokens(x), (384,), n.weight, n.bias, 1e-6)
    assert rel_err(want, got) < 1e-6


def test_other_clip_length_and_size_from_a_16x224_checkpoint(tmp_path, capsys):
    """8 frames x 160 px from a 16 x 224 file: the official model constructed at that size, same
    weights."""
    torch.save({"module": official(frames=16, size=224).state_dict()}, tmp_path / "16x224.pth")
    small = official(frames=8, size=160)
    small.load_state_dict(torch.load(tmp_path / "16x224.pth")["module"])
    x = clip(8, 160, batch=1)
    with torch.no_grad():
        assert rel_err(small(x), ours(frames=8, size=160, src=tmp_path / "16x224.pth")(x)) < 1e-6
    assert "fixed sinusoid table built for 4x10x10 tokens" in capsys.readouterr().out


def test_a_learned_table_is_interpolated_as_videomaev2(tmp_path, capsys):
    """A learned 8x14x14 table to 4x10x10: bicubic over H, W per time step, then linear over T
    (VideoMAEv2 run_class_finetuning.py), written here step by step."""
    ref = official(frames=16, size=224, use_learnable_pos_emb=True)
    torch.save({"model": ref.state_dict()}, tmp_path / "learned.pth")
    m = ours(frames=8, size=160, src=tmp_path / "learned.pth")
    assert "learned table interpolated 8x14x14 -> 4x10x10" in capsys.readouterr().out
    t = ref.pos_embed.data.reshape(8, 14, 14, 384).permute(0, 3, 1, 2)
    t = nn.functional.interpolate(t, size=(10, 10), mode="bicubic", align_corners=False)
    t = t.permute(2, 3, 1, 0).reshape(100, 384, 8)
    t = nn.functional.interpolate(t, size=4, mode="linear").reshape(10, 10, 384, 4)
    assert torch.allclose(m.pos_embed.data, t.permute(3, 0, 1, 2).reshape(1, 400, 384), atol=1e-12)
    assert isinstance(m.pos_embed, nn.Parameter)


@pytest.mark.parametrize(
    "case, needles",
    [
        ("convnet", ["pytorchvideo ConvNet checkpoint", "--arch vit_s16"]),
        ("ours_convnet", ["a torchvision / ours ConvNet checkpoint", "--arch vit_s16"]),
        ("vit_b", ["768 wide", "--arch vit_b16", "does not fit --arch vit_s16"]),
        ("no_q_bias", ["q_bias", "missing"]),
    ],
)
def test_a_wrong_file_is_refused_in_one_line(tmp_path, case, needles):
    if case == "convnet":
        hub = pytest.importorskip("pytorchvideo.models.hub.resnet")
        torch.save(hub.i3d_r50(pretrained=False).state_dict(), tmp_path / "f.pth")
    elif case == "ours_convnet":
        net = model.build_network("resnet10_3d", 4)
        torch.save({"model": net.state_dict()}, tmp_path / "f.pth")
    elif case == "vit_b":
        torch.save({"model": official("vit_b16").state_dict()}, tmp_path / "f.pth")
    else:
        state = official().state_dict()
        del state["blocks.1.attn.q_bias"]
        torch.save(state, tmp_path / "f.pth")
    with pytest.raises(ValueError) as e:
        ours(src=tmp_path / "f.pth")
    one_line_error(str(e.value), *needles)
    assert str(e.value).count("ConvNet") <= 1, e.value  # said once


@pytest.mark.parametrize(
    "given, needle",
    [
        (["--mode", "TSN"], "use --mode 3D"),
        (["--t_length", "5"], "tubelets of 2 frames"),
        (["--crop_size", "100"], "16 px patches"),
        (["--grad-ckpt", "--arch", "resnet10_3d"], "--grad-ckpt"),
    ],
)
def test_bad_flags_one_line_before_any_work(capsys, tmp_path, given, needle):
    argv = ["ucf101", "nope.txt", "nope.txt", "--arch", "vit_s16", *given]
    with pytest.raises(SystemExit) as e:
        flags.check_args(train.parse_args(argv + ["--output_root", str(tmp_path)]))
    one_line_error(capsys, needle, exc=e)
    assert not any(tmp_path.iterdir())


def test_layer_ids_grad_ckpt_and_drop_path():
    m = vit.build("vit_t16", 5, 4, 32, drop_path=0.2, grad_ckpt=True)
    ids, L = train.models.layer_ids("vit_t16", [n for n, _ in m.named_parameters()])
    assert L == 4 and ids["patch_embed.proj.weight"] == 0 and ids["blocks.0.attn.q_bias"] == 1
    assert ids["blocks.3.mlp.fc2.bias"] == 4 and ids["fc_norm.weight"] == ids["head.bias"] == 5
    assert [b.drop_path.p for b in m.blocks] == pytest.approx([0, 0.2 / 3, 0.4 / 3, 0.2])
    # activation checkpointing recomputes the same numbers: same loss, same gradients
    x = torch.randn(2, 3, 4, 32, 32)
    grads = []
    for ckpt in (False, True):
        m.grad_ckpt = ckpt
        torch.manual_seed(0)  # the same drop-path draws
        m.zero_grad()
        m.train()(x).square().sum().backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_features_are_the_pooled_normed_tokens():
    """features.py's default (the head's input) is what the localization models read from
    VideoMAEv2: fc_norm of the mean token."""
    import features

    m = ours()
    x = clip()
    f, y = features.Extractor(m)(x)
    with torch.no_grad():
        assert torch.equal(f, m.fc_norm(m.tokens(x).mean(1))) and torch.equal(y, m(x))
    with pytest.raises(ValueError, match="not for --arch vit_s16"):
        features.Extractor(m, layer="blocks.0")


@pytest.mark.slow
def test_the_vit_recipe_trains_a_step_and_evaluates_on_cpu(tmp_path):
    """recipes/kinetics_videomae_b.txt as written (AdamW, layer decay, drop path, mixing,
    RandAugment, erasing, 2 reps), at ViT-S on one 4-frame video of 32 px: one optimizer step, then
    one validation."""
    import prepare

    prepare.make_synth(tmp_path, classes=1, videos=1, frames=16, size=(64, 48))
    common = [
        "ucf101",
        str(tmp_path / "train.txt"),
        str(tmp_path / "val.txt"),
        f"@{REPO / 'recipes' / 'kinetics_videomae_b.txt'}",
        *("--arch", "vit_s16", "--t_length", "4", "--new_size", "36", "--crop_size", "32"),
        *("-b", "1", "--epochs", "1", "-j", "0", "--device", "cpu", "--grad-ckpt"),
        *("--output_root", str(tmp_path / "o")),
    ]
    top1 = run_main(common)
    log = logs(run_dir(tmp_path / "o", common))[-1]
    assert math.isfinite(log["train_loss"]) and log["val_top1"] == top1 and log["mixed"]


def test_videomae_test_clip_placements():
    """VideoMAE's Kinetics test (datasets.py VideoClsDataset: 5 clips over the frames 0, 4, 8, ...)
    and its SSv2 test (SSVideoClsDataset: segment-based, 2 views), worked by hand."""
    import data

    clips = data.sample_indices(300, 16, 4, "test", 5, start_index=0, placement="videomae")
    # 75 strided frames, step (75 - 16) / 4 = 14.75: starts int(0, 14.75, 29.5, 44.25, 59)
    assert (
        clips[:, 0].tolist() == [0, 56, 116, 176, 236] and (clips[:, 1:] - clips[:, :-1] == 4).all()
    )
    short = data.sample_indices(20, 16, 4, "test", 2, start_index=1, placement="videomae")
    assert short[0].tolist() == [1, 5, 9, 13, 17] + [17] * 11 and (short[1] == short[0]).all()
    val = data.sample_indices(300, 16, 4, "val", start_index=0, placement="videomae")
    # their validation clip: end (64 + 300) // 2 = 182, linspace(118, 182, 16) clamped to 181
    assert val[0].tolist() == [
        118,
        122,
        126,
        130,
        135,
        139,
        143,
        147,
        152,
        156,
        160,
        164,
        169,
        173,
        177,
        181,
    ]
    ssv2 = data.sample_indices(100, 16, 2, "test", 2, start_index=0, placement="videomae-ssv2")
    # tick 6.25: view 0 int(6.25 x), view 1 int(3.125 + 6.25 x)
    assert ssv2[0, :4].tolist() == [0, 6, 12, 18] and ssv2[1, :4].tolist() == [3, 9, 15, 21]
    assert ssv2[0, -1] == 93 and ssv2[1, -1] == 96


def transcribed_ssv2_train(n, num_segment, draw):
    """SSVideoClsDataset.loadvideo_decord's train branch (MCG-NJU/VideoMAE datasets.py), transcribed
    with its random draws taken from `draw(high, size)`."""
    average_duration = n // num_segment
    if average_duration > 0:
        return list(
            np.multiply(list(range(num_segment)), average_duration)
            + draw(average_duration, num_segment)
        )
    if n > num_segment:
        return list(np.sort(draw(n, num_segment)))
    return list(np.zeros((num_segment,)))


@pytest.mark.parametrize("n", [5, 16, 17, 31, 100, 117])
def test_videomae_ssv2_train_clips_are_the_official_segments(n):
    """--train_sampling videomae-ssv2: a frame per segment, as the official SSv2 train clips, with
    the same draws; the stride is not used; segment k's frame is in [k d, (k + 1) d)."""
    import data

    ours = data.sample_indices(n, 16, 4, "train", 1, np.random.default_rng(7), 1, "videomae-ssv2")
    rng = np.random.default_rng(7)
    theirs = transcribed_ssv2_train(n, 16, lambda high, size: rng.integers(0, high, size=size))
    assert ours.shape == (1, 16) and (ours[0] - 1).tolist() == [int(i) for i in theirs]
    d = n // 16
    if d:
        assert ((ours[0] - 1) // d == np.arange(16)).all()
    seen = np.concatenate(
        [
            data.sample_indices(n, 16, 4, "train", 1, np.random.default_rng(s), 0, "videomae-ssv2")
            for s in range(200)
        ],
        axis=None,
    )
    assert seen.max() < max(1, 16 * d)  # the last n mod 16 frames are never read, as theirs


def test_videomae_ssv2_sampling_in_the_loader_and_its_flags(tmp_path, capsys):
    """The dataset reads the segments' frames in train mode and the centres (VideoMAEv2's
    validation) in val mode; with TSN segments the flag is refused in one line before any work."""
    import data

    lst = tmp_path / "l.txt"
    lst.write_text("v 64 0\n")
    spec = data.DataSpec(t_length=8, t_stride=4, train_sampling="videomae-ssv2", seed=3)
    spec = dataclasses.replace(spec, test_sampling="videomae-ssv2", new_size=32, crop_size=32)
    train_ds = data.VideoFrameDataset(str(lst), spec, "train")
    frames = train_ds.choose_frames(train_ds.videos[0], np.random.default_rng(1))[0]
    assert ((frames - 1) // 8 == np.arange(8)).all()
    val_ds = data.VideoFrameDataset(str(lst), spec, "val")
    assert (val_ds.choose_frames(val_ds.videos[0], None)[0] - 1).tolist() == list(range(4, 64, 8))
    ours = data.VideoFrameDataset(
        str(lst), dataclasses.replace(spec, train_sampling="ours"), "train"
    )
    strided = ours.choose_frames(ours.videos[0], np.random.default_rng(1))[0]
    assert (np.diff(strided) == 4).all()
    argv = ["ucf101", "nope.txt", "nope.txt", "--arch", "resnet50", "--mode", "TSN"]
    argv += ["--num_segments", "3", "--train_sampling", "videomae-ssv2"]
    with pytest.raises(SystemExit) as e:
        flags.check_args(train.parse_args(argv + ["--output_root", str(tmp_path / "o")]))
    one_line_error(capsys, "--train_sampling", "--num_segments 1", exc=e)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_demo_vit_recipe_trains_and_evaluates(lists, tmp_path):
    """recipes/demo_vit.txt (the VideoMAE recipe for vit_t16 on the demo videos) parses to the
    recipe and runs an epoch; what it learns in its 40 epochs is measured in docs/vit.md."""
    argv = ["demo", *lists, f"@{REPO}/recipes/demo_vit.txt", "--epochs", "1", "--workers", "0"]
    argv += ["--device", "cpu", "--output_root", str(tmp_path), "-b", "4"]  # 2 steps: past lr 0
    args = train.parse_args(argv)
    recipe = (args.arch, args.lr_policy, args.mixup_alpha, args.ra_reps, args.layer_decay)
    assert recipe == ("vit_t16", "cosine_after_warmup", 0.8, 2, 0.75) and args.clip_grad == 0
    top1 = run_main(argv)
    log = logs(run_dir(tmp_path, argv))[-1]
    assert math.isfinite(log["train_loss"]) and log["val_top1"] == top1 and log["mixed"]
    assert log["lr"] == train.lr_at(args, 1, 2) > 0  # the second step's warmup lr: it trained


def test_videomae_ssv2_train_clips_do_not_depend_on_the_workers(lists):
    """The segment draws come from each sample's own generator, like the crops: 0 and 2 loader
    workers give the same clips, and another epoch other ones."""
    import data

    ds = data.VideoFrameDataset(
        lists[0], t_length=4, new_size=48, crop_size=48, train_sampling="videomae-ssv2", seed=1
    )
    ds.finish_crop = True

    def clips(workers, epoch):
        ds.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=4, num_workers=workers, collate_fn=data.collate
        )
        return torch.cat([batch[0] for batch in loader])

    first = clips(0, 1)
    assert torch.equal(first, clips(2, 1)) and not torch.equal(first, clips(0, 2))


@pytest.mark.parametrize(
    "arch, official_name",
    [("vit_s16", "vit_small_patch16_224"), ("vit_b16", "vit_base_patch16_224")],
)
def test_the_distilled_k710_files_layout(tmp_path, capsys, monkeypatch, arch, official_name):
    """VideoMAEv2's distilled vit_s_k710_dl_from_giant.pth / vit_b_k710_dl_from_giant.pth: the
    official vit_small / vit_base_patch16_224 (12 blocks, 16 frames, 224 px, 710 classes) under
    "module". Their names and shapes (on the meta device: no memory) are vit.py's, and a file of
    that layout loads with its 710-class head (ViT-S at full size: random weights, 12 blocks)."""
    linspace = torch.linspace  # the official drop-path rates are read with .item(): on the CPU
    monkeypatch.setattr(torch, "linspace", lambda *a, **k: linspace(*a, **{**k, "device": "cpu"}))
    with torch.device("meta"):
        ref = getattr(modeling_finetune, official_name)(num_classes=710, all_frames=16)
        mine = vit.build(arch, 710, 16, 224)
    want = {k: v.shape for k, v in ref.state_dict().items()}
    assert want == {k: v.shape for k, v in mine.state_dict().items()}
    assert len({k.split(".")[1] for k in want if k.startswith("blocks.")}) == 12
    if arch != "vit_s16":
        return
    g = torch.Generator().manual_seed(0)
    state = {k: torch.randn(s, generator=g) * 0.02 for k, s in want.items()}
    torch.save({"module": state}, tmp_path / "vit_s_k710_dl_from_giant.pth")
    m = vit.build(arch, 710, 16, 224)
    zoo.load_pretrained(m, str(tmp_path / "vit_s_k710_dl_from_giant.pth"))
    assert f"loaded {len(want)}, new 0" in capsys.readouterr().out
    assert m.pretrained_info["head_classes"] == 710 and m.pretrained_info["head_loaded"]
    assert all(torch.equal(v, state[k]) for k, v in m.state_dict().items())
