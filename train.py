"""Train and evaluate 3D ConvNets (I3D ResNet-3D), TSN / TSM and 2D networks for video action recognition.

    python train.py demo                     # CPU: recipes/demo.txt on synthetic motion videos
    python train.py ucf101 train.txt val.txt @recipes/ucf101_i3d.txt     # a recipe; later flags override it
    torchrun --nproc_per_node=8 train.py ucf101 train.txt val.txt @recipes/ucf101_i3d.txt --ddp -b 8
    python train.py ucf101 train.txt val.txt --evaluate --resume ckpt.pth --test_clips 10 --test_crops 3
    python train.py @output/RUN/args.txt --resume auto     # continue a run (SIGTERM saves it, exits 143)
    python train.py predict --resume model_best.pth video.avi frames/v_Biking_g01_c01       # top-5 labels

The original project's command works verbatim:
    CUDA_VISIBLE_DEVICES=2,3 python train.py ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 \
        --mode 3D --t_length 16 --t_stride 4 --pretrained --epochs 95 --batch-size 64 --lr 0.001 \
        --lr_steps 40 80 90 --workers 16 --image_tmpl img_{:05d}.jpg
-b is per process: DataParallel (no --ddp) splits it over the visible GPUs; with --ddp the global batch is
b x processes x iter_size (--iter_size N: N batches accumulated per SGD step). Several machines: torchrun
--nnodes=N --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 on each (it sets RANK / LOCAL_RANK / WORLD_SIZE),
or under Slurm `sbatch slurm/train.sbatch`: srun starts one process per GPU, no torchrun (see launch.py).
--evaluate scores 1 centred clip, or clips x crops with softmax averaged per video; the model and clip
flags not given are the checkpoint's own.

main() is the table of contents: flags -> runtime -> data -> model -> optimizer -> resume -> epochs.
Everything a step needs about where it runs (rank, device, autocast, memory format, run folder) is in
one `Runtime`. Checkpoints and resuming are checkpoint.py; the rest of the run folder and the signals that
stop a run, rundir.py; the progress line, report.Meter; one-line errors, errors.py. `python train.py
predict|...` runs predict.py (train.py never imports it: predict.py imports train.py).

References: pytorch/examples imagenet/main.py (flags, top-k), torchvision references/video_classification
(distributed setup, warmup per iteration, no-WD for norm layers), PySlowFast / mmaction2 (I3D recipe,
cosine schedule, multi-view testing), BannyStone/Video_Classification_PyTorch (the flags and run-folder
name kept here; its fine-tuning scripts: --freeze_bn, --fc_only).
"""

import argparse
import builtins
import contextlib
import dataclasses
import math
import os
import random
import shlex
import sys
import time
from dataclasses import dataclass

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
import gpudecode
import launch
import model as models
import prepare  # the start-up folder check and the demo's synthetic data
import report
import rundir
import vit  # the VideoMAE ViTs' clip geometry
import zoo  # --pretrained: the model zoos' weights
from errors import fail, warn

NUM_CLASSES = {
    "ucf101": 101,
    "hmdb51": 51,
    "kinetics400": 400,
    "kinetics200": 200,
    "sthv1": 174,
    "sthv2": 174,
}
# The project's folder: a relative @recipes/... not found in the working folder is found here.
PROJECT = os.path.dirname(os.path.abspath(__file__))
# `python train.py demo`: recipes/demo.txt learns data.py's synthetic motion classes on a CPU.
DEMO_RECIPE = os.path.join(PROJECT, "recipes", "demo.txt")
DEMO_DATA = dict(videos=128, frames=24, size=(64, 48))  # per split; small frames keep it CPU-fast
OUTPUT_ROOT = "./output"
SUBCOMMANDS = (
    "predict",
    "features",
    "export",
    "pretrain",
)  # `python train.py predict ...` runs predict.py (__main__)


# ---- flags -----------------------------------------------------------------------------------------
def number(cast, low, below=math.inf, top=math.inf):
    """An argparse type: a `cast` number in [low, below) and <= top. Counts and sizes are >= 1: a 0 would
    only fail later, as a division by zero. The error names the range as it is."""
    kind = "an integer" if cast is int else "a number"
    if cast is int and below < math.inf:  # integers below B: at most B - 1
        top, below = min(top, below - 1), math.inf
    if top < math.inf:
        want = f"{kind} in [{low}, {top}]"
    elif below < math.inf:
        want = f"{kind} in [{low}, {below})"
    else:
        want = f"{kind} >= {low}"

    def parse(text):
        try:
            x = cast(text)
        except ValueError:
            x = None
        if x is None or not low <= x < below or x > top or not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return x

    return parse


positive, natural = number(int, 1), number(int, 0)
nonnegative, fraction, probability = number(float, 0), number(float, 0, 1), number(float, 0, top=1)


