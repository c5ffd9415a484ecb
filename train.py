"""Train and evaluate 3D ConvNets (I3D ResNet-3D) for video action recognition.

Launch manual
-------------
CPU demo (builds a small synthetic motion dataset in ./output on first use, ~1 minute):
    python train.py demo

One GPU, or DataParallel over every visible GPU (the original project's command, verbatim):
    CUDA_VISIBLE_DEVICES=2,3 python train.py ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 \
        --mode 3D --t_length 16 --t_stride 4 --pretrained --epochs 95 --batch-size 64 --lr 0.001 \
        --lr_steps 40 80 90 --workers 16 --image_tmpl img_{:05d}.jpg
The same recipe on one smaller GPU: -b 16 --iter_size 4 (gradient accumulation, one step per 64 clips).

DistributedDataParallel, one process per GPU (-b is then per process: global batch = b x GPUs x iter_size):
    torchrun --nproc_per_node=8 train.py ucf101 train.txt val.txt --ddp -b 8 ...
Several machines (run on each node; torchrun's rendezvous sets RANK / LOCAL_RANK / WORLD_SIZE):
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \
        train.py ucf101 train.txt val.txt --ddp ...

Evaluate a checkpoint (1 centred clip; or 10 clips x 3 crops, softmax averaged per video):
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth --test_clips 10 --test_crops 3

Resume after a crash or preemption (SIGTERM saves checkpoint.pth and exits 143):
    python train.py ... --resume auto

Label videos with a trained checkpoint (top-5 class names and probabilities):
    python train.py predict --resume model_best.pth video.avi frames/v_Biking_g01_c01

main() is the table of contents: flags -> runtime -> data -> model -> optimizer -> resume -> epochs.
Everything a step needs about where it runs (rank, device, autocast, memory format, run folder) is in
one `Runtime`; training progress (epoch, iteration, best top-1) in one `Progress`, which checkpoints save.

References: pytorch/examples imagenet/main.py (flags, top-k), torchvision references/
video_classification (distributed setup, warmup per iteration, no-WD for norm layers), PySlowFast /
mmaction2 (I3D recipe, cosine schedule, multi-view testing), BannyStone/Video_Classification_PyTorch
(the flags and run-folder name kept here; its fine-tuning scripts: --freeze_bn, --fc_only).
"""
import argparse
import builtins
import contextlib
import json
import math
import os
import random
import resource
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, Subset

from tqdm import tqdm

import data
import model as models
import report

# Datasets whose labels name a direction (a flipped "moving left" is "moving right"): no horizontal flips.
NO_FLIP = {"sthv1", "sthv2", "demo"}
NUM_CLASSES = {"ucf101": 101, "hmdb51": 51, "kinetics400": 400, "kinetics200": 200, "sthv1": 174, "sthv2": 174}
# `python train.py demo`: a tiny recipe that learns data.py's synthetic motion classes on a CPU in ~1 min.
DEMO_DATA = dict(videos=128, frames=24, size=(64, 48))  # per split; small frames keep it CPU-fast
DEMO_DEFAULTS = dict(arch="resnet10_3d", t_length=8, t_stride=2, new_size=48, crop_size=40, epochs=12, batch_size=8,
                     lr=0.02, lr_steps=[9], warmup=1, dropout=0.0, workers=2, eval_freq=1, print_freq=8)
RUN_FILES = ("checkpoint.pth", "model_best.pth", "log.jsonl")  # a folder holding any of these holds a run
TEMP_FILES = ("checkpoint.pth.tmp", "model_best.tmp")  # never complete: the saves write them, then rename


