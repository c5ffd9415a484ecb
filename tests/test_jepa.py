"""V-JEPA 2 pretraining (jepa.py) against the official code: the masks, the predictor, the loss and
its gradients, the EMA update, the schedules, and the checkpoint read by the official loader.

Reference: facebookresearch/vjepa2 (MIT), vendored unchanged under tests/reference/vjepa2 (its
README names the files and the commit): src/masks/multiseq_multiblock3d.py (_MaskGenerator),
src/models/predictor.py, src/utils/wrappers.py (MultiSeqWrapper, PredictorMultiSeqWrapper),
src/utils/schedulers.py, app/vjepa/utils.py (init_opt, load_checkpoint). app/vjepa/train.py's
train_step is a closure inside main(), so `official_step` below transcribes its forward_target,
forward_context, loss_fn and momentum update, line for line. Every comparison is float64 with random
weights unless a test says otherwise.
"""

import functools
import importlib
import json
import sys

import pytest
import torch
import torch.nn as nn
from PIL import Image

import flags
import jepa
import train
from conftest import REPO, TINY, one_line_error, run_main

pytest.importorskip("timm")  # the official modules.py imports it
pytest.importorskip("einops")  # the official patch_embed.py imports it
sys.path.insert(0, str(REPO / "tests" / "reference" / "vjepa2"))
ovit = importlib.import_module("src.models.vision_transformer")
opred = importlib.import_module("src.models.predictor")
omask = importlib.import_module("src.masks.multiseq_multiblock3d")
owrap = importlib.import_module("src.utils.wrappers")
osched = importlib.import_module("src.utils.schedulers")

