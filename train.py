"""Train and evaluate 3D ConvNets (I3D ResNet-3D) for video action recognition.

Launch manual
-------------
CPU demo (builds a small synthetic motion dataset in ./output on first use, ~1 minute):
    python train.py demo

One GPU, or DataParallel over every visible GPU (the original project's command, verbatim):
    CUDA_VISIBLE_DEVICES=2,3 python train.py ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 \
        --mode 3D --t_length 16 --t_stride 4 --pretrained --epochs 95 --batch-size 64 --lr 0.001 \
        --lr_steps 40 80 90 --workers 16 --image_tmpl img_{:05d}.jpg

DistributedDataParallel, one process per GPU (-b is then per process: global batch = b x GPUs):
    torchrun --nproc_per_node=8 train.py ucf101 train.txt val.txt --ddp -b 8 ...
Several machines (run on each node; torchrun's rendezvous sets RANK / LOCAL_RANK / WORLD_SIZE):
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \
        train.py ucf101 train.txt val.txt --ddp ...

Evaluate a checkpoint (1 centred clip; or 10 clips x 3 crops, softmax averaged per video):
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth --test_clips 10 --test_crops 3

Resume after a crash or preemption (SIGTERM saves checkpoint.pth and exits 143):
    python train.py ... --resume auto

References: pytorch/examples imagenet/main.py (flags, top-k), torchvision references/
video_classification (distributed setup, warmup + MultiStepLR per iteration, no-WD for norm layers),
PySlowFast / mmaction2 (I3D recipe, multi-view testing), BannyStone/Video_Classification_PyTorch
(the flags and run-folder name kept here).
"""
import argparse
import builtins
import json
import math
import os
import random
import resource
import shutil
import signal
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, Subset

import data
import model as models

# Datasets whose labels name a direction (a flipped "moving left" is "moving right"): no horizontal flips.
NO_FLIP = {"sthv1", "sthv2", "demo"}
NUM_CLASSES = {"ucf101": 101, "hmdb51": 51, "kinetics400": 400, "kinetics200": 200, "sthv1": 174, "sthv2": 174}
# `python train.py demo`: a tiny recipe that learns data.py's synthetic motion classes on a CPU in ~1 min.
DEMO_DATA = dict(videos=128, frames=24, size=(64, 48))  # per split; small frames keep it CPU-fast
DEMO_DEFAULTS = dict(arch="resnet10_3d", t_length=8, t_stride=2, new_size=48, crop_size=40, epochs=12, batch_size=8,
                     lr=0.02, lr_steps=[9], warmup=1, dropout=0.0, workers=2, eval_freq=1, print_freq=8)


