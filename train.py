"""Train and evaluate 3D ConvNets (I3D ResNet-3D), TSN / TSM and 2D networks for video action
recognition.

    python train.py demo                     # CPU: recipes/demo.txt on synthetic motion videos
    # a recipe; later flags override it
    python train.py ucf101 train.txt val.txt @recipes/ucf101_i3d.txt
    torchrun --nproc_per_node=8 train.py ucf101 train.txt val.txt @recipes/ucf101_i3d.txt --ddp -b 8
    # parameters, gradients and optimizer state sharded over the processes (FSDP2, fsdp.py)
    torchrun --nproc_per_node=8 train.py k400 train.csv val.csv --arch vit_g14 --fsdp --amp bf16
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth --test_clips 10 \
        --test_crops 3
    # continue a run (SIGTERM saves it, exits 143)
    python train.py @output/RUN/args.txt --resume auto
    # top-5 labels
    python train.py predict --resume model_best.pth video.avi frames/v_Biking_g01_c01

The original project's command works verbatim:
    CUDA_VISIBLE_DEVICES=2,3 python train.py ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 \
        --mode 3D --t_length 16 --t_stride 4 --pretrained --epochs 95 --batch-size 64 --lr 0.001 \
        --lr_steps 40 80 90 --workers 16 --image_tmpl img_{:05d}.jpg
-b is per process: DataParallel (no --ddp) splits it over the visible GPUs; with --ddp the global
batch is b x processes x iter_size (--iter_size N: N batches accumulated per SGD step). Several
machines: torchrun --nnodes=N --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 on each (it sets RANK /
LOCAL_RANK / WORLD_SIZE), or under Slurm `sbatch slurm/train.sbatch`: srun starts one process per
GPU, no torchrun (see launch.py). --evaluate scores 1 centred clip, or clips x crops with softmax
averaged per video; the model and clip flags not given are the checkpoint's own.

main() is the table of contents: flags -> runtime -> data -> model -> optimizer -> resume -> epochs.
Everything a step needs about where it runs (rank, device, autocast, memory format, run folder) is
in one `Runtime`. The flags, recipes and their up-front checks are flags.py; checkpoints and
resuming, checkpoint.py; the rest of the run folder and the signals that stop a run, rundir.py; the
progress line, report.Meter; one-line errors, errors.py. `python train.py predict|...` runs
predict.py (train.py never imports it: predict.py imports train.py).

References: pytorch/examples imagenet/main.py (flags, top-k), torchvision
references/video_classification (distributed setup, warmup per iteration, no-WD for norm layers),
PySlowFast / mmaction2 (I3D recipe, cosine schedule, multi-view testing),
BannyStone/Video_Classification_PyTorch (the flags and run-folder name kept here; its fine-tuning
scripts: --freeze_bn, --fc_only).
"""

import builtins
import contextlib
import copy
import dataclasses
import io
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.optim import swa_utils
from torch.utils.data import DataLoader, DistributedSampler, Subset
from torchvision import tv_tensors
from torchvision.transforms import v2

from tqdm import tqdm

import augment  # --augment_device batch: clip augmentation applied to the batch
import checkpoint
import data
import decode
import flags
import fsdp  # --fsdp: sharding and sharded checkpoints
import gpudecode
import launch
import model as models
import prepare  # the start-up folder check and the demo's synthetic data
import probe  # --probe: frozen-backbone probing
import report
import rundir
import vjepa_zoo  # --probe-weights: the official V-JEPA 2 probe checkpoints
import zoo  # --pretrained: the model zoos' weights
from errors import fail, warn

# train.get_args_parser() and train.parse_args(argv), as before the flags had a module of their own
from flags import get_args_parser, parse_args  # noqa: F401

DEMO_DATA = dict(videos=128, frames=24, size=(64, 48))  # per split; small frames keep it CPU-fast