LN = functools.partial(nn.LayerNorm, eps=1e-6)
# vjepa2_vitt16 at 4 blocks: 192 wide, 3 heads; a 2-block predictor 96 wide, 3 heads
T, CROP, PRED = 4, 48, dict(pred_depth=2, pred_width=96, pred_heads=3)
GRID = (T // 2, CROP // 16, CROP // 16)


def official_generator(spec, grid=GRID):
    """_MaskGenerator of one config entry, for T frames of CROP px."""
    return omask._MaskGenerator(
        crop_size=(grid[1] * 16, grid[2] * 16),
        num_frames=grid[0] * 2,
        spatial_patch_size=16,
        temporal_patch_size=2,
        spatial_pred_mask_scale=spec.spatial_scale,
        temporal_pred_mask_scale=spec.temporal_scale,
        aspect_ratio=spec.aspect_ratio,
        npred=spec.num_blocks,
        max_context_frames_ratio=spec.max_temporal_keep,
    )


@pytest.mark.parametrize(
    "spec, grid",
    [
        (jepa.MASKS[0], (8, 16, 16)),  # the ViT-L config's short-range masks at 16 x 256 px
        (jepa.MASKS[1], (8, 16, 16)),  # and its long-range ones
        (jepa.MaskSpec((0.1, 0.4), (0.5, 1.0), (0.3, 3.0), 3, 0.5), (4, 7, 5)),  # every range
    ],
)
def test_masks_equal_the_official_generator_for_the_same_draws(spec, grid):
    """For batch counter c and the same random stream, the official generator's batch of B masks
    (block size from c; positions from the global stream, sample after sample; then each cut to the
    batch's shortest) equals ours: block_size from a generator seeded with c, sample_mask drawing
    from that stream in turn, collate_masks."""
    B = 6
    for c in range(20):
        official = official_generator(spec, grid)
        official._itr_counter.value = c - 1  # its step() makes it c
        torch.manual_seed(1000 + c)
        enc, pred = official(B)
        size = jepa.block_size(grid, spec, torch.Generator().manual_seed(c))
        g = torch.Generator().manual_seed(1000 + c)
        ctx, tgt = jepa.collate_masks([jepa.sample_mask(grid, spec, size, g) for _ in range(B)])
        assert torch.equal(ctx, enc) and torch.equal(tgt, pred)


def test_masks_come_from_each_sample_generator():
    """A sample's masks depend on (seed, epoch, index) and the batch counter alone: the same in any
    batch composition up to the batch's cut, so any worker count and resume draw them."""
    a = jepa.draw_masks(GRID, jepa.MASKS, 7, 0, [3, 3], [5, 9])
    b = jepa.draw_masks(GRID, jepa.MASKS, 7, 0, [3], [5])
    for (ca, ta), (cb, tb) in zip(a, b):
        assert torch.equal(ca[0], cb[0][: ca.shape[1]]) and torch.equal(ta[0], tb[0][: ta.shape[1]])
    c = jepa.draw_masks(GRID, jepa.MASKS, 7, 0, [4], [5])  # another epoch
    assert any(not torch.equal(x[0], y[0]) for x, y in zip(b, c))
    for ctx, tgt in a:  # disjoint, in token order
        for i in range(2):
            assert not set(ctx[i].tolist()) & set(tgt[i].tolist())
            assert torch.equal(ctx[i], ctx[i].sort().values)


def randomise(m, seed):
    g = torch.Generator().manual_seed(seed)
    for p in m.parameters():
        p.data.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    return m


def official_models(depth=4, pred_depth=PRED["pred_depth"]):
    """init_video_model's encoder and predictor at vjepa2_vitt16's size (use_rope, mask tokens),
    wrapped as there, float64."""
    encoder = ovit.VisionTransformer(
        img_size=CROP,
        patch_size=16,
        num_frames=T,
        tubelet_size=2,
        embed_dim=192,
        depth=depth,
        num_heads=3,
        mlp_ratio=4,
        qkv_bias=True,
        norm_layer=LN,
        use_rope=True,
        uniform_power=True,
        use_sdpa=True,
    )
    predictor = opred.vit_predictor(
        img_size=CROP,
        use_mask_tokens=True,
        patch_size=16,
        num_frames=T,
        tubelet_size=2,
        embed_dim=192,
        predictor_embed_dim=PRED["pred_width"],
        depth=pred_depth,
        num_heads=PRED["pred_heads"],
        uniform_power=True,
        num_mask_tokens=len(jepa.MASKS),
        zero_init_mask_tokens=True,
        use_rope=True,
        use_sdpa=True,
    )
    return owrap.MultiSeqWrapper(encoder), owrap.PredictorMultiSeqWrapper(predictor)


def pair(seed=0):
    """(ours, official encoder, official target encoder, official predictor): the same random
    weights (ours loaded from theirs by the official names), float64."""
    encoder, predictor = official_models()
    randomise(encoder, seed), randomise(predictor, seed + 1)
    target = randomise(official_models()[0], seed + 2)
    ours = jepa.JEPA("vjepa2_vitt16", T, CROP, **PRED)
    for part, theirs in (
        (ours.encoder, encoder),
        (ours.target_encoder, target),
        (ours.predictor, predictor),
    ):
        state = {k.removeprefix("backbone."): v for k, v in theirs.state_dict().items()}
        part.load_state_dict(state, strict=True)
    return ours.double(), encoder.double(), target.double(), predictor.double()


def official_step(encoder, target_encoder, predictor, clips, masks_enc, masks_pred, loss_exp):
    """app/vjepa/train.py train_step's forward_target, forward_context and loss_fn, transcribed (one
    clip length: clips, masks_enc, masks_pred each a list of one)."""
    h = target_encoder(clips)
    h = [nn.functional.layer_norm(hi, (hi.size(-1),)) for hi in h]
    h = [[hij.detach() for hij in hi] if isinstance(hi, list) else hi.detach() for hi in h]
    z = encoder(clips, masks_enc)
    z = predictor(z, masks_enc, masks_pred)
    apply_masks = importlib.import_module("src.masks.utils").apply_masks
    h = [apply_masks(hi, mi, concat=False) for hi, mi in zip(h, masks_pred)]
    loss, n = 0, 0
    for zi, hi in zip(z, h):
        for zij, hij in zip(zi, hi):
            loss += torch.mean(torch.abs(zij - hij) ** loss_exp) / loss_exp
            n += 1
    return loss / n


@pytest.mark.slow
@pytest.mark.parametrize("loss_exp", [1.0, 2.0])
def test_loss_and_gradients_equal_the_official_modules(loss_exp):
    ours, encoder, target, predictor = pair()
    x = torch.randn(3, 3, T, CROP, CROP, dtype=torch.float64)
    masks = jepa.draw_masks(GRID, jepa.MASKS, 4, 0, [0, 0, 0], [0, 1, 2])
    want = official_step(
        encoder, target, predictor, [x], [[c for c, _ in masks]], [[t for _, t in masks]], loss_exp
    )
    got = jepa.jepa_loss(ours(x, masks), loss_exp)
    want.backward(), got.backward()
    assert abs(got.item() - want.item()) / want.item() < 1e-12
    worst = 0.0
    for mine, theirs in ((ours.encoder, encoder), (ours.predictor, predictor)):
        theirs = dict(theirs.named_parameters())
        for name, p in mine.named_parameters():
            q = theirs[f"backbone.{name}"]
            if q.grad is None:  # the mask tokens no generator reads
                assert p.grad is None or not p.grad.any()
                continue
            worst = max(worst, ((p.grad - q.grad).norm() / q.grad.norm()).item())
    assert worst < 1e-10
    assert all(p.grad is None for p in ours.target_encoder.parameters())


def test_grad_ckpt_gives_the_same_loss_and_gradients():
    """--grad-ckpt (use_activation_checkpointing) reaches the context encoder's and the predictor's
    blocks: each runs again in the backward, and the step's loss and gradients are the same bit for
    bit, float64."""
    args = flags.parse_args(["demo", "@recipes/demo_vjepa_pretrain.txt", "--grad-ckpt"])
    args.t_length, args.crop_size = T, CROP
    torch.manual_seed(0)
    plain = jepa.JEPA("vjepa2_vitt16", T, CROP, **PRED).double()
    ckpt = jepa.build_model(args).double()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, T, CROP, CROP, dtype=torch.float64)
    masks = jepa.draw_masks(GRID, jepa.MASKS, 2, 0, [0, 0], [0, 1])
    losses, grads, calls = [], [], []
    for m in (plain, ckpt):
        seen = []
        # count the forwards (recomputed too) of an encoder block, a predictor block, a target one
        for blk in (
            m.encoder.blocks[0],
            m.predictor.predictor_blocks[0],
            m.target_encoder.blocks[0],
        ):
            blk.forward = lambda x, pos, f=blk.forward: (seen.append(1), f(x, pos))[1]
        loss = jepa.jepa_loss(m.train()(x, masks))
        loss.backward()
        losses.append(loss)
        grads.append([p.grad for p in m.parameters() if p.requires_grad])
        calls.append(len(seen))
    # the target encoder once, then per generator: the encoder and the predictor, again in backward
    assert calls == [1 + 2 * len(masks), 1 + 4 * len(masks)]
    assert torch.equal(*losses)
    assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(*grads))


