"""What a run leaves on disk and how it is continued: the run folder, checkpoints (written atomically,
read with one-line errors, resumed with the flags checked), the signals that stop a run at a step
boundary (and Slurm's requeue), and the unreadable videos that training replaced.

A run folder (--output_root / --run_name) holds:
    args.txt        the resolved flags, as a recipe: `python train.py @RUN/args.txt --resume auto` continues
    checkpoint.pth  the latest state: weights, optimizer, GradScaler, Progress, args, every rank's RNG state
    model_best.pth  a copy of checkpoint.pth from the epoch with the best val top-1
    log.jsonl       one JSON line per epoch (curves.png is drawn from it; TensorBoard files if asked)
    bad_videos.txt  the videos training replaced, one line each
    events.log      each interruption (signal, epoch, iteration) and each resume, with the time
Rank 0 writes them all. A save is collective (it gathers every rank's RNG state): every rank calls it.
`rt`, `net`, `d` are train.py's Runtime, Net and Data records: this module only reads their fields.
"""
import contextlib
import hashlib
import json
import os
import pickle
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch

import data
import model as models
import report

RUN_FILES = ("checkpoint.pth", "model_best.pth", "log.jsonl")  # a folder holding any of these holds a run
TEMP_FILES = ("checkpoint.pth.tmp", "model_best.tmp")  # never complete: the saves write them, then rename
STOP = {"signal": 0}  # set by the handler of STOP_SIGNALS; read at the end of each optimizer step
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def fail(msg, code=2):
    """A user error: one clear line, exit status 2, no traceback."""
    print(f"train.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def warn(msg):
    print(f"train.py: warning: {msg}", file=sys.stderr)  # every rank: stderr is never silenced


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""
    epoch: int = 0  # the epoch to continue with
    iter: int = 0  # batches of it already trained (a multiple of iter_size); saved as optimizer steps
    best_acc1: float = 0.0
    best_epoch: int = -1
    bad_seen: set = field(default_factory=set)  # videos ("<list>:<line>") replaced in training so far
    last_val: dict = None  # the latest validation's results (not saved)


# ---- the run folder --------------------------------------------------------------------------------
def prepare_run_dir(args, rt, parser):
    """Fail before any work if the run folder cannot be written or holds another run; drop stale temp
    files; write args.txt (not under --evaluate: it may evaluate in a training run's folder)."""
    if os.path.exists(rt.run_dir) and not os.path.isdir(rt.run_dir):
        fail(f"run folder {rt.run_dir} exists and is a file (--output_root / --run_name)")
    taken = [f for f in RUN_FILES if os.path.exists(os.path.join(rt.run_dir, f))]
    here = args.resume and os.path.realpath(os.path.dirname(args.resume)) == os.path.realpath(rt.run_dir)
    if taken and not (args.resume == "auto" or here) and not args.evaluate:
        fail(f"{rt.run_dir} already holds a run ({', '.join(taken)}): continue it with --resume auto, "
             "or start a separate experiment with --run_name NAME or --output_root DIR")
    if rt.rank != 0:
        return
    try:
        os.makedirs(rt.run_dir, exist_ok=True)
        probe = os.path.join(rt.run_dir, f".write_test{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        fail(f"cannot write to the run folder {rt.run_dir}: {e.strerror} (--output_root / --run_name)")
    if args.evaluate:
        return
    for name in TEMP_FILES:  # left by a process killed while saving
        if os.path.isfile(os.path.join(rt.run_dir, name)):
            os.remove(os.path.join(rt.run_dir, name))
    with disk_errors(os.path.join(rt.run_dir, "args.txt")):
        with open(os.path.join(rt.run_dir, "args.txt"), "w") as f:
            f.write(args_file(parser, args))


def args_file(parser, args):
    """The resolved flags as an @FILE that parses back to `args` (train.Parser reads it): the positionals,
    then one flag per line. Flags that are off or None are left out: they parse back to that."""
    words, lines = [], []
    for action in parser._actions:  # argparse keeps no public list of its arguments
        value = getattr(args, action.dest, None)
        if not action.option_strings:
            words += [] if value is None else [str(value)]
        elif value is not None and value is not False:
            flag = next(s for s in action.option_strings if s.startswith("--"))
            values = value if isinstance(value, (list, tuple)) else [] if value is True else [value]
            lines.append(shlex.join([flag, *map(str, values)]))
    return "\n".join([shlex.join(words), *lines]) + "\n"


def open_tensorboard(args, rt):
    """--tensorboard: rank 0 writes event files to RUN/tensorboard (append_log adds each epoch's scalars)."""
    if args.tensorboard and rt.rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            fail("--tensorboard needs the tensorboard package: pip install tensorboard")
        rt.tensorboard = SummaryWriter(os.path.join(rt.run_dir, "tensorboard"))


@contextlib.contextmanager
def disk_errors(path, tmp=None):
    """A full disk or an unwritable file while writing `path`: one line naming it and the free space, the
    temp file removed, the previous `path` left as it was (writes go to `tmp`, then a rename)."""
    # torch.save reports a failed write (a disk filling mid-save) as RuntimeError "... unexpected pos".
    try:
        yield
    except (OSError, RuntimeError) as e:
        with contextlib.suppress(OSError):
            os.remove(tmp) if tmp else None
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 2**20
        why = getattr(e, "strerror", None) or (str(e).splitlines() or [type(e).__name__])[0]
        fail(f"could not write {path}: {why} ({free:.0f} MiB free); the previous file is intact", code=1)


def atomic_save(obj, path):
    """To a temp file, flushed to disk, then renamed: a crash mid-save never destroys the last good file."""
    tmp = f"{path}.tmp"
    with disk_errors(path, tmp):
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def append_log(rt, log):
    """Rank 0: the epoch's line in log.jsonl, curves.png redrawn from it, and the TensorBoard scalars."""
    if rt.rank != 0:
        return
    path = os.path.join(rt.run_dir, "log.jsonl")
    with disk_errors(path):
        with open(path, "a") as f:
            f.write(json.dumps(log) + "\n")
        report.save_curves_png(path, os.path.join(rt.run_dir, "curves.png"))
    for key, value in log.items() if rt.tensorboard else ():
        if value is not None and key != "epoch":
            rt.tensorboard.add_scalar(key, value, log["epoch"])


# Flags that change what an evaluation scores (besides clips, crops and --test_sampling, named in full).
RESULT_FLAGS = ("arch", "num_classes", "val_list", "data_root", "image_tmpl", "t_length", "t_stride",
                "new_size", "crop_size", "amp", "channels_last", "decode_device", "use_ema")


def evaluation_files(args, rt):
    """--evaluate's files (report.evaluation_paths), named <clips>x<crops>_<test_sampling>_<hash of the
    checkpoint file, RESULT_FLAGS and the normalisation>: two protocols never overwrite each other.
    Rank 0 checks it can write them all BEFORE evaluating: a failure is one line at once, not after it."""
    settings = {k: getattr(args, k, None) for k in RESULT_FLAGS}
    settings.update(resume=os.path.realpath(args.resume), mean=list(rt.mean), std=list(rt.std))
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
    tag = f"{args.test_clips}x{args.test_crops}_{args.test_sampling}_{digest}"
    paths = report.evaluation_paths(rt.run_dir, tag, args.save_scores)
    for path in paths.values() if rt.rank == 0 else ():
        existed = os.path.exists(path)
        try:
            open(path, "ab").close()  # appends nothing: an existing file is left as it was
            os.remove(path) if not existed else None
        except OSError as e:
            fail(f"cannot write {path}: {e.strerror}; nothing evaluated (--output_root / --run_name)")
    return tag


# ---- checkpoints -----------------------------------------------------------------------------------
def save(args, rt, net, progress, d, best=False):
    """checkpoint.pth: a plain dict, weights without 'module.'; `best`: also copied to model_best.pth."""
    # Each rank has its own dropout stream: one state per rank. CUDA: every GPU's state (DataParallel
    # replicas and --device cuda:1 draw from their own generators, not cuda:0's).
    rng = rt.gather({"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                     "python": random.getstate(),
                     "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None})
    if rt.rank != 0:
        return
    path = os.path.join(rt.run_dir, "checkpoint.pth")
    atomic_save({"model": net.bare.state_dict(), "optimizer": net.optimizer.state_dict(),
                 "scaler": net.scaler.state_dict(), "epoch": progress.epoch, "iter": progress.iter,
                 "step": progress.iter // args.iter_size,  # the position a resume uses (load_training_state)
                 "best_acc1": progress.best_acc1, "best_epoch": progress.best_epoch,
                 "bad_seen": sorted(progress.bad_seen), "class_names": d.class_names, "rng": rng,
                 # --model-ema: the averaged model's state_dict (the same keys as "model") and its updates
                 "model_ema": net.ema.module.state_dict() if net.ema else None,
                 "model_ema_updates": int(net.ema.n_averaged) if net.ema else 0,
                 "args": {**vars(args), "mean": rt.mean, "std": rt.std}}, path)
    if best:  # copy, then rename: model_best.pth is never half-written either
        best, tmp = os.path.join(rt.run_dir, "model_best.pth"), os.path.join(rt.run_dir, "model_best.tmp")
        with disk_errors(best, tmp):
            shutil.copyfile(path, tmp)
            os.replace(tmp, best)


def load(path, flag="--resume"):
    """The one reader of checkpoint files (ours for --resume / --evaluate / predict, the zoos' for
    --pretrained): PATH -> dict, on the CPU. Any problem is a ValueError of one line naming `flag` and the
    file. weights_only=False: our checkpoints hold args and numpy RNG states, PySlowFast's a config, and
    unpickling can run code from the file: load only files you trust."""
    if not os.path.isfile(path):
        raise ValueError(f"{flag} {path}: no such checkpoint file")
    errors = []
    for reader in (_caffe2_pickle, _torch_file) if path.endswith(".pkl") else (_torch_file, _caffe2_pickle):
        try:
            ckpt = reader(path)
            break
        except Exception as e:  # torch raises many kinds (UnpicklingError, EOFError, RuntimeError, ...)
            errors.append(e)
    else:
        e = errors[1] if path.endswith(".pkl") else errors[0]  # torch's own complaint, first line only
        why = (str(e).splitlines() or [""])[0]
        raise ValueError(f"{flag} {path}: cannot read it as a torch checkpoint ({type(e).__name__}: {why}) "
                         "nor as a Caffe2 pickle") from None
    if not isinstance(ckpt, dict):
        raise ValueError(f"{flag} {path}: not a checkpoint dict but a {type(ckpt).__name__}")
    return ckpt


def _torch_file(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def _caffe2_pickle(path):  # PySlowFast's Caffe2 zoo: a Python 2 pickle (slowfast/utils/checkpoint.py: latin1)
    with open(path, "rb") as f:
        return pickle.load(f, encoding="latin1")


def load_weights(model, ckpt, path, args, ema=False):
    """A checkpoint's weights ('model', 'state_dict' or the dict itself; `ema`: 'model_ema') into `model`;
    ValueError: 1 line."""
    if ema and not isinstance(ckpt.get("model_ema"), dict):
        raise ValueError(f"--use-ema: {path} holds no EMA weights (trained without --model-ema)")
    weights = ckpt["model_ema"] if ema else ckpt.get("model", ckpt.get("state_dict", ckpt))
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise ValueError(f"--resume {path}: no weights in it (no 'model', no 'state_dict', not a state dict)")
    try:
        model.load_state_dict(models.strip_prefixes(weights))
    except RuntimeError as e:  # its first line only names the class; the second names the tensor
        lines = [line.strip() for line in str(e).splitlines()]
        raise ValueError(f"--resume {path}: its weights do not load into --arch {args.arch} with "
                         f"{args.num_classes} classes ({lines[1] if len(lines) > 1 else lines[0]})") from None


def auto_checkpoint(run_dir):
    """--resume auto: the run folder's checkpoint.pth, or '' (a fresh run) when it has none."""
    path = os.path.join(run_dir, "checkpoint.pth")
    return path if os.path.exists(path) else ""


def check_resume_flags(args, path, saved, mid_epoch):
    """Flags a run cannot change. --epochs, --lr_steps, --warmup, --lr can: the schedule follows them."""
    fixed = ["arch", "num_classes"] + ([] if args.evaluate else ["t_length", "t_stride", "crop_size"])
    for key in fixed:
        if key in saved and saved[key] != getattr(args, key):
            fail(f"--resume {path} was trained with --{key} {saved[key]}, not {getattr(args, key)}")
    for key in [] if args.evaluate else ["opt", "layer_decay"]:  # the optimizer's state and groups
        if key in saved and saved[key] != getattr(args, key):
            fail(f"--resume {path} was trained with --{key.replace('_', '-')} {saved[key]}, not "
                 f"{getattr(args, key)}: a run cannot change it")
    for key in [] if args.evaluate else ["bn_bias_wd", "fc_only", "freeze_bn"]:  # they shape the optimizer
        if bool(saved.get(key)) != bool(getattr(args, key)):
            fail(f"--resume {path} was trained {'with' if saved.get(key) else 'without'} --{key}: a run "
                 f"cannot change it (start a new run from its weights with --pretrained {path})")
    if mid_epoch and "batch_size" in saved:
        was = saved["batch_size"] * saved.get("iter_size", 1) * saved.get("world_size", 1)
        now = args.batch_size * args.iter_size * args.world_size
        if was != now:
            fail(f"--resume {path} stopped mid-epoch with a global batch of {was} clips (b x iter_size x "
                 f"processes), this run has {now}: resume with the same, or from an end-of-epoch checkpoint")


def resume(args, rt, net, progress):
    """--resume: the weights and, to continue training, the optimizer, GradScaler, Progress and this rank's
    RNG state. Returns the checkpoint, or None for a fresh run."""
    if args.resume == "auto":
        args.resume = auto_checkpoint(rt.run_dir)
        if args.evaluate and not args.resume:
            fail(f"--evaluate --resume auto: no checkpoint.pth in {rt.run_dir}")
    if not args.resume:
        progress.epoch = args.start_epoch
        return None
    try:
        ckpt = load(args.resume)
        if not args.evaluate and "optimizer" not in ckpt:
            fail(f"--resume {args.resume}: weights only, not a train.py checkpoint; start from them with "
                 "--pretrained PATH")
        saved = ckpt.get("args") if isinstance(ckpt.get("args"), dict) else {}
        check_resume_flags(args, args.resume, saved, ckpt.get("iter", 0) > 0)
        load_weights(net.bare, ckpt, args.resume, args, ema=args.evaluate and args.use_ema)
    except ValueError as e:
        fail(str(e))
    rt.mean = tuple(args.mean or saved.get("mean") or data.MEAN)  # the run keeps its normalisation
    rt.std = tuple(args.std or saved.get("std") or data.STD)
    if not args.evaluate:
        load_training_state(args, rt, net, progress, ckpt, saved)
    text = f"resumed from {args.resume} at epoch {ckpt.get('epoch')} iteration {ckpt.get('iter', 0)}"
    job, restart = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_RESTART_COUNT", 0)
    if job:  # a job's first run is restart 0 (Slurm sets the variable from the first requeue on)
        text += f" (Slurm job {job}, restart {restart})"
    if args.evaluate:  # an evaluation leaves the run's events alone
        print(text)
    else:
        event(rt, text)
    return ckpt


def load_training_state(args, rt, net, progress, ckpt, saved):
    """The optimizer, GradScaler, Progress and this rank's RNG state, with the flags of this run winning."""
    # The optimizer state holds wd and momentum too: keep this run's --wd / --momentum (lr is set per step).
    hyper = [{k: g[k] for k in ("weight_decay", "momentum", "lr_scale") if k in g}
             for g in net.optimizer.param_groups]
    net.optimizer.load_state_dict(ckpt["optimizer"])
    for g, h in zip(net.optimizer.param_groups, hyper):
        g.update(h)
    if getattr(net, "ema", None) is not None and ckpt.get("model_ema"):  # none saved: starts from the weights
        net.ema.module.load_state_dict(ckpt["model_ema"])
        net.ema.n_averaged.fill_(ckpt["model_ema_updates"])
    if ckpt["scaler"]:  # empty: saved with --amp off; a run turning fp16 on starts from a fresh scale
        net.scaler.load_state_dict(ckpt["scaler"])
    # The position in optimizer steps, not batches: resuming with the same global batch split otherwise
    # (-b 2 --iter_size 2 -> -b 4) continues with exactly the clips and lr steps not yet done.
    steps = ckpt.get("step", ckpt.get("iter", 0) // saved.get("iter_size", 1))
    progress.epoch, progress.iter = ckpt["epoch"], steps * args.iter_size
    progress.best_acc1, progress.best_epoch = ckpt["best_acc1"], ckpt.get("best_epoch", -1)
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
    elif cuda is not None and torch.cuda.is_available():  # other GPUs than when saved: the first ones' states
        for i, state in enumerate(cuda[:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state, i)


# ---- one epoch's numbers (train.train_one_epoch) -------------------------------------------------
@dataclass
class Meter:
    """One epoch's running numbers on this rank, and the timing behind the progress line."""
    start: int  # first batch of this (maybe resumed) epoch
    # GPU trap: a host read (.item(), .tolist(), `if loss`) per step stalls the GPU's queue. The sums and the
    # first non-finite loss stay on the device; `totals` reads them at print time and at the epoch's end.
    sums: object = 0.0  # (loss sum, correct) on the device
    bad: tuple = (-1, 0.0)  # (iteration, loss) of the first non-finite loss, on the device; -1: none
    clips: int = 0
    n_log: int = 0  # clips since the last line
    t_wait: float = 0.0  # seconds spent waiting for the loader
    t_epoch: float = field(default_factory=time.time)
    t_log: float = field(default_factory=time.time)

    def update(self, loss, logits, labels, it):
        n, loss = len(labels), loss.detach().float()
        self.sums = self.sums + torch.stack([loss * n, (logits.argmax(1) == labels).sum().float()])
        first = ~loss.isfinite() & (self.bad[0] < 0)
        self.bad = (torch.where(first, it, self.bad[0]), torch.where(first, loss, self.bad[1]))
        self.clips, self.n_log = self.clips + n, self.n_log + n

    def totals(self, epoch):
        """[loss sum, correct, clips] on the host (one sync); a non-finite loss so far stops."""
        if int(self.bad[0]) >= 0:
            fail(f"loss is {float(self.bad[1])} at epoch {epoch} iteration {int(self.bad[0])}; stopping "
                 "(lower --lr, or --clip-grad)", code=1)
        return (self.sums.tolist() if torch.is_tensor(self.sums) else [0.0, 0.0]) + [self.clips]

    def line(self, args, rt, progress, loss, lr, it, batches):
        loss_sum, _, clips = self.totals(progress.epoch)  # the step's one host sync
        now = time.time()
        left = (args.epochs - progress.epoch) * batches - it - 1  # batches
        eta = (now - self.t_epoch) / (it + 1 - self.start) * left
        h, s = divmod(int(eta), 3600)  # hours unbounded: a 30 h run shows 30:00:00
        mem = (torch.cuda.max_memory_allocated(rt.device) if rt.device.type == "cuda"
               else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
        text = (f"epoch {progress.epoch} [{it + 1}/{batches}] loss {loss.item():.4f} "
                f"({loss_sum / clips:.4f}) lr {lr:.2e} "
                f"{self.n_log * rt.world_size / (now - self.t_log):.1f} clips/s "
                f"data {self.t_wait / (now - self.t_epoch):.0%} eta {h}:{s // 60:02d}:{s % 60:02d} "
                f"mem {mem:.2f}GiB")
        self.t_log, self.n_log = now, 0
        return text


# ---- stopping at a step boundary: signals and bad videos ------------------------------------------
@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM (preemption, `scontrol requeue`), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's warning before the
    time limit, #SBATCH --signal=USR1@T) only set STOP: the step finishes, end_of_step saves and exits
    128 + signal, after requeueing the Slurm job on SIGUSR1. The previous handlers come back afterwards
    (callers running main() in-process)."""
    STOP["signal"] = 0
    old = {sig: signal.signal(sig, lambda signum, frame: STOP.update(signal=signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def end_of_step(args, rt, net, progress, d, bad, next_iter):
    """After each optimizer step, on every rank: report the videos replaced in it (`bad`: this rank's lines);
    save and exit on a signal (here or on another rank) or when more than --max_bad_videos were replaced.
    Ranks may see a signal at different steps: the decision is one collective, so all ranks stop together."""
    signum, n_bad = agreed_signal(rt, len(bad))
    if n_bad:  # rare: only then the lines themselves travel
        record_bad_videos(bad, rt, progress)
    too_many = len(progress.bad_seen) > args.max_bad_videos
    if not (signum or too_many):
        return
    progress.iter = next_iter
    save(args, rt, net, progress, d)
    where = f"at epoch {progress.epoch} iteration {next_iter}"
    if not too_many:
        exit_on_signal(rt, signum, where)
    fail(f"{len(progress.bad_seen)} bad videos replaced, more than --max_bad_videos {args.max_bad_videos} "
         f"(listed in {rt.run_dir}/bad_videos.txt); saved checkpoint.pth {where}. Fix them "
         "(python prepare.py check LIST), then --resume auto")


def decode_on_device(batch, args, rt, net, progress, d, it):
    """--decode_device cuda: data.decode_batch. A frame that fails only on the GPU cannot be replaced (its
    loader has moved on). One process saves at the last step boundary first; under DDP the other ranks stop
    with it."""
    try:
        return data.decode_batch(batch, rt.device, d.train_ds)
    except Exception as e:  # nvJPEG / TorchCodec raise RuntimeError, ValueError, their own kinds; OOM too
        if rt.world_size == 1:
            progress.iter = it - it % args.iter_size
            save(args, rt, net, progress, d)
        if isinstance(e, data.BadVideo):
            fail(f"{e} -- found decoding on the GPU in training; run `python prepare.py check LIST --full` "
                 "and fix it, then --resume auto")
        why = (f"out of GPU memory decoding batch {it} (lower -b or data.DECODE_CHUNK)" if isinstance(
            e, torch.OutOfMemoryError) else f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")
        fail(f"GPU decoding failed in training: {why}; {'saved checkpoint.pth; ' * (rt.world_size == 1)}"
             "--resume auto continues")


def exit_if_signalled(rt, progress):
    """Between epochs: a signal during validation. checkpoint.pth is saved already; all ranks exit."""
    signum, = agreed_signal(rt)
    if signum:
        exit_on_signal(rt, signum, f"at epoch {progress.epoch} iteration {progress.iter}")


def agreed_signal(rt, *counts):
    """The signal every rank acts on, in one collective with `counts` (summed): SIGUSR1 if any rank got it
    (the job is then requeued), else the one this rank got (SIGTERM if only another rank got one), or 0."""
    got, usr1, *sums = rt.all_sum([STOP["signal"] != 0, STOP["signal"] == signal.SIGUSR1, *counts])
    return (signal.SIGUSR1 if usr1 else STOP["signal"] or signal.SIGTERM) if got else 0, *sums


def exit_on_signal(rt, signum, where):
    """After the save (every rank took part). SIGUSR1: rank 0 first requeues the Slurm job, whose rerun
    continues with --resume auto. Trap: every rank waits for rank 0 before leaving, as `srun
    --kill-on-bad-exit` ends all tasks at the first non-zero exit, which would cut rank 0's save short."""
    text = f"{signal.Signals(signum).name}: saved {rt.run_dir}/checkpoint.pth {where}"
    if signum == signal.SIGUSR1 and rt.rank == 0:
        text += "; " + requeue_slurm_job()
    event(rt, text)
    rt.all_sum([0])  # a barrier: an all-reduce returns on no rank before every rank has joined
    sys.exit(128 + signum)


def requeue_slurm_job():
    """`scontrol requeue $SLURM_JOB_ID`: the job goes back to the queue (Slurm sends SIGTERM to the steps,
    then reruns the batch script with SLURM_RESTART_COUNT + 1). A failure is a warning: the checkpoint is
    saved, so submitting the job again continues it. Returns what happened, for the log."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return "not in a Slurm job: nothing requeued (continue with --resume auto)"
    try:
        r = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
        why = "" if r.returncode == 0 else (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        why = str(e)
    if why:
        warn(f"scontrol requeue {job} failed ({why.splitlines()[0]}); checkpoint.pth is saved: submit the "
             "job again and --resume auto continues it")
        return f"Slurm job {job} not requeued"
    return f"requeued Slurm job {job}"


def event(rt, text):
    """An interruption or a resume: printed, and (rank 0) a line with the time in the run's events.log."""
    print(text)
    if rt.rank == 0:
        path = os.path.join(rt.run_dir, "events.log")
        with disk_errors(path):
            with open(path, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")


def record_bad_videos(lines, rt, progress):
    """Every rank learns every rank's lines (so all count the same and stop together); each video counts
    once; rank 0 reports it, on stderr and in bad_videos.txt."""
    new = {}  # video ("<list>:<line>", how data.BadVideo's line starts) -> its first report
    for line in sum(rt.gather(lines), []):
        video = line.split(": ", 1)[0]
        if video not in progress.bad_seen:
            new.setdefault(video, line)
    progress.bad_seen.update(new)
    if rt.rank == 0 and new:
        for line in new.values():
            warn(f"bad video replaced: {line}")
        with disk_errors(os.path.join(rt.run_dir, "bad_videos.txt")):
            with open(os.path.join(rt.run_dir, "bad_videos.txt"), "a") as f:
                f.writelines(line + "\n" for line in new.values())
