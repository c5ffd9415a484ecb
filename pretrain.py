"""VideoMAE pretraining: a masked autoencoder on your own unlabelled videos, for vit.py's ViTs.

    python train.py pretrain ucf101 train.txt val.txt @recipes/ucf101_videomae_pretrain.txt
    # fine-tune
    python train.py ucf101 train.txt val.txt --arch vit_b16 --pretrained RUN/checkpoint.pth ...

`python train.py pretrain ARGS` is `python train.py ARGS --pretrain`: the same lists (labels
ignored), run folder, checkpoints, SIGTERM / --resume auto, DDP, --iter_size, --amp, --grad-ckpt and
bad-video replacement as training (train.train_one_epoch runs the step with `reconstruction` as its
objective).

Each clip is cut into tubelets of 2 x P x P pixels; `tube_mask` hides round-down(ratio x n) of the n
positions of one frame's grid and the same positions in every tubelet (TubeMaskingGenerator), drawn
from the sample's own generator (seed, epoch, index): any worker count and a resumed run draw the
same masks. The encoder sees the visible tokens only; the decoder (narrow: the arch's entry's,
`vit.decoder_of`) gets them with a learned mask token at every hidden position, both plus a fixed
sinusoid table, and predicts the hidden tubelets' pixels: normalised per patch and channel (mean and
unbiased std over its 2 x P x P pixels, + 1e-6) of the clip before input normalisation, or raw with
--raw-target. The loss is their mean squared error.

The checkpoint's weights carry the official names (models/modeling_pretrain.py
PretrainVisionTransformer: encoder.patch_embed, encoder.blocks.i, encoder.norm, encoder_to_decoder,
mask_token, decoder.blocks.i, decoder.norm, decoder.head; the position tables are not stored, as
there), so `official_state` is the identity, the official code loads them with load_state_dict, and
`--pretrained PATH` (vit_zoo's "videomae-pretrain" layout) fine-tunes them: encoder.* in,
encoder.norm and the decoder out, a new fc_norm and head.

Each epoch: the reconstruction loss on the val clips (a fixed mask per video) beside the train loss
in log.jsonl and curves.png, and reconstruction_eNNN.png (and TensorBoard's "reconstruction"): per
val video the input frames, the visible tubelets and the reconstruction, drawn as
run_videomae_vis.py does (hidden patches predicted, de-normalised with the input patch's own mean
and std; visible ones the input's).

References
- Tong, Song, Wang, Wang. VideoMAE: Masked Autoencoders are Data-Efficient Learners for
  Self-Supervised Video Pre-Training. NeurIPS 2022.
- He et al. Masked Autoencoders Are Scalable Vision Learners. CVPR 2022 (normalised pixel targets).
- Followed: OpenGVLab/VideoMAEv2 models/modeling_pretrain.py (PretrainVisionTransformer*),
  engine_for_pretraining.py (targets and loss), dataset/masking_generator.py (TubeMaskingGenerator),
  run_mae_pretraining.py (defaults); MCG-NJU/VideoMAE run_videomae_vis.py (the picture) and
  scripts/*/pretrain.sh (the recipes in recipes/*_videomae_pretrain.txt).
"""

import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader, Subset

import checkpoint
import data
import decode
import flags
import fsdp
import jepa
import rundir
import train
import vit
from errors import fail

PATCH_EPS = 1e-6  # engine_for_pretraining.py: (x - mean) / (unbiased std + 1e-6)
# "mask": the mask's generator is the sample's (seed, epoch, index, MASK_STREAM)
MASK_STREAM = 0x6D61736B


# ---- masks ---------------------------------------------------------------------------------------
def tube_mask(grid, ratio, perm):
    """(T', H', W') token grid, mask ratio and a permutation of the H'W' positions of a frame ->
    bool (T'H'W',) mask, True = hidden: TubeMaskingGenerator's [0] * (n - k) + [1] * k shuffled by
    `perm`, k = int(ratio * n) (rounded down, as there), tiled over the T' tubelets (time-major, as
    the tokens)."""
    T_, H_, W_ = grid
    n = H_ * W_
    k = hidden_per_frame(ratio, n)
    frame = torch.cat([torch.zeros(n - k, dtype=torch.bool), torch.ones(k, dtype=torch.bool)])
    return frame[torch.as_tensor(perm)].repeat(T_)