@pytest.mark.slow
def test_ema_update_equals_the_official_momentum_step():
    ours, encoder, target, _ = pair()
    m = 0.99925
    ours.update_target(m)
    with torch.no_grad():  # train_step's Step 3
        params_k, params_q = [], []
        for param_q, param_k in zip(encoder.parameters(), target.parameters()):
            params_k.append(param_k)
            params_q.append(param_q)
        torch._foreach_mul_(params_k, m)
        torch._foreach_add_(params_k, params_q, alpha=1 - m)
    theirs = {k.removeprefix("backbone."): v for k, v in target.state_dict().items()}
    for k, v in ours.target_encoder.state_dict().items():
        assert torch.equal(v, theirs[k]), k


def test_schedules_equal_the_official_schedulers():
    """lr, wd and momentum at every step of a run equal WarmupCosineSchedule, CosineWDSchedule and
    train.py's momentum generator stepped as app/vjepa/train.py steps them (ipe_scale 1.25, warmup
    from start_lr, a cosine to final_lr, wd 0.04 -> 0.4, momentum 0.998 -> 1.0)."""
    ipe, epochs = 7, 5
    args = flags.get_args_parser(pretrain=True).parse_args(
        ["demo", "t", "v", "--pretrain", "--objective", "vjepa", "--epochs", str(epochs)]
        + ["--lr", "6e-4", "--lr-warmup-start", "2e-4", "--lr-min", "1e-6", "--warmup", "2"]
        + ["--wd", "0.04", "--wd-end", "0.4", "--ema-momentum", "0.998", "1.0"]
    )
    opt = torch.optim.AdamW([{"params": [nn.Parameter(torch.zeros(1))]}])
    lr_s = osched.WarmupCosineSchedule(
        opt,
        warmup_steps=2 * ipe,
        start_lr=2e-4,
        ref_lr=6e-4,
        final_lr=1e-6,
        T_max=int(1.25 * 5 * ipe),
    )
    wd_s = osched.CosineWDSchedule(opt, ref_wd=0.04, final_wd=0.4, T_max=int(1.25 * 35))
    ema = (0.998, 1.0)
    momentum = (
        ema[0] + i * (ema[1] - ema[0]) / (ipe * epochs * 1.25)
        for i in range(int(ipe * epochs * 1.25) + 1)
    )
    for step in range(ipe * epochs):
        want = (lr_s.step(), wd_s.step(), next(momentum))
        assert jepa.schedules(args, step, ipe) == want