# ---- flags -----------------------------------------------------------------------------------------
def positive(text):
    """argparse type for counts and sizes: a 0 would only fail later, as a division by zero."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def natural(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return int(text)


def nonnegative(text):
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not x >= 0 or not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return x


def fraction(text):
    x = nonnegative(text)
    if x >= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text!r}")
    return x


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message} (see -h)\n")


def get_args_parser():
    p = Parser(prog="train.py", description="Train / evaluate 3D ConvNets on video frame folders.")
    p.add_argument("dataset", help=f"one of {', '.join(NUM_CLASSES)} (sets the number of classes), 'demo', or any name (classes from the lists)")
    p.add_argument("train_list", nargs="?", help="list file: '<frame_dir> <num_frames> <label>' per line (optional for demo)")
    p.add_argument("val_list", nargs="?", help="validation list file, same format (optional for demo)")
    # model (the original project's flags)
    p.add_argument("-a", "--arch", default="resnet50_3d", help=f"one of: {', '.join(models.ARCHS)}")
    p.add_argument("--dro", "--dropout", dest="dropout", default=0.2, type=fraction, help="dropout before fc")
    p.add_argument("--mode", default="3D", choices=["3D"], help="clip mode (the original's 2D/TSN modes are not kept)")
    p.add_argument("--t_length", default=16, type=positive, help="frames per clip")
    p.add_argument("--t_stride", default=4, type=positive, help="frames between sampled frames")
    p.add_argument("--new_size", default=256, type=positive, help="short side in px before cropping (train jitters it to 1.25x)")
    p.add_argument("--crop_size", default=224, type=positive, help="square crop in px")
    p.add_argument("--pretrained", nargs="?", const="imagenet", default=None, help="imagenet | imagenet_v2 | kinetics400 | PATH (2D ResNet, ours, or a PySlowFast / pytorchvideo / mmaction2 checkpoint); bare = imagenet")
    p.add_argument("--pretrained_model", default=None, help="PATH to pretrained weights (overrides --pretrained)")
    p.add_argument("--inflate", default="mean", choices=["mean", "center"], help="how 2D kernels are inflated over time")
    p.add_argument("--num_classes", default=None, type=positive, help="override the number of classes")
    p.add_argument("--class_names", default=None, help="file with one class name per line (default: <dataset>_classes.txt beside train_list)")
    p.add_argument("--no_flip", action="store_true", help=f"no horizontal flips in training (always for {', '.join(sorted(NO_FLIP))})")
    p.add_argument("--mean", default=None, type=float, nargs=3, help="input normalisation mean, RGB in [0, 1] (default: what the weights expect)")
    p.add_argument("--std", default=None, type=float, nargs=3, help="input normalisation std, RGB in [0, 1] (default: what the weights expect)")
    # optimisation
    p.add_argument("--epochs", default=95, type=positive, help="total epochs")
    p.add_argument("-b", "--batch-size", dest="batch_size", default=64, type=positive, help="clips per process per step (DataParallel splits it over GPUs; with --ddp global batch = b x world size x iter_size)")
    p.add_argument("--iter_size", default=1, type=positive, help="gradient accumulation: one SGD step per N batches of -b clips")
    p.add_argument("--lr", "--learning-rate", dest="lr", default=0.001, type=nonnegative, help="initial learning rate (not scaled with the batch)")
    p.add_argument("--lr_policy", default="step", choices=["step", "cosine"], help="step: x0.1 at each --lr_steps epoch; cosine: to 0 at --epochs")
    p.add_argument("--lr_steps", default=[40, 80, 90], type=nonnegative, nargs="+", help="epochs at which the lr is multiplied by 0.1 (--lr_policy step)")
    p.add_argument("--warmup", default=0.0, type=nonnegative, help="epochs of linear lr warmup, stepped per iteration")
    p.add_argument("--momentum", default=0.9, type=nonnegative, help="SGD momentum")
    p.add_argument("--wd", "--weight-decay", dest="weight_decay", default=5e-4, type=nonnegative, help="weight decay (not on BN/bias unless --bn_bias_wd)")
    p.add_argument("--bn_bias_wd", action="store_true", help="also decay BN weights and biases (the original project did)")
    p.add_argument("--clip-grad", dest="clip_grad", default=0.0, type=nonnegative, help="max grad norm (0 = off)")
    p.add_argument("--label-smoothing", dest="label_smoothing", default=0.0, type=fraction, help="cross-entropy label smoothing, in [0, 1)")
    p.add_argument("--freeze_bn", action="store_true", help="fine-tuning: BatchNorm statistics and affine parameters fixed (BN in eval mode)")
    p.add_argument("--fc_only", action="store_true", help="fine-tuning: train the classifier only (implies --freeze_bn)")
    # monitoring
    p.add_argument("-p", "--print-freq", dest="print_freq", default=20, type=positive, help="log every N optimizer steps")
    p.add_argument("-ef", "--eval-freq", dest="eval_freq", default=2, type=positive, help="validate every N epochs (and after the last)")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files to <run folder>/tensorboard")
    # runtime
    p.add_argument("-j", "--workers", default=4, type=natural, help="data loading worker processes per process")
    p.add_argument("--resume", default="", help="checkpoint PATH to resume from, or 'auto' (the run folder's checkpoint.pth if present)")
    p.add_argument("-e", "--evaluate", action="store_true", help="only evaluate the --resume checkpoint on val_list")
    p.add_argument("--start-epoch", dest="start_epoch", default=0, type=natural, help="manual epoch number (overridden by --resume)")
    p.add_argument("--output_root", default="./output", help="run folders go here")
    p.add_argument("--run_name", default=None, help="run folder name (default: the original's {dataset}_{arch}_{mode}_length{T}_stride{S}_dropout{D})")
    p.add_argument("--image_tmpl", default="img_{:05d}.jpg", help="frame file name template, formatted with the frame number")
    p.add_argument("--data_root", default=None, help="folder that frame_dirs are relative to (default: each list's folder)")
    p.add_argument("--max_bad_videos", default=100, type=natural, help="training: unreadable videos replaced (and listed in bad_videos.txt) before the run stops")
    p.add_argument("--decode_device", default="cpu", choices=["cpu", "cuda"], help="where JPEGs are decoded: cpu (loader workers, libjpeg-turbo) or cuda (nvJPEG in batches; the loader only reads files)")
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel under torchrun (else DataParallel over visible GPUs)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="mixed precision (fp16 uses a GradScaler)")
    p.add_argument("--sync-bn", dest="sync_bn", action="store_true", help="synchronise BatchNorm statistics across DDP processes")
    p.add_argument("--channels-last", dest="channels_last", action="store_true", help="channels_last_3d memory format (faster convs on tensor cores)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--seed", default=0, type=natural, help="seed for init, sampling and augmentation")
    # evaluation
    p.add_argument("--test_clips", default=1, type=positive, help="--evaluate: clips per video")
    p.add_argument("--test_crops", default=1, type=int, choices=[1, 3, 10], help="--evaluate: spatial crops per clip (3: the whole short side, resized to --crop_size, mmaction2's ThreeCrop at --crop_size 256; 10: 4 corners + centre at short side --new_size, each also mirrored, the original project's test_10crop.py)")
    p.add_argument("--test_sampling", default="ours", choices=data.PLACEMENTS, help="where val/test clips go: ours (first frame to last), pyslowfast, mmaction2 (their test-time formulas)")
    p.add_argument("--save_scores", action="store_true", help="kept from the original command line: --evaluate always writes scores_<clips>x<crops>.npz")
    return p


def parse_args(argv=None):
    parser = get_args_parser()
    args = parser.parse_args(argv)
    if args.dataset == "demo":  # demo's own defaults, for every flag the user did not give
        parser.set_defaults(**DEMO_DEFAULTS)
        args = parser.parse_args(argv)
    return args


def fail(msg, code=2):
    """A user error: one clear line, exit status 2, no traceback."""
    print(f"train.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def warn(msg):
    print(f"train.py: warning: {msg}", file=sys.stderr)  # every rank: stderr is never silenced


def check_args(args):
    """What can be told from the flags alone, before anything is read or built."""
    if args.arch not in models.ARCHS:
        fail(f"--arch {args.arch}: unknown; choose one of: {', '.join(models.ARCHS)}")
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
    if args.decode_device == "cuda" and not args.device.startswith("cuda"):
        fail("--decode_device cuda needs --device cuda")
    if any(s <= 0 for s in args.std or [1]):
        fail(f"--std {args.std}: must be > 0")
    args.freeze_bn = args.freeze_bn or args.fc_only
    args.run_name = args.run_name or run_dir_name(args)


def run_dir_name(args):
    # The original project's experiment id, so old and new runs sort side by side.
    return f"{args.dataset}_{args.arch}_{args.mode}_length{args.t_length}_stride{args.t_stride}_dropout{args.dropout}"


# ---- where we run ----------------------------------------------------------------------------------
@dataclass
class Runtime:
    """Where this process runs and how its steps compute: passed around instead of long argument lists."""
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    run_dir: str
    autocast: torch.autocast
    memory_format: torch.memory_format
    mean: tuple = data.MEAN  # input normalisation the weights expect (set once the model is known)
    std: tuple = data.STD
    tensorboard: object = None


def setup_runtime(args):
    """torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; without --ddp this is one process."""
    rank, world_size, local_rank = 0, 1, 0
    if args.ddp:
        if "RANK" not in os.environ:
            fail("--ddp needs torchrun, e.g. torchrun --nproc_per_node=8 train.py ... --ddp")
        rank, world_size, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
        if args.device.startswith("cuda"):
            torch.cuda.set_device(local_rank)  # one GPU per process, before NCCL touches any device
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        if rank != 0:  # only rank 0 prints (model.py's pretrained summary included); warnings go to stderr
            builtins.print = lambda *a, **k: None
    device = torch.device(f"cuda:{local_rank}" if args.device.startswith("cuda") and args.ddp else args.device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    torch.manual_seed(args.seed)  # same init on every rank; DDP broadcasts rank 0's anyway
    # cuDNN trap: benchmark mode times every 3D conv algorithm once per input shape. A win for fixed-size
    # training; for evaluation (one pass, other shapes) it only costs time and workspace memory.
    torch.backends.cudnn.benchmark = not args.evaluate
    return Runtime(rank, world_size, local_rank, device, os.path.join(args.output_root, args.run_name),
                   torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None),
                   torch.channels_last_3d if args.channels_last else torch.contiguous_format)


def gather(obj, rt):
    if rt.world_size == 1:
        return [obj]
    out = [None] * rt.world_size
    dist.all_gather_object(out, obj)
    return out


def all_sum(values, rt):
    """Sum a few numbers over ranks (one collective). Ranks may see a signal at different steps: every
    stop decision goes through here, so all ranks stop together and none waits for the others forever."""
    t = torch.tensor(values, dtype=torch.float64, device=rt.device)
    if rt.world_size > 1:
        dist.all_reduce(t)
    return t.tolist()


def prepare_run_dir(args, rt):
    """Fail before any work if the run folder cannot be written or holds another run; drop stale temp files."""
    if os.path.exists(rt.run_dir) and not os.path.isdir(rt.run_dir):
        fail(f"run folder {rt.run_dir} exists and is a file (--output_root / --run_name)")
    taken = [f for f in RUN_FILES if os.path.exists(os.path.join(rt.run_dir, f))]
    resuming_here = args.resume == "auto" or args.resume and os.path.realpath(os.path.dirname(args.resume)) == os.path.realpath(rt.run_dir)
    if taken and not resuming_here and not args.evaluate:
        fail(f"{rt.run_dir} already holds a run ({', '.join(taken)}): continue it with --resume auto, "
             "or start a separate experiment with --run_name NAME or --output_root DIR")
    if rt.rank == 0:
        try:
            os.makedirs(rt.run_dir, exist_ok=True)
            probe = os.path.join(rt.run_dir, f".write_test{os.getpid()}")
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
        except OSError as e:
            fail(f"cannot write to the run folder {rt.run_dir}: {e.strerror} (--output_root / --run_name)")
        for name in TEMP_FILES if not args.evaluate else ():  # left by a process killed while saving
            if os.path.isfile(os.path.join(rt.run_dir, name)):
                os.remove(os.path.join(rt.run_dir, name))


# ---- data ------------------------------------------------------------------------------------------
@dataclass
class Data:
    train_ds: data.VideoFrameDataset
    val_ds: data.VideoFrameDataset
    train_sampler: DistributedSampler
    val_loader: DataLoader
    val_indices: list
    steps_per_epoch: int  # optimizer steps; each takes iter_size batches of batch_size clips
    class_names: list


def worker_init_fn(worker_id):
    # Trap: forked workers inherit the parent's numpy/random state, so every worker would draw the same
    # "random" numbers. data.py seeds its own generators per sample; this protects code you add.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
    # Trap: a preemption SIGTERM (or Ctrl-C) goes to the whole process group; a worker it kills makes the
    # main process fail mid-step, before it can save. A worker in its own session gets no group signal,
    # yet still dies of the SIGTERM its DataLoader sends when shutting down -- ignoring SIGTERM instead
    # makes the main process wait forever for workers at exit after any error.
    if hasattr(os, "setsid"):
        os.setsid()


def build_data(args, rt):
    if args.dataset == "demo" and not os.path.exists(args.train_list):
        if rt.rank == 0:
            data.make_synth(os.path.dirname(args.train_list), **DEMO_DATA)
        if rt.world_size > 1:
            dist.barrier()
    for flag, path in (("train_list", args.train_list), ("val_list", args.val_list)):
        if not os.path.isfile(path):
            fail(f"{flag} not found: {path}")
    num_classes = args.num_classes or NUM_CLASSES.get(args.dataset)
    common = dict(root=args.data_root, image_tmpl=args.image_tmpl, t_length=args.t_length, t_stride=args.t_stride,
                  new_size=args.new_size, crop_size=args.crop_size, num_classes=num_classes, seed=args.seed,
                  flip=not (args.no_flip or args.dataset in NO_FLIP), encoded=args.decode_device == "cuda")
    views = args.test_clips * args.test_crops if args.evaluate else 1
    try:
        train_ds = data.VideoFrameDataset(args.train_list, mode="train", **common)
        val_ds = data.VideoFrameDataset(args.val_list, mode="test" if views > 1 else "val",
                                        num_clips=args.test_clips if views > 1 else 1,
                                        num_crops=args.test_crops if views > 1 else 1,
                                        test_sampling=args.test_sampling, **common)
    except (ValueError, OSError) as e:
        fail(str(e))
    args.num_classes = num_classes or max(train_ds.num_classes, val_ds.num_classes)
    check_frame_folders(args, [] if args.evaluate else train_ds.videos, val_ds.videos)
    train_labels, warned = {v.label for v in train_ds.videos}, set()
    for v in val_ds.videos:  # it would silently widen the classifier, and can never be right
        if v.label not in train_labels and v.label not in warned and rt.rank == 0 and not args.evaluate:
            warned.add(v.label)
            warn(f"{args.val_list}:{v.line}: label {v.label} never occurs in {args.train_list}")
    # Training: DistributedSampler also serves one process (num_replicas=1) so that the shuffle order is a
    # function of (seed, epoch) only -- exact resume. It pads with repeats so every rank steps equally.
    train_sampler = DistributedSampler(train_ds, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed)
    # Validation: a disjoint shard per rank and no padding (DistributedSampler would count duplicates).
    val_indices = list(range(rt.rank, len(val_ds), rt.world_size))
    val_loader = DataLoader(Subset(val_ds, val_indices), batch_size=max(1, args.batch_size // views),
                            num_workers=args.workers, pin_memory=rt.device.type == "cuda", worker_init_fn=worker_init_fn,
                            collate_fn=collate_fn(args), generator=torch.Generator().manual_seed(args.seed))
    step_clips = args.batch_size * args.iter_size
    if not args.evaluate and len(train_sampler) < step_clips:
        fail(f"{args.train_list} has {len(train_sampler)} videos per process, fewer than --batch-size x --iter_size = {step_clips}")
    return Data(train_ds, val_ds, train_sampler, val_loader, val_indices, len(train_sampler) // step_clips,
                read_class_names(args))


def check_frame_folders(args, *video_lists):
    """Before the model is built: every listed folder holds its first and last frame (stat calls only)."""
    for videos in video_lists:
        problems, count = data.check_folders(videos, args.image_tmpl)
        if count:
            shown = "; ".join(problems)
            fail(f"{count} listed video(s) have missing frame folders or frames: {shown}"
                 f"{' ...' if count > len(problems) else ''} (run `python data.py check LIST` for the full report)")


def read_class_names(args):
    """--class_names, or <dataset>_classes.txt beside the train list (written by `data.py lists`); else None."""
    path = args.class_names or os.path.join(os.path.dirname(os.path.abspath(args.train_list)), f"{args.dataset}_classes.txt")
    if not os.path.isfile(path):
        if args.class_names:
            fail(f"--class_names {path}: no such file")
        return None
    try:
        names = data.read_class_names(path)
    except (ValueError, OSError) as e:
        fail(str(e))
    if len(names) != args.num_classes:
        fail(f"{path} names {len(names)} classes, but this run has {args.num_classes} (--num_classes / the lists)")
    return names


def train_loader(args, d, epoch, start_iter):
    """A fresh loader each epoch (no persistent workers): workers must see set_epoch, and a resumed epoch
    skips the batches it already trained on. The generator keeps DataLoader off the global RNG, which
    drives dropout and is restored on resume."""
    d.train_sampler.set_epoch(epoch)  # shuffle order = f(seed, epoch)
    d.train_ds.set_epoch(epoch)  # augmentation seeds = (seed, epoch, index)
    used = d.steps_per_epoch * args.iter_size * args.batch_size
    order = list(d.train_sampler)[start_iter * args.batch_size:used]
    return DataLoader(d.train_ds, batch_size=args.batch_size, sampler=order, num_workers=args.workers,
                      pin_memory=d.val_loader.pin_memory, drop_last=True, worker_init_fn=worker_init_fn,
                      collate_fn=collate_fn(args), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))


def collate_fn(args):  # --decode_device cuda: batches of encoded frames, decoded by decode_batch in the step
    return data.collate_encoded if args.decode_device == "cuda" else data.collate


# ---- model and optimizer ---------------------------------------------------------------------------
@dataclass
class Net:
    """The model as trained (maybe DDP/DataParallel/compiled), as saved (bare) and as evaluated, with the
    optimizer and GradScaler that update it."""
    train: nn.Module
    bare: nn.Module
    eval: nn.Module
    ddp: nn.Module = None  # for no_sync() during gradient accumulation
    optimizer: torch.optim.Optimizer = None
    scaler: torch.amp.GradScaler = None


def build_net(args, rt):
    try:
        model = models.build_model(args.arch, args.num_classes, dropout=args.dropout,
                                   pretrained=args.pretrained_model or args.pretrained, inflate=args.inflate)
    except (ValueError, OSError) as e:
        fail(str(e))
    if args.t_length < getattr(model, "min_t", 1):
        fail(f"--t_length {args.t_length} is too short for --arch {args.arch} (needs >= {model.min_t})")
    stem_t = model.conv1.kernel_size[0] if isinstance(getattr(model, "conv1", None), nn.Conv3d) else 1
    if args.amp == "bf16" and rt.device.type == "cpu" and args.t_length < stem_t:
        # Measured with torch 2.14: the CPU bf16 conv3d weight gradient is NaN or several-fold wrong when the
        # temporal kernel is longer than the clip (fine from T = kernel up, and in fp32).
        fail(f"--amp bf16 on CPU needs --t_length >= {stem_t} for --arch {args.arch} (torch's CPU bf16 conv3d "
             "gradient is wrong for clips shorter than the kernel); use --amp off")
    info = getattr(model, "pretrained_info", None) or {}
    rt.mean = tuple(args.mean or info.get("mean") or data.MEAN)
    rt.std = tuple(args.std or info.get("std") or data.STD)
    for name, p in model.named_parameters():  # fine-tuning modes: frozen tensors get no gradient, no decay
        if args.fc_only and not name.startswith(models.HEAD):
            p.requires_grad = False
    for m in model.modules() if args.freeze_bn else []:
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.requires_grad_(False)
    if args.sync_bn and args.ddp:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    # Batches arrive in channels_last_3d memory (data.collate); convs use it where --channels-last asks.
    model.to(rt.device, memory_format=rt.memory_format)
    net = Net(model, model, model)
    if args.ddp:
        net.ddp = net.train = nn.parallel.DistributedDataParallel(
            model, device_ids=[rt.local_rank] if rt.device.type == "cuda" else None)
    elif args.device == "cuda" and torch.cuda.device_count() > 1:  # --device cuda:N means that one GPU
        net.train = net.eval = nn.DataParallel(model)  # splits the batch over every visible GPU
    if args.compile:
        net.train = torch.compile(net.train)
        net.eval = net.train if not args.ddp else net.eval
    # The optimizer is built after wrapping: SyncBN conversion makes new parameters.
    net.optimizer = torch.optim.SGD(param_groups(model, args.weight_decay, args.bn_bias_wd), lr=args.lr, momentum=args.momentum)
    net.scaler = torch.amp.GradScaler(rt.device.type, enabled=args.amp == "fp16")
    torch.manual_seed(args.seed + rt.rank)  # a different dropout stream on each rank (resume restores it)
    # Trap: under DDP, evaluate the bare module. DDP's forward broadcasts buffers (a collective), which hangs
    # when ranks hold shards of different lengths.
    return net


def set_train_mode(net, args):
    net.train.train()
    if args.freeze_bn:  # the original's finetune_bn_frozen.py: BN uses (and keeps) the pretrained statistics
        for m in net.bare.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()


def param_groups(model, weight_decay, decay_all):
    # Weight decay on BN scales/shifts and biases only hurts (Goyal et al. 2017; torchvision references).
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if decay_all or p.ndim > 1 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_at(args, step, steps_per_epoch):
    """The lr of optimizer step `step` (0-based, global): a pure function of the flags, so a resumed run with
    other --epochs / --lr_steps / --warmup follows the new flags. Warmup ramps linearly to the schedule."""
    epoch = step / steps_per_epoch
    if args.lr_policy == "cosine":  # PySlowFast's lr_policy "cosine", end lr 0
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, epoch / args.epochs)))
    else:
        lr = args.lr * 0.1 ** sum(step >= round(m * steps_per_epoch) for m in args.lr_steps)
    warmup_steps = round(args.warmup * steps_per_epoch)
    return lr * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr


# ---- checkpoints -----------------------------------------------------------------------------------
@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""
    epoch: int = 0  # the epoch to continue with
    iter: int = 0  # batches of it already trained (a multiple of iter_size)
    best_acc1: float = 0.0
    best_epoch: int = -1
    bad_seen: set = field(default_factory=set)  # videos ("<list>:<line>") replaced in training so far, all ranks
    last_val: dict = None  # the latest validation's results (not saved)


@contextlib.contextmanager
def disk_errors(path, tmp=None):
    """A full disk or an unwritable file while writing `path`: one line naming it and the free space, the
    temp file removed, the previous `path` left as it was (writes go to `tmp`, then a rename)."""
    try:
        yield
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp) if tmp else None
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 2**20
        fail(f"could not write {path}: {e.strerror} ({free:.0f} MiB free); the previous file is intact", code=1)


def atomic_save(obj, path):
    """Write to a temp file, flush to disk, then rename: a crash mid-save never destroys the last good file."""
    tmp = f"{path}.tmp"
    with disk_errors(path, tmp):
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def get_rng_state(rt):
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
             "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}
    return gather(state, rt)  # one per rank: each rank has its own dropout stream


def save_checkpoint(args, rt, net, progress, d):
    """A plain dict, weights without 'module.'. Collective (RNG states), so every rank calls it."""
    rng = get_rng_state(rt)
    if rt.rank == 0:
        atomic_save({"model": net.bare.state_dict(), "optimizer": net.optimizer.state_dict(), "scaler": net.scaler.state_dict(),
                     "epoch": progress.epoch, "iter": progress.iter, "best_acc1": progress.best_acc1,
                     "best_epoch": progress.best_epoch, "bad_seen": sorted(progress.bad_seen),
                     "args": {**vars(args), "mean": rt.mean, "std": rt.std}, "class_names": d.class_names, "rng": rng},
                    os.path.join(rt.run_dir, "checkpoint.pth"))


def read_checkpoint(path):
    if not os.path.isfile(path):
        fail(f"--resume: no checkpoint at {path}")
    try:  # weights_only=False: our checkpoints hold args and numpy RNG state. Load only files you trust.
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        fail(f"--resume {path}: not a readable checkpoint ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    if not isinstance(ckpt, dict):
        fail(f"--resume {path}: not a checkpoint dict but a {type(ckpt).__name__}")
    return ckpt


def check_resume_flags(args, path, saved, mid_epoch):
    """Flags that cannot change mid-run. --epochs, --lr_steps, --warmup, --lr may: the schedule follows them."""
    fixed = ["arch", "num_classes"] + ([] if args.evaluate else ["t_length", "t_stride", "crop_size"])
    for key in fixed:
        if key in saved and saved[key] != getattr(args, key):
            fail(f"--resume {path} was trained with --{key} {saved[key]}, not {getattr(args, key)}")
    if mid_epoch and "batch_size" in saved:
        was = saved["batch_size"] * saved.get("iter_size", 1) * saved.get("world_size", 1)
        now = args.batch_size * args.iter_size * args.world_size
        if was != now:
            fail(f"--resume {path} stopped mid-epoch with a global batch of {was} clips (b x iter_size x processes), "
                 f"this run has {now}: resume with the same, or from an end-of-epoch checkpoint")


def resume(args, rt, net, progress):
    if args.resume == "auto":
        auto = os.path.join(rt.run_dir, "checkpoint.pth")
        args.resume = auto if os.path.exists(auto) else ""
        if args.evaluate and not args.resume:
            fail(f"--evaluate --resume auto: no checkpoint.pth in {rt.run_dir}")
    if not args.resume:
        progress.epoch = args.start_epoch
        return None
    ckpt = read_checkpoint(args.resume)
    weights = ckpt.get("model", ckpt.get("state_dict", ckpt))
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        fail(f"--resume {args.resume}: no weights in it (neither 'model', 'state_dict' nor a state dict)")
    if not args.evaluate and "optimizer" not in ckpt:
        fail(f"--resume {args.resume}: weights only, not a train.py checkpoint; start from them with --pretrained PATH")
    check_resume_flags(args, args.resume, ckpt.get("args", {}), ckpt.get("iter", 0) > 0)
    try:
        net.bare.load_state_dict(models.strip_prefixes(weights))
    except RuntimeError as e:
        fail(f"--resume {args.resume}: its weights do not fit --arch {args.arch} with {args.num_classes} classes "
             f"({str(e).splitlines()[1].strip() if len(str(e).splitlines()) > 1 else e})")
    saved = ckpt.get("args", {})
    rt.mean = tuple(args.mean or saved.get("mean") or data.MEAN)  # the run keeps its normalisation
    rt.std = tuple(args.std or saved.get("std") or data.STD)
    if not args.evaluate:
        net.optimizer.load_state_dict(ckpt["optimizer"])
        net.scaler.load_state_dict(ckpt["scaler"])
        progress.epoch, progress.iter = ckpt["epoch"], ckpt.get("iter", 0)
        progress.best_acc1, progress.best_epoch = ckpt["best_acc1"], ckpt.get("best_epoch", -1)
        progress.bad_seen = set(ckpt.get("bad_seen", []))
        if len(ckpt.get("rng", [])) == rt.world_size:
            set_rng_state(ckpt["rng"][rt.rank])
    print(f"resumed from {args.resume} (epoch {ckpt.get('epoch')}, iter {ckpt.get('iter', 0)})")
    return ckpt


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    if s["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(s["cuda"])


# ---- one epoch of training -------------------------------------------------------------------------
def to_model_input(clips, info, rt):
    """uint8 batch from the loader -> normalised float on the device, the train crop finished there."""
    x = data.normalize(clips.to(rt.device, non_blocking=True), rt.mean, rt.std)
    if "box" in info:  # training: the scale jitter's resize, batched on the device (data.crop_resize)
        x = data.crop_resize(x, info["box"].to(rt.device, non_blocking=True))
    return x.contiguous(memory_format=rt.memory_format)


def record_bad_videos(lines, rt, progress):
    """Training replaced unreadable videos (data.py). Every rank learns every rank's lines (so all count
    the same and stop together); each video counts once; rank 0 reports it, on stderr and in bad_videos.txt."""
    new = {}  # video ("<list>:<line>", how data.BadVideo's line starts) -> its first report
    for line in sum(gather(lines, rt), []):
        video = line.split(": ", 1)[0]
        if video not in progress.bad_seen:
            new.setdefault(video, line)
    progress.bad_seen.update(new)
    new = list(new.values())
    if rt.rank == 0 and new:
        for line in new:
            warn(f"bad video replaced: {line}")
        with disk_errors(os.path.join(rt.run_dir, "bad_videos.txt")):
            with open(os.path.join(rt.run_dir, "bad_videos.txt"), "a") as f:
                f.writelines(line + "\n" for line in new)


@dataclass
class Meter:
    """One epoch's running numbers on this rank, and the timing behind the progress line."""
    start: int  # first batch of this (maybe resumed) epoch
    sums: list = field(default_factory=lambda: [0.0, 0, 0])  # loss sum, correct, clips
    n_log: int = 0  # clips since the last line
    t_wait: float = 0.0  # seconds spent waiting for the loader
    t_epoch: float = field(default_factory=time.time)
    t_log: float = field(default_factory=time.time)

    def update(self, loss, logits, labels):
        n = len(labels)
        self.sums = [self.sums[0] + loss.item() * n, self.sums[1] + (logits.argmax(1) == labels).sum().item(), self.sums[2] + n]
        self.n_log += n

    def line(self, args, rt, progress, loss, lr, it, batches):
        now = time.time()
        eta = (now - self.t_epoch) / (it + 1 - self.start) * ((args.epochs - progress.epoch) * batches - it - 1)
        h, s = divmod(int(eta), 3600)  # hours unbounded: a 30 h run shows 30:00:00
        mem = (torch.cuda.max_memory_allocated(rt.device) if rt.device.type == "cuda"
               else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
        text = (f"epoch {progress.epoch} [{it + 1}/{batches}] loss {loss.item():.4f} ({self.sums[0] / self.sums[2]:.4f}) "
                f"lr {lr:.2e} {self.n_log * rt.world_size / (now - self.t_log):.1f} clips/s "
                f"data {self.t_wait / (now - self.t_epoch):.0%} eta {h}:{s // 60:02d}:{s % 60:02d} mem {mem:.2f}GiB")
        self.t_log, self.n_log = now, 0
        return text


def train_one_epoch(args, rt, d, net, criterion, progress):
    """Train from progress.iter to the end of progress.epoch; returns this rank's Meter.
    Saves and exits at the end of the step in which SIGTERM/SIGINT came or too many videos were bad."""
    epoch, meter = progress.epoch, Meter(start=progress.iter)
    set_train_mode(net, args)
    batches, bad = d.steps_per_epoch * args.iter_size, []  # bad: this step's replaced videos, this rank
    t_end = time.time()
    for it, batch in enumerate(train_loader(args, d, epoch, progress.iter), start=progress.iter):
        clips, labels, info = decode_on_device(batch, args, rt, d, net, progress, it) if d.train_ds.encoded else batch
        meter.t_wait += time.time() - t_end  # GPU decoding counts as waiting for data
        bad += [line for text in info.get("bad", []) for line in text.splitlines()]
        x, labels = to_model_input(clips, info, rt), labels.to(rt.device, non_blocking=True)
        last = (it + 1) % args.iter_size == 0  # the batch that completes an optimizer step
        step = epoch * d.steps_per_epoch + it // args.iter_size
        lr = lr_at(args, step, d.steps_per_epoch)
        for g in net.optimizer.param_groups:
            g["lr"] = lr
        # DDP averages gradients in every backward; accumulating, only the step's last batch needs that.
        with net.ddp.no_sync() if net.ddp is not None and not last else contextlib.nullcontext():
            with rt.autocast:
                logits = net.train(x)
                loss = criterion(logits, labels)
            if not math.isfinite(loss.item()):
                fail(f"loss is {loss.item()} at epoch {epoch} iteration {it}; stopping (lower --lr, or --clip-grad)", code=1)
            net.scaler.scale(loss / args.iter_size).backward()  # mean over the step's iter_size x b clips
        meter.update(loss, logits, labels)
        if not last:
            t_end = time.time()
            continue
        if args.clip_grad > 0:
            net.scaler.unscale_(net.optimizer)
            nn.utils.clip_grad_norm_(net.bare.parameters(), args.clip_grad)
        net.scaler.step(net.optimizer)
        net.scaler.update()
        net.optimizer.zero_grad(set_to_none=True)
        if (step + 1) % args.print_freq == 0 or it + 1 == batches:
            print(meter.line(args, rt, progress, loss, lr, it, batches))
        signum, n_bad = all_sum([STOP["signal"], len(bad)], rt)
        if n_bad:  # rare: only then the lines themselves travel
            record_bad_videos(bad, rt, progress)
        bad = []
        if signum or len(progress.bad_seen) > args.max_bad_videos:
            stop_and_save(args, rt, net, progress, d, it + 1)
        t_end = time.time()
    return meter


def decode_on_device(batch, args, rt, d, net, progress, it):
    """--decode_device cuda: a frame that fails only on the GPU cannot be replaced (its loader has moved on).
    One process saves at the last step boundary first; under DDP the other ranks stop with it."""
    try:
        return data.decode_batch(batch, rt.device, d.train_ds)
    except data.BadVideo as e:
        if rt.world_size == 1:
            progress.iter = it - it % args.iter_size
            save_checkpoint(args, rt, net, progress, d)
        fail(f"{e} -- found by nvJPEG in training; run `python data.py check LIST --full` and fix it, then --resume auto")


def stop_and_save(args, rt, net, progress, d, next_iter):
    progress.iter = next_iter
    save_checkpoint(args, rt, net, progress, d)
    where = f"at epoch {progress.epoch} iteration {next_iter}"
    if len(progress.bad_seen) <= args.max_bad_videos:  # a signal, here or on another rank
        print(f"signal {STOP['signal'] or signal.SIGTERM}: saved {rt.run_dir}/checkpoint.pth {where}")
        sys.exit(128 + (STOP["signal"] or signal.SIGTERM))
    fail(f"{len(progress.bad_seen)} bad videos replaced, more than --max_bad_videos {args.max_bad_videos} (listed in "
         f"{rt.run_dir}/bad_videos.txt); saved checkpoint.pth {where}. Fix them (python data.py check LIST), "
         "then --resume auto")


STOP = {"signal": 0}  # set by the SIGTERM/SIGINT handler; read at the end of each optimizer step


# ---- evaluation ------------------------------------------------------------------------------------
@torch.no_grad()
def evaluate(net, d, args, rt):
    """Softmax scores averaged over each video's views -> dict of top1, top5, loss (of the averaged
    probabilities), and the per-video scores and labels in dataset order.

    Exact under DDP: each rank scores a disjoint shard (indices rank::world, no padding, so no video
    counted twice), then the per-video scores are gathered and every rank computes the same numbers.
    """
    net.eval.eval()
    scores, labels, error = [], [], None
    try:
        quiet = rt.rank != 0 or not sys.stderr.isatty()  # a bar on a terminal; logs stay clean
        for batch in tqdm(d.val_loader, desc="evaluate", unit="batch", disable=quiet, leave=False):
            clips, target, _ = data.decode_batch(batch, rt.device, d.val_ds) if d.val_ds.encoded else batch
            clips = data.normalize(clips.to(rt.device, non_blocking=True), rt.mean, rt.std)
            if clips.dim() == 5:  # one view per video: (B, 3, T, H, W) -> (B, 1, 3, T, H, W)
                clips = clips.unsqueeze(1)
            B, V = clips.shape[:2]
            clips = clips.flatten(0, 1).contiguous(memory_format=rt.memory_format)  # (B*V, 3, T, H, W)
            with rt.autocast:
                logits = net.eval(clips)
            scores.append(logits.float().softmax(-1).view(B, V, -1).mean(1).cpu())  # average views per video
            labels.append(target)
    except data.BadVideo as e:  # never substituted (that would change the metric); all ranks learn of it below
        error = str(e)  # one line, also when a DataLoader worker raised it (data.BadVideo keeps its text)
    scores = torch.cat(scores) if scores else torch.zeros(0, args.num_classes)
    labels = torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long)
    shards = gather((d.val_indices[:len(labels)], scores, labels, error), rt)
    errors = [s[3] for s in shards if s[3]]
    if errors:
        raise data.BadVideo(errors[0])
    # Put every rank's shard back in dataset order.
    all_scores = torch.zeros(len(d.val_ds), args.num_classes)
    all_labels = torch.zeros(len(d.val_ds), dtype=torch.long)
    for idx, s, l, _ in shards:
        all_scores[idx], all_labels[idx] = s, l
    topk = all_scores.topk(min(5, args.num_classes), dim=1).indices
    p_true = all_scores.gather(1, all_labels[:, None]).clamp_min(1e-12)
    return {"top1": (topk[:, 0] == all_labels).float().mean().item() * 100,
            "top5": (topk == all_labels[:, None]).any(1).float().mean().item() * 100,
            "loss": -p_true.log().mean().item(), "scores": all_scores, "labels": all_labels}