def hidden_per_frame(ratio, n):
    """Tokens hidden of a frame's n: int(ratio * n), rounded down as TubeMaskingGenerator does."""
    return int(ratio * n)


def draw_mask(grid, ratio, seed, epoch, index, views=1):
    """The mask of sample `index` in `epoch`: a permutation from its own generator (np.random's
    shuffle of the same state is the same permutation, so the official generator's draws compare
    exactly). views > 1 (--num_sample): (views, T'H'W'), view k's the k-th permutation drawn in turn
    from that generator, as VideoMAEv2's pretrain_datasets.py calls its transform (crop and mask)
    once per view."""
    rng = np.random.default_rng([seed, epoch, index, MASK_STREAM])
    masks = [tube_mask(grid, ratio, rng.permutation(grid[1] * grid[2])) for _ in range(views)]
    return masks[0] if views == 1 else torch.stack(masks)


class MaskedClips(data.Wrapped):
    """A train.make_dataset dataset whose items carry info["mask"], (T'H'W',) bool: draw_mask of the
    dataset's seed, its epoch (set_epoch: the wrapped one's) and the item's index; (K, T'H'W') for
    the K views of a train item with --num_sample K (the wrapped dataset's reps: one decode, K
    crops)."""

    def __init__(self, ds, grid, ratio):
        super().__init__(ds)
        self.grid, self.ratio = grid, ratio

    def __getitem__(self, index):
        clip, label, info = self.ds[index]
        views = self.ds.reps
        mask = draw_mask(self.grid, self.ratio, self.ds.spec.seed, self.ds.epoch, index, views)
        return clip, label, {**info, "mask": mask}


# ---- the model -----------------------------------------------------------------------------------
def _xavier(m):
    """modeling_pretrain.py's encoder / decoder _init_weights: Linear xavier uniform, bias 0; LN 1 /
    0."""
    if isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


class Encoder(nn.Module):
    """PretrainVisionTransformerEncoder: vit.py's patch embedding and blocks, a final LayerNorm, and
    the forward on the visible tokens only."""

    def __init__(self, spec, grid, drop_path=0.0, grad_ckpt=False):
        super().__init__()
        D = spec.width
        self.patch_embed = vit.PatchEmbed(D, spec.patch, spec.tubelet)
        self.register_buffer(
            "pos_embed", vit.sinusoid_table(int(np.prod(grid)), D), persistent=False
        )
        rates = torch.linspace(0, drop_path, spec.depth).tolist()
        self.blocks = nn.ModuleList(
            vit.Block(D, spec.heads, spec.mlp_ratio, rates[i]) for i in range(spec.depth)
        )
        self.norm = nn.LayerNorm(D, eps=vit.EPS)
        self.grad_ckpt = grad_ckpt
        self.apply(_xavier)

    def forward(self, x, mask, visible=None):
        """x (B, 3, T, H, W), mask (B, N) bool, the same count per row -> visible tokens (B, N_vis,
        D). visible: their indices (`split_tokens`), if known."""
        x = self.patch_embed(x) + self.pos_embed.to(x.dtype)
        visible = split_tokens(mask)[0] if visible is None else visible
        return self.norm(vit.run_blocks(self.blocks, take(x, visible), self.grad_ckpt))


def split_tokens(mask, n_visible=None):
    """(B, N) bool mask (True = hidden), the same count per row -> the indices of the visible tokens
    (B, n_visible) and of the hidden ones (B, N - n_visible), each in token order: x[~mask] and
    x[mask] as gathers of a shape known in advance, so torch.compile sees no data-dependent shape
    (no graph break, no recompilation). n_visible None: counted from the mask (a host sync)."""
    if n_visible is None:
        n_visible = mask.shape[1] - int(mask[0].sum())
    # a stable sort of 0 (visible) / 1 (hidden) keeps each group in token order
    order = torch.sort(mask.to(torch.uint8), dim=1, stable=True).indices
    return order[:, :n_visible], order[:, n_visible:]