def test_parameter_groups_are_init_opts():
    """init_opt's decayed and excluded sets (by the official names), the unread mask token in
    neither (no gradient, as there: AdamW skips it)."""
    ours, encoder, _, predictor = pair()
    want = [[], [], [], []]
    for i, part in enumerate((encoder, predictor)):
        for n, p in part.named_parameters():
            no_decay = ("bias" in n) or (len(p.shape) == 1)
            want[i + 2 * no_decay].append(n.removeprefix("backbone."))
    names = {
        id(p): n for part in (ours.encoder, ours.predictor) for n, p in part.named_parameters()
    }
    got = [[names[id(p)] for p in g["params"]] for g in jepa.param_groups(ours)]
    want[1].remove("mask_tokens.1")
    assert got == want
    assert [g.get("WD_exclude", False) for g in jepa.param_groups(ours)] == [0, 0, 1, 1]


class DDPNames(nn.Module):
    """DistributedDataParallel's names (`module.`) without a process group."""

    def __init__(self, m):
        super().__init__()
        self.module = m


@pytest.mark.slow
def test_checkpoint_keys_load_into_the_official_models_strictly(tmp_path):
    """app/vjepa/utils.py load_checkpoint (load_state_dict, strict) reads our official_state into
    DDP(MultiSeqWrapper(VisionTransformer)) and DDP(PredictorMultiSeqWrapper(vit_predictor)), the
    weights equal; --pretrained reads its target_encoder (the evals' key) into a VJEPAViT."""
    import vjepa
    import zoo

    outils = importlib.import_module("app.vjepa.utils")
    ours = pair()[0].float()
    encoder, predictor = (DDPNames(m) for m in official_models())
    target = DDPNames(official_models()[0])
    opt = torch.optim.AdamW(encoder.parameters())
    path = tmp_path / "checkpoint.pth"
    official = ours.official_state(ours.state_dict())
    torch.save({**official, "opt": opt.state_dict(), "epoch": 3}, path)
    *_, epoch = outils.load_checkpoint(str(path), encoder, predictor, target, opt, None)
    assert epoch == 3
    for mine, theirs in (
        (ours.encoder, encoder),
        (ours.target_encoder, target),
        (ours.predictor, predictor),
    ):
        theirs = theirs.module.backbone.state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in mine.state_dict().items())
    probe_model = vjepa.VJEPAViT("vjepa2_vitt16", 4)
    info = zoo.load_pretrained(probe_model, str(path))
    assert info["format"] == "official 'target_encoder'" and info["dropped"] == []
    for k, v in ours.target_encoder.state_dict().items():
        assert torch.equal(probe_model.state_dict()[k], v)


def recipe_args(name, *extra):
    """A recipe file's flags, parsed as `train.py pretrain` parses them."""
    return flags.parse_args(["kinetics400", "t", "v", f"@recipes/{name}", *extra])


def test_the_vitl_recipe_and_masks_are_the_official_config():
    """recipes/kinetics_vjepa2_vitl_pretrain.txt and jepa.MASKS against the vendored
    configs/train/vitl16/pretrain-256px-16f.yaml, key by key."""
    yaml = pytest.importorskip("yaml")
    path = REPO / "tests/reference/vjepa2/configs/train/vitl16/pretrain-256px-16f.yaml"
    cfg = yaml.safe_load(path.read_text())
    a, opt, model = (
        recipe_args("kinetics_vjepa2_vitl_pretrain.txt"),
        cfg["optimization"],
        cfg["model"],
    )
    assert (a.objective, a.arch, a.opt) == ("vjepa", "vjepa2_vitl16", "adamw")
    assert (a.pred_depth, a.pred_width, a.pred_heads) == (
        model["pred_depth"],
        model["pred_embed_dim"],
        model["pred_num_heads"],
    )
    assert (a.lr, a.lr_min, a.lr_warmup_start, a.warmup) == (
        opt["lr"],
        opt["final_lr"],
        opt["start_lr"],
        opt["warmup"],
    )
    assert (a.weight_decay, a.wd_end) == (opt["weight_decay"], opt["final_weight_decay"])
    assert a.ema_momentum == opt["ema"] and a.schedule_scale == opt["ipe_scale"]
    assert a.loss_exp == cfg["loss"]["loss_exp"] and a.batch_size == cfg["data"]["batch_size"]
    assert (a.t_length, a.crop_size) == (cfg["data"]["dataset_fpcs"][0], cfg["data"]["crop_size"])
    assert a.amp == "bf16" and a.grad_ckpt == model["use_activation_checkpointing"]
    want = [
        jepa.MaskSpec(
            tuple(m["spatial_scale"]),
            tuple(m["temporal_scale"]),
            tuple(m["aspect_ratio"]),
            m["num_blocks"],
            m["max_temporal_keep"],
        )
        for m in cfg["mask"]
    ]
    assert list(jepa.MASKS) == want
    assert not any(m["full_complement"] or m["max_keep"] for m in cfg["mask"])


