"""Checkpoints: what checkpoint.pth holds (weights, optimizer, GradScaler, Progress, args, every
rank's RNG state), how it is written (atomically: a temp file, then a rename), read (one-line
errors, also for the zoos' files) and resumed (the flags a run cannot change checked, the RNG states
restored), and how model_best.pth follows it. The rest of the run folder, and the signals that
trigger a save, are rundir.py.

A save is collective (it gathers every rank's RNG state): every rank calls it; rank 0 writes. Under
--fsdp every rank also writes its shards of the model and optimizer state (fsdp.save_shards) and
checkpoint.pth names their folder; the model in it is gathered whole (fsdp.py's docstring).
`rt`, `net`, `d` are train.py's Runtime, Net and Data records: this module only reads their fields.
"""

import argparse
import codecs
import collections
import contextlib
import os
import pickle
import random
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

import data
import fsdp
import model as models
from errors import disk_errors, fail

# never complete: the saves write them, then rename
TEMP_FILES = ("checkpoint.pth.tmp", "model_best.tmp")


# --best-metric NAME[:max|min]: the validation numbers that may pick model_best.pth (each logged as
# val_NAME; with --use-ema, the EMA's val_NAME_ema), and the way each is better unless it says
# (mmaction2's save_best rule "greater" / "less", timm's --eval-metric and its decreasing loss).
VAL_METRICS = {"top1": "max", "top5": "max", "loss": "min", "mean_class_acc": "max"}
# --multi-label: mAP (and loss); --heads: each head's top-1 / top-5 (two heads: EPIC-100's verb,
# noun and their action), and loss
HEAD_METRIC = re.compile(r"(action|verb|noun|head\d+)_acc[15]")


def metric_way(name):
    """Which way a validation number is better ("max" / "min"); None for a name never logged."""
    if name in VAL_METRICS:
        return VAL_METRICS[name]
    return "max" if name == "mAP" or HEAD_METRIC.fullmatch(name) else None


def val_names(args):
    """The numbers a validation of this run logs (val_NAME), the first the default --best-metric:
    top1, top5, loss, mean_class_acc; --multi-label mAP, loss; --heads each head's (and two heads'
    action) acc1 / acc5, loss."""
    if getattr(args, "multi_label", False):
        return ("mAP", "loss")
    heads = getattr(args, "heads", None)
    if heads:
        kinds = (
            ("action", "verb", "noun")
            if len(heads) == 2
            else [f"head{h}" for h in range(len(heads))]
        )
        return tuple(f"{h}_acc{k}" for h in kinds for k in (1, 5)) + ("loss",)
    return tuple(VAL_METRICS)


def parse_metric(text):
    """--best-metric's value -> (name, "max" | "min"); a "val_" prefix is optional. ValueError
    naming the valid names."""
    name, _, way = str(text).partition(":")
    name = name.removeprefix("val_")
    if metric_way(name) is None or way not in ("", "max", "min"):
        raise ValueError(
            f"unknown metric {text!r}: give NAME or NAME:max / NAME:min, NAME one of "
            f"{', '.join(VAL_METRICS)} ; --multi-label: mAP; --heads: verb_acc1, action_acc5, ... "
            "(as logged: val_NAME)"
        )
    return name, way or metric_way(name)


def beats(metric, score, best):
    """Whether `score` is a new best of --best-metric `metric` over `best` (None: no best yet)."""
    way = parse_metric(metric)[1]
    return best is None or (score > best if way == "max" else score < best)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    epoch: int = 0  # the epoch to continue with
    # batches of it already trained (a multiple of iter_size); saved as optimizer steps
    iter: int = 0
    # model_best.pth's --best-metric value and epoch (None, -1: no validation yet)
    best_score: float = None
    best_epoch: int = -1
    # videos ("<list>:<line>") replaced in training so far
    bad_seen: set = field(default_factory=set)
    last_val: dict = None  # the latest validation's results (not saved)


def atomic_save(obj, path):
    """To a temp file, flushed to disk, then renamed: a crash mid-save never destroys the last good
    file."""
    tmp = f"{path}.tmp"
    with disk_errors(path, tmp):
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