def report_evaluation(rt, d, res, clips, crops):
    """Rank 0: top-1, top-5, mean class accuracy, the per-class table (worst first) and the run folder's
    per_class CSV, confusion PNG and scores .npz. Exact under DDP: `res` holds every rank's videos."""
    if rt.rank != 0:
        return
    videos = [v.path for v in d.val_ds.videos]
    metrics, paths = report.write_evaluation(rt.run_dir, res["scores"], res["labels"], d.class_names, clips, crops, videos)
    print(f"top-1 {res['top1']:.3f}  top-5 {res['top5']:.3f}  mean class accuracy {metrics['mean_class_acc']:.3f}  "
          f"({len(videos)} videos, {clips}x{crops} views); wrote {', '.join(sorted(paths.values()))}")
    print(report.per_class_table(metrics, d.class_names))


def evaluate_checkpoint(args, rt, net, d):
    """--evaluate: the metrics, the per-class report and its files; the last line is the one scripts parse."""
    try:
        res = evaluate(net, d, args, rt)
    except data.BadVideo as e:
        fail(f"evaluation stopped: {e}")
    report_evaluation(rt, d, res, args.test_clips, args.test_crops)
    print(f" * Acc@1 {res['top1']:.3f} Acc@5 {res['top5']:.3f}")
    return res


