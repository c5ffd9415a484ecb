"""Train and evaluate 3D ConvNets (I3D ResNet-3D), TSN / TSM and 2D networks for video action recognition.

    python train.py demo                     # CPU, ~1 minute: recipes/demo.txt on synthetic motion videos
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

import checkpoint
import data
import decode
import gpudecode
import launch
import model as models
import prepare  # the start-up folder check and the demo's synthetic data
import report
import rundir
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
# `python train.py demo`: recipes/demo.txt learns data.py's synthetic motion classes on a CPU in ~1 minute.
DEMO_RECIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes", "demo.txt")
DEMO_DATA = dict(videos=128, frames=24, size=(64, 48))  # per split; small frames keep it CPU-fast
SUBCOMMANDS = (
    "predict",
    "features",
    "export",
)  # `python train.py predict ...` runs predict.py (__main__)
# Flags about this process, not about the model or its clips: --evaluate and predict never take these
# from a checkpoint. Every other saved flag they do (so a flag you add reaches them with no edit there).
PROCESS_FLAGS = {
    "train_list",
    "val_list",
    "pretrained",
    "pretrained_model",
    "class_names",
    "batch_size",
    "tensorboard",
    "workers",
    "resume",
    "evaluate",
    "start_epoch",
    "output_root",
    "run_name",
    "data_root",
    "decode_device",
    "ddp",
    "device",
    "amp",
    "sync_bn",
    "channels_last",
    "compile",
    "test_clips",
    "test_crops",
    "save_scores",
    "video_decoder",
    "read_timeout",
    "use_ema",
}


# ---- flags -----------------------------------------------------------------------------------------
def number(cast, low, below=math.inf, top=math.inf):
    """An argparse type: a `cast` number in [low, below) and <= top. Counts and sizes are >= 1: a 0 would
    only fail later, as a division by zero."""

    def parse(text):
        try:
            x = cast(text)
        except ValueError:
            x = None
        if x is None or not low <= x < below or x > top or not math.isfinite(x):
            want = (
                f"in [{low}, {top}]"
                if top < math.inf
                else f"an integer >= {low}"
                if cast is int
                else f"a number >= {low}"
                if below == math.inf
                else f"in [{low}, {below})"
            )
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return x

    return parse


positive, natural = number(int, 1), number(int, 0)
nonnegative, fraction, probability = number(float, 0), number(float, 0, 1), number(float, 0, top=1)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and recipes: an argument @FILE reads more arguments from FILE (e.g.
    recipes/ucf101_i3d.txt, a run folder's args.txt), any number per line, shell quoting, '#' comments."""

    def __init__(self, **kwargs):
        super().__init__(fromfile_prefix_chars="@", **kwargs)

    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message} (see -h)\n")

    def convert_arg_line_to_args(self, line):
        # argparse's own takes each line as ONE argument: "--lr_steps 40 80 90" would be a single word.
        # Trap: '#' starts a comment even inside a word (shlex); quote a value holding one.
        return shlex.split(line, comments=True)


def get_args_parser():
    p = Parser(prog="train.py", description="Train / evaluate 3D, TSN/TSM and 2D video networks.")
    p.add_argument(
        "dataset", help=f"{', '.join(NUM_CLASSES)} (sets the classes), demo, or any name"
    )
    p.add_argument(
        "train_list", nargs="?", help="list file: '<frame_dir> <num_frames> <label>' per line"
    )
    p.add_argument(
        "val_list", nargs="?", help="validation list file, same format (demo: both optional)"
    )
    add_model_args(
        p.add_argument_group("model and clips", "what the model is and the clips it sees")
    )
    add_optim_args(
        p.add_argument_group("optimisation", "the recipe: optimizer, schedule, fine-tuning")
    )
    add_recipe_args(p.add_argument_group("modern recipe", "AdamW, layer decay, drop path, EMA"))
    add_augment_args(p.add_argument_group("augmentation", "mixing and clip augmentation"))
    add_run_args(p.add_argument_group("run", "this process: data access, devices, monitoring"))
    add_eval_args(p.add_argument_group("evaluation", "--evaluate: views and protocol"))
    return p