# ---- where we run --------------------------------------------------------------------------------
@dataclass
class Runtime:
    """Where this process runs and how its steps compute: passed around instead of long argument
    lists."""

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

    def gather(self, obj):
        """Every rank's `obj`, in rank order."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def all_sum(self, values):
        """A few numbers summed over ranks (one collective): how ranks agree on when to stop. One
        process: no tensor at all (a CUDA tensor would be a host sync every step)."""
        if self.world_size == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()


def setup_runtime(args):
    """One process, or with --ddp one per GPU, started by torchrun or by srun (launch.py reads
    which)."""
    cuda = args.device.startswith("cuda")
    # --fsdp: launched as --ddp (in a Slurm job: by srun, its refusals included), or outside any
    # launcher one plain process (fsdp.init_single_process)
    launched = "RANK" in os.environ or "SLURM_JOB_ID" in os.environ
    distributed = args.ddp or (args.fsdp and launched)
    try:
        flag = "--fsdp" if args.fsdp else "--ddp"
        rank, world_size, local_rank = launch.ranks(distributed, args.device, flag)
    except ValueError as e:
        fail(str(e))
    if args.fsdp and not distributed:
        fsdp.init_single_process()
    if distributed:
        if cuda:
            torch.cuda.set_device(local_rank)  # one GPU per process, before NCCL touches any device
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size)
        # only rank 0 prints (model.py's pretrained summary included); warnings go to stderr
        if rank != 0:
            builtins.print = lambda *a, **k: None
        where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
        print(f"{'FSDP' if args.fsdp else 'DDP'}: {world_size} processes, rendezvous {where}")
    device = torch.device(f"cuda:{local_rank}" if cuda and distributed else args.device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    torch.manual_seed(args.seed)  # same init on every rank; DDP broadcasts rank 0's anyway
    # cuDNN trap: benchmark mode times every 3D conv algorithm once per input shape. A win for
    # fixed-size training; for evaluation (one pass, other shapes) it only costs time and workspace
    # memory.
    torch.backends.cudnn.benchmark = not args.evaluate
    return Runtime(
        rank,
        world_size,
        local_rank,
        device,
        os.path.join(args.output_root, args.run_name),
        torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None),
        torch.channels_last_3d if args.channels_last else torch.contiguous_format,
    )


# ---- data ----------------------------------------------------------------------------------------
@dataclass
class Data:
    train_ds: data.VideoFrameDataset
    val_ds: data.VideoFrameDataset
    train_sampler: DistributedSampler
    val_loader: DataLoader
    val_indices: list
    steps_per_epoch: int  # optimizer steps; each takes iter_size batches of batch_size videos
    class_names: list
    mix: object = None  # (x, labels) -> (x, targets): MixUp / CutMix (`mixing`), or as they came


def make_dataset(args, list_file, mode):
    """The dataset of `list_file` as the flags say. Training, validation, --evaluate and predict
    (with a checkpoint's flags: checkpoint_args) all build theirs here: an option added to
    data.DataSpec reaches all four."""
    return data.VideoFrameDataset(list_file, data_spec(args, mode), mode)


def data_spec(args, mode):
    """The flags -> data.DataSpec for `mode`: the fields derived here, and every other field named
    as its flag filled by name (a flag a checkpoint's args predate keeps the field's default)."""
    test = mode == "test"
    derived = dict(
        root=args.data_root,
        flip=not args.no_flip,  # and never for data.NO_FLIP's datasets
        num_clips=args.test_clips if test else 1,
        num_crops=args.test_crops if test else 1,
        encoded=args.decode_device == "cuda",
        read_timeout=args.read_timeout or None,
        finish_crop=not args.device.startswith("cuda"),  # a CPU model: the loader finishes the crop
        augment=None,
        reps=args.ra_reps,
        # pretraining: '<frame_dir> <num_frames>' lines too (labels unused)
        unlabelled=getattr(args, "pretrain", False),
        heads=tuple(args.heads) if getattr(args, "heads", None) else None,
    )
    if mode == "train":
        # in the loader, or augment.BatchAugment's draws
        derived["augment"] = clip_augmentation(args)
    fields = {f.name for f in dataclasses.fields(data.DataSpec)} - set(derived)
    return data.DataSpec(**{k: v for k, v in vars(args).items() if k in fields}, **derived)


def clip_augmentation(args):
    """The train clips' augmentation: data.clip_transforms's transforms, run in the loader, or with
    --augment_device batch only drawn there (augment.BatchAugment) and applied in to_model_input."""
    transforms = data.clip_transforms(
        args.auto_augment == "ra",
        args.ra_num_ops,
        args.ra_magnitude,
        args.color_jitter,
        args.random_erase,
    )
    if transforms is not None and getattr(args, "augment_device", "loader") == "batch":
        return augment.BatchAugment(transforms)
    return transforms


def worker_init_fn(worker_id):
    # Trap: forked workers inherit the parent's numpy/random state, so every worker would draw the
    # same "random" numbers. data.py seeds its own generators per sample; this protects code you
    # add.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
    # Trap: a preemption SIGTERM (or Ctrl-C) goes to the whole process group; a worker it kills
    # makes the main process fail mid-step, before it can save. A worker in its own session gets no
    # group signal, yet still dies of the SIGTERM its DataLoader sends when shutting down --
    # ignoring SIGTERM instead makes the main process wait forever for workers at exit after any
    # error.
    if hasattr(os, "setsid"):
        os.setsid()


def make_demo_data(args, rt):
    """`python train.py demo`: its synthetic dataset, made once in flags.demo_folder when a list it
    uses is the demo's own and missing. A list the user named is theirs: read, never written (a
    mistyped name is "not found", not a dataset written over the files beside it)."""
    ours = [os.path.join(flags.demo_folder(args), name) for name in ("train.txt", "val.txt")]
    used = {os.path.abspath(args.train_list), os.path.abspath(args.val_list)}
    if used & {os.path.abspath(p) for p in ours} and not all(map(os.path.exists, ours)):
        if rt.rank == 0:
            prepare.make_synth(flags.demo_folder(args), **DEMO_DATA)
        if rt.world_size > 1:
            dist.barrier()


def build_data(args, rt):
    if args.dataset == "demo":
        make_demo_data(args, rt)
    for flag, path in (("train_list", args.train_list), ("val_list", args.val_list)):
        if not os.path.isfile(path):
            fail(f"{flag} not found: {path}")
    # else: from the lists, below
    args.num_classes = args.num_classes or flags.NUM_CLASSES.get(args.dataset)
    args.num_classes = sum(args.heads) if args.heads else args.num_classes  # one fc, split
    views = args.test_clips * args.test_crops if args.evaluate else 1
    try:
        train_ds = make_dataset(args, args.train_list, "train")
        val_ds = make_dataset(args, args.val_list, "test" if views > 1 else "val")
    except (ValueError, OSError) as e:
        fail(str(e))
    args.num_classes = args.num_classes or max(train_ds.num_classes, val_ds.num_classes)
    files = [v.path for v in train_ds.videos + val_ds.videos if decode.is_video_file(v.path)]
    # AVI files always go to PyAV (decode.open_video): said where some are listed
    if rt.rank == 0 and files:
        avi = any(p.lower().endswith(".avi") for p in files)
        print(
            f"video files: decoded with {train_ds.video_decoder} "
            f"({'AVI files: pyav; ' if avi else ''}--video_decoder)"
        )
    check_frame_folders(args, [] if args.evaluate else train_ds.videos, val_ds.videos)
    train_labels, warned = {v.label for v in train_ds.videos}, set()
    for v in val_ds.videos:  # it would silently widen the classifier, and can never be right
        if (
            not isinstance(v.label, tuple)
            and v.label not in train_labels
            and v.label not in warned
            and rt.rank == 0
            and not args.evaluate
        ):
            warned.add(v.label)
            warn(f"{args.val_list}:{v.line}: label {v.label} never occurs in {args.train_list}")
    # Training: DistributedSampler also serves one process (num_replicas=1) so that the shuffle
    # order is a function of (seed, epoch) only -- exact resume. It pads with repeats so every rank
    # steps equally.
    train_sampler = DistributedSampler(
        train_ds, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed
    )
    # Validation: a disjoint shard per rank and no padding (DistributedSampler would count
    # duplicates).
    val_indices = list(range(rt.rank, len(val_ds), rt.world_size))
    val_loader = DataLoader(
        Subset(val_ds, val_indices),
        batch_size=max(1, args.batch_size // views),
        num_workers=args.workers,
        pin_memory=rt.device.type == "cuda",
        worker_init_fn=worker_init_fn,
        collate_fn=collate_fn(args),
        generator=torch.Generator().manual_seed(args.seed),
    )
    step_clips = args.batch_size * args.iter_size
    if not args.evaluate and len(train_sampler) < step_clips:
        fail(
            f"{args.train_list} has {len(train_sampler)} videos per process, fewer than "
            "--batch-size x "
            f"--iter_size = {step_clips}"
        )
    return Data(
        train_ds,
        val_ds,
        train_sampler,
        val_loader,
        val_indices,
        len(train_sampler) // step_clips,
        read_class_names(args),
        mixing(args),
    )


def mixing(args):
    """--mixup-alpha / --cutmix-alpha: torchvision's v2.MixUp / CutMix on the normalised float
    batch, one of them (CutMix with --mix-switch-prob) on a batch with --mix-prob, as PySlowFast's
    MixUp (timm's Mixup). CutMix cuts the same box from every frame: a (B, C, T, H, W) batch passes
    as a Video, whose last two dims are H and W. Targets come back soft (B, classes), unmixed ones
    as the labels. Draws from torch's global generator, which a resume restores (as dropout's)."""
    ops = [
        (kind(alpha=alpha, num_classes=args.num_classes), p)
        for kind, alpha, p in (
            (v2.MixUp, args.mixup_alpha, 1 - args.mix_switch_prob),
            (v2.CutMix, args.cutmix_alpha, args.mix_switch_prob),
        )
        if alpha > 0
    ]
    if not ops:
        return lambda x, labels: (x, labels)
    one = v2.RandomApply(
        [v2.RandomChoice([op for op, _ in ops], p=[p for _, p in ops] if len(ops) > 1 else None)],
        p=args.mix_prob,
    )

    def mix(x, labels):
        x, targets = one(tv_tensors.Video(x), labels)
        return x.as_subclass(torch.Tensor), targets

    return mix


def check_frame_folders(args, *video_lists):
    """Before the model is built: every listed folder holds its first and last frame (stat calls
    only)."""
    for videos in video_lists:
        problems, count = prepare.check_folders(videos, args.image_tmpl)
        if count:
            fail(
                f"{count} listed video(s) have missing frame folders or frames: "
                f"{'; '.join(problems)}"
                f"{' ...' if count > len(problems) else ''} (full report: `python prepare.py "
                "check LIST`)"
            )


def read_class_names(args):
    """--class_names, or <dataset>_classes.txt beside the train list (from `prepare.py lists`), or
    the names the train list's own format gives (data.class_names); or None."""
    if args.class_names and not os.path.isfile(args.class_names):
        fail(f"--class_names {args.class_names}: no such file")
    try:
        names = data.class_names(data_spec(args, "train"), args.train_list)
    except (ValueError, OSError) as e:
        fail(str(e))
    if names is not None and len(names) != args.num_classes:
        fail(
            f"{args.class_names or args.train_list}: {len(names)} class names, this run has "
            f"{args.num_classes} (--num_classes, the lists)"
        )
    return names