# ---- checkpoints ---------------------------------------------------------------------------------
def save(args, rt, net, progress, d, best=False):
    """checkpoint.pth: a plain dict, weights without 'module.'; `best`: also copied to
    model_best.pth."""
    # Each rank has its own dropout stream: one state per rank. CUDA: every GPU's state
    # (DataParallel replicas and --device cuda:1 draw from their own generators, not cuda:0's).
    rng = rt.gather(
        {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }
    )
    # --fsdp: the model and optimizer state as DCP shards (every rank writes its own), and the whole
    # model gathered to rank 0 for checkpoint.pth (fsdp.py); both collectives
    shards = fsdp.save_shards(rt, net.bare, net.optimizer) if args.fsdp else None
    weights = fsdp.full_model_state(net.bare) if args.fsdp else net.bare.state_dict()
    if rt.rank != 0:
        return
    path = os.path.join(rt.run_dir, "checkpoint.pth")
    atomic_save(
        {
            "model": weights,
            "optimizer": None if shards else net.optimizer.state_dict(),
            "shards": shards,  # --fsdp: the folder beside it holding the model and optimizer shards
            "scaler": net.scaler.state_dict(),
            "epoch": progress.epoch,
            "iter": progress.iter,
            "step": progress.iter
            // args.iter_size,  # the position a resume uses (load_training_state)
            "best_score": progress.best_score,
            "best_epoch": progress.best_epoch,
            "bad_seen": sorted(progress.bad_seen),
            "class_names": d.class_names,
            "rng": rng,
            # --model-ema: the averaged model's state_dict (the same keys as "model") and its
            # updates
            "model_ema": net.ema.module.state_dict() if net.ema else None,
            "model_ema_updates": int(net.ema.n_averaged) if net.ema else 0,
            # V-JEPA pretraining: also the official release's encoder / target_encoder /
            # predictor (the same tensors: stored once)
            **(net.bare.official_state(weights) if hasattr(net.bare, "official_state") else {}),
            # the ViTs' LayerNorm eps (vit.VideoViT.norm_eps): the weights' source's, kept with them
            "args": {
                **vars(args),
                "mean": rt.mean,
                "std": rt.std,
                "norm_eps": getattr(net.bare, "norm_eps", None),
            },
        },
        path,
    )
    if shards:  # checkpoint.pth names the new folder: the previous one can go
        fsdp.remove_old_shards(rt.run_dir, shards)
    if best:
        copy_best(path, rt.run_dir)


def copy_best(path, run_dir):
    """model_best.pth := a copy of `path`, to a temp file, then renamed: never half-written either.
    A kill before the rename leaves checkpoint.pth naming a best that model_best.pth lacks:
    check_best mends it."""
    best, tmp = os.path.join(run_dir, "model_best.pth"), os.path.join(run_dir, "model_best.tmp")
    with disk_errors(best, tmp):
        shutil.copyfile(path, tmp)
        os.replace(tmp, best)


def check_best(args, rt, progress, ckpt):
    """--resume (training): the best score recorded must have its weights in model_best.pth, or a
    later best would be compared with a score whose weights are gone. A kill between a best epoch's
    two renames leaves checkpoint.pth (that epoch's) newer than model_best.pth: copy it again. Any
    other mismatch (the file deleted, a checkpoint from another folder): forget the best score, in
    one line."""
    if progress.best_epoch < 0:
        return
    best = os.path.join(rt.run_dir, "model_best.pth")
    try:  # mmap: reads the small fields, not the weights
        held = read_torch(best, mmap=True)
        held = (held.get("best_epoch"), saved_best(held))
    except Exception:  # missing, truncated, not ours: it holds no best
        held = None
    if held == (progress.best_epoch, progress.best_score):
        return
    said = f"best {args.best_metric} {progress.best_score:.3f}"
    # it is the best epoch's
    if ckpt.get("epoch") == progress.best_epoch + 1 and ckpt.get("iter", 0) == 0:
        if rt.rank == 0:
            copy_best(args.resume, rt.run_dir)
            print(
                f"{best} did not hold epoch {progress.best_epoch} ({said}): copied it from "
                f"{args.resume}"
            )
        return
    print(
        f"{best} does not hold epoch {progress.best_epoch} ({said}): that score is forgotten; "
        "the next validation sets the best"
    )
    progress.best_score, progress.best_epoch = None, -1


def saved_best(ckpt):
    """A checkpoint's best score: "best_score", or an older file's "best_acc1" (top-1, the only
    metric then); None where it names no best epoch."""
    if ckpt.get("best_epoch", -1) < 0:
        return None
    return ckpt.get("best_score", ckpt.get("best_acc1"))


