"""V-JEPA 2 pretraining: predict, from the visible tokens, the features that an EMA target encoder
gives the hidden space-time blocks; for vjepa.py's encoders, on your own unlabelled videos.

    python train.py pretrain demo train.txt val.txt @recipes/demo_vjepa_pretrain.txt
    # a frozen attentive probe on its target encoder
    python train.py demo train.txt val.txt --arch vjepa2_vitt16 --probe attentive \\
        --pretrained RUN/checkpoint.pth ...

`train.py pretrain --objective vjepa` runs here (pretrain.py hands over): the same lists, run
folder, checkpoints, SIGTERM / --resume auto, DDP, --fsdp and workers as VideoMAE pretraining;
train.train_one_epoch runs the step with `prediction` as its objective.

One step, as app/vjepa/train.py's train_step:
- masks: for each of the config's mask generators (MASKS: 8 small blocks of 15 % of a frame; 2
  large blocks of 70 %; every block spans the whole clip in time), a block size drawn once per
  batch from a generator seeded with the batch's global index (the official iteration counter), then
  each sample's block positions from the sample's own generator (seed, epoch, index, generator): any
  worker count and a resumed run draw the same masks. The hidden tokens are the union of the
  blocks, the context the rest; each is cut to the batch's shortest (`collate_masks`, as
  MaskCollator does).
- the target encoder (an EMA of the context encoder, no gradient) on every token, its output
  layer-normed (no affine); the context encoder on the context tokens of each generator (its own
  forward per generator, RoPE at the tokens' own positions); the predictor (`Predictor`) maps them
  to its width, adds a learned mask token at every hidden position, runs its blocks over both in
  token order and projects the hidden ones back.
- loss: per generator mean(|z - h| ** p) / p over the hidden tokens' features, then the mean over
  generators (p = --loss-exp, 1: L1).
- after the optimizer step, the target encoder moves to m * target + (1 - m) * encoder, m linear
  from --ema-momentum's first value to its second over the schedule's steps.
- lr: WarmupCosineSchedule (warmup from --lr-warmup-start to --lr, cosine to --lr-min), weight
  decay: CosineWDSchedule (--wd to --wd-end), both over --schedule-scale x the run's steps (the
  configs' ipe_scale 1.25: the run stops at 80 % of them); AdamW with the official four parameter
  groups (biases and 1-D tensors: no decay).

The checkpoint holds, beside the trainer's own keys, the official `encoder`, `target_encoder` and
`predictor` state dicts (DDP(MultiSeqWrapper(...)) names: `module.backbone.*`), so
app/vjepa/utils.py load_checkpoint reads it strictly, and `--pretrained RUN/checkpoint.pth`
(vjepa_zoo: `target_encoder`, as the official evals read it) probes or fine-tunes it.

References
- Assran et al. V-JEPA 2: Self-Supervised Video Models Enable Understanding, Prediction and
  Planning. 2025. facebookresearch/vjepa2 (MIT): app/vjepa/train.py (train_step, loss_fn, the
  momentum schedule), app/vjepa/utils.py (init_video_model, init_opt, load_checkpoint),
  src/masks/multiseq_multiblock3d.py (_MaskGenerator, MaskCollator), src/models/predictor.py
  (VisionTransformerPredictor), src/utils/schedulers.py,
  configs/train/vitl16/pretrain-256px-16f.yaml.
- Bardes et al. Revisiting Feature Prediction for Learning Visual Representations from Video
  (V-JEPA). 2024.
"""

import copy
import math
import os
import time
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Subset

import checkpoint
import data
import decode
import flags
import fsdp
import probe
import rundir
import train
import vjepa
from errors import fail

# "jepa": a sample's mask generator is (seed, epoch, index, MASK_STREAM, generator)
MASK_STREAM = 0x6A657061


class MaskSpec(NamedTuple):
    """One mask generator (a `mask:` entry of the configs; _MaskGenerator's arguments)."""

    spatial_scale: tuple  # fraction of a frame's tokens one block covers (min, max)
    temporal_scale: tuple  # fraction of the clip's tubelets it spans (min, max)
    aspect_ratio: tuple  # block height / width (min, max)
    num_blocks: int  # blocks per sample, their union hidden
    max_temporal_keep: float = 1.0  # the context spans at most this fraction of the tubelets


