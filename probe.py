"""Frozen-backbone probing: a ViT's tokens read by small trained heads (V-JEPA 2's evaluation
protocol).

    model = probe.ProbedModel(backbone, [vjepa.AttentiveClassifier(D, K) for _ in grid], snippet=16)
    logits = model(x)  # (B, K) of the best probe; model.grid_out = True: (B, N, K), every probe

The backbone (a V-JEPA 2 or VideoMAE ViT) is frozen: no gradient, always in eval mode (no dropout,
no drop path, no statistics move), its forward under no_grad. Its tokens are read by N probes at
once (one backbone forward per clip serves them all), each an `attentive` probe (V-JEPA 2's
AttentiveClassifier, vjepa.py) or a `linear` one (a linear layer on the mean token). A clip of S
segments (--mode TSN, --num_segments S) is encoded segment by segment and the segments' tokens
concatenated before the probe (ClipAggregation, vjepa.segment_tokens); spatial views' softmax scores
are averaged by the trainer's evaluation, as the official eval does.

The grid: --probe-lrs x --probe-wds (evals/video_classification_frozen/eval.py `multihead_kwargs`,
wd outer, lr inner as configs/eval/vitl/*.yaml list them). Each probe is one AdamW parameter group
(its own moments per parameter, its own lr and wd), scheduled as the official WarmupCosineLRSchedule
and CosineWDSchedule (eval.py), stepped before each optimizer step (with a cosine --lr_policy;
--lr_policy step scales the trainer's step schedule to each probe's lr). Every probe starts from the
same weights (its init drawn with --seed, as a single-probe run draws it), so a grid of N equals N
single-probe runs bit for bit (the official eval draws its probes one after another instead). The
training loss is the sum of the probes' losses: each probe's gradient is its own loss's.
"""

import math

import torch
import torch.nn as nn

import vjepa


class LinearProbe(nn.Module):
    """A linear classifier on the mean of the tokens."""

    def __init__(self, dim, num_classes):
        super().__init__()
        self.linear = nn.Linear(dim, num_classes)

    def pooled(self, x):
        return x.mean(1)

    def forward(self, x):
        return self.linear(self.pooled(x))


# --probe KIND: its builder (token width D, classes K, --probe-heads, --probe-blocks) -> a module of
# tokens (B, N, D) -> logits (B, K) with `pooled` (B, N, D) -> (B, D) (features.py reads it). The
# flag's choices are this table's names: a kind is added here, nowhere else.
KINDS = {
    "attentive": lambda dim, num_classes, heads, blocks: vjepa.AttentiveClassifier(
        dim, num_classes, heads, blocks
    ),
    "linear": lambda dim, num_classes, heads, blocks: LinearProbe(dim, num_classes),
}