def train_loader(args, d, epoch, start_iter):
    """A fresh loader each epoch (no persistent workers): workers must see set_epoch, and a resumed
    epoch skips the batches it already trained on. The generator keeps DataLoader off the global
    RNG, which drives dropout and is restored on resume."""
    d.train_sampler.set_epoch(epoch)  # shuffle order = f(seed, epoch)
    d.train_ds.set_epoch(epoch)  # augmentation seeds = (seed, epoch, index)
    used = d.steps_per_epoch * args.iter_size * args.batch_size
    order = list(d.train_sampler)[start_iter * args.batch_size : used]
    return DataLoader(
        d.train_ds,
        batch_size=args.batch_size,
        sampler=order,
        num_workers=args.workers,
        pin_memory=d.val_loader.pin_memory,
        drop_last=True,
        worker_init_fn=worker_init_fn,
        collate_fn=collate_fn(args),
        generator=torch.Generator().manual_seed(args.seed * 1000 + epoch),
    )


def collate_fn(args):
    """--decode_device cuda: batches of encoded frames, decoded by decode_batch in the step."""
    return gpudecode.collate_encoded if args.decode_device == "cuda" else data.collate


# ---- model and optimizer -------------------------------------------------------------------------
@dataclass
class Net:
    """The model and what updates it. `bare` is the model itself: what a checkpoint saves, the EMA
    averages and gradient clipping reads; `train_model` is what the step calls: `bare` wrapped in
    DDP or DataParallel and maybe compiled; `eval_model` what evaluation calls; `ddp` is the DDP
    wrapper, whose no_sync accumulation needs. (Not `train` / `eval`: nn.Module's methods.)"""

    train_model: nn.Module
    bare: nn.Module
    ddp: nn.Module = None
    optimizer: torch.optim.Optimizer = None
    scaler: torch.amp.GradScaler = None
    ema: swa_utils.AveragedModel = None  # --model-ema: ema.module is the averaged model

    @property
    def eval_model(self):
        """What evaluation calls: DataParallel (the batch split over the GPUs; never compiled), else
        the bare model. Trap: under DDP, the bare module: DDP's forward broadcasts buffers (a
        collective), which hangs when ranks hold shards of different lengths."""
        if isinstance(self.train_model, nn.DataParallel):
            return self.train_model
        return self.bare

    def grad_sync(self, last):
        """DDP averages gradients in every backward; accumulating, only the step's last batch needs
        that: the others run under no_sync."""
        if self.ddp is None or last:
            return contextlib.nullcontext()
        return self.ddp.no_sync()


def make_model(args):
    """The bare model the flags describe, --pretrained weights loaded; ValueError / OSError: one
    line. Training, --evaluate and predict (with a checkpoint's flags: checkpoint_args) all build
    theirs here."""
    args.t_length = flags.default_t_length(args)
    pretrained = args.pretrained_model or args.pretrained
    # a V-JEPA file without a head: the load line says what fills it (or that it is never used)
    head_note = (
        f"filled by --probe-weights {args.probe_weights} (next line)"
        if args.probe_weights
        else "unused (--probe trains its own probes)"
        if args.probe
        else None
    )
    model = zoo.build_model(
        model_spec(args),
        pretrained=pretrained,
        inflate=args.inflate,
        vjepa_key=args.vjepa_key,
        head_note=head_note,
    )
    # SlowFast: the network built (the --pretrained file's variant), which a checkpoint must rebuild
    args.slowfast_variant = getattr(model, "slowfast_variant", args.slowfast_variant)
    model = probe.wrap(model, args) if args.probe else model
    if args.probe_weights:  # onto the probe, or a V-JEPA arch's own attentive head
        model = load_probe_weights(model, args)
    if args.t_length < getattr(model, "min_t", 1):
        raise ValueError(
            f"--t_length {args.t_length} is too short for --arch {args.arch} "
            f"(needs >= {model.min_t})"
        )
    return model


def load_probe_weights(model, args):
    """--probe-weights FILE[:K]: one head of an official probe file onto the probe (--probe) or a
    V-JEPA arch's own head; FILE:all (--evaluate): every head, each its own probe on the one
    backbone, so one evaluation pass scores them all (probe.ProbedModel's grid)."""
    states, _ = vjepa_zoo.probe_states(args.probe_weights)
    if len(states) > 1 and args.probe:
        model = probe.wrap(model.backbone, args, count=len(states))
    elif len(states) > 1:  # the arch's own head, once per head of the file
        heads = [copy.deepcopy(model.head) for _ in states]
        model.head = nn.Identity()
        model = probe.ProbedModel(model, heads)
    vjepa_zoo.load_probe(
        model.probes if isinstance(model, probe.ProbedModel) else [model.head], args.probe_weights
    )
    # --evaluate --pretrained ENCODER --probe-weights FILE: the probe file is the classifier scored
    if model.pretrained_info is not None:
        classes = vjepa_zoo.probe_classes(args.probe_weights)
        model.pretrained_info.update(head_classes=classes, head_loaded=classes == args.num_classes)
    return model


def check_weights(args):
    """--pretrained / --probe-weights refused before any list is read: the model is made on the meta
    device from the files memory-mapped (nothing copied, no load line printed); make_model loads
    them for real after the lists. Every arch's local file or folder; a ViT's Hub id too (its
    download is needed anyway). The names "imagenet" / "kinetics400" of the other archs are not
    fetched twice: they are checked when make_model loads them."""
    pretrained = args.pretrained_model or args.pretrained
    vit = args.arch in models.VITS + models.VJEPAS
    local = bool(pretrained) and os.path.exists(pretrained)
    if not (local or (vit and (pretrained or args.probe_weights))):
        return
    a = copy.copy(args)
    # the lists' class count is not known yet: the dataset's, else the probe file's own
    known = args.num_classes or flags.NUM_CLASSES.get(args.dataset)
    try:
        with checkpoint.mapped():
            a.num_classes = known or vjepa_zoo.probe_classes(args.probe_weights) or 1
            with torch.device("meta"), contextlib.redirect_stdout(io.StringIO()):
                make_model(a)
    except (ValueError, OSError) as e:
        fail(str(e))