def jepa_args(data, root, *extra):
    """A tiny V-JEPA pretraining run: 4 frames at 48 px (a 3 x 3 grid), a 1-block predictor."""
    return [
        "ucf101",
        *data,
        *TINY,
        "--new_size",
        "48",
        "--crop_size",
        "48",
        "--pretrain",
        "--objective",
        "vjepa",
        "--arch",
        "vjepa2_vitt16",
        "--opt",
        "adamw",
        "--lr",
        "1e-3",
        "--pred-depth",
        "1",
        "--pred-width",
        "96",
        "--pred-heads",
        "3",
        "--output_root",
        str(root),
        *extra,
    ]


@pytest.mark.parametrize(
    "given, needle",
    [
        (["--arch", "vit_t16"], "--objective vjepa pretrains a V-JEPA 2 encoder"),
        (["--arch", "vjepa2_1_vitt16"], "2.1's deep-supervised objective is not implemented"),
        (["--crop_size", "32", "--new_size", "32"], "--crop_size 32: a 2 x 2 token grid"),
        (["--opt", "sgd"], "--opt adamw"),
        (["--pred-width", "100"], "--pred-width 100: a multiple of --pred-heads 3"),
        (["--mask-ratio", "0.5"], "--mask-ratio 0.5 does nothing without --objective videomae"),
        (["--num_sample", "2"], "--num_sample: not with --objective vjepa"),
    ],
)
def test_bad_inputs_one_line(tiny_data, tmp_path, capsys, given, needle):
    with pytest.raises(SystemExit) as e:
        run_main(jepa_args(tiny_data, tmp_path, *given))
    one_line_error(capsys, needle, exc=e)
    assert not any(tmp_path.iterdir())  # refused before any work


def test_vjepa_flags_without_the_objective_are_refused(tiny_data, tmp_path, capsys):
    args = jepa_args(tiny_data, tmp_path, "--objective", "videomae", "--arch", "vit_t16")
    with pytest.raises(SystemExit) as e:
        run_main(args)
    one_line_error(capsys, "--pred-depth 1 does nothing without --objective vjepa", exc=e)


@pytest.mark.slow
def test_a_run_writes_the_official_checkpoint_its_masks_and_probes(tiny_data, tmp_path, capsys):
    """Two epochs of pretraining: the val loss in log.jsonl, masks.png, the checkpoint read by the
    official loader strictly and by --pretrained (target_encoder) for an attentive probe."""
    args = jepa_args(tiny_data, tmp_path / "pre", "--epochs", "2")
    run_main(args)
    run = tmp_path / "pre" / flags.run_dir_name(train.parse_args(args))
    logs = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in logs] == [0, 1] and all(r["val_loss"] > 0 for r in logs)
    assert Image.open(run / "masks.png").size[0] > 0
    # --evaluate --resume reads it as train.py's own file (it holds the official keys too)
    loss = run_main([*args, "--evaluate", "--resume", str(run / "checkpoint.pth")])
    assert loss == pytest.approx(logs[-1]["val_loss"], rel=1e-6)
    saved = torch.load(run / "checkpoint.pth", weights_only=False)
    encoder, predictor = (DDPNames(m) for m in official_models(pred_depth=1))
    target = DDPNames(official_models()[0])
    opt = torch.optim.AdamW(encoder.parameters())
    torch.save(
        {**{k: saved[k] for k in jepa.OFFICIAL_KEYS}, "opt": opt.state_dict(), "epoch": 2},
        tmp_path / "official.pt",
    )
    outils = importlib.import_module("app.vjepa.utils")
    outils.load_checkpoint(str(tmp_path / "official.pt"), encoder, predictor, target, opt, None)
    for k, v in target.module.backbone.state_dict().items():
        assert torch.equal(v, saved["model"][f"target_encoder.{k}"])
    # the target encoder moved away from the context encoder (EMA), both trained
    assert not torch.equal(
        saved["model"]["target_encoder.norm.weight"], saved["model"]["encoder.norm.weight"]
    )
    capsys.readouterr()
    probe_args = ["ucf101", *tiny_data, *TINY, "--new_size", "48", "--crop_size", "48"]
    probe_args += [
        "--arch",
        "vjepa2_vitt16",
        "--probe",
        "attentive",
        "--epochs",
        "1",
        "--opt",
        "adamw",
    ]
    probe_args += [
        "--pretrained",
        str(run / "checkpoint.pth"),
        "--output_root",
        str(tmp_path / "p"),
    ]
    run_main(probe_args)
    assert "(official 'target_encoder'): loaded 52" in capsys.readouterr().out