def load(path, flag="--resume"):
    """The one reader of checkpoint files (ours for --resume / --evaluate / predict, the zoos' for
    --pretrained): PATH -> dict, on the CPU. Any problem is a ValueError of one line naming `flag`
    and the file. A checkpoint is data: read as read_torch / read_caffe2 say, a pickle asking for
    anything else (code: a function to call, a class to build) is refused unless TRUST["on"]
    (--trust-checkpoint)."""
    if os.path.isdir(path):
        held = sorted(f for f in os.listdir(path) if f.endswith((".pth", ".pt", ".pyth", ".pkl")))
        raise ValueError(
            f"{flag} {path} is a folder, not a checkpoint file: name the file "
            + (f"({', '.join(os.path.join(path, f) for f in held)})" if held else "(it holds none)")
        )
    if not os.path.isfile(path):
        raise ValueError(f"{flag} {path}: no such checkpoint file")
    errors = []
    for reader in (read_caffe2, read_torch) if path.endswith(".pkl") else (read_torch, read_caffe2):
        try:
            ckpt = reader(path)
            # a torch file of the legacy (not zip) format read as a plain pickle yields torch's
            # magic number first: PySlowFast's Charades / SSv2 files are such, named .pkl
            if reader is read_caffe2 and not isinstance(ckpt, dict):
                raise ValueError(f"a pickle of a {type(ckpt).__name__}, not of Caffe2 blobs")
            break
        except Unsafe as e:
            raise ValueError(
                f"{flag} {path}: refused: its pickle asks for {e.name}, which is code, not "
                "checkpoint "
                "data (tensors, numbers, text, numpy arrays); if you trust the file's source, add "
                "--trust-checkpoint"
            ) from None
        # torch raises many kinds (UnpicklingError, EOFError, RuntimeError, ...)
        except Exception as e:
            errors.append(e)
    else:
        torch_error = errors[1] if path.endswith(".pkl") else errors[0]
        raise ValueError(
            f"{flag} {path}: cannot read it as a torch checkpoint ({unreadable(torch_error)}) "
            "nor as a Caffe2 pickle"
        ) from None
    if not isinstance(ckpt, dict):
        raise ValueError(f"{flag} {path}: not a checkpoint dict but a {type(ckpt).__name__}")
    return ckpt


def unreadable(e):
    """Why a file could not be read, in this project's words: torch's weights_only refusal goes on
    to advise weights_only=False (running the pickle's code), which --trust-checkpoint is."""
    text = str(e)
    if "weights_only" in text or "Weights only load failed" in text:
        return f"{type(e).__name__}: neither a torch zip file nor a pickle of checkpoint data"
    return f"{type(e).__name__}: {(text.splitlines() or [''])[0]}"


# --trust-checkpoint (train.py, predict, features, export set it): read files as
# torch.load(weights_only= False) and pickle.load do, running whatever code they name -- only for
# files you trust.
TRUST = {"on": False, "warned": set()}


def warn_trusted(path):
    """--trust-checkpoint: one line on stderr naming the file whose pickle may run code, once per
    file (what users of torch.load(weights_only=False) expect to be told)."""
    if path not in TRUST["warned"]:
        TRUST["warned"].add(path)
        print(
            f"warning: --trust-checkpoint: reading {path} with full pickle: any code it names runs",
            file=sys.stderr,
        )


class Unsafe(Exception):
    """A checkpoint's pickle asked for a global outside the allowlists: `name`, "module.name"."""

    def __init__(self, name):
        super().__init__(name)
        self.name = name


_MULTIARRAY = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray
# What checkpoints hold beyond the tensors and plain containers torch.load(weights_only=True)
# builds: numpy arrays, scalars and dtypes (numpy's RNG state in ours; PySlowFast's and mmengine's
# meta), under numpy 2's module names and numpy 1's (numpy.core), and argparse.Namespace args (older
# trainers' files).
NUMPY_GLOBALS = {
    "numpy.core.multiarray._reconstruct": _MULTIARRAY._reconstruct,
    "numpy._core.multiarray._reconstruct": _MULTIARRAY._reconstruct,
    "numpy.core.multiarray.scalar": _MULTIARRAY.scalar,
    "numpy._core.multiarray.scalar": _MULTIARRAY.scalar,
    "numpy.ndarray": np.ndarray,
    "numpy.dtype": np.dtype,
    **{f"numpy.dtypes.{n}": getattr(np.dtypes, n) for n in np.dtypes.__all__},
}