def check_pretrained_head(args, model):
    """--evaluate --pretrained FILE (no --resume) scores the file's own classifier: it must have one
    of --num_classes outputs (the new head a fine-tuning run starts from would score chance). A
    file whose classifier is several heads (EPIC-100's verbs, nouns) loaded whole: --heads must be
    its heads, in its order (the same sum in another split would read verbs as nouns)."""
    info = getattr(model, "pretrained_info", None) or {}
    src, n = args.pretrained_model or args.pretrained, info.get("head_classes")
    heads, flag = info.get("heads"), " ".join(map(str, args.heads or ()))
    loaded = info.get("head_loaded") or args.evaluate
    if heads and loaded and not args.resume and tuple(args.heads or ()) != heads:
        said = f"--heads {flag}" if args.heads else f"--num_classes {args.num_classes}"
        fail(
            f"--pretrained {src}: its classifier is {len(heads)} heads of "
            f"{' + '.join(map(str, heads))} outputs (verbs, nouns); {said} reads it otherwise: "
            f"give --heads {' '.join(map(str, heads))}"
        )
    if not args.evaluate or args.resume:
        return
    if n is None:
        fail(
            f"--evaluate --pretrained {src}: the file has no classifier (a backbone or pretraining "
            "file): fine-tune it first, then --evaluate --resume the run's model_best.pth"
        )
    if not info.get("head_loaded"):
        fail(
            f"--evaluate --pretrained {src}: its classifier has {n} classes, --num_classes is "
            f"{args.num_classes}: give the list of its {n} classes (or --num_classes {n})"
        )


def model_spec(args):
    """The model.ModelSpec the flags describe: each of its fields is the flag of the same name."""
    fields = dataclasses.fields(models.ModelSpec)
    return models.ModelSpec(**{f.name: getattr(args, f.name) for f in fields})


def build_net(args, rt, model=None):
    """The Net of `model` (default: make_model's) on the device, wrapped, with its optimizer."""
    try:
        model = make_model(args) if model is None else model
    except (ValueError, OSError) as e:
        fail(str(e))
    stem_t = (
        model.conv1.kernel_size[0] if isinstance(getattr(model, "conv1", None), nn.Conv3d) else 1
    )
    if args.amp == "bf16" and rt.device.type == "cpu" and args.t_length < stem_t:
        # Measured with torch 2.14: the CPU bf16 conv3d weight gradient is NaN or several-fold wrong
        # when the temporal kernel is longer than the clip (fine from T = kernel up, and in fp32).
        fail(
            f"--amp bf16 on CPU needs --t_length >= {stem_t} for --arch {args.arch} (torch's CPU "
            "bf16 "
            "conv3d gradient is wrong for clips shorter than the kernel); use --amp off"
        )
    info = getattr(model, "pretrained_info", None) or {}
    rt.mean = tuple(args.mean or info.get("mean") or data.MEAN)
    rt.std = tuple(args.std or info.get("std") or data.STD)
    # fine-tuning modes: frozen tensors get no gradient, no decay
    if args.fc_only:
        for name, p in model.named_parameters():
            if not name.startswith(models.HEAD):
                p.requires_grad = False
    if args.freeze_bn:
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.requires_grad_(False)
    if args.sync_bn and args.ddp:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    # Batches arrive in channels_last_3d memory (data.collate); convs use it where --channels-last
    # asks.
    model.to(rt.device, memory_format=rt.memory_format)
    net = Net(train_model=model, bare=model)
    # --fsdp: sharded in place (train_model and bare are the one sharded module); --evaluate needs
    # no optimizer state, so it scores the whole model, its videos split over the processes as
    # --ddp's
    if args.fsdp and not args.evaluate:
        fsdp.shard(model, args, rt)
    elif args.ddp:
        # gradients as views of the all-reduce buckets: no copy in, no second gradient copy
        net.ddp = net.train_model = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[rt.local_rank] if rt.device.type == "cuda" else None,
            gradient_as_bucket_view=True,
        )
    elif args.device == "cuda" and torch.cuda.device_count() > 1 and not args.fsdp:
        # --device cuda:N means that one GPU; DataParallel splits the batch over every visible GPU
        net.train_model = nn.DataParallel(model)
    # Training only (the shapes never change: drop_last), never DataParallel (flags.check_args); DDP
    # itself is compiled, the documented way (its DDPOptimizer splits the graph at buckets:
    # all-reduce overlaps the backward). Evaluation stays eager: eval mode, views x batch and the
    # last partial batch would each recompile, for a pass that runs once every -ef epochs.
    if args.compile:
        net.train_model = torch.compile(net.train_model, dynamic=False)
    # The optimizer is built after wrapping: SyncBN conversion makes new parameters.
    net.optimizer = make_optimizer(model, args, fused=rt.device.type == "cuda")
    # --model-ema: torchvision references' EMA (AveragedModel + get_ema_multi_avg_fn), buffers
    # averaged too. GPU trap: each update reads n_averaged on the host (one sync); --model-ema-steps
    # N spaces them.
    net.ema = (
        swa_utils.AveragedModel(
            model,
            multi_avg_fn=swa_utils.get_ema_multi_avg_fn(args.model_ema_decay),
            use_buffers=True,
        )
        if args.model_ema and not args.evaluate
        else None
    )
    net.scaler = torch.amp.GradScaler(rt.device.type, enabled=args.amp == "fp16")
    # a different dropout stream on each rank (resume restores it)
    torch.manual_seed(args.seed + rt.rank)
    return net


def make_optimizer(model, args, fused):
    """SGD (momentum) or AdamW over param_groups. `fused` (CUDA): the step takes GradScaler's
    found-inf flag on the device (the unfused one syncs to skip a step: fp16)."""
    if args.probe:  # one group per probe, its own lr and wd
        return probe.optimizer(model, args, fused)
    groups = param_groups(model, args)
    if args.opt == "adamw":
        betas = tuple(args.opt_betas or (0.9, 0.999))  # torch's default; VideoMAE pretraining 0.95
        return torch.optim.AdamW(groups, lr=args.lr, betas=betas, fused=fused or None)
    optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, fused=fused or None)
    # fp16 trap: fused SGD's first step makes its momentum buffers with empty_like and fills them in
    # the kernel, which GradScaler's found-inf flag skips whole. The first fp16 steps usually
    # overflow (initial scale 65536): the buffers stay uninitialised memory, and the next step adds
    # it to the weights (NaN). Zero buffers make the same first step (momentum * 0 + grad == grad,
    # bit for bit), skipped or not.
    if args.momentum > 0:
        for p in (p for g in groups for p in g["params"]):
            optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return optimizer


def set_train_mode(net, args):
    net.train_model.train()
    # the original's finetune_bn_frozen.py: BN uses (and keeps) the pretrained statistics
    if args.freeze_bn:
        for m in net.bare.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()