# ---- the epoch loop --------------------------------------------------------------------------------
def validate_and_log(args, rt, net, d, progress, meter):
    """End of an epoch: validate (every -ef epochs), save checkpoint.pth (and model_best.pth), log a line."""
    epoch = progress.epoch
    loss_sum, correct, seen = all_sum(meter.sums, rt)
    log = {"epoch": epoch, "lr": net.optimizer.param_groups[0]["lr"],  # the lr its last step used
           "train_loss": loss_sum / seen if seen else None,  # seen = 0: resumed at the epoch's end
           "train_top1": 100 * correct / seen if seen else None, "val_top1": None, "val_top5": None, "val_loss": None}
    if rt.world_size > 1:  # BN running stats differ per rank (own batches): score with rank 0's, the saved ones
        for b in net.bare.buffers():
            dist.broadcast(b, 0)
    progress.epoch, progress.iter = epoch + 1, 0
    if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
        try:
            res = evaluate(net, d, args, rt)
        except data.BadVideo as e:  # the training state is saved first: nothing is lost
            save_checkpoint(args, rt, net, progress, d)
            fail(f"validation stopped (checkpoint.pth saved): {e}")
        log.update(val_top1=res["top1"], val_top5=res["top5"], val_loss=res["loss"])
        progress.last_val = res
        print(f"epoch {epoch} * Acc@1 {res['top1']:.3f} Acc@5 {res['top5']:.3f}")
    is_best = log["val_top1"] is not None and log["val_top1"] > progress.best_acc1
    if is_best:
        progress.best_acc1, progress.best_epoch = log["val_top1"], epoch
    log["epoch_time"] = time.time() - meter.t_epoch
    save_checkpoint(args, rt, net, progress, d)
    if rt.rank == 0:
        best, tmp = os.path.join(rt.run_dir, "model_best.pth"), os.path.join(rt.run_dir, "model_best.tmp")
        with disk_errors(best, tmp):
            if is_best:  # copy, then rename: model_best.pth is never half-written either
                shutil.copyfile(os.path.join(rt.run_dir, "checkpoint.pth"), tmp)
                os.replace(tmp, best)
        with disk_errors(os.path.join(rt.run_dir, "log.jsonl")):
            with open(os.path.join(rt.run_dir, "log.jsonl"), "a") as f:
                f.write(json.dumps(log) + "\n")
            report.save_curves_png(os.path.join(rt.run_dir, "log.jsonl"), os.path.join(rt.run_dir, "curves.png"))
        for key, value in log.items() if rt.tensorboard else ():
            if value is not None and key != "epoch":
                rt.tensorboard.add_scalar(key, value, epoch)
    return log