def add_model_args(p):
    """Model and clip flags (the original project's)."""
    p.add_argument("-a", "--arch", default="resnet50_3d", help=f"one of: {', '.join(models.ARCHS)}")
    p.add_argument(
        "--dro", "--dropout", dest="dropout", default=0.2, type=fraction, help="dropout before fc"
    )
    p.add_argument(
        "--mode", default="3D", choices=["3D", "TSN", "2D"], help="3D clips | TSN segments | 2D"
    )
    p.add_argument("--num_segments", default=1, type=positive, help="TSN/2D: a snippet per segment")
    p.add_argument(
        "--shift", default=0, type=natural, help="TSM: shift 1/N of channels each way, 0: off"
    )
    p.add_argument("--t_length", type=positive, help="frames per clip/snippet; 16, TSN/2D: 1")
    p.add_argument("--t_stride", default=4, type=positive, help="frames between sampled frames")
    p.add_argument(
        "--new_size", default=256, type=positive, help="short side in px before cropping"
    )
    p.add_argument("--crop_size", default=224, type=positive, help="square crop in px")
    p.add_argument(
        "--pretrained", nargs="?", const="imagenet", help="imagenet (bare), kinetics400, PATH..."
    )
    p.add_argument("--pretrained_model", help="PATH to pretrained weights (overrides --pretrained)")
    p.add_argument(
        "--inflate", default="mean", choices=["mean", "center"], help="2D kernels over time"
    )
    p.add_argument("--num_classes", type=positive, help="override the number of classes")
    p.add_argument(
        "--class_names", help="one name per line (default: <dataset>_classes.txt by train_list)"
    )
    p.add_argument(
        "--train_crop",
        default="jitter",
        choices=data.TRAIN_CROPS,
        help="scale jitter | TSN's multiscale corner crops",
    )
    p.add_argument(
        "--no_flip", action="store_true", help=f"no train flips (always: {sorted(data.NO_FLIP)})"
    )
    p.add_argument(
        "--mean", type=float, nargs=3, help="input mean, RGB in [0, 1] (default: the weights')"
    )
    p.add_argument(
        "--std", type=float, nargs=3, help="input std, RGB in [0, 1] (default: the weights')"
    )


def add_optim_args(p):
    """The optimizer, schedule and fine-tuning flags."""
    p.add_argument("--epochs", default=95, type=positive, help="total epochs")
    # Per process: -b (DataParallel splits it over the GPUs) and -j. Global: the SGD step, b x processes x
    # iter_size clips, and the --lr it takes (never rescaled when the batch changes).
    p.add_argument(
        "-b", "--batch-size", dest="batch_size", default=64, type=positive, help="clips/process"
    )
    p.add_argument(
        "--iter_size", default=1, type=positive, help="batches accumulated into one SGD step"
    )
    p.add_argument(
        "--lr", "--learning-rate", dest="lr", default=0.001, type=nonnegative, help="initial lr"
    )
    p.add_argument(
        "--lr_policy", default="step", choices=["step", "cosine"], help="cosine: to 0 at --epochs"
    )
    p.add_argument(
        "--lr_steps", default=[40, 80, 90], type=nonnegative, nargs="+", help="epochs of lr x0.1"
    )
    p.add_argument(
        "--warmup", default=0.0, type=nonnegative, help="epochs of linear lr warmup, per step"
    )
    p.add_argument("--momentum", default=0.9, type=nonnegative, help="SGD momentum")
    p.add_argument(
        "--wd", "--weight-decay", dest="weight_decay", default=5e-4, type=nonnegative, help="L2"
    )
    p.add_argument(
        "--bn_bias_wd", action="store_true", help="--wd on BN and biases too (the original)"
    )
    p.add_argument(
        "--clip-grad", dest="clip_grad", default=0.0, type=nonnegative, help="max norm, 0: off"
    )
    p.add_argument(
        "--label-smoothing", dest="label_smoothing", default=0.0, type=fraction, help="in [0, 1)"
    )
    p.add_argument(
        "--freeze_bn", action="store_true", help="fine-tuning: BN statistics and affine fixed"
    )
    p.add_argument("--fc_only", action="store_true", help="fine-tuning: train the classifier only")