def param_groups(model, args):
    """Optimizer groups: per layer (--layer-decay: "lr_scale" = decay^(L + 1 - i), model.layer_ids),
    each split into --wd and --norm-weight-decay parameters: the 1-D ones and those model.ARCHS'
    entry names (Arch.no_decay). Weight decay on norms' scales/shifts and biases only hurts (Goyal
    et al. 2017; torchvision references); --bn_bias_wd: the original's --wd on all."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    ids, L = models.layer_ids(args.arch, [n for n, _ in named]) if args.layer_decay < 1 else ({}, 0)
    norm_wd, groups = args.norm_weight_decay, {}  # --bn_bias_wd: no parameter is one_d below
    # with the 1-D parameters: the position tables and tokens the arch's entry names
    no_decay = models.ARCHS[args.arch].no_decay
    for name, p in named:
        one_d = not args.bn_bias_wd and (p.ndim <= 1 or any(k in name for k in no_decay))
        i = ids.get(name, L + 1)
        key = (L + 1 - i, one_d)  # scale exponent; without --layer-decay: (0, False), (0, True)
        groups.setdefault(
            key,
            {
                "params": [],
                "weight_decay": norm_wd if one_d else args.weight_decay,
                "lr_scale": args.layer_decay ** (L + 1 - i),
            },
        )["params"].append(p)
    groups.setdefault((0, True), {"params": [], "weight_decay": norm_wd, "lr_scale": 1.0})
    return [groups[k] for k in sorted(groups)]


def lr_at(args, step, steps_per_epoch):
    """The lr of optimizer step `step` (0-based, global): a pure function of the flags, so a resumed
    run with other --epochs / --lr_steps / --warmup follows the new flags. Warmup ramps linearly to
    the schedule."""
    if args.lr_policy == "cosine_after_warmup":
        return cosine_after_warmup(args, step, steps_per_epoch)
    epoch, scale = step / steps_per_epoch, lr_batch_scale(args)
    # PySlowFast's lr_policy "cosine", end lr --lr-min (COSINE_END_LR)
    if args.lr_policy == "cosine":
        cos = 0.5 * (1 + math.cos(math.pi * min(1.0, epoch / args.epochs)))
        lr = args.lr_min + (args.lr - args.lr_min) * cos
    else:
        lr = args.lr * 0.1 ** sum(step >= round(m * steps_per_epoch) for m in args.lr_steps)
    warmup_steps, start = round(args.warmup * steps_per_epoch), args.lr_warmup_start
    lr = start + (lr - start) * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr
    return lr * scale


def cosine_after_warmup(args, step, steps_per_epoch):
    """VideoMAE's utils.cosine_scheduler (BEiT's), to the last bit: the lrs scaled first as
    run_class_finetuning.py / run_mae_pretraining.py do (lr * batch / 256, with --lr-batch); then
    np.linspace(start, lr, W) over the W warmup steps (i * ((lr - start) / (W - 1)) + start, the
    last exactly lr), then min + 0.5 (lr - min) (1 + cos(pi i / (S - W))) for the i-th of the S - W
    steps left, S = epochs x steps per epoch. Past S (a longer resume): --lr-min."""
    lr, low, start = (batch_scaled(args, v) for v in (args.lr, args.lr_min, args.lr_warmup_start))
    warmup = round(args.warmup * steps_per_epoch)
    if step < warmup:
        if warmup == 1 or step < warmup - 1:  # linspace of one value is its start
            return step * ((lr - start) / max(1, warmup - 1)) + start
        return lr
    left = round(args.epochs * steps_per_epoch) - warmup
    i = min(step - warmup, left)
    return low + 0.5 * (lr - low) * (1 + math.cos(math.pi * i / max(1, left)))


def batch_scaled(args, lr):
    """lr x global batch / --lr-batch, in VideoMAE's order of operations ((lr * batch) / 256)."""
    if not args.lr_batch:
        return lr
    return lr * global_batch(args) / args.lr_batch


def global_batch(args):
    """Clips per optimizer step over all processes: -b x --iter_size x processes."""
    return args.batch_size * args.iter_size * getattr(args, "world_size", 1)


def lr_batch_scale(args):
    """--lr-batch N: the lrs are given for N clips; this run's global batch / N (VideoMAE: lr x B /
    256)."""
    if not args.lr_batch:
        return 1.0
    return global_batch(args) / args.lr_batch


# ---- one epoch of training -----------------------------------------------------------------------
def decode_on_device(batch, args, rt, net, progress, d, it):
    """--decode_device cuda: gpudecode.decode_batch. A frame that fails only on the GPU cannot be
    replaced (its loader has moved on). One process saves at the last step boundary first; under DDP
    the other ranks stop with it."""
    try:
        return gpudecode.decode_batch(batch, rt.device, d.train_ds)
    # nvJPEG / TorchCodec raise RuntimeError, ValueError, their own kinds; OOM too
    except Exception as e:
        if rt.world_size == 1:
            progress.iter = it - it % args.iter_size
            checkpoint.save(args, rt, net, progress, d)
        if isinstance(e, decode.BadVideo):
            fail(
                f"{e} -- found decoding on the GPU in training; run `python prepare.py check LIST "
                "--full` "
                "and fix it, then --resume auto"
            )
        why = (
            f"out of GPU memory decoding batch {it} (lower -b or gpudecode.DECODE_CHUNK)"
            if isinstance(e, torch.OutOfMemoryError)
            else f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        )
        saved = "saved checkpoint.pth; " if rt.world_size == 1 else ""
        fail(f"GPU decoding failed in training: {why}; {saved}--resume auto continues")


def to_model_input(clips, labels, info, rt):
    """uint8 batch from the loader -> normalised float on the device, the train crop finished there,
    and the labels there. --ra-reps K: (B, K, 3, T, H, W) and (B, K, 4) boxes -> B x K clips, each
    video's K clips together; whole frames (B, 3, T, H, W) with info["size"] (data.load_clip): each
    video's K boxes cut from them."""
    K = info["box"].shape[1] if "box" in info and info["box"].dim() == 3 else 1
    clips = clips.flatten(0, 1) if clips.dim() == 6 else clips
    labels = labels.repeat_interleave(K) if K > 1 else labels
    x = clips.to(rt.device, non_blocking=True)  # uint8: cheap
    if "augment" in info:  # --augment_device batch: the loader drew each clip's augmentation
        x = augment.apply(x, info["augment"].flatten(0, -3))  # (B x K, stages, 8)
    x = data.normalize(x.contiguous(memory_format=rt.memory_format), rt.mean, rt.std)
    # training: the scale jitter's resize, batched on the device (boxes: still on the host)
    if "box" in info:
        x = data.crop_resize(x, info["box"], info.get("size"))
    return x.contiguous(memory_format=rt.memory_format), labels.to(rt.device, non_blocking=True)


@dataclass(frozen=True)
class Objective:
    """What the step minimises, in two parts: `forward` runs the model on the batch, `loss` scores
    its output. The trainer's: `classification`; pretrain.py's: `reconstruction` of the hidden
    tubelets."""

    forward: Callable  # (model, x, info) -> output
    loss: Callable  # (output, targets, x, info) -> the batch's mean loss
    classifies: bool = True  # the output is class scores: the meter counts their top-1
    # (optimizer, step, steps_per_epoch) -> lr: its own lr / wd schedule, set before the step
    schedule: Callable = None
    # (net, step, steps_per_epoch): after each optimizer step (V-JEPA's EMA target encoder)
    after_step: Callable = None


def classification_loss(args):
    """The one place of the classification loss: (logits (B, K), targets) -> the batch's mean loss,
    the targets labels (B,) or, with --mixup-alpha / --cutmix-alpha, soft targets (B, K). Every
    branch of the step scores its logits here: the model's, and each probe's of a --probe grid. The
    cross-entropy, with --label-smoothing; --multi-label: binary cross-entropy against the 0/1
    targets; --heads: the sum of the heads' cross-entropies."""
    cross_entropy = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    if args.multi_label:
        # PySlowFast's "bce_logit" (its Charades recipe): the mean over clips and classes
        bce = nn.BCEWithLogitsLoss()
        return lambda logits, targets: bce(logits, targets.to(logits.dtype))
    if args.heads:
        # the sum of the heads' cross-entropies (the EPIC-Kitchens team's forks: verb + noun)
        return lambda logits, targets: heads_loss(cross_entropy, logits, targets, args.heads)
    return cross_entropy