def take(x, index):
    """x (B, N, D), index (B, n) -> (B, n, D): the rows of each sample."""
    return torch.gather(x, 1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class Decoder(nn.Module):
    """PretrainVisionTransformerDecoder: blocks, LayerNorm, a linear head to the tubelet's
    pixels."""

    def __init__(self, width, heads, depth, mlp_ratio, out, grad_ckpt=False):
        super().__init__()
        self.blocks = nn.ModuleList(vit.Block(width, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(width, eps=vit.EPS)
        self.head = nn.Linear(width, out)
        self.grad_ckpt = grad_ckpt
        self.apply(_xavier)

    def forward(self, x, n_masked):  # the last n_masked tokens are the hidden ones
        x = vit.run_blocks(self.blocks, x, self.grad_ckpt)
        return self.head(self.norm(x[:, -n_masked:]))


class PretrainViT(nn.Module):
    """PretrainVisionTransformer for vit.VIT_SPECS[arch] over t_length x crop_size clips: (x, mask)
    -> predictions (B, N_masked, tubelet * P * P * 3) for the hidden tokens, in token order.
    mask_ratio (tube_mask's): the visible count is known before the mask is (`split_tokens`), so the
    compiled model never reads it from the mask; None: counted from each batch's mask."""

    def __init__(
        self,
        arch,
        t_length,
        crop_size,
        decoder_depth=4,
        drop_path=0.0,
        grad_ckpt=False,
        mask_ratio=None,
    ):
        super().__init__()
        spec = self.spec = vit.VIT_SPECS[arch]
        self.arch = arch
        self.grid = (t_length // spec.tubelet, crop_size // spec.patch, crop_size // spec.patch)
        T_, H_, W_ = self.grid
        hidden = None if mask_ratio is None else T_ * hidden_per_frame(mask_ratio, H_ * W_)
        self.n_visible = None if hidden is None else T_ * H_ * W_ - hidden
        # (width, heads): the arch's entry's (vit.VIT_SPECS); its depth is --decoder-depth
        # (run_mae_pretraining.py default 4, as every scripts/*/pretrain.sh)
        width, heads = vit.decoder_of(spec)
        self.encoder = Encoder(spec, self.grid, drop_path, grad_ckpt)
        out = 3 * spec.tubelet * spec.patch**2
        self.decoder = Decoder(width, heads, decoder_depth, spec.mlp_ratio, out, grad_ckpt)
        self.encoder_to_decoder = nn.Linear(spec.width, width, bias=False)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, width))
        nn.init.trunc_normal_(self.mask_token, std=0.02, a=-0.02, b=0.02)
        n = int(np.prod(self.grid))
        self.register_buffer("pos_embed", vit.sinusoid_table(n, width), persistent=False)

    def forward(self, x, mask):
        visible, hidden = split_tokens(mask, self.n_visible)
        x_vis = self.encoder_to_decoder(self.encoder(x, mask, visible))  # (B, N_vis, C)
        B, _, C = x_vis.shape
        pos = self.pos_embed.to(x_vis.dtype).expand(B, -1, -1)
        # the visible tokens keep their order; the positions follow them (no unshuffling needed)
        pos_vis, pos_mask = take(pos, visible), take(pos, hidden)
        x = torch.cat([x_vis + pos_vis, self.mask_token.to(x_vis.dtype) + pos_mask], dim=1)
        return self.decoder(x, pos_mask.shape[1])


def official_state(state):
    """Our pretraining weights -> the official PretrainVisionTransformer's state dict (and the
    layout the official fine-tuning script reads, `encoder.*` kept): the names are the same, so this
    is the identity; tests/test_pretrain.py loads it into the official model strictly."""
    return dict(state)


# ---- targets and loss ----------------------------------------------------------------------------
def patches(x, patch, tubelet=2):
    """(B, C, T, H, W) -> (B, N, tubelet * patch * patch, C): engine_for_pretraining.py's rearrange
    'b c (t p0) (h p1) (w p2) -> b (t h w) (p0 p1 p2) c', tokens in the encoder's order."""
    B, C, T, H, W = x.shape
    x = x.reshape(B, C, T // tubelet, tubelet, H // patch, patch, W // patch, patch)
    x = x.permute(0, 2, 4, 6, 3, 5, 7, 1)  # b t h w p0 p1 p2 c
    return x.reshape(B, -1, tubelet * patch * patch, C)


def unpatch(p, grid, patch, tubelet=2):
    """patches' inverse: (B, N, tubelet * patch * patch, C) -> (B, C, T, H, W)."""
    B, _, _, C = p.shape
    T_, H_, W_ = grid
    p = p.reshape(B, T_, H_, W_, tubelet, patch, patch, C).permute(0, 7, 1, 4, 2, 5, 3, 6)
    return p.reshape(B, C, T_ * tubelet, H_ * patch, W_ * patch)


def patch_stats(sq):
    """Per patch and channel: mean and unbiased std + eps over the pixels (dim -2)."""
    return sq.mean(dim=-2, keepdim=True), sq.var(
        dim=-2, unbiased=True, keepdim=True
    ).sqrt() + PATCH_EPS


def targets(pixels, patch, tubelet=2, raw=False):
    """Clip in [0, 1] (B, 3, T, H, W) -> (B, N, tubelet * P * P * 3): per-patch normalised pixels,
    flattened pixel-major then channel ('b n p c -> b n (p c)'), or raw (the same order: '(p0 p1 p2
    c)')."""
    sq = patches(pixels, patch, tubelet)
    if not raw:
        mean, std = patch_stats(sq)
        sq = (sq - mean) / std
    return sq.flatten(2)


def pixels_of(x, mean, std):
    """The normalised clip x (B, 3, T, H, W) back in [0, 1], as the official engine undoes it (its
    mean and std as float32 tensors, then in x's dtype: float32, float64 in the tests)."""
    m = torch.tensor(mean).view(1, 3, 1, 1, 1).to(x)
    s = torch.tensor(std).view(1, 3, 1, 1, 1).to(x)
    return x * s + m


def reconstruction(mean, std, spec, raw=False):
    """train_one_epoch's train.Objective: the forward predicts the hidden tubelets (info["mask"]) of
    the clip, the loss is the mean squared error of the predictions against their targets; x is the
    normalised clip (mean, std undo it as the official engine does). No class scores (labels
    unused)."""

    def hidden(x, info):
        # (B, N), or (B, K, N) with --num_sample K: a row per view, each video's K views together as
        # x's
        return info["mask"].to(x.device, non_blocking=True).flatten(0, -2)

    def forward(model, x, info):
        return model(x, hidden(x, info))

    def loss(out, labels, x, info):
        with torch.no_grad():
            pixels = pixels_of(x, mean, std)
            target = targets(pixels, spec.patch, spec.tubelet, raw)
            B, _, C = target.shape
            target = target[hidden(x, info)].reshape(B, -1, C)
        return ((out.to(target.dtype) - target) ** 2).mean()  # AMP: in float32

    return train.Objective(forward, loss, classifies=False)


# ---- the reconstruction picture ------------------------------------------------------------------
def reconstruct(pixels, mask, out, patch, tubelet=2, raw=False):
    """run_videomae_vis.py: clip in [0, 1] (B, 3, T, H, W), mask (B, N), predictions (B, N_masked,
    D) -> (visible, reconstruction), each (B, 3, T, H, W): the hidden patches black / predicted
    (normalised ones de-normalised with the input patch's own mean and std), the visible ones the
    input's."""
    B, C, T, H, W = pixels.shape
    grid = (T // tubelet, H // patch, W // patch)
    sq = patches(pixels, patch, tubelet)
    mean, std = patch_stats(sq)
    pred = out.to(sq.dtype).reshape(B, -1, sq.shape[2], C)
    if not raw:
        pred = pred * std[mask].reshape(pred.shape[0], -1, 1, C) + mean[mask].reshape(B, -1, 1, C)
    rec = sq.clone()
    rec[mask] = pred.reshape(-1, *sq.shape[2:])
    keep = (~mask)[:, :, None, None].to(sq.dtype)
    return unpatch(sq * keep, grid, patch, tubelet), unpatch(rec, grid, patch, tubelet).clamp(0, 1)


def picture(pixels, visible, rec, tubelet=2):
    """One image: per video three rows (input, visible tubelets, reconstruction), a column per
    tubelet (its first frame); (3, H', W') in [0, 1]."""
    rows = [
        v[:, ::tubelet].permute(1, 0, 2, 3)
        for b in range(len(pixels))
        for v in (pixels[b], visible[b], rec[b])
    ]
    return torchvision.utils.make_grid(
        torch.cat(rows), nrow=rows[0].shape[0], padding=2, pad_value=1.0
    )


# ---- validation ----------------------------------------------------------------------------------
@torch.no_grad()
def validate(net, d, args, rt, objective):
    """The reconstruction loss over the val videos (this rank's shard, summed over ranks: exact)."""
    net.eval_model.eval()
    total, n = 0.0, 0
    for clips, labels, info in d.val_loader:
        x = data.normalize(
            clips.to(rt.device).contiguous(memory_format=rt.memory_format), rt.mean, rt.std
        )
        with rt.autocast:
            out = objective.forward(net.eval_model, x, info)
            loss = objective.loss(out, labels, x, info)
        total, n = total + loss.item() * len(clips), n + len(clips)
    total, n = rt.all_sum([total, n])
    return total / max(n, 1)


@torch.no_grad()
def draw(net, d, args, rt, epoch):
    """Rank 0: reconstruction_eNNN.png of the first --vis-videos val videos, and TensorBoard's
    image."""
    k = min(args.vis_videos, len(d.val_ds))
    if rt.rank != 0 or k == 0:
        return None
    clips, _, info = train.collate_fn(args)([d.val_masked[i] for i in range(k)])
    x = data.normalize(clips.to(rt.device), rt.mean, rt.std)
    mask = info["mask"].to(rt.device)
    net.eval_model.eval()
    with rt.autocast:
        out = net.eval_model(x, mask)
    pixels = pixels_of(x.float(), rt.mean, rt.std)
    spec = net.bare.spec
    visible, rec = reconstruct(pixels, mask, out, spec.patch, spec.tubelet, args.raw_target)
    image = picture(pixels.clamp(0, 1).cpu(), visible.cpu(), rec.cpu(), spec.tubelet)
    path = os.path.join(rt.run_dir, f"reconstruction_e{epoch:03d}.png")
    torchvision.utils.save_image(image, path)
    if rt.tensorboard:
        rt.tensorboard.add_image("reconstruction", image, epoch)
    return path


def validate_and_log(args, rt, net, d, progress, meter, objective):
    """End of an epoch: val reconstruction loss and picture (every -ef epochs), checkpoint.pth, log
    line."""
    epoch = progress.epoch
    log = {**train.epoch_log(rt, net, meter, epoch), "val_loss": None}
    progress.epoch, progress.iter = epoch + 1, 0
    if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
        try:
            with fsdp.gathered(net.bare):  # --fsdp: the whole parameters while it scores and draws
                log["val_loss"] = validate(net, d, args, rt, objective)
                path = draw(net, d, args, rt, epoch)
        except decode.BadVideo as e:
            checkpoint.save(args, rt, net, progress, d)
            fail(f"validation stopped (checkpoint.pth saved): {e}")
        drawn = f"; {path}" if path else ""  # --vis-videos 0: no picture
        print(f"epoch {epoch} * val reconstruction loss {log['val_loss']:.4f}{drawn}")
    return train.save_and_log(args, rt, net, progress, d, meter, log)


# ---- the run -------------------------------------------------------------------------------------
def check_args(args):
    """Pretraining's one-line refusals, before anything is read; then flags.check_args."""
    if args.arch not in vit.VIT_SPECS:
        fail(
            f"--arch {args.arch}: VideoMAE pretraining takes a video ViT "
            f"({', '.join(vit.VIT_SPECS)}); a V-JEPA 2 encoder pretrains with --objective vjepa"
        )
    if not 0 < args.mask_ratio < 1:
        fail(f"--mask-ratio {args.mask_ratio}: must be in (0, 1)")
    args.t_length = flags.default_t_length(args)
    if vit.geometry_error(args.arch, args.t_length, args.crop_size):
        fail(vit.geometry_error(args.arch, args.t_length, args.crop_size))
    spec = vit.VIT_SPECS[args.arch]
    if hidden_per_frame(args.mask_ratio, (args.crop_size // spec.patch) ** 2) == 0:
        fail(f"--mask-ratio {args.mask_ratio} hides no patch of a {args.crop_size} px frame")
    flags.refuse_for_pretraining(args, "--pretrain")
    flags.check_args(args)


def make_model(args):
    return PretrainViT(
        args.arch,
        args.t_length,
        args.crop_size,
        args.decoder_depth,
        args.drop_path or 0.0,
        args.grad_ckpt,
        args.mask_ratio,
    )


def mask_data(args, rt, d, grid):
    """Masks on the train items (drawn per epoch) and the val items (epoch 0's, fixed)."""
    d.train_ds = MaskedClips(d.train_ds, grid, args.mask_ratio)
    d.val_masked = MaskedClips(d.val_ds, grid, args.mask_ratio)
    d.val_loader = DataLoader(
        Subset(d.val_masked, d.val_indices),
        batch_size=args.batch_size,
        num_workers=args.workers,
        pin_memory=rt.device.type == "cuda",
        worker_init_fn=train.worker_init_fn,
        collate_fn=train.collate_fn(args),
        generator=torch.Generator().manual_seed(args.seed),
    )


def start_line(args, rt, d, model):
    n = int(np.prod(model.grid))
    hidden = model.grid[0] * hidden_per_frame(args.mask_ratio, model.grid[1] * model.grid[2])
    params = sum(p.numel() for p in model.parameters()) / 1e6
    views = f" videos x {args.ra_reps} views from one decode" if args.ra_reps > 1 else ""
    return (
        f"run folder {rt.run_dir}: pretraining {args.arch} ({params:.1f}M parameters with the "
        f"decoder) on {len(d.train_ds)} train / {len(d.val_ds)} val videos, {n - hidden} of {n} "
        f"tokens visible, {rt.world_size} process(es) x batch {args.batch_size}{views} x iter_size "
        f"{args.iter_size}, {d.steps_per_epoch} steps/epoch, lr x {train.lr_batch_scale(args):g}, "
        f"device {rt.device}"
    )


def main(args):
    if args.objective == "vjepa":  # V-JEPA 2 pretraining (jepa.py): the same trainer
        return jepa.main(args)
    check_args(args)
    rt = train.setup_runtime(args)
    rundir.prepare_run_dir(args, rt, train.get_args_parser())
    d = train.build_data(args, rt)
    net = train.build_net(args, rt, make_model(args))
    mask_data(args, rt, d, net.bare.grid)
    objective = reconstruction(rt.mean, rt.std, net.bare.spec, args.raw_target)
    progress = checkpoint.Progress()
    args.world_size = rt.world_size
    sets = flags.flag_sets()
    ckpt = checkpoint.resume(args, rt, net, progress, sets)
    rundir.resumed(args, rt, ckpt, sets)
    if args.evaluate:  # the checkpoint's val reconstruction loss (DDP: shards summed, exact)
        loss = validate(net, d, args, rt, objective)
        print(f" * val reconstruction loss {loss:.6f}")
        return loss
    rundir.open_tensorboard(args, rt)
    print(start_line(args, rt, d, net.bare))
    t_run = time.time()
    with rundir.stop_on_signals():
        while progress.epoch < args.epochs:
            meter = train.train_one_epoch(args, rt, d, net, objective, progress)
            validate_and_log(args, rt, net, d, progress, meter, objective)
            rundir.exit_if_signalled(rt, progress)
    ckpt_path = os.path.join(rt.run_dir, "checkpoint.pth")
    print(f"done in {time.time() - t_run:.0f}s: fine-tune it with --pretrained {ckpt_path}")
    if rt.world_size > 1:
        torch.distributed.destroy_process_group()
    return None


if __name__ == "__main__":  # `python train.py pretrain ARGS` hands over here
    args = train.parse_args([*sys.argv[1:], "--pretrain"])
    train.run_command(main, args)
