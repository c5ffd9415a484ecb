"""The command line: train.py's flags in argparse groups, the lists derived from the groups, recipes
(@FILE), and the checks that need nothing but the flags (run before anything is read or built).

A flag is one line in its group's add_*_args; its group (FLAG_GROUPS) says whether a checkpoint
gives it, whether it names evaluation files and whether a resumed run keeps it (flag_sets). Parser
records the flags as they are added: argparse keeps no public list of them.
"""

import argparse
import difflib
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass

import torch

import checkpoint
import data
import decode
import model as models
import probe  # --probe: its checks
import vit  # the VideoMAE ViTs' clip geometry
import vjepa  # the V-JEPA 2 encoders' clip geometry
import vjepa_zoo  # --vjepa-key: the encoders of an official .pt
import zoo  # --evaluate --resume of a zoo's file: named, not loaded
from errors import fail


NUM_CLASSES = {
    "ucf101": 101,
    "hmdb51": 51,
    "kinetics400": 400,
    "kinetics200": 200,
    "sthv1": 174,
    "sthv2": 174,
    "charades": 157,  # several at once: --multi-label
    "epic100": sum(data.EPIC_HEADS),  # 97 verbs + 300 nouns: --heads 97 300
}
# What a dataset's labels are, where not one class a video: the defaults its name sets.
DATASET_DEFAULTS = {
    "charades": dict(multi_label=True),
    "epic100": dict(heads=list(data.EPIC_HEADS)),
}
# The project's folder: a relative @recipes/... not found in the working folder is found here.
PROJECT = os.path.dirname(os.path.abspath(__file__))
# `python train.py demo`: recipes/demo.txt learns data.py's synthetic motion classes on a CPU.
DEMO_RECIPE = os.path.join(PROJECT, "recipes", "demo.txt")
OUTPUT_ROOT = "./output"
# `python train.py predict ...` runs predict.py (__main__)
SUBCOMMANDS = ("predict", "features", "export", "pretrain")


# ---- flags ---------------------------------------------------------------------------------------
def number(cast, low, below=math.inf, top=math.inf, over=False):
    """An argparse type: a `cast` number in [low, below) and <= top (over: > low). Counts and sizes
    are >= 1: a 0 would only fail later, as a division by zero. The error names the range as it
    is."""
    kind = "an integer" if cast is int else "a number"
    if cast is int and below < math.inf:  # integers below B: at most B - 1
        top, below = min(top, below - 1), math.inf
    if over:
        want = f"{kind} > {low}"
    elif top < math.inf:
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
        if (
            x is None
            or not low <= x < below
            or x > top
            or not math.isfinite(x)
            or x == low
            and over
        ):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return x

    return parse


positive, natural = number(int, 1), number(int, 0)
above_zero = number(float, 0, over=True)  # a learning rate: 0 would train nothing
nonnegative, fraction, probability = number(float, 0), number(float, 0, 1), number(float, 0, top=1)