def classification(args):
    """The logits, and classification_loss of them. --probe: every probe's logits (B, N, K), each
    probe's loss classification_loss's, summed (probe.grid_loss; (B, K) logits: the loss itself).
    --multi-label and --heads have no one top-1 for the meter (classifies=False)."""
    criterion = classification_loss(args)
    if args.multi_label or args.heads:
        return Objective(
            forward=lambda model, x, info: model(x),
            loss=lambda logits, targets, x, info: criterion(logits, targets),
            classifies=False,
        )
    return Objective(
        forward=lambda model, x, info: model(x),
        loss=lambda logits, targets, x, info: probe.grid_loss(criterion, logits, targets),
    )


def heads_loss(loss, logits, targets, heads):
    """--heads: logits (B, sum(heads)) split into the heads' columns, targets (B, heads): the sum of
    each head's `loss`."""
    parts = logits.split(list(heads), dim=-1)
    return sum(loss(part, targets[:, h]) for h, part in enumerate(parts))


def train_one_epoch(args, rt, d, net, objective, progress):
    """Train from progress.iter to the end of progress.epoch; returns this rank's Meter. After each
    optimizer step, rundir.end_of_step saves and exits if a signal came or too many videos were
    bad."""
    # the meter's numbers in every epoch's line: a loss without classes (pretraining's) has no top-1
    logged = ("loss", "top1") if objective.classifies else ("loss",)
    epoch, meter = progress.epoch, report.Meter(progress.iter, logged)
    if args.probe:  # the probes' step sizes are their own; a grid cannot clip (probe.check)
        meter.advice = "lower --probe-lrs" + (
            ", or --clip-grad" if len(probe.grid(args)) == 1 else ""
        )
    set_train_mode(net, args)
    # bad: this step's replaced videos, this rank
    batches, bad = d.steps_per_epoch * args.iter_size, []
    t_end = time.time()
    for it, batch in enumerate(train_loader(args, d, epoch, progress.iter), start=progress.iter):
        if d.train_ds.spec.encoded:  # --decode_device cuda: nvJPEG, here
            batch = decode_on_device(batch, args, rt, net, progress, d, it)
        clips, labels, info = batch
        meter.t_wait += time.time() - t_end  # GPU decoding counts as waiting for data
        bad += [line for text in info.get("bad", []) for line in text.splitlines()]
        x, labels = to_model_input(clips, labels, info, rt)
        # --mixup-alpha / --cutmix-alpha: soft targets; else the labels
        x, targets = d.mix(x, labels)
        last = (it + 1) % args.iter_size == 0  # the batch that completes an optimizer step
        step = epoch * d.steps_per_epoch + it // args.iter_size
        lr = lr_at(args, step, d.steps_per_epoch)
        for g in net.optimizer.param_groups:
            g["lr"] = lr * g["lr_scale"]  # --layer-decay; else 1
        if args.probe:  # each probe its own lr and wd (the official schedules)
            probe.schedule(net.optimizer, args, step, d.steps_per_epoch, lr)
        if objective.schedule:
            lr = objective.schedule(net.optimizer, step, d.steps_per_epoch)
        # the batch's global index: what an objective draws per-batch randomness from (V-JEPA's
        # block sizes, the official iteration counter)
        info["batch"] = epoch * batches + it
        with net.grad_sync(last):
            with rt.autocast:
                out = objective.forward(net.train_model, x, info)
                loss = objective.loss(out, targets, x, info)
            # mean over the step's iter_size x b clips
            net.scaler.scale(loss / args.iter_size).backward()
        # top-1 against the labels, or the dominant (largest-weight) label of mixed targets (not
        # counted for --multi-label / --heads: objective.classifies)
        top1_labels = (
            labels if targets.dim() == 1 or not objective.classifies else targets.argmax(1)
        )
        scores = probe.first(out) if objective.classifies else None  # a grid: the first probe's
        meter.update(loss, scores, top1_labels, it)
        if last:
            if args.clip_grad > 0:
                net.scaler.unscale_(net.optimizer)
                nn.utils.clip_grad_norm_(net.bare.parameters(), args.clip_grad)
            net.scaler.step(net.optimizer)
            net.scaler.update()
            net.optimizer.zero_grad(set_to_none=True)
            # --model-ema: one update, every N steps
            if net.ema and (step + 1) % args.model_ema_steps == 0:
                net.ema.update_parameters(net.bare)
            if objective.after_step:
                objective.after_step(net, step, d.steps_per_epoch)
            at_line = (step + 1) % args.print_freq == 0 or it + 1 == batches
            if at_line:
                # a grid of probes: each probe's lr (the step's; the trainer's lr is not theirs)
                lrs = [g["lr"] for g in net.optimizer.param_groups] if args.probe else lr
                print(meter.line(args, rt, progress, loss, lrs, it, batches))
            # DDP: a collective, so only where the host syncs anyway
            if rt.world_size == 1 or at_line:
                rundir.end_of_step(args, rt, net, progress, d, bad, it + 1)
                bad = []
        t_end = time.time()
    return meter


# ---- evaluation ----------------------------------------------------------------------------------
@torch.no_grad()
def evaluate(model, d, args, rt):
    """Softmax scores averaged over each video's views -> dict of top1, top5, loss (of the averaged
    probabilities), and the per-video scores and labels in dataset order.

    Exact under DDP: each rank scores a disjoint shard (indices rank::world, no padding, so no video
    counted twice), then the per-video scores are gathered and every rank computes the same numbers.
    """
    model.eval()
    scores, labels, error = [], [], None
    try:
        quiet = rt.rank != 0 or not sys.stderr.isatty()  # a bar on a terminal; logs stay clean
        for batch in tqdm(d.val_loader, desc="evaluate", unit="batch", disable=quiet, leave=False):
            clips, target, _ = (
                gpudecode.decode_batch(batch, rt.device, d.val_ds)
                if d.val_ds.spec.encoded
                else batch
            )
            clips = clips.to(rt.device, non_blocking=True)
            if clips.dim() == 5:  # one view per video: (B, 3, T, H, W) -> (B, 1, 3, T, H, W)
                clips = clips.unsqueeze(1)
            B, V = clips.shape[:2]
            # (B*V, 3, T, H, W), uint8
            clips = clips.flatten(0, 1).contiguous(memory_format=rt.memory_format)
            clips = data.normalize(clips, rt.mean, rt.std)
            with rt.autocast:
                logits = model(clips)  # (B*V, K); a grid of probes: (B*V, N, K)
            probs = view_probabilities(logits.float(), args)
            scores.append(combine_views(probs.view(B, V, *probs.shape[1:]), args).cpu())
            labels.append(target)
    # never substituted (it would change the metric); all ranks learn of it below
    except decode.BadVideo as e:
        # one line, also when a DataLoader worker raised it (decode.BadVideo keeps its text)
        error = str(e)
    shape = tuple(scores[0].shape[1:]) if scores else (args.num_classes,)
    # a label (B,); --multi-label: 0/1 (B, K); --heads: (B, heads)
    label_shape, label_type = label_layout(args)
    scores = torch.cat(scores) if scores else torch.zeros(0, *shape)
    labels = torch.cat(labels) if labels else torch.zeros(0, *label_shape, dtype=label_type)
    shards = rt.gather((d.val_indices[: len(labels)], scores, labels, error))
    errors = [s[3] for s in shards if s[3]]
    if errors:
        raise decode.BadVideo(errors[0])
    # Put every rank's shard back in dataset order.
    all_scores = torch.zeros(len(d.val_ds), *shape)
    all_labels = torch.zeros(len(d.val_ds), *label_shape, dtype=label_type)
    for idx, s, y, _ in shards:
        all_scores[idx], all_labels[idx] = s, y
    # a grid of probes: each one's metrics; the best by --best-metric (first of ties) reports
    if all_scores.dim() == 3:
        each = [scores_metrics(all_scores[:, i], all_labels) for i in range(all_scores.shape[1])]
        name, way = checkpoint.parse_metric(args.best_metric)
        sign = 1 if way == "max" else -1
        best = max(range(len(each)), key=lambda i: (sign * each[i][name], -i))
        return {**each[best], "probe_top1": [e["top1"] for e in each], "best_probe": best}
    return scores_metrics(all_scores, all_labels, args)