def positive(text):
    """argparse type for counts and sizes: a 0 would only fail later, as a division by zero."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def get_args_parser():
    p = argparse.ArgumentParser(description="Train / evaluate 3D ConvNets on video frame folders.", add_help=True)
    p.add_argument("dataset", help=f"one of {', '.join(NUM_CLASSES)} (sets the number of classes), 'demo', or any name (classes from the lists)")
    p.add_argument("train_list", nargs="?", help="list file: '<frame_dir> <num_frames> <label>' per line (optional for demo)")
    p.add_argument("val_list", nargs="?", help="validation list file, same format (optional for demo)")
    # model (the original project's flags)
    p.add_argument("-a", "--arch", default="resnet50_3d", help=f"one of: {', '.join(models.ARCHS)}")
    p.add_argument("--dro", "--dropout", dest="dropout", default=0.2, type=float, help="dropout before fc")
    p.add_argument("--mode", default="3D", choices=["3D"], help="clip mode (the original's 2D/TSN modes are not kept)")
    p.add_argument("--t_length", default=16, type=positive, help="frames per clip")
    p.add_argument("--t_stride", default=4, type=positive, help="frames between sampled frames")
    p.add_argument("--new_size", default=256, type=positive, help="short side in px before cropping (train jitters it to 1.25x)")
    p.add_argument("--crop_size", default=224, type=positive, help="square crop in px")
    p.add_argument("--pretrained", nargs="?", const="imagenet", default=None, help="imagenet | imagenet_v2 | PATH (2D ResNet or 3D checkpoint); bare = imagenet")
    p.add_argument("--pretrained_model", default=None, help="PATH to pretrained weights (overrides --pretrained)")
    p.add_argument("--inflate", default="mean", choices=["mean", "center"], help="how 2D kernels are inflated over time")
    p.add_argument("--num_classes", default=None, type=int, help="override the number of classes")
    p.add_argument("--no_flip", action="store_true", help=f"no horizontal flips in training (always for {', '.join(sorted(NO_FLIP))})")
    # optimisation
    p.add_argument("--epochs", default=95, type=positive, help="total epochs")
    p.add_argument("-b", "--batch-size", dest="batch_size", default=64, type=positive, help="clips per process per step (DataParallel splits it over GPUs; with --ddp global batch = b x world size)")
    p.add_argument("--lr", "--learning-rate", dest="lr", default=0.001, type=float, help="initial learning rate (not scaled with the batch)")
    p.add_argument("--lr_steps", default=[40, 80, 90], type=float, nargs="+", help="epochs at which the lr is multiplied by 0.1")
    p.add_argument("--warmup", default=0.0, type=float, help="epochs of linear lr warmup, stepped per iteration")
    p.add_argument("--momentum", default=0.9, type=float, help="SGD momentum")
    p.add_argument("--wd", "--weight-decay", dest="weight_decay", default=5e-4, type=float, help="weight decay (not on BN/bias unless --bn_bias_wd)")
    p.add_argument("--bn_bias_wd", action="store_true", help="also decay BN weights and biases (the original project did)")
    p.add_argument("--clip-grad", dest="clip_grad", default=0.0, type=float, help="max grad norm (0 = off)")
    p.add_argument("--label-smoothing", dest="label_smoothing", default=0.0, type=float, help="cross-entropy label smoothing")
    # monitoring
    p.add_argument("-p", "--print-freq", dest="print_freq", default=20, type=positive, help="log every N iterations")
    p.add_argument("-ef", "--eval-freq", dest="eval_freq", default=2, type=positive, help="validate every N epochs (and after the last)")
    # runtime
    p.add_argument("-j", "--workers", default=4, type=int, help="data loading worker processes per process")
    p.add_argument("--resume", default="", help="checkpoint PATH to resume from, or 'auto' (the run folder's checkpoint.pth if present)")
    p.add_argument("-e", "--evaluate", action="store_true", help="only evaluate the --resume checkpoint on val_list")
    p.add_argument("--start-epoch", dest="start_epoch", default=0, type=int, help="manual epoch number (overridden by --resume)")
    p.add_argument("--output_root", default="./output", help="run folders go here")
    p.add_argument("--image_tmpl", default="img_{:05d}.jpg", help="frame file name template, formatted with the frame number")
    p.add_argument("--data_root", default=None, help="folder that frame_dirs are relative to (default: each list's folder)")
    # new flags
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel under torchrun (else DataParallel over visible GPUs)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="mixed precision (fp16 uses a GradScaler)")
    p.add_argument("--sync-bn", dest="sync_bn", action="store_true", help="synchronise BatchNorm statistics across DDP processes")
    p.add_argument("--channels-last", dest="channels_last", action="store_true", help="channels_last_3d memory format (faster convs on tensor cores)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--seed", default=0, type=int, help="seed for init, sampling and augmentation")
    p.add_argument("--test_clips", default=1, type=positive, help="--evaluate: clips per video, spread over the whole video")
    p.add_argument("--test_crops", default=1, type=int, choices=[1, 3, 10], help="--evaluate: spatial crops per clip (3: the whole short side, resized to --crop_size, mmaction2's ThreeCrop at --crop_size 256; 10: 4 corners + centre at short side --new_size, each also mirrored, the original project's test_10crop.py)")
    p.add_argument("--test_sampling", default="ours", choices=data.PLACEMENTS, help="where val/test clips go: ours (first frame to last), pyslowfast, mmaction2 (their test-time formulas)")
    p.add_argument("--save_scores", action="store_true", help="--evaluate: write per-video softmax scores to the run folder (.npz)")
    return p


def fail(msg):
    """A user error: one clear line, exit status 2, no traceback."""
    print(f"train.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run_dir_name(args):
    # The original project's experiment id, so old and new runs sort side by side.
    return f"{args.dataset}_{args.arch}_{args.mode}_length{args.t_length}_stride{args.t_stride}_dropout{args.dropout}"


def init_distributed(args):
    """torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; without --ddp this is one process."""
    if not args.ddp:
        return 0, 1, 0
    if "RANK" not in os.environ:
        fail("--ddp needs torchrun, e.g. torchrun --nproc_per_node=8 train.py ... --ddp")
    rank, world_size, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if args.device.startswith("cuda"):
        torch.cuda.set_device(local_rank)  # one GPU per process, before NCCL touches any device
    dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    if rank != 0:  # only rank 0 prints (model.py's pretrained summary included)
        builtins.print = lambda *a, **k: None
    return rank, world_size, local_rank


def param_groups(model, weight_decay, decay_all):
    # Weight decay on BN scales/shifts and biases only hurts (Goyal et al. 2017; torchvision references).
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if decay_all or p.ndim > 1 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def worker_init_fn(worker_id):
    # Trap: forked workers inherit the parent's numpy/random state, so every worker would draw the same
    # "random" numbers. data.py seeds its own generators per sample; this protects code you add.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
    # Trap: a preemption SIGTERM (or Ctrl-C) goes to the whole process group. A worker it kills makes the main
    # process raise mid-step, before it can save. Workers ignore both; the main process saves, then ends them.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def atomic_save(obj, path):
    """Write to a temp file, flush to disk, then rename: a crash mid-save never destroys the last good file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def gather(obj, world_size):
    if world_size == 1:
        return [obj]
    out = [None] * world_size
    dist.all_gather_object(out, obj)
    return out