class Record:
    """A zoo's bookkeeping object, read as its fields only (no code of its own runs): mmengine's
    HistoryBuffer, the training logs a mmaction2 run's checkpoint keeps under 'message_hub';
    Lightning's hyperparameters and callback classes (LIGHTNING_RECORDS)."""


# Lightning's checkpoints (pytorch_lightning 1.x Trainer.save_checkpoint: the EPIC-Kitchens team's
# C1 TSM .ckpt) keep beside "state_dict" the hyperparameters as an omegaconf DictConfig (its nodes,
# their metadata, typing.Any annotations), its type ("hparams_type") and the callbacks' classes as
# the keys of "callbacks": Records too. The globals a pickled omegaconf 2.0 DictConfig names, and
# the builtin containers its metadata holds (dict, list, int, collections.defaultdict).
LIGHTNING_RECORDS = (
    "omegaconf.dictconfig.DictConfig",
    "omegaconf.listconfig.ListConfig",
    *(f"omegaconf.base.{n}" for n in ("ContainerMetadata", "Metadata")),
    *(f"omegaconf.nodes.{n}Node" for n in ("Any", "String", "Integer", "Float", "Boolean", "Enum")),
    "typing.Any",
    "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint",
    "pytorch_lightning.callbacks.early_stopping.EarlyStopping",
)
SAFE_GLOBALS = [(obj, name) for name, obj in NUMPY_GLOBALS.items()] + [
    argparse.Namespace,
    (Record, "mmengine.logging.history_buffer.HistoryBuffer"),
    *((Record, name) for name in LIGHTNING_RECORDS),
    dict,
    list,
    int,
    collections.defaultdict,
]


@contextlib.contextmanager
def mapped():
    """Within: torch files are memory-mapped (their tensors read only where touched), for a check of
    a file's layout and shapes before a run starts; a file torch cannot map is read whole."""
    MMAP["on"] = True
    try:
        yield
    finally:
        MMAP["on"] = False


MMAP = {"on": False}