def view_probabilities(logits, args):
    """A view's scores: the softmax; --multi-label: each class's sigmoid (PySlowFast's HEAD_ACT
    sigmoid); --heads: a softmax per head."""
    if args.multi_label:
        return logits.sigmoid()
    if args.heads:
        return torch.cat([p.softmax(-1) for p in logits.split(list(args.heads), -1)], -1)
    return logits.softmax(-1)


def combine_views(probs, args):
    """(B, V, ...) -> (B, ...): a video's views averaged; --multi-label: their maximum
    (PySlowFast's TEST.ENSEMBLE_METHOD max, its Charades recipe)."""
    return probs.amax(1) if args.multi_label else probs.mean(1)


def label_layout(args):
    """The shape of one video's labels after collation and their dtype."""
    if args.multi_label:
        return (args.num_classes,), torch.float32
    return ((len(args.heads),) if args.heads else ()), torch.long


def scores_metrics(all_scores, all_labels, args=None):
    """(videos, K) combined probabilities and labels -> the numbers of checkpoint.val_names: top1,
    top5, loss, mean_class_acc (the per-class report's, report.class_metrics); --multi-label mAP and
    per_class_ap; --heads each head's; and the scores and labels."""
    if args is not None and args.multi_label:
        m = report.multilabel_metrics(all_scores, all_labels)
        p = all_scores.double().clamp(1e-12, 1 - 1e-12)
        y = all_labels.double()
        loss = -(y * p.log() + (1 - y) * (1 - p).log()).mean().item() if len(y) else 0.0
        return {**m, "loss": loss, "scores": all_scores, "labels": all_labels}
    if args is not None and args.heads:
        parts = all_scores.split(list(args.heads), -1)
        p_true = [part.gather(1, all_labels[:, h : h + 1]) for h, part in enumerate(parts)]
        loss = (
            -sum(p.clamp_min(1e-12).log().mean() for p in p_true).item() if len(all_labels) else 0.0
        )
        m = report.heads_metrics(all_scores, all_labels, args.heads)
        return {**m, "loss": loss, "scores": all_scores, "labels": all_labels}
    topk = all_scores.topk(min(5, all_scores.shape[1]), dim=1).indices
    p_true = all_scores.gather(1, all_labels[:, None]).clamp_min(1e-12)
    per_class = report.class_metrics(all_scores, all_labels) if len(all_labels) else {}
    return {
        "top1": (topk[:, 0] == all_labels).float().mean().item() * 100,
        "top5": (topk == all_labels[:, None]).any(1).float().mean().item() * 100,
        "loss": -p_true.log().mean().item(),
        "mean_class_acc": per_class.get("mean_class_acc", 0.0),
        "scores": all_scores,
        "labels": all_labels,
    }


def summary(res, args, ema=""):
    """A validation's numbers in one line: Acc@1 / Acc@5; --multi-label mAP; --heads each head's
    (and the action's) Acc@1 / Acc@5."""
    if args.multi_label:
        return f"{ema}mAP {res['mAP']:.3f}"
    if args.heads:
        names = [n for n in checkpoint.val_names(args) if n != "loss"]
        return ema + " ".join(f"{n} {res[n]:.3f}" for n in names)
    return f"{ema}Acc@1 {res['top1']:.3f} Acc@5 {res['top5']:.3f}"


def report_labels_evaluation(args, rt, d, res, clips, crops, tag=None):
    """--multi-label: per_class_ap_<tag>.csv (and the classes without a positive video said);
    --heads: the heads' numbers, and each head's per-class table and confusion matrix
    (report.write_heads_evaluation); --save_scores: scores_<tag>.npz. Rank 0."""
    tag = tag or f"{clips}x{crops}"
    if args.save_scores:
        path = report.evaluation_paths(rt.run_dir, tag)["scores"]
        os.makedirs(rt.run_dir, exist_ok=True)
        videos = [v.path for v in d.val_ds.videos]
        report.save_scores_npz(path, res["scores"], res["labels"], videos, d.class_names)
    if args.heads:
        _, paths = report.write_heads_evaluation(
            rt.run_dir, res["scores"], res["labels"], args.heads, d.class_names, clips, crops, tag
        )
        print(
            f"{summary(res, args)}  ({len(d.val_ds)} videos, {clips}x{crops} views); wrote "
            + ", ".join(paths)
        )
        return
    path = os.path.join(rt.run_dir, f"per_class_ap_{tag}.csv")
    os.makedirs(rt.run_dir, exist_ok=True)
    report.save_per_class_ap_csv(res, d.class_names, path)
    absent = ", ".join(map(str, res["absent"][:20])) + (" ..." if len(res["absent"]) > 20 else "")
    print(
        f"mAP {res['mAP']:.3f} over {args.num_classes - len(res['absent'])} classes "
        f"({len(d.val_ds)} videos, {clips}x{crops} views); wrote {path}"
        + (f"; no positive video, left out: {absent}" if len(res["absent"]) else "")
    )


def report_evaluation(args, rt, d, res, clips, crops, tag=None):
    """Rank 0: the metrics, the per-class table and report.write_evaluation's files; `res`: every
    rank's."""
    if rt.rank != 0:
        return
    if args.multi_label or args.heads:
        return report_labels_evaluation(args, rt, d, res, clips, crops, tag)
    videos = [v.path for v in d.val_ds.videos]
    metrics, paths = report.write_evaluation(
        rt.run_dir,
        res["scores"],
        res["labels"],
        d.class_names,
        clips,
        crops,
        videos,
        tag,
        args.save_scores,
    )
    print(
        f"top-1 {res['top1']:.3f}  top-5 {res['top5']:.3f}  "
        f"mean class accuracy {metrics['mean_class_acc']:.3f}  "
        f"({len(videos)} videos, {clips}x{crops} views); wrote {', '.join(sorted(paths.values()))}"
    )
    print(report.per_class_table(metrics, d.class_names))


def evaluate_checkpoint(args, rt, net, d):
    """--evaluate: the metrics, the per-class report and its files; the last line is the one scripts
    parse."""
    tag = rundir.evaluation_files(args, rt, flags.flag_sets().scores)
    try:
        res = evaluate(net.eval_model, d, args, rt)
    except decode.BadVideo as e:
        fail(f"evaluation stopped: {e}")
    report_evaluation(args, rt, d, res, args.test_clips, args.test_crops, tag)
    if "probe_top1" in res and rt.rank == 0:  # a grid: every probe's top-1; the best one's above
        print(probe.grid_line(args, None, res))
    print(f" * {summary(res, args)}")
    return res