def add_recipe_args(p):
    """The transformers' recipe (PySlowFast's MViT, Video Swin, VideoMAE), usable with any arch."""
    p.add_argument(
        "--opt", default="sgd", choices=["sgd", "adamw"], help="optimizer (adamw: no --momentum)"
    )
    p.add_argument(
        "--norm-weight-decay",
        dest="norm_weight_decay",
        default=0.0,
        type=nonnegative,
        help="wd of norms, biases, position embeddings, class tokens (--bn_bias_wd: --wd)",
    )
    p.add_argument(
        "--lr-min", dest="lr_min", default=0.0, type=nonnegative, help="cosine: lr at --epochs"
    )
    p.add_argument(
        "--lr-warmup-start",
        dest="lr_warmup_start",
        default=0.0,
        type=nonnegative,
        help="--warmup starts from this lr (else 0)",
    )
    p.add_argument(
        "--layer-decay",
        dest="layer_decay",
        default=1.0,
        type=probability,
        help="layer i of L's lr x this^(L + 1 - i) (BEiT; stem 0, head L + 1); 1: off",
    )
    p.add_argument(
        "--drop-path", dest="drop_path", type=fraction, help="stochastic depth (default: arch's)"
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
    p.add_argument(
        "--use-ema",
        dest="use_ema",
        action="store_true",
        help="--evaluate / predict: the EMA weights; training: the EMA top-1 picks model_best",
    )


def add_augment_args(p):
    """Batch mixing (MixUp / CutMix) and per-clip augmentation."""
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
        "--ra-magnitude", dest="ra_magnitude", default=9, type=number(int, 0, 31), help="0-30"
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
        dest="ra_reps",
        default=1,
        type=positive,
        help="repeated augmentation: clips per video per step (-b counts videos)",
    )


def add_run_args(p):
    """Where and how this process runs: data access, devices, monitoring."""
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
        "-j", "--workers", default=4, type=natural, help="loader worker processes per process"
    )
    p.add_argument(
        "--resume", default="", help="checkpoint PATH, or auto (the run folder's, if any)"
    )
    p.add_argument(
        "-e", "--evaluate", action="store_true", help="only evaluate --resume on val_list"
    )
    p.add_argument("--start-epoch", dest="start_epoch", default=0, type=natural, help="first epoch")
    p.add_argument("--output_root", default="./output", help="run folders go here")
    p.add_argument("--run_name", help="run folder (default: from dataset, arch, clip, dropout)")
    p.add_argument(
        "--image_tmpl", default="img_{:05d}.jpg", help="frame file name, .format(number)"
    )
    p.add_argument(
        "--data_root", help="folder frame_dirs are relative to (default: each list's folder)"
    )
    p.add_argument(
        "--read_timeout", default=600, type=nonnegative, help="s a file read may take, 0: any"
    )
    p.add_argument(
        "--max_bad_videos", default=100, type=natural, help="bad videos replaced before a stop"
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
    p.add_argument("--ddp", action="store_true", help="DDP under torchrun (else DataParallel)")
    p.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu"
    )
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="mixed precision")
    p.add_argument(
        "--sync-bn", dest="sync_bn", action="store_true", help="BN statistics over DDP processes"
    )
    p.add_argument(
        "--channels-last", dest="channels_last", action="store_true", help="channels_last_3d"
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--seed", default=0, type=natural, help="seed for init, sampling and augmentation"
    )


def add_eval_args(p):
    """Evaluation views and protocol."""
    p.add_argument("--test_clips", default=1, type=positive, help="--evaluate: clips per video")
    p.add_argument(
        "--test_crops", default=1, type=int, choices=[1, 3, 10], help="--evaluate: crops per clip"
    )
    p.add_argument(
        "--test_sampling", default="ours", choices=data.PLACEMENTS, help="where val/test clips go"
    )
    p.add_argument(
        "--save_scores", action="store_true", help="also write the per-video scores (.npz)"
    )


def parse_args(argv=None):
    """Command line (recipes included) -> args. A flag not given takes, first found: the demo recipe's
    value (dataset demo), the checkpoint's own (--evaluate: its model and clip flags), the default."""
    parser = get_args_parser()
    args = parser.parse_args(argv)
    if args.dataset == "demo":
        parser.set_defaults(**vars(parser.parse_args(["demo", "@" + DEMO_RECIPE])))
        args = parser.parse_args(argv)
    if args.evaluate and args.resume:
        run_dir = os.path.join(args.output_root, args.run_name or run_dir_name(args))
        path = checkpoint.auto_checkpoint(run_dir) if args.resume == "auto" else args.resume
        try:
            args = checkpoint_args(checkpoint.load(path), argv, parser) if path else args
        except ValueError as e:
            fail(str(e))
    return args