def get_rng_state(world_size):
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
             "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}
    return gather(state, world_size)  # one per rank: each rank has its own dropout stream


def set_rng_state(states, rank):
    s = states[rank]
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    if s["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(s["cuda"])


def any_rank(flag, world_size, device):
    """Ranks may see a signal at different steps: agree before anyone stops, or the others hang."""
    if world_size == 1:
        return bool(flag)
    t = torch.tensor([float(flag)], device=device)
    dist.all_reduce(t)
    return t.item() > 0


@torch.no_grad()
def evaluate(model, loader, indices, args, device, autocast, world_size, memory_format):
    """Top-1/top-5 of softmax scores averaged over each video's views.

    Exact under DDP: each rank scores a disjoint shard (indices rank::world, no padding, so no video
    counted twice), then the per-video scores are gathered and every rank computes the same numbers.
    """
    model.eval()
    scores, labels = [], []
    for clips, target, _ in loader:
        clips = data.normalize(clips.to(device, non_blocking=True))
        if clips.dim() == 5:  # one view per video: (B, 3, T, H, W) -> (B, 1, 3, T, H, W)
            clips = clips.unsqueeze(1)
        B, V = clips.shape[:2]
        clips = clips.flatten(0, 1).contiguous(memory_format=memory_format)  # (B*V, 3, T, H, W)
        with autocast:
            logits = model(clips)
        scores.append(logits.float().softmax(-1).view(B, V, -1).mean(1).cpu())  # average views per video
        labels.append(target)
    scores = torch.cat(scores) if scores else torch.zeros(0, args.num_classes)
    labels = torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long)
    # Put every rank's shard back in dataset order.
    all_scores = torch.zeros(len(loader.dataset.dataset), args.num_classes)
    all_labels = torch.zeros(len(loader.dataset.dataset), dtype=torch.long)
    for idx, s, l in gather((indices, scores, labels), world_size):
        all_scores[idx], all_labels[idx] = s, l
    k = min(5, args.num_classes)
    topk = all_scores.topk(k, dim=1).indices
    top1 = (topk[:, 0] == all_labels).float().mean().item() * 100
    top5 = (topk == all_labels[:, None]).any(1).float().mean().item() * 100
    return top1, top5, all_scores, all_labels