def read_torch(path, **kw):
    """torch.load(weights_only=True) with SAFE_GLOBALS allowed; Unsafe names the global it
    refused."""
    if MMAP["on"] and not kw:
        try:
            return read_torch(path, mmap=True)
        except RuntimeError:  # a legacy (not zip) or plain-pickle file: read it whole
            pass
    if TRUST["on"]:
        warn_trusted(path)
        return torch.load(path, map_location="cpu", weights_only=False, **kw)
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS), warnings.catch_warnings():
            # a plain pickle (not torch's zip) of protocol > 2: torch warns, then reads it as well
            warnings.filterwarnings("ignore", "Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True, **kw)
    except pickle.UnpicklingError as e:
        # torch's text: "... Unsupported global: GLOBAL posix.system was not an allowed global ..."
        named = re.search(r"GLOBAL (\S+)", str(e))
        if named:
            raise Unsafe(named[1]) from None
        raise


class ArraysOnly(pickle.Unpickler):
    """PySlowFast's Caffe2 zoo: a Python 2 pickle of dicts of numpy blobs
    (slowfast/utils/checkpoint.py reads it with latin1). Builds numpy arrays and scalars only (and
    bytes: protocol 2 writes them as _codecs.encode); any other global is Unsafe."""

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full in NUMPY_GLOBALS:
            return NUMPY_GLOBALS[full]
        if full == "_codecs.encode":
            return codecs.encode
        raise Unsafe(full)


def read_caffe2(path):
    with open(path, "rb") as f:
        if TRUST["on"]:
            warn_trusted(path)
            return pickle.load(f, encoding="latin1")
        return ArraysOnly(f, encoding="latin1").load()


def load_weights(model, ckpt, path, args, ema=False):
    """A checkpoint's weights ('model', 'state_dict' or the dict itself; `ema`: 'model_ema') into
    `model`; ValueError: 1 line."""
    if ema and not isinstance(ckpt.get("model_ema"), dict):
        raise ValueError(f"--use-ema: {path} holds no EMA weights (trained without --model-ema)")
    weights = ckpt["model_ema"] if ema else ckpt.get("model", ckpt.get("state_dict", ckpt))
    if not isinstance(weights, dict) or not all(
        isinstance(v, torch.Tensor) for v in weights.values()
    ):
        raise ValueError(
            f"--resume {path}: no weights in it (no 'model', no 'state_dict', not a state dict)"
        )
    set_norm_eps(model, ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {})
    try:
        model.load_state_dict(models.strip_prefixes(weights))
    except RuntimeError as e:  # its first line only names the class; the second names the tensor
        lines = [line.strip() for line in str(e).splitlines()]
        raise ValueError(
            f"--resume {path}: its weights do not load into --arch {args.arch} with "
            f"{args.num_classes} classes ({lines[1] if len(lines) > 1 else lines[0]})"
        ) from None


def set_norm_eps(model, saved):
    """A ViT runs with its weights' source's LayerNorm eps, saved in the checkpoint's args."""
    if saved.get("norm_eps") and hasattr(model, "set_norm_eps"):
        model.set_norm_eps(saved["norm_eps"])


def check_sharded(args, ckpt):
    """--resume to continue training: a checkpoint written with --fsdp (its optimizer state in
    shards) needs --fsdp, and --fsdp needs one (its shards complete); ValueError: one line."""
    if args.evaluate:
        return
    if ckpt.get("shards") and not args.fsdp:
        raise ValueError(
            f"--resume {args.resume} was trained with --fsdp: its optimizer state is in shards "
            f"({ckpt['shards']}); resume with --fsdp (on any number of processes), or start from "
            f"its weights with --pretrained {args.resume}"
        )
    if args.fsdp and not ckpt.get("shards"):
        raise ValueError(
            f"--resume {args.resume} was trained without --fsdp: resume it without --fsdp, or "
            f"start from its weights with --pretrained {args.resume}"
        )
    if args.fsdp:
        fsdp.shards_folder(args.resume, ckpt)


def auto_checkpoint(run_dir):
    """--resume auto: the run folder's checkpoint.pth, or '' (a fresh run) when it has none."""
    path = os.path.join(run_dir, "checkpoint.pth")
    return path if os.path.exists(path) else ""


def check_resume_flags(args, path, saved, mid_epoch, flags):
    """Flags a run cannot change: flags.kept, and to continue training flags.kept_training
    (flags.flag_sets: the model, clip and optimizer-state groups). --epochs, --lr_steps, --warmup,
    --lr can: the schedule follows them."""
    if bool(saved.get("pretrain")) != bool(getattr(args, "pretrain", False)):
        if saved.get("pretrain"):
            fail(
                f"--resume {path} is a pretraining checkpoint (train.py pretrain): fine-tune from "
                "it "
                f"with --pretrained {path}, not --resume"
            )
        fail(f"--resume {path} is not a pretraining checkpoint: train.py pretrain cannot resume it")
    segments = saved.get("num_segments", 1)
    if args.evaluate and saved.get("shift") and segments != args.num_segments:
        # TSN averages any number of snippets; TSM's shift moves channels between neighbouring
        # segments, so its layers learned its own count (mmaction2 tests its TSMs at the training
        # count too).
        fail(
            f"--resume {path} is a TSM model (--shift {saved['shift']}) trained on {segments} "
            "segments: "
            f"it is evaluated on those, not --num_segments {args.num_segments} (leave the flag out)"
        )
    for key in flags.kept if args.evaluate else flags.kept_training:
        was, now, flag = saved.get(key), getattr(args, key), flags.names[key]
        if isinstance(now, bool) and bool(was) != now:
            fail(
                f"--resume {path} was trained {'with' if was else 'without'} {flag}: a run "
                f"cannot change it (start a new run from its weights with --pretrained {path})"
            )
        if not isinstance(now, bool) and key in saved and was != now:
            fail(
                f"--resume {path} was trained with {flag} {was}, not {now}: a run cannot change it"
            )
    if mid_epoch and "batch_size" in saved:
        was = saved["batch_size"] * saved.get("iter_size", 1) * saved.get("world_size", 1)
        now = args.batch_size * args.iter_size * args.world_size
        if was != now:
            fail(
                f"--resume {path} stopped mid-epoch with a global batch of {was} clips (b x "
                "iter_size x "
                f"processes), this run has {now}: resume with the same, or from an end-of-epoch "
                "checkpoint"
            )


# None given: the run keeps the checkpoint's value (`resume` restores the normalisation)
KEPT_WHEN_NONE = ("mean", "std")


def changed_flags(args, ckpt, flags):
    """What a training resume changes of the recipe (flags.recipe: the groups that let it), as
    "--flag was -> now", in the flags' order; [] for an evaluation or a fresh run."""
    saved = ckpt.get("args") if ckpt and isinstance(ckpt.get("args"), dict) else {}
    if args.evaluate:
        return []
    changes = []
    for key in flags.recipe:
        was, now = saved.get(key), getattr(args, key, None)
        if key not in saved or (now is None and key in KEPT_WHEN_NONE):
            continue
        # a list given on the command line, a tuple saved: the same values
        if isinstance(was, (list, tuple)) and isinstance(now, (list, tuple)):
            was, now = list(was), list(now)
        if was != now:
            show = [" ".join(map(str, v)) if isinstance(v, list) else str(v) for v in (was, now)]
            changes.append(f"{flags.names[key]} {show[0]} -> {show[1]}")
    return changes


def resume(args, rt, net, progress, flags):
    """--resume: the weights and, to continue training, the optimizer, GradScaler, Progress and this
    rank's RNG state; `flags`: flags.flag_sets(), what a run keeps. Returns the checkpoint, or None
    for a fresh run."""
    if args.resume == "auto":
        args.resume = auto_checkpoint(rt.run_dir)
        if args.evaluate and not args.resume:
            fail(f"--evaluate --resume auto: no checkpoint.pth in {rt.run_dir}")
    if not args.resume:
        progress.epoch = args.start_epoch
        return None
    sharded = args.fsdp and not args.evaluate  # the model and optimizer come from the shards
    try:
        # --fsdp: every rank reads the file; memory-mapped, its whole model is never copied
        with mapped() if sharded else contextlib.nullcontext():
            ckpt = load(args.resume)
        if not args.evaluate and "optimizer" not in ckpt:
            fail(
                f"--resume {args.resume}: weights only, not a train.py checkpoint; start from "
                "them with "
                "--pretrained PATH"
            )
        saved = ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {}
        check_resume_flags(args, args.resume, saved, ckpt.get("iter", 0) > 0, flags)
        check_sharded(args, ckpt)
        if sharded:
            set_norm_eps(net.bare, saved)
        else:
            load_weights(net.bare, ckpt, args.resume, args, ema=args.evaluate and args.use_ema)
    except ValueError as e:
        fail(str(e))
    rt.mean = tuple(args.mean or saved.get("mean") or data.MEAN)  # the run keeps its normalisation
    rt.std = tuple(args.std or saved.get("std") or data.STD)
    if not args.evaluate:
        load_training_state(args, rt, net, progress, ckpt, saved)
        check_best(args, rt, progress, ckpt)
    return ckpt


def load_training_state(args, rt, net, progress, ckpt, saved):
    """The optimizer, GradScaler, Progress and this rank's RNG state, with the flags of this run
    winning."""
    # The optimizer state holds wd and momentum too: keep this run's --wd / --momentum (lr is set
    # per step).
    hyper = [
        {k: g[k] for k in ("weight_decay", "momentum", "lr_scale") if k in g}
        for g in net.optimizer.param_groups
    ]
    if ckpt.get("shards"):
        fsdp.load_shards(fsdp.shards_folder(args.resume, ckpt), net.bare, net.optimizer)
    else:
        net.optimizer.load_state_dict(ckpt["optimizer"])
    for g, h in zip(net.optimizer.param_groups, hyper):
        g.update(h)
    # none saved: starts from the weights
    if getattr(net, "ema", None) is not None and ckpt.get("model_ema"):
        net.ema.module.load_state_dict(ckpt["model_ema"])
        net.ema.n_averaged.fill_(ckpt["model_ema_updates"])
    # empty: saved with --amp off; a run turning fp16 on starts from a fresh scale
    if ckpt["scaler"]:
        net.scaler.load_state_dict(ckpt["scaler"])
    # The position in optimizer steps, not batches: resuming with the same global batch split
    # otherwise (-b 2 --iter_size 2 -> -b 4) continues with exactly the clips and lr steps not yet
    # done.
    steps = ckpt.get("step", ckpt.get("iter", 0) // saved.get("iter_size", 1))
    progress.epoch, progress.iter = ckpt["epoch"], steps * args.iter_size
    progress.best_score, progress.best_epoch = saved_best(ckpt), ckpt.get("best_epoch", -1)
    progress.bad_seen = set(ckpt.get("bad_seen", []))
    if len(ckpt.get("rng", [])) == rt.world_size:
        set_rng_state(ckpt["rng"][rt.rank])


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    cuda = s["cuda"]
    if isinstance(cuda, torch.Tensor):  # a checkpoint from before all GPUs' states were saved
        cuda = [cuda]
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    # other GPUs than when saved: the first ones' states
    elif cuda is not None and torch.cuda.is_available():
        for i, state in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state, i)