def default_workers():
    """4 loader workers, or fewer on a machine with fewer CPUs (more would only contend, and torch's
    DataLoader warns): the CPUs this process may run on (a Slurm job's or taskset's share)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cpus = os.cpu_count() or 1
    return min(4, cpus)


def project_file(arg):
    """@recipes/x.txt from any folder: a relative @FILE missing from the working folder is the project's
    own, if it has one (a file of that name in the working folder comes first)."""
    if isinstance(arg, str) and arg.startswith("@") and not os.path.isabs(arg[1:]):
        if not os.path.exists(arg[1:]) and os.path.isfile(os.path.join(PROJECT, arg[1:])):
            return "@" + os.path.join(PROJECT, arg[1:])
    return arg


def no_weights(value):
    """--pretrained none (or ''): no pretrained weights, e.g. after a recipe's --pretrained."""
    return None if value.strip().lower() in ("", "none") else value


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and recipes: an argument @FILE reads more arguments from FILE (e.g.
    recipes/ucf101_i3d.txt, a run folder's args.txt), any number per line, shell quoting, '#' comments."""

    def __init__(self, **kwargs):
        super().__init__(fromfile_prefix_chars="@", **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args([project_file(a) for a in args], namespace)

    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message} (see -h)\n")

    def convert_arg_line_to_args(self, line):
        # argparse's own takes each line as ONE argument: "--lr_steps 40 80 90" would be a single word.
        # Trap: '#' starts a comment even inside a word (shlex); quote a value holding one.
        return shlex.split(line, comments=True)


def get_args_parser():
    p = Parser(
        prog="train.py",
        description="Train / evaluate 3D, TSN/TSM, 2D and ViT video networks.",
        epilog="Other commands (each with its own -h): `train.py demo` trains on synthetic videos; "
        "`train.py predict --resume CKPT VIDEO...` labels videos; `train.py features LIST --resume "
        "CKPT --out DIR` saves per-window features; `train.py export --resume CKPT OUT` writes ONNX "
        "or .pt2; `train.py pretrain DATASET TRAIN VAL --arch vit_b16` pretrains a ViT (VideoMAE).",
    )
    for group in FLAG_GROUPS:
        group.add(p.add_argument_group(group.title, group.about))
    return p


def add_model_args(p):
    """What the network is (its weights' shapes)."""
    p.add_argument(
        "-a",
        "--arch",
        default="resnet50_3d",
        help=f"3D: {', '.join(models.archs_with('modes', '3D'))}; "
        f"2D: {', '.join(models.archs_with('modes', '2D'))}",
    )
    p.add_argument("--num_classes", type=positive, help="override the number of classes")
    p.add_argument(
        "--mode", default="3D", choices=["3D", "TSN", "2D"], help="3D clips | TSN segments | 2D"
    )
    p.add_argument(
        "--shift",
        default=0,
        type=natural,
        help=f"TSM: shift 1/N of channels each way, 0: off ({', '.join(models.archs_with('shift'))})",
    )


def add_clip_args(p):
    """What the network sees: the clips, their sampling, size and placement."""
    p.add_argument("--num_segments", default=1, type=positive, help="TSN/2D: a snippet per segment")
    p.add_argument("--t_length", type=positive, help="frames per clip/snippet; 16, TSN/2D: 1")
    p.add_argument("--t_stride", default=4, type=positive, help="frames between sampled frames")
    p.add_argument(
        "--new_size", default=256, type=positive, help="short side in px before cropping"
    )
    p.add_argument("--crop_size", default=224, type=positive, help="square crop in px")
    p.add_argument(
        "--test_sampling", default="ours", choices=data.PLACEMENTS, help="where val/test clips go"
    )
    p.add_argument(
        "--train_sampling",
        default="ours",
        choices=data.TRAIN_PLACEMENTS,
        help="train clips: a random start | VideoMAE's SSv2 segments (a frame per segment, no stride)",
    )


def add_input_args(p):
    """The dataset, its frame files and the input normalisation."""
    p.add_argument(
        "dataset", help=f"{', '.join(NUM_CLASSES)} (sets the classes), demo, or any name"
    )
    p.add_argument(
        "--image_tmpl", default="img_{:05d}.jpg", help="frame file name, .format(number)"
    )
    p.add_argument(
        "--mean", type=float, nargs=3, help="input mean, RGB in [0, 1] (default: the weights')"
    )
    p.add_argument(
        "--std", type=float, nargs=3, help="input std, RGB in [0, 1] (default: the weights')"
    )
    p.add_argument(
        "--max_bad_videos", default=100, type=natural, help="bad videos replaced before a stop"
    )


def add_optim_args(p):
    """The recipe's optimizer and schedule."""
    p.add_argument("--epochs", default=95, type=positive, help="total epochs")
    p.add_argument(
        "--iter_size", default=1, type=positive, help="batches accumulated into one SGD step"
    )
    p.add_argument(
        "--lr", "--learning-rate", dest="lr", default=0.001, type=nonnegative, help="initial lr"
    )
    p.add_argument(
        "--lr_policy",
        default="step",
        choices=["step", "cosine", "cosine_after_warmup"],
        help="cosine: to --lr-min at --epochs, warmup blended in (PySlowFast); cosine_after_warmup: "
        "warmup, then cosine over the steps left (VideoMAE / BEiT utils.cosine_scheduler)",
    )
    p.add_argument(
        "--lr_steps", default=[40, 80, 90], type=nonnegative, nargs="+", help="epochs of lr x0.1"
    )
    p.add_argument(
        "--warmup", default=0.0, type=nonnegative, help="epochs of linear lr warmup, per step"
    )
    p.add_argument(
        "--lr-min", dest="lr_min", default=0.0, type=nonnegative, help="cosine: lr at --epochs"
    )
    p.add_argument(
        "--opt-betas",
        dest="opt_betas",
        type=nonnegative,
        nargs=2,
        help="AdamW betas (default: torch's 0.9 0.999; VideoMAE pretraining 0.9 0.95)",
    )
    p.add_argument(
        "--lr-batch",
        dest="lr_batch",
        default=0,
        type=natural,
        help="--lr, --lr-min, --lr-warmup-start are per N clips: x global batch / N (0: as given)",
    )
    p.add_argument(
        "--lr-warmup-start",
        dest="lr_warmup_start",
        default=0.0,
        type=nonnegative,
        help="--warmup starts from this lr (else 0)",
    )
    p.add_argument("--momentum", default=0.9, type=nonnegative, help="SGD momentum")
    p.add_argument(
        "--wd", "--weight-decay", dest="weight_decay", default=5e-4, type=nonnegative, help="L2"
    )
    p.add_argument(
        "--norm-weight-decay",
        dest="norm_weight_decay",
        default=0.0,
        type=nonnegative,
        help="wd of norms, biases, position embeddings, class tokens (--bn_bias_wd: --wd)",
    )
    p.add_argument(
        "--clip-grad", dest="clip_grad", default=0.0, type=nonnegative, help="max norm, 0: off"
    )
    p.add_argument(
        "--seed", default=0, type=natural, help="seed for init, sampling and augmentation"
    )


def add_optimizer_state_args(p):
    """What the optimizer's state and parameter groups are."""
    p.add_argument(
        "--opt", default="sgd", choices=["sgd", "adamw"], help="optimizer (adamw: no --momentum)"
    )
    p.add_argument(
        "--layer-decay",
        dest="layer_decay",
        default=1.0,
        type=probability,
        help="layer i of L's lr x this^(L + 1 - i) (BEiT; stem 0, head L + 1); 1: off",
    )
    p.add_argument(
        "--bn_bias_wd", action="store_true", help="--wd on BN and biases too (the original)"
    )
    # --fc_only before --freeze_bn, which it implies: a resume that adds it is refused naming it.
    p.add_argument("--fc_only", action="store_true", help="fine-tuning: train the classifier only")
    p.add_argument(
        "--freeze_bn", action="store_true", help="fine-tuning: BN statistics and affine fixed"
    )


def add_regular_args(p):
    """The recipe's dropout, drop path, label smoothing and weight averaging."""
    p.add_argument(
        "--dro", "--dropout", dest="dropout", default=0.2, type=fraction, help="dropout before fc"
    )
    p.add_argument(
        "--drop-path",
        dest="drop_path",
        type=fraction,
        help=f"stochastic depth (default: arch's): {', '.join(models.archs_with('drop_path'))}",
    )
    p.add_argument(
        "--label-smoothing", dest="label_smoothing", default=0.0, type=fraction, help="in [0, 1)"
    )
    p.add_argument(
        "--model-ema", dest="model_ema", action="store_true", help="EMA of weights and buffers"
    )
    p.add_argument(
        "--model-ema-decay",
        dest="model_ema_decay",
        default=0.9998,
        type=fraction,
        help="EMA decay per update",
    )
    p.add_argument(
        "--model-ema-steps",
        dest="model_ema_steps",
        default=1,
        type=positive,
        help="optimizer steps per EMA update",
    )


def add_pretrain_args(p):
    """VideoMAE masked-autoencoder pretraining (pretrain.py; `python train.py pretrain ...` sets it)."""
    p.add_argument(
        "--pretrain", action="store_true", help="pretrain a ViT: no labels (pretrain.py)"
    )
    p.add_argument(
        "--mask-ratio", dest="mask_ratio", default=0.9, type=float, help="tubes masked, in (0, 1)"
    )
    p.add_argument(
        "--decoder-depth", dest="decoder_depth", default=4, type=positive, help="decoder blocks"
    )
    p.add_argument(
        "--raw-target", dest="raw_target", action="store_true", help="pixels, not patch-normalised"
    )
    p.add_argument(
        "--vis-videos",
        dest="vis_videos",
        default=4,
        type=natural,
        help="val videos drawn per epoch",
    )


def add_augment_args(p):
    """Batch mixing (MixUp / CutMix) and per-clip augmentation."""
    p.add_argument(
        "--train_crop",
        default="jitter",
        choices=data.TRAIN_CROPS,
        help="scale jitter | TSN's multiscale corner crops | 13 places (VideoMAE pretraining)",
    )
    p.add_argument(
        "--no_flip", action="store_true", help=f"no train flips (always: {sorted(data.NO_FLIP)})"
    )
    p.add_argument(
        "--mixup-alpha", dest="mixup_alpha", default=0.0, type=nonnegative, help="0: off"
    )
    p.add_argument(
        "--cutmix-alpha", dest="cutmix_alpha", default=0.0, type=nonnegative, help="0: off"
    )
    p.add_argument(
        "--mix-prob", dest="mix_prob", default=1.0, type=probability, help="P(a batch is mixed)"
    )
    p.add_argument(
        "--mix-switch-prob",
        dest="mix_switch_prob",
        default=0.5,
        type=probability,
        help="P(CutMix rather than MixUp) when both are on",
    )
    p.add_argument(
        "--auto-augment", dest="auto_augment", choices=["ra"], help="ra: RandAugment per clip"
    )
    p.add_argument(
        "--ra-magnitude", dest="ra_magnitude", default=9, type=number(int, 0, top=30), help="0-30"
    )
    p.add_argument("--ra-num-ops", dest="ra_num_ops", default=2, type=positive, help="ops per clip")
    p.add_argument(
        "--random-erase", dest="random_erase", default=0.0, type=probability, help="P per clip"
    )
    p.add_argument(
        "--color-jitter",
        dest="color_jitter",
        default=0.0,
        type=nonnegative,
        help="brightness, contrast, saturation strength per clip",
    )
    p.add_argument(
        "--ra-reps",
        "--num_sample",
        dest="ra_reps",
        default=1,
        type=positive,
        help="repeated augmentation: views per video per step from one decode, each its own crop "
        "(and mask: --pretrain); -b counts videos (VideoMAEv2's --num_sample)",
    )


def add_weights_args(p):
    """Where the weights come from."""
    p.add_argument(
        "--pretrained",
        nargs="?",
        const="imagenet",
        type=no_weights,
        help="imagenet (bare), kinetics400, PATH...; none: from scratch (after a recipe's)",
    )
    p.add_argument("--pretrained_model", help="PATH to pretrained weights (overrides --pretrained)")
    p.add_argument(
        "--inflate", default="mean", choices=["mean", "center"], help="2D kernels over time"
    )
    p.add_argument(
        "--resume", default="", help="checkpoint PATH, or auto (the run folder's, if any)"
    )
    p.add_argument(
        "-e", "--evaluate", action="store_true", help="only evaluate --resume on val_list"
    )
    p.add_argument("--start-epoch", dest="start_epoch", default=0, type=natural, help="first epoch")
    p.add_argument(
        "--use-ema",
        dest="use_ema",
        action="store_true",
        help="--evaluate / predict: the EMA weights; training: the EMA top-1 picks model_best",
    )


def add_eval_args(p):
    """--evaluate's views."""
    p.add_argument("--test_clips", default=1, type=positive, help="--evaluate: clips per video")
    p.add_argument(
        "--test_crops", default=1, type=int, choices=[1, 3, 10], help="--evaluate: crops per clip"
    )


def add_device_args(p):
    """Where this process's data is, how it is read, what computes on it."""
    p.add_argument(
        "train_list", nargs="?", help="list file: '<frame_dir> <num_frames> <label>' per line"
    )
    p.add_argument(
        "val_list", nargs="?", help="validation list file, same format (demo: both optional)"
    )
    p.add_argument(
        "--data_root", help="folder frame_dirs are relative to (default: each list's folder)"
    )
    p.add_argument(
        "--class_names", help="one name per line (default: <dataset>_classes.txt by train_list)"
    )
    p.add_argument(
        "--read_timeout", default=600, type=nonnegative, help="s a file read may take, 0: any"
    )
    p.add_argument(
        "--decode_device", default="cpu", choices=["cpu", "cuda"], help="JPEGs: loader or nvJPEG"
    )
    p.add_argument(
        "--video_decoder",
        default="auto",
        choices=decode.VIDEO_DECODERS,
        help="video files: auto = TorchCodec if FFmpeg's libraries load, else PyAV",
    )
    p.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="cuda | cpu (default: cuda if a GPU is visible; cpu: on the CPU on purpose)",
    )
    p.add_argument("--ddp", action="store_true", help="DDP under torchrun (else DataParallel)")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="mixed precision")
    p.add_argument(
        "--sync-bn", dest="sync_bn", action="store_true", help="BN statistics over DDP processes"
    )
    p.add_argument(
        "--channels-last", dest="channels_last", action="store_true", help="channels_last_3d"
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--grad-ckpt", dest="grad_ckpt", action="store_true", help="ViTs: recompute blocks (memory)"
    )
    p.add_argument(
        "--augment_device",
        default="loader",
        choices=["loader", "batch"],
        help="clip augmentation: in the loader, or drawn there and applied to the batch on --device",
    )