# ---- the epoch loop ------------------------------------------------------------------------------
def validate_and_log(args, rt, net, d, progress, meter):
    """End of an epoch: validate (every -ef epochs), save checkpoint.pth (and model_best.pth), log a
    line."""
    epoch = progress.epoch
    names = checkpoint.val_names(args)  # val_top1, ...; --multi-label val_mAP; --heads ...
    log = {**epoch_log(rt, net, meter, epoch), **{f"val_{n}": None for n in names}}
    # train_top1 is against the dominant label of mixed targets
    if args.mixup_alpha or args.cutmix_alpha:
        log["mixed"] = True
    # BN statistics differ per rank (own batches): score with rank 0's, the saved ones
    if rt.world_size > 1:
        for b in [*net.bare.buffers(), *(net.ema.buffers() if net.ema else ())]:
            dist.broadcast(b, 0)
    progress.epoch, progress.iter = epoch + 1, 0
    if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
        try:
            with fsdp.gathered(net.bare):  # --fsdp: the whole parameters while it scores
                res = evaluate(net.eval_model, d, args, rt)
            ema = evaluate(net.ema.module, d, args, rt) if net.ema else None
        except decode.BadVideo as e:  # the training state is saved first: nothing is lost
            checkpoint.save(args, rt, net, progress, d)
            fail(f"validation stopped (checkpoint.pth saved): {e}")
        log.update({f"val_{n}": res[n] for n in names})
        progress.last_val = res
        print(f"epoch {epoch} * {summary(res, args)}")
        if "probe_top1" in res:  # --probe grid: every probe's top-1; the best one's weights predict
            log.update(probe_top1=res["probe_top1"], best_probe=res["best_probe"])
            print(probe.grid_line(args, epoch, res))
        if ema:
            log.update({f"val_{n}_ema": ema[n] for n in names})
            print(f"epoch {epoch} * {summary(ema, args, 'EMA ')}")
    score = log.get(best_key(args))
    is_best = score is not None and checkpoint.beats(args.best_metric, score, progress.best_score)
    if is_best:
        progress.best_score, progress.best_epoch = score, epoch
    # the probe that won is the one model_best.pth predicts with
    if is_best and args.probe:
        net.bare.best.fill_(log.get("best_probe", 0))
    return save_and_log(args, rt, net, progress, d, meter, log, best=is_best)


def best_key(args):
    """The logged number that picks model_best.pth: val_NAME of --best-metric NAME; with --use-ema,
    the EMA's (val_NAME_ema)."""
    name, _ = checkpoint.parse_metric(args.best_metric)
    return f"val_{name}_ema" if args.use_ema else f"val_{name}"


def epoch_log(rt, net, meter, epoch):
    """The epoch's log line so far: the lr its last step used and the meter's train_* numbers (every
    rank's clips; None where this epoch saw none: resumed at its end)."""
    lr = net.optimizer.param_groups[0]["lr"]
    return {"epoch": epoch, "lr": lr, **meter.totals(epoch, rt.all_sum)}


def save_and_log(args, rt, net, progress, d, meter, log, best=False):
    """The epoch's end, training's and pretraining's: checkpoint.pth (model_best.pth), then its line
    in log.jsonl, curves.png and TensorBoard (rundir.append_log): every number in `log` reaches all
    three."""
    log["epoch_time"] = time.time() - meter.t_epoch
    checkpoint.save(args, rt, net, progress, d, best=best)
    rundir.append_log(rt, log)
    return log


def main(args):
    if args.pretrain:  # pretrain.py imports train.py, so train.py never imports it (see __main__)
        fail("--pretrain: pretrain.main(args) runs it (`python train.py` hands it over)")
    flags.check_args(args)
    check_weights(args)  # a wrong weights file: refused before the lists are read
    rt = setup_runtime(args)
    rundir.prepare_run_dir(args, rt, flags.get_args_parser())
    d = build_data(args, rt)
    net = build_net(args, rt)
    check_pretrained_head(args, net.bare)
    objective = classification(args)
    # --probe, --probe-weights FILE:all: every probe's logits, (B, N, K)
    net.bare.grid_out = bool(args.probe) or len(getattr(net.bare, "probes", ())) > 1
    progress = checkpoint.Progress()
    # saved with the args: a mid-epoch resume needs the same global batch
    args.world_size = rt.world_size
    sets = flags.flag_sets()
    ckpt = checkpoint.resume(args, rt, net, progress, sets)
    rundir.resumed(args, rt, ckpt, sets)
    # no classes file: the checkpoint's
    d.class_names = d.class_names or (ckpt or {}).get("class_names")
    if args.evaluate:
        res = evaluate_checkpoint(args, rt, net, d)
        if dist.is_initialized():
            dist.destroy_process_group()
        return tuple(res[n] for n in checkpoint.val_names(args)[:2])

    rundir.open_tensorboard(args, rt)
    print(
        f"run folder {rt.run_dir}: {len(d.train_ds)} train / {len(d.val_ds)} val videos, "
        f"{args.num_classes}"
        f" classes, {rt.world_size} process(es) x batch {args.batch_size} x iter_size "
        f"{args.iter_size}, "
        f"{d.steps_per_epoch} steps/epoch, device {rt.device}, input mean {rt.mean} std {rt.std}"
    )
    t_run = time.time()
    with rundir.stop_on_signals():  # SIGTERM / SIGINT / SIGUSR1: finish the step, save, exit
        while progress.epoch < args.epochs:
            meter = train_one_epoch(args, rt, d, net, objective, progress)
            validate_and_log(args, rt, net, d, progress, meter)
            rundir.exit_if_signalled(rt, progress)  # a signal during validation: already saved

    best = (
        f"best {best_key(args)} {progress.best_score:.3f} at epoch {progress.best_epoch} "
        f"(--best-metric {args.best_metric}), saved to {os.path.join(rt.run_dir, 'model_best.pth')}"
        if progress.best_epoch >= 0
        else "no best epoch"
    )
    print(f"done in {time.time() - t_run:.0f}s: {best}; the last epoch's validation by class:")
    if progress.last_val is not None:
        report_evaluation(args, rt, d, progress.last_val, 1, 1)
    if dist.is_initialized():
        dist.destroy_process_group()
    return progress.best_score


def run_command(main, args):
    """`main(args)` as a command (train.py, pretrain.py): a one-line error, a traceback or Ctrl-C
    leave no run folder holding only args.txt; a video whose replacements all failed is one line."""
    try:
        main(args)
    except BaseException as e:
        rundir.remove_if_unused()
        if isinstance(e, decode.BadVideo):
            fail(str(e))
        raise


if __name__ == "__main__":
    # `train.py predict ARGS` runs `predict.py ARGS` (also features, export: a sibling script of
    # that name). Handed over with exec, not imported: those import train.py, and train.py imports
    # none of them.
    script = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), f"{sys.argv[1:2] and sys.argv[1]}.py"
    )
    if sys.argv[1:2] and sys.argv[1] in flags.SUBCOMMANDS and os.path.isfile(script):
        os.execv(sys.executable, [sys.executable, script, *sys.argv[2:]])
    args = flags.parse_args()
    if args.pretrain:  # --pretrain, given or from a recipe: `train.py pretrain` (pretrain.py)
        pretrain_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrain.py")
        os.execv(sys.executable, [sys.executable, pretrain_py, *sys.argv[1:]])
    run_command(main, args)