def checkpoint_args(ckpt, argv, parser=None):
    """The args that rebuild a checkpoint's model and clips: the flags in `argv`, else the checkpoint's own
    (all but PROCESS_FLAGS), else the defaults. --evaluate and predict both come through here and then
    make_dataset / make_model, so neither can drift from what the checkpoint was trained with."""
    parser = parser or get_args_parser()
    saved = ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {}
    known = {action.dest for action in parser._actions}
    parser.set_defaults(**{k: v for k, v in saved.items() if k in known and k not in PROCESS_FLAGS})
    return parser.parse_args(argv)


def check_args(args):
    """What can be told from the flags alone, before anything is read or built."""
    if args.arch not in models.ARCHS:
        fail(f"--arch {args.arch}: unknown; choose one of: {', '.join(models.ARCHS)}")
    check_mode(args)
    if args.dataset == "demo":
        args.train_list = args.train_list or os.path.join(
            args.output_root, "demo_data", "train.txt"
        )
        args.val_list = args.val_list or os.path.join(args.output_root, "demo_data", "val.txt")
    if not args.train_list or not args.val_list:
        fail("give train_list and val_list (only 'demo' makes its own)")
    if args.evaluate and not args.resume:
        fail("--evaluate needs --resume CHECKPOINT")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {args.device} but no CUDA GPU is visible; use --device cpu")
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
    args.run_name = args.run_name or run_dir_name(args)


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
    if (
        args.shift == 1 or args.shift > 64
    ):  # 2/shift of the channels move; 64: the fewest a block has
        fail(
            f"--shift {args.shift}: must be 0 (off) or 2..64 (TSM: 8, a quarter of the channels move)"
        )
    if args.shift and args.arch not in models.RESNET_2D:
        fail(f"--shift {args.shift} needs a 2D ResNet arch ({', '.join(models.RESNET_2D)})")


def check_recipe_args(args):
    """The optimizer, schedule, mixing, clip augmentation, drop path and EMA flags, alone."""
    if args.norm_weight_decay and args.bn_bias_wd:
        fail("--norm-weight-decay and --bn_bias_wd both set the decay of 1-D parameters: give one")
    if args.lr_min > args.lr or (args.lr_min and args.lr_policy != "cosine"):
        fail(f"--lr-min {args.lr_min}: the floor of --lr_policy cosine, at most --lr {args.lr}")
    if args.lr_warmup_start and not args.warmup:
        fail(f"--lr-warmup-start {args.lr_warmup_start} needs --warmup EPOCHS")
    if args.layer_decay <= 0 or (args.layer_decay < 1 and args.arch not in models.LAYERS):
        fail(
            f"--layer-decay {args.layer_decay}: needs a value in (0, 1] and an arch with layers to number "
            f"({', '.join(a for a in models.ARCHS if a in models.LAYERS)}), not --arch {args.arch}"
        )
    if args.drop_path is not None and args.arch not in models.DROP_PATH:
        fail(
            f"--drop-path {args.drop_path}: --arch {args.arch} has no stochastic depth "
            f"(these have: {', '.join(models.DROP_PATH)})"
        )
    if args.use_ema and not args.model_ema and not args.evaluate:
        fail("--use-ema needs --model-ema (there is no EMA to use)")
    if args.decode_device == "cuda" and (
        args.auto_augment or args.random_erase or args.color_jitter or args.ra_reps > 1
    ):
        fail(
            "--auto-augment / --random-erase / --color-jitter / --ra-reps work on the loader's clips: "
            "use --decode_device cpu"
        )


def run_dir_name(args):
    # The original project's experiment id, so old and new runs sort side by side; segments when > 1.
    t_length = default_t_length(args)
    segments = (f"_segments{args.num_segments}" if args.num_segments > 1 else "") + (
        f"_shift{args.shift}" if args.shift else ""
    )
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
        derived["augment"] = data.clip_augment(
            args.auto_augment == "ra",
            args.ra_num_ops,
            args.ra_magnitude,
            args.color_jitter,
            args.random_erase,
        )
    fields = {f.name for f in dataclasses.fields(data.DataSpec)} - set(derived)
    return data.DataSpec(**{k: v for k, v in vars(args).items() if k in fields}, **derived)


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
            prepare.make_synth(os.path.dirname(args.train_list), **DEMO_DATA)
        if rt.world_size > 1:
            dist.barrier()
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
    model = zoo.build_model(
        args.arch,
        args.num_classes,
        dropout=args.dropout,
        pretrained=args.pretrained_model or args.pretrained,
        inflate=args.inflate,
        mode=args.mode,
        t_length=args.t_length,
        num_segments=args.num_segments,
        shift=args.shift,
        drop_path=args.drop_path,
    )
    if args.t_length < getattr(model, "min_t", 1):
        raise ValueError(
            f"--t_length {args.t_length} is too short for --arch {args.arch} "
            f"(needs >= {model.min_t})"
        )
    return model