def add_run_args(p):
    """This process's batch, loaders, logs and run folder."""
    # Per process: -b (DataParallel splits it over the GPUs) and -j. Global: the SGD step, b x processes x
    # iter_size clips, and the --lr it takes (never rescaled when the batch changes).
    p.add_argument(
        "-b", "--batch-size", dest="batch_size", default=64, type=positive, help="clips/process"
    )
    p.add_argument(
        "-j",
        "--workers",
        default=default_workers(),
        type=natural,
        help=f"loader worker processes per process (default: 4, at most the CPUs this process may "
        f"use: {default_workers()} here)",
    )
    p.add_argument(
        "-p", "--print-freq", dest="print_freq", default=20, type=positive, help="every N steps"
    )
    p.add_argument(
        "-ef", "--eval-freq", dest="eval_freq", default=2, type=positive, help="every N epochs"
    )
    p.add_argument(
        "--tensorboard", action="store_true", help="also TensorBoard files in RUN/tensorboard"
    )
    p.add_argument(
        "--save_scores", action="store_true", help="also write the per-video scores (.npz)"
    )
    p.add_argument(
        "--output_root",
        default=OUTPUT_ROOT,
        help="run folders go here (--evaluate: the checkpoint's folder unless this or --run_name)",
    )
    p.add_argument("--run_name", help="run folder (default: from dataset, arch, clip, dropout)")


@dataclass(frozen=True)
class FlagGroup:
    """An argparse group: flags by what they are about, which says how the code treats them. The lists
    other code needs are derived from these (flag_sets): a flag added to a group needs no other edit."""

    title: str
    about: str
    add: object  # add_*_args(argparse group)
    process: bool = (
        False  # about this process: --evaluate / predict never take it from a checkpoint
    )
    scores: bool = (
        True  # may change what an evaluation scores: its value names the evaluation files
    )
    kept: str = ""  # a resumed run keeps it: "always", or "training" (--evaluate may change it)


FLAG_GROUPS = (
    FlagGroup(
        "model", "what the network is; a resumed run keeps it", add_model_args, kept="always"
    ),
    FlagGroup(
        "clips",
        "what the network sees; a resumed training run keeps it",
        add_clip_args,
        kept="training",
    ),
    FlagGroup("input", "the dataset, its frames and the normalisation", add_input_args),
    FlagGroup("optimisation", "the recipe: optimizer and schedule", add_optim_args, scores=False),
    FlagGroup(
        "optimizer state",
        "the optimizer's state and parameter groups; a resumed training run keeps them",
        add_optimizer_state_args,
        scores=False,
        kept="training",
    ),
    FlagGroup(
        "regularisation", "the recipe: dropout, drop path, EMA", add_regular_args, scores=False
    ),
    FlagGroup(
        "augmentation", "the recipe: mixing and clip augmentation", add_augment_args, scores=False
    ),
    FlagGroup(
        "weights", "this process: where the weights come from", add_weights_args, process=True
    ),
    FlagGroup("evaluation", "this process: --evaluate's views", add_eval_args, process=True),
    FlagGroup(
        "devices and data",
        "this process: where the data is, how it is read, what computes",
        add_device_args,
        process=True,
    ),
    FlagGroup(
        "pretraining",
        "--pretrain: VideoMAE masked autoencoding (pretrain.py); a resumed run keeps them",
        add_pretrain_args,
        kept="training",
    ),
    FlagGroup(
        "run",
        "this process: batch, loaders, logs, run folder",
        add_run_args,
        process=True,
        scores=False,
    ),
)


@dataclass(frozen=True)
class FlagSets:
    """The flag lists derived from FLAG_GROUPS."""

    process: frozenset  # never taken from a checkpoint (checkpoint_args)
    scores: tuple  # name --evaluate's files (rundir.evaluation_files)
    kept: tuple  # a resumed run keeps them (checkpoint.check_resume_flags)
    kept_training: tuple  # a resumed training run keeps them
    names: dict  # dest -> its flag as typed (t_length -> --t_length, layer_decay -> --layer-decay)


def flag_sets(parser=None):
    """FlagSets of `parser` (get_args_parser()): each flag counts as its group says."""
    parser = parser or get_args_parser()
    dests = {g.title: [a.dest for a in g._group_actions] for g in parser._action_groups}

    def flags(pick):
        return tuple(d for g in FLAG_GROUPS if pick(g) for d in dests.get(g.title, ()))

    return FlagSets(
        frozenset(flags(lambda g: g.process)),
        flags(lambda g: g.scores),
        flags(lambda g: g.kept == "always"),
        flags(lambda g: bool(g.kept)),
        {
            a.dest: next((o for o in a.option_strings if o.startswith("--")), a.dest)
            for a in parser._actions
        },
    )