# configs/train/vitl16/pretrain-256px-16f.yaml `mask:` (full_complement, max_keep null: not
# implemented): short-range (8 blocks of 15 %) and long-range (2 blocks of 70 %), all in time
MASKS = (
    MaskSpec((0.15, 0.15), (1.0, 1.0), (0.75, 1.5), 8),
    MaskSpec((0.7, 0.7), (1.0, 1.0), (0.75, 1.5), 2),
)


# ---- masks ---------------------------------------------------------------------------------------
def block_size(grid, spec, g):
    """_MaskGenerator._sample_block_size: (t, h, w) of a block, three uniforms from `g`."""
    T_, H_, W_ = grid
    lo, hi = spec.temporal_scale
    t = max(1, int(T_ * (lo + torch.rand(1, generator=g).item() * (hi - lo))))
    lo, hi = spec.spatial_scale
    keep = int(H_ * W_ * (lo + torch.rand(1, generator=g).item() * (hi - lo)))
    lo, hi = spec.aspect_ratio
    ar = lo + torch.rand(1, generator=g).item() * (hi - lo)
    h = int(round(math.sqrt(keep * ar)))
    w = int(round(math.sqrt(keep / ar)))
    return t, min(h, H_), min(w, W_)


def sample_mask(grid, spec, size, g):
    """_MaskGenerator.__call__'s per-sample loop: spec.num_blocks blocks of `size` placed by `g`
    (top, left, start, in that order, each block), redrawn while no token is left visible ->
    (context, target) token indices (time-major), increasing."""
    T_, H_, W_ = grid
    t, h, w = size
    keep_t = max(1, int(T_ * spec.max_temporal_keep))
    while True:
        visible = torch.ones(grid, dtype=torch.int32)
        for _ in range(spec.num_blocks):
            top = torch.randint(0, H_ - h + 1, (1,), generator=g)
            left = torch.randint(0, W_ - w + 1, (1,), generator=g)
            start = torch.randint(0, T_ - t + 1, (1,), generator=g)
            block = torch.ones(grid, dtype=torch.int32)
            block[start : start + t, top : top + h, left : left + w] = 0
            # the context spans only the first max_temporal_keep of the tubelets
            block[keep_t:] = 0
            visible *= block
        visible = visible.flatten()
        if visible.any():
            return visible.nonzero().flatten(), (visible == 0).nonzero().flatten()


def collate_masks(pairs):
    """[(context, target)] of a batch -> (B, n_ctx), (B, n_tgt): each cut to the batch's shortest,
    as MaskCollator does (the lowest indices kept)."""
    n_ctx = min(len(c) for c, _ in pairs)
    n_tgt = min(len(t) for _, t in pairs)
    return torch.stack([c[:n_ctx] for c, _ in pairs]), torch.stack([t[:n_tgt] for _, t in pairs])


def sample_generator(seed, epoch, index, k):
    """The generator of sample `index`'s positions for mask generator k in `epoch`."""
    rng = np.random.default_rng([seed, epoch, index, MASK_STREAM, k])
    return torch.Generator().manual_seed(int(rng.integers(2**63)))


def draw_masks(grid, specs, batch, seed, epochs, indices):
    """The masks of one batch: per generator k, the block size from a generator seeded with
    `batch` (the official iteration counter; every generator's counter moves together), each
    sample's positions from its own generator -> [(context (B, n), target (B, m))] per k."""
    out = []
    for k, spec in enumerate(specs):
        size = block_size(grid, spec, torch.Generator().manual_seed(int(batch)))
        pairs = [
            sample_mask(grid, spec, size, sample_generator(seed, int(e), int(i), k))
            for e, i in zip(epochs, indices)
        ]
        out.append(collate_masks(pairs))
    return out


class Indexed(data.Wrapped):
    """A train.make_dataset dataset whose items carry info["index"] and info["epoch"]: what the
    step draws each sample's masks from."""

    def __getitem__(self, index):
        clip, label, info = self.ds[index]
        return clip, label, {**info, "index": index, "epoch": self.ds.epoch}


# ---- the model -----------------------------------------------------------------------------------
def gather(x, index):
    """apply_masks for one mask: x (B, N, D), index (B, n) -> (B, n, D)."""
    return torch.gather(x, 1, index[..., None].expand(-1, -1, x.shape[-1]))