def main(args):
    # ---- args ------------------------------------------------------------------------------------
    if args.dataset == "demo":
        args.train_list = args.train_list or os.path.join(args.output_root, "demo_data", "train.txt")
        args.val_list = args.val_list or os.path.join(args.output_root, "demo_data", "val.txt")
    if not args.train_list or not args.val_list:
        fail("give train_list and val_list (only 'demo' makes its own)")
    if args.evaluate and not args.resume:
        fail("--evaluate needs --resume CHECKPOINT")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {args.device} but no CUDA GPU is visible; use --device cpu")
    if args.amp == "fp16" and not args.device.startswith("cuda"):
        fail("--amp fp16 needs a CUDA device; use --amp bf16 on CPU")
    run_dir = os.path.join(args.output_root, run_dir_name(args))

    # ---- distributed -----------------------------------------------------------------------------
    rank, world_size, local_rank = init_distributed(args)
    device = torch.device(f"cuda:{local_rank}" if args.device.startswith("cuda") and args.ddp else args.device)
    torch.manual_seed(args.seed)  # same init on every rank; DDP broadcasts rank 0's anyway
    # cuDNN trap: benchmark mode times every 3D conv algorithm once per input shape. A win for fixed-size
    # training; for evaluation (one pass, other shapes) it only costs time and workspace memory.
    torch.backends.cudnn.benchmark = not args.evaluate

    # ---- data ------------------------------------------------------------------------------------
    if args.dataset == "demo" and not os.path.exists(args.train_list):
        if rank == 0:
            data.make_synth(os.path.dirname(args.train_list), **DEMO_DATA)
        if world_size > 1:
            dist.barrier()
    for flag, path in (("train_list", args.train_list), ("val_list", args.val_list)):
        if not os.path.isfile(path):
            fail(f"{flag} not found: {path}")
    num_classes = args.num_classes or NUM_CLASSES.get(args.dataset)
    common = dict(root=args.data_root, image_tmpl=args.image_tmpl, t_length=args.t_length, t_stride=args.t_stride,
                  new_size=args.new_size, crop_size=args.crop_size, num_classes=num_classes, seed=args.seed,
                  flip=not (args.no_flip or args.dataset in NO_FLIP), test_sampling=args.test_sampling)
    views = args.test_clips * args.test_crops if args.evaluate else 1
    try:
        train_ds = data.VideoFrameDataset(args.train_list, mode="train", **common)
        val_ds = data.VideoFrameDataset(args.val_list, mode="test" if views > 1 else "val",
                                        num_clips=args.test_clips if views > 1 else 1,
                                        num_crops=args.test_crops if views > 1 else 1, **common)
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
    args.num_classes = num_classes or max(train_ds.num_classes, val_ds.num_classes)
    # Training: DistributedSampler also serves one process (num_replicas=1) so that the shuffle order is a
    # function of (seed, epoch) only -- exact resume. It pads with repeats so every rank steps equally.
    train_sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    # Validation: a disjoint shard per rank and no padding (DistributedSampler would count duplicates).
    val_indices = list(range(rank, len(val_ds), world_size))
    pin = device.type == "cuda"
    val_loader = DataLoader(Subset(val_ds, val_indices), batch_size=max(1, args.batch_size // views),
                            num_workers=args.workers, pin_memory=pin, worker_init_fn=worker_init_fn, collate_fn=data.collate,
                            generator=torch.Generator().manual_seed(args.seed))  # keeps off the global RNG
    if not args.evaluate and len(train_sampler) < args.batch_size:
        fail(f"{args.train_list} has {len(train_sampler)} videos per process, fewer than --batch-size {args.batch_size}")
    iters_per_epoch = len(train_sampler) // args.batch_size  # drop_last: BatchNorm dislikes a 1-clip batch

    # ---- model -----------------------------------------------------------------------------------
    try:
        model = models.build_model(args.arch, args.num_classes, dropout=args.dropout,
                                   pretrained=args.pretrained_model or args.pretrained, inflate=args.inflate)
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
    if args.t_length < getattr(model, "min_t", 1):
        fail(f"--t_length {args.t_length} is too short for --arch {args.arch} (needs >= {model.min_t})")
    if args.sync_bn and args.ddp:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    # Batches arrive in channels_last_3d memory (data.collate); convs use it where --channels-last asks.
    memory_format = torch.channels_last_3d if args.channels_last else torch.contiguous_format
    model.to(device, memory_format=memory_format)
    model_without_ddp = model  # what we save and evaluate: never has a 'module.' prefix
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    elif args.device == "cuda" and torch.cuda.device_count() > 1:  # --device cuda:N means that one GPU
        model = nn.DataParallel(model)  # splits the batch over every visible GPU
    if args.compile:
        model = torch.compile(model)
    torch.manual_seed(args.seed + rank)  # a different dropout stream on each rank
    # Trap: under DDP, evaluate the bare module. DDP's forward broadcasts buffers (a collective), which hangs
    # when ranks hold shards of different lengths.
    eval_model = model_without_ddp if args.ddp else model

    # ---- optimizer and lr schedule (built after wrapping: SyncBN conversion makes new parameters) -----
    optimizer = torch.optim.SGD(param_groups(model_without_ddp, args.weight_decay, args.bn_bias_wd),
                                lr=args.lr, momentum=args.momentum)
    # Stepped per iteration: linear warmup, then x0.1 at each --lr_steps epoch.
    warmup_iters = int(args.warmup * iters_per_epoch)
    milestones = [max(1, int(m * iters_per_epoch) - warmup_iters) for m in args.lr_steps]
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, gamma=0.1)
    if warmup_iters > 0:
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0 / warmup_iters, total_iters=warmup_iters)
        scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, scheduler], milestones=[warmup_iters])
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    autocast = torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp == "fp16")
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    # ---- resume ----------------------------------------------------------------------------------
    start_epoch, start_iter, best_acc1, best_epoch = args.start_epoch, 0, 0.0, -1
    if args.resume == "auto":
        args.resume = os.path.join(run_dir, "checkpoint.pth") if os.path.exists(os.path.join(run_dir, "checkpoint.pth")) else ""
        if args.evaluate and not args.resume:
            fail(f"--evaluate --resume auto: no checkpoint.pth in {run_dir}")
    if not args.resume:
        for _ in range(start_epoch * iters_per_epoch):  # --start-epoch N: the lr the schedule has at epoch N
            scheduler.step()
    if args.resume:
        if not os.path.isfile(args.resume):
            fail(f"--resume: no checkpoint at {args.resume}")
        # weights_only=False: our checkpoints hold args and numpy RNG state. Load only files you trust.
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
        if ckpt.get("args", {}).get("arch", args.arch) != args.arch:
            fail(f"--resume {args.resume} holds a {ckpt['args']['arch']} model, not --arch {args.arch}")
        if "model" not in ckpt and "state_dict" not in ckpt:
            fail(f"--resume {args.resume}: no 'model' or 'state_dict' in it")
        model_without_ddp.load_state_dict(models.strip_prefixes(ckpt.get("model", ckpt.get("state_dict"))))
        if not args.evaluate:
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            scaler.load_state_dict(ckpt["scaler"])
            start_epoch, start_iter = ckpt["epoch"], ckpt.get("iter", 0)
            best_acc1, best_epoch = ckpt["best_acc1"], ckpt.get("best_epoch", -1)
            if len(ckpt["rng"]) == world_size:
                set_rng_state(ckpt["rng"], rank)
        print(f"resumed from {args.resume} (epoch {ckpt['epoch']}, iter {ckpt.get('iter', 0)})")

    if args.evaluate:
        top1, top5, scores, labels = evaluate(eval_model, val_loader, val_indices, args, device, autocast, world_size, memory_format)
        if args.save_scores and rank == 0:
            os.makedirs(run_dir, exist_ok=True)
            path = os.path.join(run_dir, f"scores_{args.test_clips}x{args.test_crops}.npz")
            np.savez(path, scores=scores.numpy(), labels=labels.numpy(), videos=[v.path for v in val_ds.videos])
            print(f"saved per-video scores to {path}")
        print(f" * Acc@1 {top1:.3f} Acc@5 {top5:.3f}")
        if world_size > 1:
            dist.destroy_process_group()
        return top1, top5

    # ---- preemption: SIGTERM/SIGINT finish the current step, save, exit ----------------------------
    stop = {"signal": 0}
    old_handlers = {sig: signal.signal(sig, lambda signum, frame: stop.update(signal=signum))
                    for sig in (signal.SIGTERM, signal.SIGINT)}

    def checkpoint(epoch, it):
        """epoch/it = where training continues. Plain dict; weights without 'module.'."""
        rng = get_rng_state(world_size)  # collective: every rank calls it
        if rank == 0:
            atomic_save({"model": model_without_ddp.state_dict(), "optimizer": optimizer.state_dict(),
                         "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "epoch": epoch,
                         "iter": it, "best_acc1": best_acc1, "best_epoch": best_epoch, "args": vars(args), "rng": rng},
                        os.path.join(run_dir, "checkpoint.pth"))

    # ---- train -----------------------------------------------------------------------------------
    os.makedirs(run_dir, exist_ok=True)
    print(f"run folder {run_dir}: {len(train_ds)} train / {len(val_ds)} val videos, {args.num_classes} classes, "
          f"{world_size} process(es) x batch {args.batch_size}, {iters_per_epoch} iters/epoch, device {device}")
    t_run = time.time()
    for epoch in range(start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)
        train_ds.set_epoch(epoch)  # augmentation seeds = (seed, epoch, index)
        # A fresh loader each epoch (no persistent workers): workers must see set_epoch, and a resumed epoch
        # skips the batches it already trained on. The generator keeps DataLoader from drawing on the global
        # RNG, which drives dropout and is restored on resume.
        order = list(train_sampler)[start_iter * args.batch_size:]
        loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=order, num_workers=args.workers,
                            pin_memory=pin, drop_last=True, worker_init_fn=worker_init_fn, collate_fn=data.collate,
                            generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        model.train()
        loss_sum, correct, seen, t_wait, n_log = 0.0, 0, 0, 0.0, 0
        t_epoch = t_log = t_end = time.time()
        for it, (clips, labels, info) in enumerate(loader, start=start_iter):
            t_wait += time.time() - t_end
            # uint8 -> float, the rest of the loader's crop (drawn from seed, epoch, index: exact resume), layout
            clips = data.normalize(clips.to(device, non_blocking=True))
            clips = data.crop_resize(clips, info["box"].to(device)).contiguous(memory_format=memory_format)
            labels = labels.to(device, non_blocking=True)
            # forward / backward / step
            with autocast:
                logits = model(clips)
                loss = criterion(logits, labels)
            if not math.isfinite(loss.item()):
                print(f"train.py: loss is {loss.item()} at epoch {epoch} iteration {it}; stopping", file=sys.stderr)
                sys.exit(1)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if args.clip_grad > 0:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            # metrics
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
            n_log += 1
            if (it + 1) % args.print_freq == 0 or it + 1 == iters_per_epoch:
                now = time.time()
                step_time = (now - t_epoch) / (it + 1 - start_iter)
                eta = step_time * ((args.epochs - epoch) * iters_per_epoch - it - 1)
                mem = (torch.cuda.max_memory_allocated(device) if device.type == "cuda"
                       else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
                print(f"epoch {epoch} [{it + 1}/{iters_per_epoch}] loss {loss.item():.4f} ({loss_sum / seen:.4f}) "
                      f"lr {optimizer.param_groups[0]['lr']:.2e} {n_log * args.batch_size * world_size / (now - t_log):.1f} clips/s "
                      f"data {t_wait / (now - t_epoch):.0%} eta {time.strftime('%H:%M:%S', time.gmtime(eta))} mem {mem:.2f}GiB")
                t_log, n_log = now, 0
            if any_rank(stop["signal"], world_size, device):
                checkpoint(epoch, it + 1)
                print(f"signal {stop['signal']}: saved {run_dir}/checkpoint.pth at epoch {epoch} iteration {it + 1}")
                sys.exit(128 + (stop["signal"] or signal.SIGTERM))
            t_end = time.time()
        start_iter = 0

        # ---- validate, log, save -----------------------------------------------------------------
        totals = torch.tensor([loss_sum, correct, seen], dtype=torch.float64, device=device)
        if world_size > 1:
            dist.all_reduce(totals)
        trained = totals[2].item() > 0  # 0 when a resume lands on the epoch's end
        log = {"epoch": epoch, "lr": optimizer.param_groups[0]["lr"], "train_loss": (totals[0] / totals[2]).item() if trained else None,
               "train_top1": (100 * totals[1] / totals[2]).item() if trained else None, "val_top1": None, "val_top5": None}
        if world_size > 1:  # BN running stats differ per rank (own batches): score with rank 0's, the saved ones
            for b in model_without_ddp.buffers():
                dist.broadcast(b, 0)
        if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
            log["val_top1"], log["val_top5"], _, _ = evaluate(eval_model, val_loader, val_indices, args, device, autocast, world_size, memory_format)
            print(f"epoch {epoch} * Acc@1 {log['val_top1']:.3f} Acc@5 {log['val_top5']:.3f}")
        is_best = log["val_top1"] is not None and log["val_top1"] > best_acc1
        if is_best:
            best_acc1, best_epoch = log["val_top1"], epoch
        log["epoch_time"] = time.time() - t_epoch
        checkpoint(epoch + 1, 0)
        if rank == 0:
            if is_best:  # copy, then rename: model_best.pth is never half-written either
                shutil.copyfile(os.path.join(run_dir, "checkpoint.pth"), os.path.join(run_dir, "model_best.tmp"))
                os.replace(os.path.join(run_dir, "model_best.tmp"), os.path.join(run_dir, "model_best.pth"))
            with open(os.path.join(run_dir, "log.jsonl"), "a") as f:
                f.write(json.dumps(log) + "\n")
        if any_rank(stop["signal"], world_size, device):  # a signal during validation: checkpoint already saved
            sys.exit(128 + (stop["signal"] or signal.SIGTERM))

    print(f"done in {time.time() - t_run:.0f}s: best Acc@1 {best_acc1:.3f} at epoch {best_epoch}, "
          f"saved to {os.path.join(run_dir, 'model_best.pth')}")
    for sig, handler in old_handlers.items():  # callers running main() in-process get Ctrl-C back
        signal.signal(sig, handler)
    if world_size > 1:
        dist.destroy_process_group()
    return best_acc1


def parse_args(argv=None):
    parser = get_args_parser()
    args = parser.parse_args(argv)
    if args.dataset == "demo":  # demo's own defaults, for every flag the user did not give
        parser.set_defaults(**DEMO_DEFAULTS)
        args = parser.parse_args(argv)
    return args


if __name__ == "__main__":
    main(parse_args())