def parse_args(argv=None):
    """Command line (recipes included) -> args. A flag not given takes, first found: the demo recipe's
    value (dataset demo), the checkpoint's own (--evaluate: its model and clip flags), the default."""
    parser = recipe_parser(get_args_parser().parse_args(argv).dataset)
    # None: not given, resolved by check_args (check_device, check_run_folder), which must know that.
    parser.set_defaults(device=None, output_root=None)
    args = parser.parse_args(argv)
    if args.evaluate and args.resume:
        run_dir = os.path.join(args.output_root or OUTPUT_ROOT, args.run_name or run_dir_name(args))
        path = checkpoint.auto_checkpoint(run_dir) if args.resume == "auto" else args.resume
        try:
            ckpt = checkpoint.load(path) if path else None
        except ValueError as e:
            fail(str(e))
        if ckpt is not None:
            refuse_zoo_checkpoint(ckpt, path)
            args = checkpoint_args(ckpt, argv, parser)
    return args


def recipe_parser(dataset):
    """The parser whose defaults a run starts from: demo's are recipes/demo.txt's."""
    parser = get_args_parser()
    if dataset == "demo":
        parser.set_defaults(**vars(parser.parse_args(["demo", "@" + DEMO_RECIPE])))
    return parser


def refuse_zoo_checkpoint(ckpt, path):
    """--evaluate --resume of a model zoo's file (mmaction2, PySlowFast, pytorchvideo): say what it is
    (zoo.py recognises it) and that --pretrained reads it, not a line of every weight that did not load."""
    layout = zoo.zoo_layout(ckpt)
    if layout:
        fail(
            f"--resume {path} is a {layout} checkpoint, not one train.py wrote: start from its weights "
            f"with --pretrained {path} (zoo.py converts them), then --evaluate the run's model_best.pth"
        )


def checkpoint_args(ckpt, argv, parser=None):
    """The args that rebuild a checkpoint's model and clips: the flags in `argv`, else the checkpoint's own
    (all but flag_sets().process), else the defaults. --evaluate and predict both come through here and then
    make_dataset / make_model, so neither can drift from what the checkpoint was trained with."""
    parser = parser or get_args_parser()
    saved = ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {}
    known, process = {action.dest for action in parser._actions}, flag_sets(parser).process
    parser.set_defaults(**{k: v for k, v in saved.items() if k in known and k not in process})
    return parser.parse_args(argv)


def check_args(args):
    """What can be told from the flags alone, before anything is read or built."""
    if args.arch not in models.ARCHS:
        fail(f"--arch {args.arch}: unknown; choose one of: {', '.join(models.ARCHS)}")
    check_mode(args)
    check_device(args)
    if args.evaluate and not args.resume:
        fail("--evaluate needs --resume CHECKPOINT")
    check_run_folder(args)
    if args.dataset == "demo":
        args.train_list = args.train_list or os.path.join(demo_folder(args), "train.txt")
        args.val_list = args.val_list or os.path.join(demo_folder(args), "val.txt")
    if not args.train_list or not args.val_list:
        fail("give train_list and val_list (only 'demo' makes its own)")
    if args.amp == "fp16" and not args.device.startswith("cuda"):
        fail("--amp fp16 needs a CUDA device; use --amp bf16 on CPU")
    if args.sync_bn and not (
        args.ddp and args.device.startswith("cuda")
    ):  # SyncBatchNorm: CUDA-only, DDP
        fail("--sync-bn needs --ddp on CUDA (one process has no other BN statistics to sync)")
    if args.compile and args.device == "cuda" and torch.cuda.device_count() > 1 and not args.ddp:
        fail(
            "--compile with several GPUs needs --ddp (DataParallel re-replicates the module every step)"
        )
    if args.decode_device == "cuda" and not args.device.startswith("cuda"):
        fail("--decode_device cuda needs --device cuda")
    if any(s <= 0 for s in args.std or [1]):
        fail(f"--std {args.std}: must be > 0")
    check_recipe_args(args)
    args.freeze_bn = args.freeze_bn or args.fc_only


def check_device(args):
    """--device as given; else cuda if a GPU is visible, else cpu -- unless the command asks for GPUs
    (CUDA_VISIBLE_DEVICES naming one, --ddp, --amp, --decode_device cuda): then no GPU is an error before
    any work, not hours of training on the CPU (--device cpu runs there on purpose)."""
    if torch.cuda.is_available():
        args.device = args.device or "cuda"
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    # "", -1, NoDevFiles (Slurm without a GPU): GPUs hidden on purpose; an index or a UUID names one
    first = (visible or "").split(",")[0].strip()
    names_gpu = first.isdigit() or first.startswith(("GPU-", "MIG-"))
    requests = (
        (f"--device {args.device}", (args.device or "").startswith("cuda")),
        (f"CUDA_VISIBLE_DEVICES={visible}", args.device is None and names_gpu),
        ("--ddp", args.device is None and args.ddp),
        (f"--amp {args.amp}", args.device is None and args.amp != "off"),
        ("--decode_device cuda", args.device is None and args.decode_device == "cuda"),
    )
    asked = [text for text, on in requests if on]
    if asked:
        build = "" if torch.version.cuda else ", this torch is a CPU-only build"
        where = (
            f"CUDA_VISIBLE_DEVICES={visible}"
            if visible is not None
            else "CUDA_VISIBLE_DEVICES unset"
        )
        fail(
            f"{', '.join(asked)} asks for a GPU, but no CUDA GPU is visible ({where}{build}); to run "
            "on the CPU on purpose, give --device cpu"
        )
    args.device = args.device or "cpu"


def check_run_folder(args):
    """--output_root / --run_name, else ./output and a name from the flags. --evaluate of a checkpoint file
    with neither given: the checkpoint's own folder, so an evaluation's files sit beside what it scored."""
    given = args.output_root is not None or args.run_name is not None
    if args.evaluate and args.resume != "auto" and not given:
        folder = os.path.dirname(os.path.abspath(args.resume))
        args.output_root, args.run_name = os.path.dirname(folder), os.path.basename(folder)
    args.output_root = args.output_root or OUTPUT_ROOT
    args.run_name = args.run_name or run_dir_name(args)


def demo_folder(args):
    """Where `python train.py demo` writes its synthetic data: a folder of its own, never the user's."""
    return os.path.join(args.output_root, "demo_data")


def default_t_length(args):
    """--t_length, else its default: 16 frames per clip in 3D, 1 per snippet in TSN / 2D."""
    return args.t_length or (16 if args.mode == "3D" else 1)


def check_mode(args):
    """--mode, --num_segments, --shift, --t_length together."""
    args.t_length = default_t_length(args)
    if args.mode == "3D" and (args.num_segments > 1 or args.shift):
        fail(
            f"--num_segments {args.num_segments} --shift {args.shift}: segments are for --mode TSN or 2D"
        )
    if models.mode_error(args.arch, args.mode):
        fail(models.mode_error(args.arch, args.mode))
    if args.arch in models.VITS and vit.geometry_error(args.arch, args.t_length, args.crop_size):
        fail(vit.geometry_error(args.arch, args.t_length, args.crop_size))
    if (
        args.shift == 1 or args.shift > 64
    ):  # 2/shift of the channels move; 64: the fewest a block has
        fail(
            f"--shift {args.shift}: must be 0 (off) or 2..64 (TSM: 8, a quarter of the channels move)"
        )
    if args.shift and not models.ARCHS[args.arch].shift:
        fail(
            f"--shift {args.shift} needs a 2D ResNet arch ({', '.join(models.archs_with('shift'))})"
        )
    if args.shift and args.num_segments == 1:  # it would shift a quarter of the channels out: zeros
        fail(
            f"--shift {args.shift} with --num_segments 1: TSM shifts channels between segments; give "
            "--num_segments N (TSM: 8)"
        )