def best_metric(text):
    """--best-metric's type: the canonical NAME[:way] (checkpoint.parse_metric), the way only where
    it is not the metric's own: a resume compares values, not spellings."""
    try:
        name, way = checkpoint.parse_metric(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name if way == checkpoint.metric_way(name) else f"{name}:{way}"


def default_workers():
    """4 loader workers, or fewer on a machine with fewer CPUs (more would only contend, and torch's
    DataLoader warns): the CPUs this process may run on (a Slurm job's or taskset's share)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cpus = os.cpu_count() or 1
    return min(4, cpus)


def project_file(arg):
    """@recipes/x.txt from any folder: a relative @FILE missing from the working folder is the
    project's own, if it has one (a file of that name in the working folder comes first)."""
    if isinstance(arg, str) and arg.startswith("@") and not os.path.isabs(arg[1:]):
        if not os.path.exists(arg[1:]) and os.path.isfile(os.path.join(PROJECT, arg[1:])):
            return "@" + os.path.join(PROJECT, arg[1:])
    return arg


def closest_recipes(path):
    """'; closest recipes: @recipes/...' for a mistyped recipe name (difflib), or ''."""
    folder = os.path.join(PROJECT, "recipes")
    names = (
        sorted(f for f in os.listdir(folder) if f.endswith(".txt")) if os.path.isdir(folder) else []
    )
    close = difflib.get_close_matches(os.path.basename(path), names, n=3, cutoff=0.6)
    return f"; closest recipes: {', '.join('@recipes/' + n for n in close)}" if close else ""


def no_weights(value):
    """--pretrained none (or ''): no pretrained weights, e.g. after a recipe's --pretrained."""
    return None if value.strip().lower() in ("", "none") else value


NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$|^-inf(inity)?$", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and recipes: an argument @FILE reads more arguments from FILE
    (e.g. recipes/ucf101_i3d.txt, a run folder's args.txt), any number per line, shell quoting, '#'
    comments. It records its flags as they are added (argparse keeps no public list): `actions`,
    every flag in order; `groups`, each argument group by its title."""

    def __init__(self, **kwargs):
        # None while argparse's own __init__ makes its two groups (and adds -h through add_argument)
        self.actions, self.groups = [], None
        super().__init__(fromfile_prefix_chars="@", **kwargs)
        self.groups = {}
        # Trap: argparse takes a value as a negative number only in plain notation (-0.001, not
        # -1e-3 or -inf); any other is an unknown flag, and `--probe-lrs -1e-3` fails as "expected
        # at least one argument". Every number is a value here (no flag looks like one), so the
        # flag's type names what is wrong with it. The attribute is argparse's own (3.8-3.13).
        self._negative_number_matcher = NEGATIVE_NUMBER

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.actions.append(action)
        return action

    def add_argument_group(self, title=None, description=None, **kwargs):
        """A titled group (-h lists its flags under `title`) that records its flags:
        `groups[title]`."""
        group = super().add_argument_group(title, description, **kwargs)
        if self.groups is None:
            return group
        self.groups[title] = Group(group, self.actions)
        return self.groups[title]

    def parse_known_args(self, args=None, namespace=None):
        args = [project_file(a) for a in (sys.argv[1:] if args is None else list(args))]
        # argparse's own error would be a bare "No such file or directory"
        for a in args:
            if isinstance(a, str) and a.startswith("@") and not os.path.isfile(a[1:]):
                self.error(f"{a}: no such recipe or arguments file{closest_recipes(a[1:])}")
        return super().parse_known_args(args, namespace)

    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message} (see -h)\n")

    def convert_arg_line_to_args(self, line):
        # argparse's own takes each line as ONE argument: "--lr_steps 40 80 90" would be a single
        # word. Trap: '#' starts a comment even inside a word (shlex); quote a value holding one.
        return shlex.split(line, comments=True)


class Group:
    """An argparse argument group that records each flag added to it, in its own `actions` and in
    its parser's."""

    def __init__(self, group, parser_actions):
        self.group, self.parser_actions, self.actions = group, parser_actions, []

    def add_argument(self, *args, **kwargs):
        action = self.group.add_argument(*args, **kwargs)
        self.actions.append(action)
        self.parser_actions.append(action)
        return action


def get_args_parser(pretrain=False):
    """The flags, by FLAG_GROUPS; `pretrain`: as `train.py pretrain` shows them (its name, its group
    first)."""
    if pretrain:
        prog, about = (
            "train.py pretrain",
            "Pretrain a video ViT as a masked autoencoder (VideoMAE).",
        )
    else:
        prog, about = "train.py", "Train / evaluate 3D, TSN/TSM, 2D and ViT video networks."
    p = Parser(
        prog=prog,
        description=about,
        epilog="Other commands (each with its own -h): `train.py demo` trains on synthetic videos; "
        "`train.py predict --resume CKPT VIDEO...` labels videos; `train.py features LIST --resume "
        "CKPT --out DIR` saves per-window features; `train.py export --resume CKPT OUT` writes "
        "ONNX "
        "or .pt2; `train.py pretrain DATASET TRAIN VAL --arch vit_b16` pretrains a ViT (VideoMAE).",
    )
    for group in sorted(FLAG_GROUPS, key=lambda g: pretrain and g.add is not add_pretrain_args):
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
        "--multi-label",
        dest="multi_label",
        action="store_true",
        help="several labels a video ('3,17,40'): sigmoid and BCE, scored by mAP (charades: on)",
    )
    p.add_argument(
        "--heads",
        type=positive,
        nargs="+",
        help="classes of each head on one backbone, a label each ('verb,noun'); the sum of their "
        "losses (epic100: 97 300)",
    )
    p.add_argument(
        "--mode", default="3D", choices=["3D", "TSN", "2D"], help="3D clips | TSN segments | 2D"
    )
    p.add_argument(
        "--shift",
        default=0,
        type=natural,
        help="TSM: shift 1/N of channels each way, 0: off "
        f"({', '.join(models.archs_with('shift'))})",
    )
    p.add_argument(
        "--slowfast-variant",
        dest="slowfast_variant",
        choices=list(models.slowfast_net.VARIANTS),
        help="SlowFast archs: whose network (mmaction2*: every alpha-th frame to the slow "
        "pathway; mmaction2: no BN / ReLU in the laterals); default PySlowFast's, or the "
        "--pretrained file's",
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
        help="train clips: a random start | VideoMAE's SSv2 segments (a frame per segment, no "
        "stride)",
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
        "--fps", type=above_zero, help="frames a second of frame folders (segments by time)"
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
    p.add_argument(
        "--labels",
        help=f"Something-Something v2 .json lists: the labels file of {{template: index}} "
        f"(default: {data.STHV2_LABELS} beside each list)",
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
        help="cosine: to --lr-min at --epochs, warmup blended in (PySlowFast); "
        "cosine_after_warmup: "
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
    """VideoMAE masked-autoencoder pretraining (pretrain.py; `python train.py pretrain ...` sets
    it)."""
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
    # V-JEPA 2 (jepa.py); defaults: configs/train/vitl16/pretrain-256px-16f.yaml
    p.add_argument(
        "--objective",
        default="videomae",
        choices=["videomae", "vjepa"],
        help="videomae: pixels of hidden tubes (vit_*); vjepa: EMA-encoder features (vjepa2_*)",
    )
    p.add_argument("--pred-depth", dest="pred_depth", default=12, type=positive, help="predictor")
    p.add_argument("--pred-width", dest="pred_width", default=384, type=positive, help="predictor")
    p.add_argument("--pred-heads", dest="pred_heads", default=12, type=positive, help="predictor")
    p.add_argument("--loss-exp", dest="loss_exp", default=1.0, type=float, help="|z - h| ** p / p")
    p.add_argument(
        "--ema-momentum",
        dest="ema_momentum",
        default=[0.99925, 0.99925],
        type=probability,
        nargs=2,
        help="target encoder momentum: first and last of the schedule (linear, per step)",
    )
    p.add_argument("--wd-end", dest="wd_end", type=nonnegative, help="cosine wd to this (--wd)")
    p.add_argument(
        "--schedule-scale",
        dest="schedule_scale",
        default=1.25,
        type=number(float, 1),
        help="lr / wd / momentum schedules span this x the run's steps (the configs' ipe_scale)",
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
    p.add_argument("--probe-weights", dest="probe_weights", help="an official V-JEPA 2 probe .pt")
    p.add_argument(
        "--vjepa-key",
        dest="vjepa_key",
        choices=vjepa_zoo.ENCODER_KEYS,
        help="which encoder of an official V-JEPA .pt (default target_encoder, the probe evals'; "
        "ema_encoder for the distilled 2.1 ViT-B / ViT-L)",
    )
    p.add_argument(
        "--inflate", default="mean", choices=["mean", "center"], help="2D kernels over time"
    )
    p.add_argument(
        "--resume", default="", help="checkpoint PATH, or auto (the run folder's, if any)"
    )
    p.add_argument(
        "-e",
        "--evaluate",
        action="store_true",
        help="only evaluate --resume (or --pretrained's classifier as it is) on val_list",
    )
    add_trust_arg(p)
    p.add_argument("--start-epoch", dest="start_epoch", default=0, type=natural, help="first epoch")
    p.add_argument(
        "--use-ema",
        dest="use_ema",
        action="store_true",
        help="--evaluate / predict: the EMA weights; training: the EMA top-1 picks model_best",
    )


def add_trust_arg(p):
    """--trust-checkpoint (train.py, predict, features, export): checkpoint.TRUST."""
    p.add_argument(
        "--trust-checkpoint",
        dest="trust_checkpoint",
        action="store_true",
        help="read checkpoint files with full pickle, which runs any code in them (default: "
        "tensors, numbers, text and numpy arrays only): only for files you trust",
    )


def add_probe_args(p):
    """--probe: the backbone frozen, a grid of probes trained on its tokens (probe.py)."""
    p.add_argument(
        "--probe", choices=list(probe.KINDS), help="freeze the backbone, train probes on its tokens"
    )
    p.add_argument(
        "--probe-lrs",
        dest="probe_lrs",
        nargs="+",
        type=above_zero,
        default=[1e-3],
        help="grid: lrs",
    )
    p.add_argument(
        "--probe-wds",
        dest="probe_wds",
        nargs="+",
        type=nonnegative,
        default=[0.01],
        help="grid: wds",
    )
    p.add_argument(
        "--probe-blocks", dest="probe_blocks", default=4, type=positive, help="attentive"
    )
    p.add_argument("--probe-heads", dest="probe_heads", default=16, type=positive, help="attentive")


def add_selection_args(p):
    """Which validation number picks model_best.pth."""
    p.add_argument(
        "--best-metric",
        dest="best_metric",
        default="top1",
        type=best_metric,
        help=f"the validation number that picks model_best.pth: {', '.join(checkpoint.VAL_METRICS)}"
        " (logged as val_NAME; --use-ema: the EMA's), NAME:max or NAME:min says which way is "
        "better (default: max; loss: min)",
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
        "train_list",
        nargs="?",
        help="list file: lines of '<frame_dir> <num_frames> <label>', '<video> <label>' or "
        "'<video> <num_frames> <label>' (pretraining: '<frame_dir> <num_frames>' too); a Kinetics "
        ".csv; a Something-Something v2 .json (--labels)",
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
        "--jpeg-draft",
        action="store_true",
        help="JPEGs at 1/2-1/8 scale in libjpeg where short side >= --new_size: fast, inexact",
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
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="FSDP2: parameters, gradients and optimizer state sharded over the processes "
        "(launched as --ddp; one plain process works too); sharded checkpoints (fsdp.py)",
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
        "--grad-ckpt", dest="grad_ckpt", action="store_true", help="ViTs: recompute blocks (memory)"
    )
    p.add_argument(
        "--augment_device",
        default="loader",
        choices=["loader", "batch"],
        help="clip augmentation: in the loader, or drawn there and applied to the batch on "
        "--device",
    )


def add_run_args(p):
    """This process's batch, loaders, logs and run folder."""
    # Per process: -b (DataParallel splits it over the GPUs) and -j. Global: the SGD step, b x
    # processes x iter_size clips, and the --lr it takes (never rescaled when the batch changes).
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
        "--save_scores",
        action="store_true",
        help="also write scores_*.npz: per video its softmax probabilities averaged over the views",
    )
    p.add_argument(
        "--output_root",
        default=OUTPUT_ROOT,
        help="run folders go here (--evaluate: the checkpoint's folder unless this or --run_name)",
    )
    p.add_argument("--run_name", help="run folder (default: from dataset, arch, clip, dropout)")


@dataclass(frozen=True)
class FlagGroup:
    """An argparse group: flags by what they are about, which says how the code treats them. The
    lists other code needs are derived from these (flag_sets): a flag added to a group needs no
    other edit."""

    title: str
    about: str
    add: object  # add_*_args(argparse group)
    # about this process: --evaluate / predict never take it from a checkpoint
    process: bool = False
    # may change what an evaluation scores: its value names the evaluation files
    scores: bool = True
    # a resumed run keeps it: "always", "training" (--evaluate may change it), or "no" (a resume may
    # change it: the schedule follows new values, this process's own flags). The safe default: a new
    # group's flags are kept, and a resume with another value is refused in one line.
    kept: str = "training"


FLAG_GROUPS = (
    FlagGroup(
        "model", "what the network is; a resumed run keeps it", add_model_args, kept="always"
    ),
    FlagGroup("clips", "what the network sees; a resumed training run keeps it", add_clip_args),
    # a resume may change them: the lists move with the data (--data_root)
    FlagGroup("input", "the dataset, its frames and the normalisation", add_input_args, kept="no"),
    # a resume may change them: the schedule follows the new values (--epochs, --lr, --wd)
    FlagGroup(
        "optimisation",
        "the recipe: optimizer and schedule",
        add_optim_args,
        scores=False,
        kept="no",
    ),
    FlagGroup(
        "optimizer state",
        "the optimizer's state and parameter groups; a resumed training run keeps them",
        add_optimizer_state_args,
        scores=False,
    ),
    # a resume may change them (the recipe from then on)
    FlagGroup(
        "regularisation",
        "the recipe: dropout, drop path, EMA",
        add_regular_args,
        scores=False,
        kept="no",
    ),
    FlagGroup(
        "augmentation",
        "the recipe: mixing and clip augmentation",
        add_augment_args,
        scores=False,
        kept="no",
    ),
    # this process's own: a resume may change them
    FlagGroup(
        "weights",
        "this process: where the weights come from",
        add_weights_args,
        process=True,
        kept="no",
    ),
    FlagGroup(
        "probing",
        "--probe: the probes and their grid; a resumed run keeps them",
        add_probe_args,
        kept="always",
    ),
    FlagGroup(
        "model selection",
        "which validation picks model_best.pth; a resumed training run keeps it",
        add_selection_args,
        scores=False,
    ),
    FlagGroup(
        "evaluation", "this process: --evaluate's views", add_eval_args, process=True, kept="no"
    ),
    FlagGroup(
        "devices and data",
        "this process: where the data is, how it is read, what computes",
        add_device_args,
        process=True,
        kept="no",
    ),
    FlagGroup(
        "pretraining",
        "--pretrain: VideoMAE (pretrain.py) or V-JEPA 2 (jepa.py); a resumed run keeps them",
        add_pretrain_args,
    ),
    FlagGroup(
        "run",
        "this process: batch, loaders, logs, run folder",
        add_run_args,
        process=True,
        scores=False,
        kept="no",
    ),
)


@dataclass(frozen=True)
class FlagSets:
    """The flag lists derived from FLAG_GROUPS."""

    process: frozenset  # never taken from a checkpoint (checkpoint_args)
    scores: tuple  # name --evaluate's files (rundir.evaluation_files)
    kept: tuple  # a resumed run keeps them (checkpoint.check_resume_flags)
    kept_training: tuple  # a resumed training run keeps them
    # the recipe's groups that let a resume change a flag (kept="no", not this process's own): a
    # resume that changes one says so in one line, also in events.log (checkpoint.changed_flags)
    recipe: tuple
    names: dict  # dest -> its flag as typed (t_length -> --t_length, layer_decay -> --layer-decay)


def flag_sets(parser=None):
    """FlagSets of `parser` (get_args_parser()): each flag counts as its group says."""
    parser = parser or get_args_parser()
    dests = {title: [a.dest for a in g.actions] for title, g in parser.groups.items()}

    def flags(pick):
        return tuple(d for g in FLAG_GROUPS if pick(g) for d in dests.get(g.title, ()))

    return FlagSets(
        frozenset(flags(lambda g: g.process)),
        flags(lambda g: g.scores),
        flags(lambda g: g.kept == "always"),
        flags(lambda g: g.kept != "no"),
        flags(lambda g: g.kept == "no" and not g.process),
        {
            a.dest: next((o for o in a.option_strings if o.startswith("--")), a.dest)
            for a in parser.actions
        },
    )


def parse_args(argv=None):
    """Command line (recipes included) -> args. A flag not given takes, first found: the demo
    recipe's value (dataset demo), the checkpoint's own (--evaluate: its model and clip flags), the
    default."""
    # `train.py pretrain` hands over with --pretrain: its own usage and errors
    pretrain = "--pretrain" in (sys.argv[1:] if argv is None else argv)
    first = (get_args_parser(pretrain=True) if pretrain else get_args_parser()).parse_args(argv)
    checkpoint.TRUST["on"] = first.trust_checkpoint
    parser = recipe_parser(first.dataset, pretrain)
    # None: not given, resolved by check_args (check_device, check_run_folder), which must know
    # that.
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


def recipe_parser(dataset, pretrain=False):
    """The parser whose defaults a run starts from: demo's are recipes/demo.txt's."""
    parser = get_args_parser(pretrain=True) if pretrain else get_args_parser()
    if dataset == "demo":
        parser.set_defaults(**vars(parser.parse_args(["demo", "@" + DEMO_RECIPE])))
    parser.set_defaults(**DATASET_DEFAULTS.get(dataset, {}))
    return parser


def refuse_zoo_checkpoint(ckpt, path):
    """--evaluate --resume of a model zoo's file (mmaction2, PySlowFast, pytorchvideo): say what it
    is (zoo.py recognises it) and that --pretrained reads it, not a line of every weight that did
    not load. A file train.py wrote is its own, whatever else it holds (V-JEPA pretraining's also
    has the official release's keys)."""
    if isinstance(ckpt.get("args"), dict) and "model" in ckpt:
        return
    layout = zoo.zoo_layout(ckpt)
    if layout:
        fail(
            f"--resume {path} is a {layout} checkpoint, not one train.py wrote: start from its "
            "weights "
            f"with --pretrained {path} (zoo.py converts them), then --evaluate the run's "
            "model_best.pth"
        )


def checkpoint_args(ckpt, argv, parser=None):
    """The args that rebuild a checkpoint's model and clips: the flags in `argv`, else the
    checkpoint's own (all but flag_sets().process), else the defaults. --evaluate and predict both
    come through here and then make_dataset / make_model, so neither can drift from what the
    checkpoint was trained with."""
    parser = parser or get_args_parser()
    saved = ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {}
    known, process = {action.dest for action in parser.actions}, flag_sets(parser).process
    parser.set_defaults(**{k: v for k, v in saved.items() if k in known and k not in process})
    return parser.parse_args(argv)


def check_args(args):
    """What can be told from the flags alone, before anything is read or built."""
    if args.arch not in models.ARCHS:
        fail(f"--arch {args.arch}: unknown; choose one of: {', '.join(models.ARCHS)}")
    check_mode(args)
    check_device(args)
    if args.evaluate and not (args.resume or args.pretrained_model or args.pretrained):
        fail("--evaluate needs --resume CHECKPOINT, or --pretrained FILE with a classifier")
    check_run_folder(args)
    if args.dataset == "demo":
        args.train_list = args.train_list or os.path.join(demo_folder(args), "train.txt")
        args.val_list = args.val_list or os.path.join(demo_folder(args), "val.txt")
    if not args.train_list or not args.val_list:
        fail("give train_list and val_list (only 'demo' makes its own)")
    if args.amp == "fp16" and not args.device.startswith("cuda"):
        fail("--amp fp16 needs a CUDA device; use --amp bf16 on CPU")
    # SyncBatchNorm: CUDA-only, DDP
    if args.sync_bn and not (args.ddp and args.device.startswith("cuda")):
        fail("--sync-bn needs --ddp on CUDA (one process has no other BN statistics to sync)")
    if args.compile and args.device == "cuda" and torch.cuda.device_count() > 1 and not args.ddp:
        fail(
            "--compile with several GPUs needs --ddp (DataParallel re-replicates the module every "
            "step)"
        )
    if args.decode_device == "cuda" and not args.device.startswith("cuda"):
        fail("--decode_device cuda needs --device cuda")
    if any(s <= 0 for s in args.std or [1]):
        fail(f"--std {args.std}: must be > 0")
    check_recipe_args(args)
    check_fsdp(args)
    check_label_args(args)
    if probe.check(args, models.VITS + models.VJEPAS, models.VJEPAS):
        fail(probe.check(args, models.VITS + models.VJEPAS, models.VJEPAS))
    args.freeze_bn = args.freeze_bn or args.fc_only


def refuse_for_pretraining(args, objective, more=None):
    """The flags pretraining cannot take (it starts from random weights and reads no labels), each
    refused in one line naming `objective` (--pretrain, --objective vjepa); `more`: an objective's
    own {flag: given}."""
    refused = {
        "--test_clips / --test_crops": args.test_clips * args.test_crops > 1,
        "--pretrained": args.pretrained or args.pretrained_model,
        "--decode_device cuda": args.decode_device == "cuda",
        "--mixup-alpha / --cutmix-alpha": args.mixup_alpha or args.cutmix_alpha,
        "--model-ema": args.model_ema,
        **(more or {}),
    }
    for flag, given in refused.items():
        if given:
            why = "pretraining starts from random weights, no labels"
            fail(f"{flag}: not with {objective} ({why})")


def check_fsdp(args):
    """--fsdp with the flags it cannot serve (yet), each refused in one line."""
    if not args.fsdp:
        return
    refused = (
        ("--model-ema", args.model_ema, "the EMA would be a whole, unsharded copy on every rank"),
        ("--amp fp16", args.amp == "fp16", "use --amp bf16 (FSDP2's mixed-precision policy)"),
        ("--compile", args.compile, "torch.compile of the sharded model is not wired here"),
        ("--sync-bn", args.sync_bn, "SyncBatchNorm is converted for DDP only"),
    )
    for flag, given, why in refused:
        if given:
            fail(f"{flag} with --fsdp: not supported ({why}); drop one of them")


def check_device(args):
    """--device as given; else cuda if a GPU is visible, else cpu -- unless the command asks for
    GPUs (CUDA_VISIBLE_DEVICES naming one, --ddp, --amp, --decode_device cuda): then no GPU is an
    error before any work, not hours of training on the CPU (--device cpu runs there on purpose)."""
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
        ("--fsdp", args.device is None and args.fsdp),
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
            f"{', '.join(asked)} asks for a GPU, but no CUDA GPU is visible ({where}{build}); to "
            "run "
            "on the CPU on purpose, give --device cpu"
        )
    args.device = args.device or "cpu"


def check_run_folder(args):
    """--output_root / --run_name, else ./output and a name from the flags. --evaluate of a
    checkpoint file with neither given: the checkpoint's own folder, so an evaluation's files sit
    beside what it scored."""
    given = args.output_root is not None or args.run_name is not None
    if args.evaluate and args.resume and args.resume != "auto" and not given:
        folder = os.path.dirname(os.path.abspath(args.resume))
        args.output_root, args.run_name = os.path.dirname(folder), os.path.basename(folder)
    args.output_root = args.output_root or OUTPUT_ROOT
    weights = args.pretrained_model or args.pretrained
    if args.evaluate and not args.resume and weights and args.run_name is None:
        # --evaluate --pretrained FILE: a folder of its own, named by the file; the flags' name
        # alone is a training run's, whose folder would take another run's evaluation files
        stem = os.path.splitext(os.path.basename(os.path.normpath(weights)))[0]
        args.run_name = f"{run_dir_name(args)}_evaluate_{stem}"
    args.run_name = args.run_name or run_dir_name(args)


def demo_folder(args):
    """Where `python train.py demo` writes its synthetic data: a folder of its own, never the
    user's."""
    return os.path.join(args.output_root, "demo_data")


def default_t_length(args):
    """--t_length, else its default: 16 frames per clip in 3D, 1 per snippet in TSN / 2D."""
    return args.t_length or (16 if args.mode == "3D" else 1)


def check_mode(args):
    """--mode, --num_segments, --shift, --t_length together."""
    args.t_length = default_t_length(args)
    if args.mode == "3D" and (args.num_segments > 1 or args.shift):
        fail(
            f"--num_segments {args.num_segments} --shift {args.shift}: segments are for --mode "
            "TSN or 2D"
        )
    if models.mode_error(args.arch, args.mode):
        fail(models.mode_error(args.arch, args.mode))
    if args.arch in models.VITS and vit.geometry_error(args.arch, args.t_length, args.crop_size):
        fail(vit.geometry_error(args.arch, args.t_length, args.crop_size))
    if args.arch in models.VJEPAS and vjepa.geometry_error(
        args.arch, args.t_length, args.crop_size
    ):
        fail(vjepa.geometry_error(args.arch, args.t_length, args.crop_size))
    if models.slowfast_net.frames_error(args.arch, args.t_length):  # SlowFast's alpha
        fail(models.slowfast_net.frames_error(args.arch, args.t_length))
    if args.slowfast_variant and args.arch not in models.slowfast_net.SLOWFAST:
        have = ", ".join(models.slowfast_net.SLOWFAST)
        fail(f"--slowfast-variant needs a SlowFast arch ({have}), not {args.arch}")
    if models.mvit_net.geometry_error(args.arch, args.t_length, args.crop_size):
        fail(models.mvit_net.geometry_error(args.arch, args.t_length, args.crop_size))
    if args.vjepa_key and args.arch not in models.VJEPAS:
        fail(
            f"--vjepa-key {args.vjepa_key} picks an encoder of an official V-JEPA 2 .pt; --arch "
            f"{args.arch} is no V-JEPA 2 encoder: leave the flag out"
        )
    # 2/shift of the channels move; 64: the fewest a block has
    if args.shift == 1 or args.shift > 64:
        fail(
            f"--shift {args.shift}: must be 0 (off) or 2..64 (TSM: 8, a quarter of the channels "
            "move)"
        )
    if args.shift and not models.ARCHS[args.arch].shift:
        fail(
            f"--shift {args.shift} needs a 2D ResNet arch ({', '.join(models.archs_with('shift'))})"
        )
    if args.shift and args.num_segments == 1:  # it would shift a quarter of the channels out: zeros
        fail(
            f"--shift {args.shift} with --num_segments 1: TSM shifts channels between segments; "
            "give "
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
            f"--layer-decay {args.layer_decay}: needs a value in (0, 1] and an arch with layers "
            "to number "
            f"({', '.join(models.archs_with('layers'))}), not --arch {args.arch}"
        )
    if args.drop_path is not None and not entry.drop_path:
        fail(
            f"--drop-path {args.drop_path}: --arch {args.arch} has no stochastic depth "
            f"(these have: {', '.join(models.archs_with('drop_path'))})"
        )
    if args.grad_ckpt and args.arch not in models.VITS + models.VJEPAS:
        vits = ", ".join(models.VITS + models.VJEPAS)
        fail(f"--grad-ckpt: checkpoints the blocks of the ViTs ({vits}) only")
    if args.decode_device == "cuda" and (
        args.auto_augment or args.random_erase or args.color_jitter or args.ra_reps > 1
    ):
        fail(
            "--auto-augment / --random-erase / --color-jitter / --ra-reps (--num_sample) work on "
            "the "
            "loader's clips: use --decode_device cpu"
        )
    check_views(args)
    if args.augment_device == "batch" and not (
        args.auto_augment or args.random_erase or args.color_jitter
    ):
        fail(
            "--augment_device batch moves --auto-augment / --random-erase / --color-jitter, "
            "and none is on"
        )


def memory_bytes():
    """This machine's memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # Windows; an OS without these names
        return None


def check_views(args):
    """--ra-reps / --num_sample N: each of the step's -b videos gives N clips, which the loader
    holds and the model reads as float32 at once. Their size alone (before any activation) must fit
    in this machine's memory: past it the run would only die out of memory, after the model, the
    lists and the workers were built."""
    total, t = memory_bytes(), default_t_length(args)
    clips = args.batch_size * args.ra_reps * 3 * t * args.crop_size**2 * 4
    if total and clips > total:
        fail(
            f"--ra-reps / --num_sample {args.ra_reps}: one step's views (-b {args.batch_size} x "
            f"{args.ra_reps} clips of 3 x {t} x {args.crop_size} x {args.crop_size} "
            f"float32) would take {clips / 2**30:.1f} GiB, more than this machine's "
            f"{total / 2**30:.1f} GiB of memory: lower it (VideoMAEv2 uses 2) or -b"
        )


# Flags that act only with others: (flag, when it acts, what it needs). Given (other than its
# default) where it would do nothing, it is refused: a run that silently ignores a flag is not the
# run asked for. an arch without a dropout before its classifier (its entry's `dropout=False`:
# convnext)
ACTS_WITH = (
    (
        "--dro",
        lambda a: models.ARCHS[a.arch].dropout or a.dropout == 0,
        "an arch with a dropout before its classifier (model.Arch.dropout)",
    ),
    (
        "--lr-min",
        lambda a: a.lr_policy != "step" or a.objective == "vjepa",
        "a cosine --lr_policy (or --objective vjepa: its own schedule)",
    ),
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
    ("--mask-ratio", lambda a: a.pretrain, "train.py pretrain (fine-tuning masks nothing)"),
    ("--decoder-depth", lambda a: a.pretrain, "train.py pretrain (fine-tuning has no decoder)"),
    ("--raw-target", lambda a: a.pretrain, "train.py pretrain"),
    ("--vis-videos", lambda a: a.pretrain, "train.py pretrain"),
    ("--jpeg-draft", lambda a: a.decode_device == "cpu", "--decode_device cpu (nvJPEG: full size)"),
    ("--objective", lambda a: a.pretrain, "train.py pretrain"),
    ("--pred-depth", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--pred-width", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--pred-heads", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--loss-exp", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--ema-momentum", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--wd-end", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--schedule-scale", lambda a: a.objective == "vjepa", "--objective vjepa"),
    ("--mask-ratio", lambda a: a.objective == "videomae", "--objective videomae (tube masks)"),
    ("--decoder-depth", lambda a: a.objective == "videomae", "--objective videomae"),
    ("--raw-target", lambda a: a.objective == "videomae", "--objective videomae"),
    ("--probe-lrs", lambda a: a.probe, "--probe attentive or --probe linear (the probes' grid)"),
    ("--probe-wds", lambda a: a.probe, "--probe attentive or --probe linear (the probes' grid)"),
    (
        "--train_sampling",
        lambda a: a.num_segments == 1,
        "--num_segments 1 (TSN segments have their own sampling)",
    ),
)


def check_flags_act(args):
    """ACTS_WITH, for training (--evaluate takes a checkpoint's training flags, which acted or not
    then)."""
    if args.evaluate:
        return
    parser = recipe_parser(args.dataset)
    actions = {s: a for a in parser.actions for s in a.option_strings}
    for flag, acts, needs in ACTS_WITH:
        dest = actions[flag].dest
        value = getattr(args, dest)
        if value != parser.get_default(dest) and not acts(args):
            given = " ".join([flag, *map(str, value if isinstance(value, list) else [value])])
            given = flag if value is True else given
            fail(f"{given} does nothing without {needs}: drop it, or add what it needs")


def check_label_args(args):
    """--multi-label / --heads: what they leave undefined is refused. torchvision's MixUp / CutMix
    mix one integer label a clip; the probes' grid scores one softmax."""
    kind = "--multi-label" if args.multi_label else "--heads" if args.heads else None
    names = checkpoint.val_names(args)
    if kind and args.best_metric == "top1":  # the default: this kind's first number
        args.best_metric = names[0]
    if checkpoint.parse_metric(args.best_metric)[0] not in names:
        fail(f"--best-metric {args.best_metric}: this run logs {', '.join(names)}")
    if kind is None:
        return
    if args.multi_label and args.heads:
        fail("--multi-label and --heads: one or the other (a head per label kind, or one sigmoid)")
    if args.mixup_alpha or args.cutmix_alpha:
        fail(f"--mixup-alpha / --cutmix-alpha are not defined for {kind}: drop them")
    if args.multi_label and args.label_smoothing:
        fail("--label-smoothing is not defined for --multi-label (BCE targets): drop it")
    if args.probe:
        fail(f"--probe scores one softmax: not with {kind}")
    if args.heads and args.num_classes and args.num_classes != sum(args.heads):
        fail(f"--num_classes {args.num_classes}, --heads {args.heads} sum to {sum(args.heads)}")


def run_dir_name(args):
    # The original project's experiment id, so old and new runs sort side by side; segments when >
    # 1.
    t_length = default_t_length(args)
    segments = (f"_segments{args.num_segments}" if args.num_segments > 1 else "") + (
        f"_shift{args.shift}" if args.shift else ""
    )
    if getattr(args, "pretrain", False):  # VideoMAE pretraining: no head, so no dropout
        mask = "vjepa" if args.objective == "vjepa" else f"mask{args.mask_ratio}"
        return f"{args.dataset}_{args.arch}_pretrain_{mask}_length{t_length}_stride{args.t_stride}"
    return (
        f"{args.dataset}_{args.arch}_{args.mode}{segments}_length{t_length}_stride{args.t_stride}"
        f"_dropout{args.dropout}"
    )