def positions(ids, grid):
    """Token indices (B, n) -> (3, B, n) frame, row, column (RoPEAttention.separate_positions)."""
    _, H_, W_ = grid
    return torch.stack((ids // (H_ * W_), ids % (H_ * W_) // W_, ids % W_))


class Predictor(nn.Module):
    """predictor.py VisionTransformerPredictor (vit_predictor, use_rope, use_mask_tokens, zero-init
    mask tokens): context tokens -> predicted features of the target tokens. Parameter names are
    the official ones."""

    def __init__(
        self, dim, width, depth, heads, mask_tokens, mlp_ratio=4.0, drop_path=0.0, grad_ckpt=False
    ):
        super().__init__()
        self.grad_ckpt = grad_ckpt
        self.predictor_embed = nn.Linear(dim, width)
        self.mask_tokens = nn.ParameterList(
            nn.Parameter(torch.zeros(1, 1, width)) for _ in range(mask_tokens)
        )
        rates = torch.linspace(0, drop_path, depth).tolist()
        self.predictor_blocks = nn.ModuleList(
            vjepa.Block(width, heads, mlp_ratio, rates[i]) for i in range(depth)
        )
        self.predictor_norm = nn.LayerNorm(width, eps=vjepa.EPS)
        self.predictor_proj = nn.Linear(width, dim)
        self.apply(vjepa.init_weights)
        vjepa.rescale(self.predictor_blocks)

    def forward(self, x, ctx, tgt, grid, mask_index=0):
        """x (B, n_ctx, dim) at tokens ctx (B, n_ctx); tgt (B, n_tgt) -> (B, n_tgt, dim)."""
        B, n_ctx, _ = x.shape
        x = self.predictor_embed(x)
        token = self.mask_tokens[mask_index % len(self.mask_tokens)]
        x = torch.cat([x, token.to(x.dtype).expand(B, tgt.shape[1], -1)], dim=1)
        ids = torch.cat([ctx, tgt], dim=1)
        # the blocks see the tokens in token order (the official argsort), then the order returns
        order = torch.argsort(ids, dim=1)
        x, ids = gather(x, order), torch.gather(ids, 1, order)
        pos = positions(ids, grid)
        x = vjepa.run_blocks(self.predictor_blocks, x, pos, self.grad_ckpt)
        x = gather(self.predictor_norm(x), torch.argsort(order, dim=1))
        return self.predictor_proj(x[:, n_ctx:])


# what the official checkpoint (app/vjepa/train.py save_checkpoint) holds the networks under
OFFICIAL_KEYS = ("encoder", "target_encoder", "predictor")


class JEPA(nn.Module):
    """The context encoder, its EMA target encoder and the predictor, for vjepa.VJEPA_SPECS[arch]
    over t_length x crop_size clips: (x, masks) -> [(predictions, targets)], one pair per mask
    generator, each (B, n_tgt, width)."""

    def __init__(
        self,
        arch,
        t_length,
        crop_size,
        pred_depth,
        pred_width,
        pred_heads,
        masks=MASKS,
        grad_ckpt=False,
    ):
        super().__init__()
        self.arch, self.masks = arch, masks
        # grad_ckpt: the context encoder's and the predictor's blocks recomputed in the backward
        # (use_activation_checkpointing); the target encoder runs without gradients, so never
        self.encoder = vjepa.VJEPAViT(arch, None, grad_ckpt=grad_ckpt)
        self.spec = self.encoder.spec
        side = crop_size // self.spec.patch
        self.grid = (t_length // self.spec.tubelet, side, side)
        # init_video_model: one mask token per generator and clip length (one length here); the
        # predictor reads token 0 (PredictorMultiSeqWrapper's mask_index is the length's index)
        self.predictor = Predictor(
            self.spec.width, pred_width, pred_depth, pred_heads, len(masks), grad_ckpt=grad_ckpt
        )
        for t in self.predictor.mask_tokens[1:]:
            t.requires_grad_(False)  # never read: no gradient (DDP), never decayed (as there)
        self.target_encoder = copy.deepcopy(self.encoder).requires_grad_(False)

    def targets(self, x):
        """forward_target: the target encoder's tokens, layer-normed without affine."""
        with torch.no_grad():
            h = self.target_encoder.tokens(x)
            return F.layer_norm(h, (h.shape[-1],))

    def forward(self, x, masks):
        h = self.targets(x)
        out = []
        for ctx, tgt in masks:
            z = self.encoder.tokens(x, ctx)
            out.append((self.predictor(z, ctx, tgt, self.grid), gather(h, tgt)))
        return out

    @torch.no_grad()
    def update_target(self, m):
        """target = m * target + (1 - m) * encoder (train_step's Step 3, _foreach in its order).
        --fsdp: on each rank's local shards; the two encoders are sharded alike and the update is
        elementwise, so no communication."""
        target = fsdp.local_shards(self.target_encoder.parameters())
        online = fsdp.local_shards(self.encoder.parameters())
        torch._foreach_mul_(target, m)
        torch._foreach_add_(target, online, alpha=1 - m)

    def official_state(self, state):  # OFFICIAL_KEYS
        """This model's whole state dict (its own, or --fsdp's gathered on rank 0) -> {encoder,
        target_encoder, predictor}: the official checkpoint's state dicts, in its DDP
        (MultiSeqWrapper / PredictorMultiSeqWrapper) names; the tensors are the state's own (saved
        once)."""
        return {
            name: {
                f"module.backbone.{k[len(name) + 1 :]}": v
                for k, v in state.items()
                if k.startswith(name + ".")
            }
            for name in OFFICIAL_KEYS
        }


def jepa_loss(out, p=1.0):
    """loss_fn: mean(|z - h| ** p) / p per generator, averaged over them. Under AMP the targets are
    float32 (layer_norm autocasts to it), so z - h is too, as there."""
    return sum(torch.mean((z - h).abs() ** p) / p for z, h in out) / len(out)


# ---- the objective and its schedules -------------------------------------------------------------
def schedules(args, step, steps_per_epoch):
    """(lr, wd, momentum) of optimizer step `step` (0-based): WarmupCosineSchedule and
    CosineWDSchedule at their `_step` = step + 1 (they step before each iteration), the momentum
    generator's step-th value, over T = int(--schedule-scale x --epochs x steps per epoch)."""
    total = int(args.schedule_scale * args.epochs * steps_per_epoch)
    warmup = int(args.warmup * steps_per_epoch)
    start = args.lr_warmup_start if warmup else args.lr
    lr = probe.warmup_cosine(step + 1, total, warmup, start, args.lr, args.lr_min)
    wd_end = args.weight_decay if args.wd_end is None else args.wd_end
    wd = probe.cosine_wd(step + 1, total, args.weight_decay, wd_end)
    m0, m1 = args.ema_momentum
    return lr, wd, m0 + step * (m1 - m0) / (steps_per_epoch * args.epochs * args.schedule_scale)


def param_groups(model):
    """init_opt's four groups: encoder and predictor weights (scheduled decay), then their biases
    and 1-D tensors (no decay, WD_exclude); the target encoder and the unread mask tokens take no
    step."""
    groups = []
    for no_decay in (False, True):
        for part in (model.encoder, model.predictor):
            params = [
                p
                for n, p in part.named_parameters()
                if p.requires_grad and (("bias" in n) or p.ndim == 1) == no_decay
            ]
            extra = {"weight_decay": 0.0, "WD_exclude": True} if no_decay else {}
            groups.append({"params": params, "lr_scale": 1.0, **extra})
    return groups


def prediction(args, grid):
    """train_one_epoch's train.Objective: masks drawn for the batch, the predictions and targets per
    mask generator, their loss; the official lr / wd schedules before each step and the target
    encoder's momentum update after it. No class scores (labels unused)."""

    def forward(model, x, info):
        epochs = info.get("epoch", torch.zeros(len(x), dtype=torch.long))
        masks = draw_masks(grid, MASKS, info.get("batch", 0), args.seed, epochs, info["index"])
        masks = [(c.to(x.device), t.to(x.device)) for c, t in masks]
        return model(x, masks)

    def schedule(optimizer, step, steps_per_epoch):
        lr, wd, _ = schedules(args, step, steps_per_epoch)
        for g in optimizer.param_groups:
            g["lr"] = lr
            if not g.get("WD_exclude"):
                g["weight_decay"] = wd
        return lr

    def after_step(net, step, steps_per_epoch):
        net.bare.update_target(schedules(args, step, steps_per_epoch)[2])

    return train.Objective(
        forward,
        lambda out, labels, x, info: jepa_loss(out, args.loss_exp),
        classifies=False,
        schedule=schedule,
        after_step=after_step,
    )


# ---- validation and the picture of the masks -----------------------------------------------------
def val_masks(grid, seed, index):
    """A val video's fixed masks: block sizes of batch 0, positions of epoch 0, uncut (a batch of
    its own), so the val loss is the same in any batch size and process count."""
    return draw_masks(grid, MASKS, 0, seed, [0], [index])


@torch.no_grad()
def validate(net, d, args, rt):
    """The prediction loss over the val videos, each with its fixed masks (this rank's shard, summed
    over ranks: exact)."""
    net.eval_model.eval()
    total, n = 0.0, 0
    for clips, _, info in d.val_loader:
        x = data.normalize(clips.to(rt.device), rt.mean, rt.std)
        for i, index in enumerate(info["index"].tolist()):
            masks = val_masks(net.bare.grid, args.seed, index)
            masks = [(c.to(rt.device), t.to(rt.device)) for c, t in masks]
            with rt.autocast:
                total += jepa_loss(net.eval_model(x[i : i + 1], masks), args.loss_exp).item()
            n += 1
    total, n = rt.all_sum([total, n])
    return total / max(n, 1)


def mask_picture(clips, grid, seed, indices, patch=16, tubelet=2):
    """Per val video and mask generator a row: one column per tubelet (its first frame), the context
    tokens as they are, the target tokens darkened and tinted red; (3, H', W') in [0, 1]."""
    rows = []
    for clip, index in zip(clips, indices):  # clip (3, T, H, W) in [0, 1]
        frames = clip[:, ::tubelet].permute(1, 0, 2, 3)  # (T', 3, H, W)
        for ctx, _ in val_masks(grid, seed, index):
            seen = torch.zeros(grid[0] * grid[1] * grid[2])
            seen[ctx[0]] = 1
            seen = seen.view(grid[0], 1, grid[1], grid[2])
            seen = seen.repeat_interleave(patch, 2).repeat_interleave(patch, 3)
            tint = torch.tensor([0.5, 0.0, 0.0]).view(1, 3, 1, 1)
            rows.append(frames * seen + (0.3 * frames + tint) * (1 - seen))
    return torchvision.utils.make_grid(torch.cat(rows), nrow=grid[0], padding=2, pad_value=1.0)


def draw_masks_png(args, rt, d, grid):
    """Rank 0: masks.png in the run folder, the first --vis-videos val videos' fixed masks."""
    k = min(args.vis_videos, len(d.val_ds))
    if rt.rank != 0 or k == 0:
        return None
    clips = torch.stack([d.val_ds[i][0] for i in range(k)]).float() / 255  # (k, 3, T, H, W)
    path = os.path.join(rt.run_dir, "masks.png")
    torchvision.utils.save_image(mask_picture(clips, grid, args.seed, range(k)), path)
    return path


def validate_and_log(args, rt, net, d, progress, meter):
    """End of an epoch: val prediction loss (every -ef epochs), checkpoint.pth, log line."""
    epoch = progress.epoch
    log = {**train.epoch_log(rt, net, meter, epoch), "val_loss": None}
    progress.epoch, progress.iter = epoch + 1, 0
    if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
        try:
            # --fsdp: the whole parameters while it scores (ranks score different counts)
            with fsdp.gathered(net.bare):
                log["val_loss"] = validate(net, d, args, rt)
        except decode.BadVideo as e:
            checkpoint.save(args, rt, net, progress, d)
            fail(f"validation stopped (checkpoint.pth saved): {e}")
        print(f"epoch {epoch} * val prediction loss {log['val_loss']:.4f}")
    return train.save_and_log(args, rt, net, progress, d, meter, log)


# ---- the run -------------------------------------------------------------------------------------
def check_args(args):
    """V-JEPA pretraining's one-line refusals, before anything is read; then flags.check_args."""
    v2 = [a for a, s in vjepa.VJEPA_SPECS.items() if not s.mod_embed]
    if args.arch not in v2:
        fail(
            f"--arch {args.arch}: --objective vjepa pretrains a V-JEPA 2 encoder ({', '.join(v2)}; "
            "2.1's deep-supervised objective is not implemented)"
        )
    args.t_length = flags.default_t_length(args)
    if vjepa.geometry_error(args.arch, args.t_length, args.crop_size):
        fail(vjepa.geometry_error(args.arch, args.t_length, args.crop_size))
    side = args.crop_size // vjepa.VJEPA_SPECS[args.arch].patch
    for spec in MASKS:  # the smallest block must hide a token
        keep = int(side * side * spec.spatial_scale[0])
        if min(round(math.sqrt(keep * r)) for r in spec.aspect_ratio) < 1:
            fail(
                f"--crop_size {args.crop_size}: a {side} x {side} token grid is too small for "
                f"blocks of {spec.spatial_scale[0]:g} of a frame (they hide no token); give more"
            )
    if args.pred_width % args.pred_heads:
        fail(f"--pred-width {args.pred_width}: a multiple of --pred-heads {args.pred_heads}")
    if args.opt != "adamw":
        fail(f"--opt {args.opt}: V-JEPA pretraining's optimizer is AdamW (init_opt): --opt adamw")
    more = {
        "--num_sample": args.ra_reps > 1,
        "--layer-decay": args.layer_decay < 1,
        "--lr-batch": args.lr_batch,
    }
    flags.refuse_for_pretraining(args, "--objective vjepa", more)
    flags.check_args(args)


def build_model(args):
    return JEPA(
        args.arch,
        args.t_length,
        args.crop_size,
        args.pred_depth,
        args.pred_width,
        args.pred_heads,
        grad_ckpt=args.grad_ckpt,
    )


def index_data(args, rt, d):
    """Items with their index and epoch (the masks' draw); the val loader over them."""
    d.train_ds, d.val_indexed = Indexed(d.train_ds), Indexed(d.val_ds)
    d.val_loader = DataLoader(
        Subset(d.val_indexed, d.val_indices),
        batch_size=args.batch_size,
        num_workers=args.workers,
        worker_init_fn=train.worker_init_fn,
        collate_fn=train.collate_fn(args),
        generator=torch.Generator().manual_seed(args.seed),
    )


def main(args):
    check_args(args)
    rt = train.setup_runtime(args)
    rundir.prepare_run_dir(args, rt, train.get_args_parser())
    d = train.build_data(args, rt)
    net = train.build_net(args, rt, build_model(args))
    # the official four groups and betas / eps in place of the trainer's groups
    betas = tuple(args.opt_betas or (0.9, 0.999))
    net.optimizer = torch.optim.AdamW(param_groups(net.bare), lr=args.lr, betas=betas, eps=1e-8)
    index_data(args, rt, d)
    objective = prediction(args, net.bare.grid)
    progress = checkpoint.Progress()
    args.world_size = rt.world_size
    sets = flags.flag_sets()
    ckpt = checkpoint.resume(args, rt, net, progress, sets)
    rundir.resumed(args, rt, ckpt, sets)
    if args.evaluate:  # the checkpoint's val prediction loss (DDP: shards summed, exact)
        loss = validate(net, d, args, rt)
        print(f" * val prediction loss {loss:.6f}")
        return loss
    rundir.open_tensorboard(args, rt)
    params = sum(p.numel() for p in net.bare.encoder.parameters()) / 1e6
    print(
        f"run folder {rt.run_dir}: V-JEPA pretraining of {args.arch} ({params:.1f}M parameters, "
        f"predictor {args.pred_depth} x {args.pred_width}) on {len(d.train_ds)} train / "
        f"{len(d.val_ds)} val videos, {rt.world_size} process(es) x batch {args.batch_size} x "
        f"iter_size {args.iter_size}, {d.steps_per_epoch} steps/epoch, device {rt.device}; "
        f"masks: {draw_masks_png(args, rt, d, net.bare.grid)}"
    )
    t_run = time.time()
    with rundir.stop_on_signals():
        while progress.epoch < args.epochs:
            meter = train.train_one_epoch(args, rt, d, net, objective, progress)
            validate_and_log(args, rt, net, d, progress, meter)
            rundir.exit_if_signalled(rt, progress)
    ckpt_path = os.path.join(rt.run_dir, "checkpoint.pth")
    print(
        f"done in {time.time() - t_run:.0f}s: probe its target encoder with --pretrained "
        f"{ckpt_path} --probe attentive"
    )
    if rt.world_size > 1:
        torch.distributed.destroy_process_group()
    return None