def check_recipe_args(args):
    """The optimizer, schedule, mixing, clip augmentation, drop path and EMA flags, alone."""
    if args.norm_weight_decay and args.bn_bias_wd:
        fail("--norm-weight-decay and --bn_bias_wd both set the decay of 1-D parameters: give one")
    if args.lr_min > args.lr:
        fail(f"--lr-min {args.lr_min}: the floor of the cosine, at most --lr {args.lr}")
    check_flags_act(args)
    entry = models.ARCHS[args.arch]
    if args.layer_decay <= 0 or (args.layer_decay < 1 and not entry.layers):
        fail(
            f"--layer-decay {args.layer_decay}: needs a value in (0, 1] and an arch with layers to number "
            f"({', '.join(models.archs_with('layers'))}), not --arch {args.arch}"
        )
    if args.drop_path is not None and not entry.drop_path:
        fail(
            f"--drop-path {args.drop_path}: --arch {args.arch} has no stochastic depth "
            f"(these have: {', '.join(models.archs_with('drop_path'))})"
        )
    if args.grad_ckpt and args.arch not in models.VITS:
        fail(f"--grad-ckpt: checkpoints the blocks of the ViTs ({', '.join(models.VITS)}) only")
    if args.decode_device == "cuda" and (
        args.auto_augment or args.random_erase or args.color_jitter or args.ra_reps > 1
    ):
        fail(
            "--auto-augment / --random-erase / --color-jitter / --ra-reps (--num_sample) work on the "
            "loader's clips: "
            "use --decode_device cpu"
        )
    if args.augment_device == "batch" and not (
        args.auto_augment or args.random_erase or args.color_jitter
    ):
        fail(
            "--augment_device batch moves --auto-augment / --random-erase / --color-jitter, "
            "and none is on"
        )


# Flags that act only with others: (flag, when it acts, what it needs). Given (other than its default)
# where it would do nothing, it is refused: a run that silently ignores a flag is not the run asked for.
ACTS_WITH = (
    ("--lr-min", lambda a: a.lr_policy != "step", "a cosine --lr_policy"),
    ("--lr-warmup-start", lambda a: a.warmup > 0, "--warmup EPOCHS"),
    ("--momentum", lambda a: a.opt == "sgd", "--opt sgd (AdamW has no momentum)"),
    ("--ra-magnitude", lambda a: a.auto_augment, "--auto-augment ra"),
    ("--ra-num-ops", lambda a: a.auto_augment, "--auto-augment ra"),
    ("--mix-prob", lambda a: a.mixup_alpha or a.cutmix_alpha, "--mixup-alpha or --cutmix-alpha"),
    (
        "--mix-switch-prob",
        lambda a: a.mixup_alpha and a.cutmix_alpha,
        "both --mixup-alpha and --cutmix-alpha",
    ),
    (
        "--mixup-alpha",
        lambda a: a.mix_prob > 0 and (not a.cutmix_alpha or a.mix_switch_prob < 1),
        "--mix-prob > 0 (and with --cutmix-alpha, --mix-switch-prob < 1)",
    ),
    (
        "--cutmix-alpha",
        lambda a: a.mix_prob > 0 and (not a.mixup_alpha or a.mix_switch_prob > 0),
        "--mix-prob > 0 (and with --mixup-alpha, --mix-switch-prob > 0)",
    ),
    ("--model-ema-decay", lambda a: a.model_ema, "--model-ema"),
    ("--model-ema-steps", lambda a: a.model_ema, "--model-ema"),
    ("--use-ema", lambda a: a.model_ema, "--model-ema (there is no EMA to use)"),
    (
        "--train_sampling",
        lambda a: a.num_segments == 1,
        "--num_segments 1 (TSN segments have their own sampling)",
    ),
)


def check_flags_act(args):
    """ACTS_WITH, for training (--evaluate takes a checkpoint's training flags, which acted or not then)."""
    if args.evaluate:
        return
    parser = recipe_parser(args.dataset)
    actions = {s: a for a in parser._actions for s in a.option_strings}
    for flag, acts, needs in ACTS_WITH:
        dest = actions[flag].dest
        value = getattr(args, dest)
        if value != parser.get_default(dest) and not acts(args):
            given = " ".join([flag, *map(str, value if isinstance(value, list) else [value])])
            given = flag if value is True else given
            fail(f"{given} does nothing without {needs}: drop it, or add what it needs")


def run_dir_name(args):
    # The original project's experiment id, so old and new runs sort side by side; segments when > 1.
    t_length = default_t_length(args)
    segments = (f"_segments{args.num_segments}" if args.num_segments > 1 else "") + (
        f"_shift{args.shift}" if args.shift else ""
    )
    if getattr(args, "pretrain", False):  # VideoMAE pretraining: no head, so no dropout
        mask = f"mask{args.mask_ratio}"
        return f"{args.dataset}_{args.arch}_pretrain_{mask}_length{t_length}_stride{args.t_stride}"
    return (
        f"{args.dataset}_{args.arch}_{args.mode}{segments}_length{t_length}_stride{args.t_stride}"
        f"_dropout{args.dropout}"
    )


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

    def gather(self, obj):
        """Every rank's `obj`, in rank order."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def all_sum(self, values):
        """A few numbers summed over ranks (one collective): how ranks agree on when to stop. One process:
        no tensor at all (a CUDA tensor would be a host sync every step)."""
        if self.world_size == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()


def setup_runtime(args):
    """One process, or with --ddp one per GPU, started by torchrun or by srun (launch.py reads which)."""
    cuda = args.device.startswith("cuda")
    try:
        rank, world_size, local_rank = launch.ranks(args.ddp, args.device)
    except ValueError as e:
        fail(str(e))
    if args.ddp:
        if cuda:
            torch.cuda.set_device(local_rank)  # one GPU per process, before NCCL touches any device
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size)
        if (
            rank != 0
        ):  # only rank 0 prints (model.py's pretrained summary included); warnings go to stderr
            builtins.print = lambda *a, **k: None
        where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
        print(f"DDP: {world_size} processes, rendezvous {where}")
    device = torch.device(f"cuda:{local_rank}" if cuda and args.ddp else args.device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    torch.manual_seed(args.seed)  # same init on every rank; DDP broadcasts rank 0's anyway
    # cuDNN trap: benchmark mode times every 3D conv algorithm once per input shape. A win for fixed-size
    # training; for evaluation (one pass, other shapes) it only costs time and workspace memory.
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


# ---- data ------------------------------------------------------------------------------------------
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
    """The dataset of `list_file` as the flags say. Training, validation, --evaluate and predict (with a
    checkpoint's flags: checkpoint_args) all build theirs here: an option added to data.DataSpec
    reaches all four."""
    return data.VideoFrameDataset(list_file, data_spec(args, mode), mode)


def data_spec(args, mode):
    """The flags -> data.DataSpec for `mode`: the fields derived here, and every other field named as
    its flag filled by name (a flag a checkpoint's args predate keeps the field's default)."""
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
    )
    if mode == "train":
        derived["augment"] = clip_augment(args)  # in the loader, or augment.BatchAugment's draws
    fields = {f.name for f in dataclasses.fields(data.DataSpec)} - set(derived)
    return data.DataSpec(**{k: v for k, v in vars(args).items() if k in fields}, **derived)


def clip_augment(args):
    """The train clips' augmentation: data.clip_augment's transforms, run in the loader, or with
    --augment_device batch only drawn there (augment.BatchAugment) and applied in to_model_input."""
    transforms = data.clip_augment(
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


def make_demo_data(args, rt):
    """`python train.py demo`: its synthetic dataset, made once in demo_folder when a list it uses is the
    demo's own and missing. A list the user named is theirs: read, never written (a mistyped name is
    "not found", not a dataset written over the files beside it)."""
    ours = [os.path.join(demo_folder(args), name) for name in ("train.txt", "val.txt")]
    used = {os.path.abspath(args.train_list), os.path.abspath(args.val_list)}
    if used & {os.path.abspath(p) for p in ours} and not all(map(os.path.exists, ours)):
        if rt.rank == 0:
            prepare.make_synth(demo_folder(args), **DEMO_DATA)
        if rt.world_size > 1:
            dist.barrier()


def build_data(args, rt):
    if args.dataset == "demo":
        make_demo_data(args, rt)
    for flag, path in (("train_list", args.train_list), ("val_list", args.val_list)):
        if not os.path.isfile(path):
            fail(f"{flag} not found: {path}")
    args.num_classes = args.num_classes or NUM_CLASSES.get(
        args.dataset
    )  # else: from the lists, below
    views = args.test_clips * args.test_crops if args.evaluate else 1
    try:
        train_ds = make_dataset(args, args.train_list, "train")
        val_ds = make_dataset(args, args.val_list, "test" if views > 1 else "val")
    except (ValueError, OSError) as e:
        fail(str(e))
    args.num_classes = args.num_classes or max(train_ds.num_classes, val_ds.num_classes)
    if rt.rank == 0 and any(decode.is_video_file(v.path) for v in train_ds.videos + val_ds.videos):
        print(
            f"video files: decoded with {train_ds.video_decoder} (AVI files: pyav; --video_decoder)"
        )
    check_frame_folders(args, [] if args.evaluate else train_ds.videos, val_ds.videos)
    train_labels, warned = {v.label for v in train_ds.videos}, set()
    for v in val_ds.videos:  # it would silently widen the classifier, and can never be right
        if (
            v.label not in train_labels
            and v.label not in warned
            and rt.rank == 0
            and not args.evaluate
        ):
            warned.add(v.label)
            warn(f"{args.val_list}:{v.line}: label {v.label} never occurs in {args.train_list}")
    # Training: DistributedSampler also serves one process (num_replicas=1) so that the shuffle order is a
    # function of (seed, epoch) only -- exact resume. It pads with repeats so every rank steps equally.
    train_sampler = DistributedSampler(
        train_ds, num_replicas=rt.world_size, rank=rt.rank, shuffle=True, seed=args.seed
    )
    # Validation: a disjoint shard per rank and no padding (DistributedSampler would count duplicates).
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
            f"{args.train_list} has {len(train_sampler)} videos per process, fewer than --batch-size x "
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
    """--mixup-alpha / --cutmix-alpha: torchvision's v2.MixUp / CutMix on the normalised float batch, one
    of them (CutMix with --mix-switch-prob) on a batch with --mix-prob, as PySlowFast's MixUp (timm's
    Mixup). CutMix cuts the same box from every frame: a (B, C, T, H, W) batch passes as a Video, whose
    last two dims are H and W. Targets come back soft (B, classes), unmixed ones as the labels. Draws from
    torch's global generator, which a resume restores (as dropout's)."""
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
    """Before the model is built: every listed folder holds its first and last frame (stat calls only)."""
    for videos in video_lists:
        problems, count = prepare.check_folders(videos, args.image_tmpl)
        if count:
            fail(
                f"{count} listed video(s) have missing frame folders or frames: {'; '.join(problems)}"
                f"{' ...' if count > len(problems) else ''} (full report: `python prepare.py check LIST`)"
            )


def read_class_names(args):
    """--class_names, or <dataset>_classes.txt beside the train list (from `prepare.py lists`), or the
    names the train list's own format gives (data.class_names); or None."""
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
    """A fresh loader each epoch (no persistent workers): workers must see set_epoch, and a resumed epoch
    skips the batches it already trained on. The generator keeps DataLoader off the global RNG, which
    drives dropout and is restored on resume."""
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