def make_probe(kind, dim, num_classes, heads, blocks, seed):
    """One probe of KINDS, its init drawn from `seed` alone (the global RNG is left as it was)."""
    if kind not in KINDS:
        raise ValueError(f"--probe {kind}: unknown; choose one of: {', '.join(KINDS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return KINDS[kind](dim, num_classes, heads, blocks)


def grid(args):
    """[(lr, wd)] of --probe-lrs x --probe-wds: wd outer, lr inner (the eval configs' order)."""
    return [(lr, wd) for wd in args.probe_wds for lr in args.probe_lrs]


class ProbedModel(nn.Module):
    """A frozen backbone with tokens(x) -> (B, N, D) and N probes over them."""

    def __init__(self, backbone, probes, snippet=None):
        super().__init__()
        self.backbone = backbone.requires_grad_(False).eval()
        self.probes = nn.ModuleList(probes)
        self.snippet = snippet
        self.arch, self.grid_out = getattr(backbone, "arch", None), False
        self.pretrained_info = getattr(backbone, "pretrained_info", None)
        # the probe the best validation picked (saved with the weights): predict, export, features
        self.register_buffer("best", torch.zeros((), dtype=torch.long))

    def train(self, mode=True):
        super().train(mode)
        self.backbone.eval()  # frozen: dropout, drop path and normalisation as in evaluation
        return self

    def tokens(self, x):
        """The backbone's tokens of a clip (its segments' concatenated), without a graph."""
        with torch.no_grad():
            return vjepa.segment_tokens(self.backbone.tokens, x, self.snippet)

    def pooled(self, x):
        """The best probe's pooled vector (the attentive probe's query after its pooler): (B, D)."""
        return self.probes[int(self.best)].pooled(self.tokens(x))

    def forward(self, x):
        t = self.tokens(x)
        if len(self.probes) == 1 and not self.grid_out:
            return self.probes[0](t)
        out = torch.stack([p(t) for p in self.probes], 1)  # (B, N, K)
        # the best probe by a tensor index (no host sync: torch.export / ONNX take it)
        return out if self.grid_out else out.index_select(1, self.best.view(1)).squeeze(1)


def wrap(backbone, args, count=None):
    """The backbone of --arch (its weights loaded) with the probes of the flags (`count` of them,
    else one per grid point); its head dropped."""
    dim = backbone.spec.width
    backbone.head = nn.Identity()  # never used: the probes classify
    probes = [
        make_probe(
            args.probe, dim, args.num_classes, args.probe_heads, args.probe_blocks, args.seed
        )
        for _ in range(count or len(grid(args)))
    ]
    return ProbedModel(backbone, probes, args.t_length if args.mode == "TSN" else None)


def grid_loss(criterion, logits, targets):
    """The sum of the probes' losses over (B, N, K) logits: each probe's gradient is its own
    loss's."""
    if logits.dim() == 2:
        return criterion(logits, targets)
    return sum(criterion(logits[:, i], targets) for i in range(logits.shape[1]))


def first(logits):
    """The first probe's (B, K) logits of a grid's (B, N, K): the train top-1 the log line shows."""
    return logits[:, 0] if logits.dim() == 3 else logits


def optimizer(model, args, fused):
    """AdamW, one parameter group per probe, every parameter of a probe decayed (eval.py
    init_opt)."""
    groups = [
        {
            "params": list(p.parameters()),
            "lr": lr,
            "weight_decay": wd,
            "probe_lr": lr,
            "probe_wd": wd,
        }
        for p, (lr, wd) in zip(model.probes, grid(args))
    ]
    for g in groups:
        g["lr_scale"] = 1.0
    betas = tuple(args.opt_betas or (0.9, 0.999))
    return torch.optim.AdamW(groups, betas=betas, fused=fused or None)


def warmup_cosine(step, total, warmup, start, ref, final):
    """eval.py WarmupCosineLRSchedule at its `_step` = step (1-based: it steps before each
    iteration)."""
    if step < warmup:
        return start + step / max(1, warmup) * (ref - start)
    progress = (step - warmup) / max(1, total - warmup)
    return max(final, final + (ref - final) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def cosine_wd(step, total, ref, final):
    """eval.py CosineWDSchedule at its `_step` = step."""
    # progress first, then times pi: the official order of operations (to the last bit)
    wd = final + (ref - final) * 0.5 * (1.0 + math.cos(math.pi * (step / total)))
    return max(final, wd) if final <= ref else min(final, wd)


def schedule(optimizer, args, step, steps_per_epoch, lr):
    """Each probe's lr and wd for optimizer step `step` (0-based). A cosine --lr_policy: the
    official schedules at their step + 1, over --epochs x steps, warmup --warmup epochs from
    --lr-warmup-start, down to --lr-min; the wd constant (the configs' final_weight_decay =
    weight_decay). --lr_policy step: the trainer's schedule (`lr`, of --lr) scaled to each probe's
    lr."""
    total, warmup = int(args.epochs * steps_per_epoch), int(args.warmup * steps_per_epoch)
    for g in optimizer.param_groups:
        if args.lr_policy == "step":
            g["lr"] = g["probe_lr"] * (lr / args.lr)
        else:
            start = args.lr_warmup_start if warmup else g["probe_lr"]
            g["lr"] = warmup_cosine(step + 1, total, warmup, start, g["probe_lr"], args.lr_min)
        g["weight_decay"] = cosine_wd(step + 1, total, g["probe_wd"], g["probe_wd"])


# flags that would train or change the backbone, refused with --probe (dest, as typed, its active
# test)
BACKBONE_FLAGS = (
    ("layer_decay", "--layer-decay", lambda v: v < 1),
    ("drop_path", "--drop-path", lambda v: v is not None),
    ("grad_ckpt", "--grad-ckpt", bool),
    ("fc_only", "--fc_only", bool),
    ("freeze_bn", "--freeze_bn", bool),
    ("sync_bn", "--sync-bn", bool),
    ("model_ema", "--model-ema", bool),
)


def check(args, vits, vjepas):
    """Why the probe flags cannot run, in one line; None if they can. vits: the archs with tokens;
    vjepas: those whose own head is an attentive probe (--probe-weights without --probe)."""
    every = str(args.probe_weights or "").endswith(":all")
    if every and not args.evaluate:
        return (
            f"--probe-weights {args.probe_weights} scores every head of the file with --evaluate; "
            "training starts from one: FILE:K"
        )
    if not args.probe:
        if args.probe_weights and args.arch not in vjepas:
            return (
                f"--probe-weights fills an attentive probe: give --probe attentive or a {vjepas[1]}"
            )
        return None
    if args.arch not in vits:
        return (
            f"--probe reads a ViT's tokens ({', '.join(vits)}); --arch {args.arch} has none: "
            "fine-tune it, or use --fc_only"
        )
    on = [flag for dest, flag, active in BACKBONE_FLAGS if active(getattr(args, dest))]
    if on:
        return f"--probe trains the probes only, the backbone stays frozen: drop {', '.join(on)}"
    if args.opt != "adamw":
        # sgd is also the default: the message must hold whether or not --opt was typed
        return (
            f"--probe trains with AdamW (the official probes'), not --opt {args.opt}: "
            "give --opt adamw"
        )
    if args.lr <= 0:
        # --lr_policy step scales each probe's lr by the schedule's lr / --lr (schedule below)
        return (
            f"--lr {args.lr:g} with --probe: the probes' lrs are --probe-lrs, and --lr_policy step "
            "scales them by the schedule / --lr: give --lr > 0 (e.g. the first of --probe-lrs)"
        )
    if args.clip_grad > 0 and len(grid(args)) > 1:
        return (
            f"--clip-grad {args.clip_grad:g} with a grid of probes would clip them together: "
            "give --clip-grad 0, or one value each to --probe-lrs and --probe-wds"
        )
    if args.probe_weights and (args.probe != "attentive" or len(grid(args)) > 1 and not every):
        return (
            "--probe-weights fills one attentive probe: give --probe attentive, one lr and one wd"
        )
    return None


def grid_line(args, epoch, res):
    """One line: every probe's val top-1, named by its (lr, wd), or by its head in --probe-weights
    FILE:all; the best marked. epoch None: --evaluate's."""
    top1 = res["probe_top1"]
    names = [f"lr {lr:g} wd {wd:g}" for lr, wd in grid(args)]
    if len(names) != len(top1):  # --probe-weights FILE:all: the file's heads, in its order
        names = [f"head {i}" for i in range(len(top1))]
    cells = [
        f"{'*' if i == res['best_probe'] else ''}{name}: {t:.3f}"
        for i, (name, t) in enumerate(zip(names, top1))
    ]
    when = "" if epoch is None else f"epoch {epoch} "
    return f"{when}probes (val Acc@1, * the best): " + ", ".join(cells)