def main(args):
    check_args(args)
    rt = setup_runtime(args)
    prepare_run_dir(args, rt)
    d = build_data(args, rt)
    net = build_net(args, rt)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    progress = Progress()
    args.world_size = rt.world_size  # saved with the args: a mid-epoch resume needs the same global batch
    ckpt = resume(args, rt, net, progress)
    d.class_names = d.class_names or (ckpt or {}).get("class_names")  # no classes file: the checkpoint's names
    if args.evaluate:
        res = evaluate_checkpoint(args, rt, net, d)
        if rt.world_size > 1:
            dist.destroy_process_group()
        return res["top1"], res["top5"]

    if args.tensorboard and rt.rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            fail("--tensorboard needs the tensorboard package: pip install tensorboard")
        rt.tensorboard = SummaryWriter(os.path.join(rt.run_dir, "tensorboard"))
    old_handlers = {sig: signal.signal(sig, lambda signum, frame: STOP.update(signal=signum))
                    for sig in (signal.SIGTERM, signal.SIGINT)}  # finish the step, save, exit 128+signal
    print(f"run folder {rt.run_dir}: {len(d.train_ds)} train / {len(d.val_ds)} val videos, {args.num_classes} classes, "
          f"{rt.world_size} process(es) x batch {args.batch_size} x iter_size {args.iter_size}, "
          f"{d.steps_per_epoch} steps/epoch, device {rt.device}, input mean {rt.mean} std {rt.std}")
    t_run = time.time()
    while progress.epoch < args.epochs:
        meter = train_one_epoch(args, rt, d, net, criterion, progress)
        validate_and_log(args, rt, net, d, progress, meter)
        if all_sum([STOP["signal"]], rt)[0]:  # a signal during validation: the checkpoint is already saved
            sys.exit(128 + (STOP["signal"] or signal.SIGTERM))

    print(f"done in {time.time() - t_run:.0f}s: best Acc@1 {progress.best_acc1:.3f} at epoch {progress.best_epoch}, "
          f"saved to {os.path.join(rt.run_dir, 'model_best.pth')}; the last epoch's validation by class:")
    if progress.last_val is not None:
        report_evaluation(rt, d, progress.last_val, 1, 1)
    for sig, handler in old_handlers.items():  # callers running main() in-process get Ctrl-C back
        signal.signal(sig, handler)
    if rt.world_size > 1:
        dist.destroy_process_group()
    return progress.best_acc1


if __name__ == "__main__":
    if sys.argv[1:2] == ["predict"]:
        import predict
        sys.exit(predict.main(sys.argv[2:]))
    try:
        main(parse_args())
    except data.BadVideo as e:  # e.g. a training video whose replacements were all unreadable too
        fail(str(e))