def collate_fn(
    args,
):  # --decode_device cuda: batches of encoded frames, decoded by decode_batch in the step
    return gpudecode.collate_encoded if args.decode_device == "cuda" else data.collate


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
    ema: swa_utils.AveragedModel = None  # --model-ema: ema.module is the averaged model


def make_model(args):
    """The bare model the flags describe, --pretrained weights loaded; ValueError / OSError: one line.
    Training, --evaluate and predict (with a checkpoint's flags: checkpoint_args) all build theirs here."""
    args.t_length = default_t_length(args)
    pretrained = args.pretrained_model or args.pretrained
    model = zoo.build_model(model_spec(args), pretrained=pretrained, inflate=args.inflate)
    if args.t_length < getattr(model, "min_t", 1):
        raise ValueError(
            f"--t_length {args.t_length} is too short for --arch {args.arch} "
            f"(needs >= {model.min_t})"
        )
    return model


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
        # Measured with torch 2.14: the CPU bf16 conv3d weight gradient is NaN or several-fold wrong when the
        # temporal kernel is longer than the clip (fine from T = kernel up, and in fp32).
        fail(
            f"--amp bf16 on CPU needs --t_length >= {stem_t} for --arch {args.arch} (torch's CPU bf16 "
            "conv3d gradient is wrong for clips shorter than the kernel); use --amp off"
        )
    info = getattr(model, "pretrained_info", None) or {}
    rt.mean = tuple(args.mean or info.get("mean") or data.MEAN)
    rt.std = tuple(args.std or info.get("std") or data.STD)
    for (
        name,
        p,
    ) in model.named_parameters():  # fine-tuning modes: frozen tensors get no gradient, no decay
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
    if (
        args.ddp
    ):  # gradients as views of the all-reduce buckets: no copy in, no second gradient copy
        net.ddp = net.train = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[rt.local_rank] if rt.device.type == "cuda" else None,
            gradient_as_bucket_view=True,
        )
    elif (
        args.device == "cuda" and torch.cuda.device_count() > 1
    ):  # --device cuda:N means that one GPU
        net.train = net.eval = nn.DataParallel(model)  # splits the batch over every visible GPU
    # Training only (the shapes never change: drop_last), never DataParallel (check_args); DDP itself is
    # compiled, the documented way (its DDPOptimizer splits the graph at buckets: all-reduce overlaps the
    # backward). Evaluation stays eager: eval mode, views x batch and the last partial batch would each
    # recompile, for a pass that runs once every -ef epochs.
    net.train = torch.compile(net.train, dynamic=False) if args.compile else net.train
    # The optimizer is built after wrapping: SyncBN conversion makes new parameters.
    net.optimizer = make_optimizer(model, args, fused=rt.device.type == "cuda")
    # --model-ema: torchvision references' EMA (AveragedModel + get_ema_multi_avg_fn), buffers averaged too.
    # GPU trap: each update reads n_averaged on the host (one sync); --model-ema-steps N spaces them.
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
    torch.manual_seed(
        args.seed + rt.rank
    )  # a different dropout stream on each rank (resume restores it)
    # Trap: under DDP, evaluate the bare module. DDP's forward broadcasts buffers (a collective), which hangs
    # when ranks hold shards of different lengths.
    return net


def make_optimizer(model, args, fused):
    """SGD (momentum) or AdamW over param_groups. `fused` (CUDA): the step takes GradScaler's found-inf
    flag on the device (the unfused one syncs to skip a step: fp16)."""
    groups = param_groups(model, args)
    if args.opt == "adamw":
        betas = tuple(args.opt_betas or (0.9, 0.999))  # torch's default; VideoMAE pretraining 0.95
        return torch.optim.AdamW(groups, lr=args.lr, betas=betas, fused=fused or None)
    optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, fused=fused or None)
    # fp16 trap: fused SGD's first step makes its momentum buffers with empty_like and fills them in the
    # kernel, which GradScaler's found-inf flag skips whole. The first fp16 steps usually overflow (initial
    # scale 65536): the buffers stay uninitialised memory, and the next step adds it to the weights (NaN).
    # Zero buffers make the same first step (momentum * 0 + grad == grad, bit for bit), skipped or not.
    if args.momentum > 0:
        for p in (p for g in groups for p in g["params"]):
            optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return optimizer


def set_train_mode(net, args):
    net.train.train()
    if (
        args.freeze_bn
    ):  # the original's finetune_bn_frozen.py: BN uses (and keeps) the pretrained statistics
        for m in net.bare.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()


# Decayed by --norm-weight-decay, with the 1-D parameters: absolute position embeddings and class tokens
# (mvit's pos_encoding.*), Swin's relative position bias tables (Video Swin / mmaction2: decay_mult 0), a
# ViT's learned position table and the pretraining mask token (VideoMAE's no_weight_decay).
EMBEDDINGS = ("pos_encoding.", "relative_position_bias_table", "pos_embed", "mask_token")