def build_net(args, rt):
    try:
        model = make_model(args)
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
    # The optimizer is built after wrapping: SyncBN conversion makes new parameters. Fused on CUDA: its step
    # takes GradScaler's found-inf flag on the device (the unfused one syncs to skip a step: fp16).
    groups, fused = param_groups(model, args), rt.device.type == "cuda" or None
    net.optimizer = (
        torch.optim.AdamW(groups, lr=args.lr, fused=fused)
        if args.opt == "adamw"
        else torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, fused=fused)
    )
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


def set_train_mode(net, args):
    net.train.train()
    if (
        args.freeze_bn
    ):  # the original's finetune_bn_frozen.py: BN uses (and keeps) the pretrained statistics
        for m in net.bare.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()


# Decayed by --norm-weight-decay, with the 1-D parameters: absolute position embeddings and class tokens
# (mvit's pos_encoding.*), Swin's relative position bias tables (Video Swin / mmaction2: decay_mult 0).
EMBEDDINGS = ("pos_encoding.", "relative_position_bias_table")


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
    epoch = step / steps_per_epoch
    if (
        args.lr_policy == "cosine"
    ):  # PySlowFast's lr_policy "cosine", end lr --lr-min (COSINE_END_LR)
        cos = 0.5 * (1 + math.cos(math.pi * min(1.0, epoch / args.epochs)))
        lr = args.lr_min + (args.lr - args.lr_min) * cos
    else:
        lr = args.lr * 0.1 ** sum(step >= round(m * steps_per_epoch) for m in args.lr_steps)
    warmup_steps, start = round(args.warmup * steps_per_epoch), args.lr_warmup_start
    return start + (lr - start) * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr


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
    x = clips.to(rt.device, non_blocking=True).contiguous(
        memory_format=rt.memory_format
    )  # uint8: cheap
    x = data.normalize(x, rt.mean, rt.std)
    if (
        "box" in info
    ):  # training: the scale jitter's resize, batched on the device (boxes: still on the host)
        x = data.crop_resize(x, info["box"].view(-1, 4))
    return x.contiguous(memory_format=rt.memory_format), labels.to(rt.device, non_blocking=True)


def train_one_epoch(args, rt, d, net, criterion, progress):
    """Train from progress.iter to the end of progress.epoch; returns this rank's Meter. After each
    optimizer step, rundir.end_of_step saves and exits if a signal came or too many videos were bad."""
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
            with rt.autocast:
                logits = net.train(x)
                loss = criterion(
                    logits, targets
                )  # soft or hard targets, --label-smoothing on either
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
            print(meter.line(args, rt, progress, loss, lr, it, batches)) if at_line else None
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
    tag = rundir.evaluation_files(args, rt)
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
    check_args(args)
    rt = setup_runtime(args)
    rundir.prepare_run_dir(args, rt, get_args_parser())
    d = build_data(args, rt)
    net = build_net(args, rt)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    progress = checkpoint.Progress()
    args.world_size = (
        rt.world_size
    )  # saved with the args: a mid-epoch resume needs the same global batch
    ckpt = checkpoint.resume(args, rt, net, progress)
    rundir.resumed(args, rt, ckpt)
    d.class_names = d.class_names or (ckpt or {}).get(
        "class_names"
    )  # no classes file: the checkpoint's
    if args.evaluate:
        res = evaluate_checkpoint(args, rt, net, d)
        dist.destroy_process_group() if rt.world_size > 1 else None
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
    dist.destroy_process_group() if rt.world_size > 1 else None
    return progress.best_acc1


if __name__ == "__main__":
    # `train.py predict ARGS` runs `predict.py ARGS` (also features, export: a sibling script of that name).
    # Handed over with exec, not imported: those import train.py, and train.py imports none of them.
    script = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), f"{sys.argv[1:2] and sys.argv[1]}.py"
    )
    if sys.argv[1:2] and sys.argv[1] in SUBCOMMANDS and os.path.isfile(script):
        os.execv(sys.executable, [sys.executable, script, *sys.argv[2:]])
    try:
        main(parse_args())
    except decode.BadVideo as e:  # e.g. a training video whose replacements were all unreadable too
        fail(str(e))