def param_groups(model, args):
    """Optimizer groups: per layer (--layer-decay: "lr_scale" = decay^(L + 1 - i), model.layer_ids), each
    split into --wd and --norm-weight-decay parameters. Weight decay on norms' scales/shifts and biases
    only hurts (Goyal et al. 2017; torchvision references); --bn_bias_wd: the original's --wd on all."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    ids, L = models.layer_ids(args.arch, [n for n, _ in named]) if args.layer_decay < 1 else ({}, 0)
    norm_wd, groups = args.norm_weight_decay, {}  # --bn_bias_wd: no parameter is one_d below
    for name, p in named:
        one_d = not args.bn_bias_wd and (p.ndim <= 1 or any(k in name for k in EMBEDDINGS))
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
    """The lr of optimizer step `step` (0-based, global): a pure function of the flags, so a resumed run with
    other --epochs / --lr_steps / --warmup follows the new flags. Warmup ramps linearly to the schedule."""
    if args.lr_policy == "cosine_after_warmup":
        return cosine_after_warmup(args, step, steps_per_epoch)
    epoch, scale = step / steps_per_epoch, lr_batch_scale(args)
    if (
        args.lr_policy == "cosine"
    ):  # PySlowFast's lr_policy "cosine", end lr --lr-min (COSINE_END_LR)
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
    np.linspace(start, lr, W) over the W warmup steps (i * ((lr - start) / (W - 1)) + start, the last
    exactly lr), then min + 0.5 (lr - min) (1 + cos(pi i / (S - W))) for the i-th of the S - W steps left,
    S = epochs x steps per epoch. Past S (a longer resume): --lr-min."""
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
    """--lr-batch N: the lrs are given for N clips; this run's global batch / N (VideoMAE: lr x B / 256)."""
    if not args.lr_batch:
        return 1.0
    return global_batch(args) / args.lr_batch


# ---- one epoch of training -------------------------------------------------------------------------
def decode_on_device(batch, args, rt, net, progress, d, it):
    """--decode_device cuda: gpudecode.decode_batch. A frame that fails only on the GPU cannot be replaced
    (its loader has moved on). One process saves at the last step boundary first; under DDP the other
    ranks stop with it."""
    try:
        return gpudecode.decode_batch(batch, rt.device, d.train_ds)
    except (
        Exception
    ) as e:  # nvJPEG / TorchCodec raise RuntimeError, ValueError, their own kinds; OOM too
        if rt.world_size == 1:
            progress.iter = it - it % args.iter_size
            checkpoint.save(args, rt, net, progress, d)
        if isinstance(e, decode.BadVideo):
            fail(
                f"{e} -- found decoding on the GPU in training; run `python prepare.py check LIST --full` "
                "and fix it, then --resume auto"
            )
        why = (
            f"out of GPU memory decoding batch {it} (lower -b or gpudecode.DECODE_CHUNK)"
            if isinstance(e, torch.OutOfMemoryError)
            else f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        )
        fail(
            f"GPU decoding failed in training: {why}; {'saved checkpoint.pth; ' * (rt.world_size == 1)}"
            "--resume auto continues"
        )


def to_model_input(clips, labels, info, rt):
    """uint8 batch from the loader -> normalised float on the device, the train crop finished there, and
    the labels there. --ra-reps K: (B, K, 3, T, H, W) -> B x K clips, each video's K clips together."""
    K = clips.shape[1] if clips.dim() == 6 else 1
    clips, labels = (clips.flatten(0, 1), labels.repeat_interleave(K)) if K > 1 else (clips, labels)
    x = clips.to(rt.device, non_blocking=True)  # uint8: cheap
    if "augment" in info:  # --augment_device batch: the loader drew each clip's augmentation
        x = augment.apply(x, info["augment"].flatten(0, -3))  # (B x K, stages, 8)
    x = data.normalize(x.contiguous(memory_format=rt.memory_format), rt.mean, rt.std)
    if (
        "box" in info
    ):  # training: the scale jitter's resize, batched on the device (boxes: still on the host)
        x = data.crop_resize(x, info["box"].view(-1, 4))
    return x.contiguous(memory_format=rt.memory_format), labels.to(rt.device, non_blocking=True)


def classify(criterion):
    """The step's forward and loss, (model, x, targets, info) -> (logits, loss): `criterion` on the
    logits. train_one_epoch takes any such function (pretrain.py's reconstruction loss: logits None)."""

    def forward_loss(model, x, targets, info):
        logits = model(x)
        return logits, criterion(logits, targets)

    return forward_loss


def train_one_epoch(args, rt, d, net, criterion, progress):
    """Train from progress.iter to the end of progress.epoch; returns this rank's Meter. After each
    optimizer step, rundir.end_of_step saves and exits if a signal came or too many videos were bad.
    criterion: `classify`'s kind of function."""
    epoch, meter = progress.epoch, report.Meter(start=progress.iter)
    set_train_mode(net, args)
    batches, bad = (
        d.steps_per_epoch * args.iter_size,
        [],
    )  # bad: this step's replaced videos, this rank
    t_end = time.time()
    for it, batch in enumerate(train_loader(args, d, epoch, progress.iter), start=progress.iter):
        if d.train_ds.spec.encoded:  # --decode_device cuda: nvJPEG, here
            batch = decode_on_device(batch, args, rt, net, progress, d, it)
        clips, labels, info = batch
        meter.t_wait += time.time() - t_end  # GPU decoding counts as waiting for data
        bad += [line for text in info.get("bad", []) for line in text.splitlines()]
        x, labels = to_model_input(clips, labels, info, rt)
        x, targets = d.mix(
            x, labels
        )  # --mixup-alpha / --cutmix-alpha: soft targets; else the labels
        last = (it + 1) % args.iter_size == 0  # the batch that completes an optimizer step
        step = epoch * d.steps_per_epoch + it // args.iter_size
        lr = lr_at(args, step, d.steps_per_epoch)
        for g in net.optimizer.param_groups:
            g["lr"] = lr * g["lr_scale"]  # --layer-decay; else 1
        # DDP averages gradients in every backward; accumulating, only the step's last batch needs that.
        with net.ddp.no_sync() if net.ddp is not None and not last else contextlib.nullcontext():
            with rt.autocast:  # classify: soft or hard targets; pretrain.py: the masked tubes
                logits, loss = criterion(net.train, x, targets, info)
            net.scaler.scale(
                loss / args.iter_size
            ).backward()  # mean over the step's iter_size x b clips
        # top-1 against the labels, or the dominant (largest-weight) label of mixed targets
        meter.update(loss, logits, labels if targets.dim() == 1 else targets.argmax(1), it)
        if last:
            if args.clip_grad > 0:
                net.scaler.unscale_(net.optimizer)
                nn.utils.clip_grad_norm_(net.bare.parameters(), args.clip_grad)
            net.scaler.step(net.optimizer)
            net.scaler.update()
            net.optimizer.zero_grad(set_to_none=True)
            if (
                net.ema and (step + 1) % args.model_ema_steps == 0
            ):  # --model-ema: one update, every N steps
                net.ema.update_parameters(net.bare)
            at_line = (step + 1) % args.print_freq == 0 or it + 1 == batches
            if at_line:
                print(meter.line(args, rt, progress, loss, lr, it, batches))
            if (
                rt.world_size == 1 or at_line
            ):  # DDP: a collective, so only where the host syncs anyway
                rundir.end_of_step(args, rt, net, progress, d, bad, it + 1)
                bad = []
        t_end = time.time()
    return meter


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
            clips, target, _ = (
                gpudecode.decode_batch(batch, rt.device, d.val_ds)
                if d.val_ds.spec.encoded
                else batch
            )
            clips = clips.to(rt.device, non_blocking=True)
            if clips.dim() == 5:  # one view per video: (B, 3, T, H, W) -> (B, 1, 3, T, H, W)
                clips = clips.unsqueeze(1)
            B, V = clips.shape[:2]
            clips = clips.flatten(0, 1).contiguous(
                memory_format=rt.memory_format
            )  # (B*V, 3, T, H, W), uint8
            clips = data.normalize(clips, rt.mean, rt.std)
            with rt.autocast:
                logits = net.eval(clips)
            scores.append(
                logits.float().softmax(-1).view(B, V, -1).mean(1).cpu()
            )  # average views per video
            labels.append(target)
    except (
        decode.BadVideo
    ) as e:  # never substituted (it would change the metric); all ranks learn of it below
        error = str(
            e
        )  # one line, also when a DataLoader worker raised it (decode.BadVideo keeps its text)
    scores = torch.cat(scores) if scores else torch.zeros(0, args.num_classes)
    labels = torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long)
    shards = rt.gather((d.val_indices[: len(labels)], scores, labels, error))
    errors = [s[3] for s in shards if s[3]]
    if errors:
        raise decode.BadVideo(errors[0])
    # Put every rank's shard back in dataset order.
    all_scores = torch.zeros(len(d.val_ds), args.num_classes)
    all_labels = torch.zeros(len(d.val_ds), dtype=torch.long)
    for idx, s, y, _ in shards:
        all_scores[idx], all_labels[idx] = s, y
    topk = all_scores.topk(min(5, args.num_classes), dim=1).indices
    p_true = all_scores.gather(1, all_labels[:, None]).clamp_min(1e-12)
    return {
        "top1": (topk[:, 0] == all_labels).float().mean().item() * 100,
        "top5": (topk == all_labels[:, None]).any(1).float().mean().item() * 100,
        "loss": -p_true.log().mean().item(),
        "scores": all_scores,
        "labels": all_labels,
    }


def report_evaluation(args, rt, d, res, clips, crops, tag=None):
    """Rank 0: the metrics, the per-class table and report.write_evaluation's files; `res`: every rank's."""
    if rt.rank != 0:
        return
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
    """--evaluate: the metrics, the per-class report and its files; the last line is the one scripts parse."""
    tag = rundir.evaluation_files(args, rt, flag_sets().scores)
    try:
        res = evaluate(net, d, args, rt)
    except decode.BadVideo as e:
        fail(f"evaluation stopped: {e}")
    report_evaluation(args, rt, d, res, args.test_clips, args.test_crops, tag)
    print(f" * Acc@1 {res['top1']:.3f} Acc@5 {res['top5']:.3f}")
    return res


# ---- the epoch loop --------------------------------------------------------------------------------
def validate_and_log(args, rt, net, d, progress, meter):
    """End of an epoch: validate (every -ef epochs), save checkpoint.pth (and model_best.pth), log a line."""
    epoch = progress.epoch
    loss_sum, correct, seen = rt.all_sum(meter.totals(epoch))
    log = {
        "epoch": epoch,
        "lr": net.optimizer.param_groups[0]["lr"],  # the lr its last step used
        "train_loss": loss_sum / seen if seen else None,  # seen = 0: resumed at the epoch's end
        "train_top1": 100 * correct / seen if seen else None,
        "val_top1": None,
        "val_top5": None,
        "val_loss": None,
    }
    if (
        args.mixup_alpha or args.cutmix_alpha
    ):  # train_top1 is against the dominant label of mixed targets
        log["mixed"] = True
    if (
        rt.world_size > 1
    ):  # BN statistics differ per rank (own batches): score with rank 0's, the saved ones
        for b in [*net.bare.buffers(), *(net.ema.buffers() if net.ema else ())]:
            dist.broadcast(b, 0)
    progress.epoch, progress.iter = epoch + 1, 0
    if (epoch + 1) % args.eval_freq == 0 or epoch + 1 == args.epochs:
        try:
            res = evaluate(net, d, args, rt)
            ema = (
                evaluate(dataclasses.replace(net, eval=net.ema.module), d, args, rt)
                if net.ema
                else None
            )
        except decode.BadVideo as e:  # the training state is saved first: nothing is lost
            checkpoint.save(args, rt, net, progress, d)
            fail(f"validation stopped (checkpoint.pth saved): {e}")
        log.update(val_top1=res["top1"], val_top5=res["top5"], val_loss=res["loss"])
        progress.last_val = res
        print(f"epoch {epoch} * Acc@1 {res['top1']:.3f} Acc@5 {res['top5']:.3f}")
        if ema:
            log.update(val_top1_ema=ema["top1"], val_top5_ema=ema["top5"], val_loss_ema=ema["loss"])
            print(f"epoch {epoch} * EMA Acc@1 {ema['top1']:.3f} Acc@5 {ema['top5']:.3f}")
    score = log.get(
        "val_top1_ema" if args.use_ema else "val_top1"
    )  # --use-ema: the EMA picks the best
    is_best = score is not None and score > progress.best_acc1
    if is_best:
        progress.best_acc1, progress.best_epoch = score, epoch
    log["epoch_time"] = time.time() - meter.t_epoch
    checkpoint.save(args, rt, net, progress, d, best=is_best)
    rundir.append_log(rt, log)
    return log


def main(args):
    if args.pretrain:  # pretrain.py imports train.py, so train.py never imports it (see __main__)
        fail("--pretrain: pretrain.main(args) runs it (`python train.py` hands it over)")
    check_args(args)
    rt = setup_runtime(args)
    rundir.prepare_run_dir(args, rt, get_args_parser())
    d = build_data(args, rt)
    net = build_net(args, rt)
    criterion = classify(nn.CrossEntropyLoss(label_smoothing=args.label_smoothing))
    progress = checkpoint.Progress()
    args.world_size = (
        rt.world_size
    )  # saved with the args: a mid-epoch resume needs the same global batch
    ckpt = checkpoint.resume(args, rt, net, progress, flag_sets())
    rundir.resumed(args, rt, ckpt)
    d.class_names = d.class_names or (ckpt or {}).get(
        "class_names"
    )  # no classes file: the checkpoint's
    if args.evaluate:
        res = evaluate_checkpoint(args, rt, net, d)
        if rt.world_size > 1:
            dist.destroy_process_group()
        return res["top1"], res["top5"]

    rundir.open_tensorboard(args, rt)
    print(
        f"run folder {rt.run_dir}: {len(d.train_ds)} train / {len(d.val_ds)} val videos, {args.num_classes}"
        f" classes, {rt.world_size} process(es) x batch {args.batch_size} x iter_size {args.iter_size}, "
        f"{d.steps_per_epoch} steps/epoch, device {rt.device}, input mean {rt.mean} std {rt.std}"
    )
    t_run = time.time()
    with rundir.stop_on_signals():  # SIGTERM / SIGINT / SIGUSR1: finish the step, save, exit
        while progress.epoch < args.epochs:
            meter = train_one_epoch(args, rt, d, net, criterion, progress)
            validate_and_log(args, rt, net, d, progress, meter)
            rundir.exit_if_signalled(rt, progress)  # a signal during validation: already saved

    best = (
        f"best Acc@1 {progress.best_acc1:.3f} at epoch {progress.best_epoch}, saved to "
        f"{os.path.join(rt.run_dir, 'model_best.pth')}"
        if progress.best_epoch >= 0
        else "no best epoch"
    )
    print(f"done in {time.time() - t_run:.0f}s: {best}; the last epoch's validation by class:")
    if progress.last_val is not None:
        report_evaluation(args, rt, d, progress.last_val, 1, 1)
    if rt.world_size > 1:
        dist.destroy_process_group()
    return progress.best_acc1


if __name__ == "__main__":
    # `train.py predict ARGS` runs `predict.py ARGS` (also features, export: a sibling script of that name).
    # Handed over with exec, not imported: those import train.py, and train.py imports none of them.
    script = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), f"{sys.argv[1:2] and sys.argv[1]}.py"
    )
    if sys.argv[1:2] and sys.argv[1] in SUBCOMMANDS and os.path.isfile(script):
        os.execv(sys.executable, [sys.executable, script, *sys.argv[2:]])
    args = parse_args()
    if args.pretrain:  # --pretrain, given or from a recipe: `train.py pretrain` (pretrain.py)
        pretrain_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrain.py")
        os.execv(sys.executable, [sys.executable, pretrain_py, *sys.argv[1:]])
    try:
        main(args)
    except BaseException as e:
        # a one-line error, a traceback, Ctrl-C: no run folder left holding only args.txt
        rundir.remove_if_unused()
        if isinstance(
            e, decode.BadVideo
        ):  # e.g. a training video whose replacements all failed too
            fail(str(e))
        raise
