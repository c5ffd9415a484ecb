"""The run folder and what stops a run: the files a run writes besides its checkpoints, and the
signals that stop it at a step boundary (and Slurm's requeue). They live together because every stop
is saved into the folder and recorded there: events.log names each interruption and resume,
bad_videos.txt each unreadable training video replaced.

A run folder (--output_root / --run_name) holds:
    args.txt        the resolved flags, as a recipe: `python train.py @RUN/args.txt --resume auto`
    continues checkpoint.pth  the latest state (checkpoint.py: what it holds, how a run resumes from
    it) model_best.pth  a copy of checkpoint.pth from the epoch with the best val top-1 log.jsonl
    one JSON line per epoch (curves.png is drawn from it; TensorBoard files if asked) bad_videos.txt
    the videos training replaced, one line each events.log      each interruption (signal, epoch,
    iteration) and each resume, with the time
Rank 0 writes them all. `rt`, `net`, `d` are train.py's Runtime, Net and Data records: this module
only reads their fields. Signals are here, not in launch.py (which reads how processes were
started): a stop is a save into this folder and a line in its events.log.
"""

import contextlib
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import checkpoint
import report
from errors import disk_errors, fail, warn

# a folder holding any of these holds a run
RUN_FILES = ("checkpoint.pth", "model_best.pth", "log.jsonl")
MADE = []  # run folders this process created (remove_if_unused may take them back after a failure)
STOP = {"signal": 0}  # set by the handler of STOP_SIGNALS; read at the end of each optimizer step
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


# ---- the run folder ------------------------------------------------------------------------------
def prepare_run_dir(args, rt, parser):
    """Fail before any work if the run folder cannot be written or holds another run; drop stale
    temp files; write args.txt (not under --evaluate: it may evaluate in a training run's
    folder)."""
    if os.path.exists(rt.run_dir) and not os.path.isdir(rt.run_dir):
        fail(f"run folder {rt.run_dir} exists and is a file (--output_root / --run_name)")
    taken = [f for f in RUN_FILES if os.path.exists(os.path.join(rt.run_dir, f))]
    here = args.resume and os.path.realpath(os.path.dirname(args.resume)) == os.path.realpath(
        rt.run_dir
    )
    if taken and not (args.resume == "auto" or here) and not args.evaluate:
        fail(
            f"{rt.run_dir} already holds a run ({', '.join(taken)}): continue it with --resume "
            "auto, "
            "or start a separate experiment with --run_name NAME or --output_root DIR"
        )
    if rt.rank != 0:
        return
    try:
        if not os.path.isdir(rt.run_dir):
            os.makedirs(rt.run_dir)
            MADE.append(rt.run_dir)
        probe = os.path.join(rt.run_dir, f".write_test{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        fail(
            f"cannot write to the run folder {rt.run_dir}: {e.strerror} (--output_root / "
            "--run_name)"
        )
    if args.evaluate:
        return
    for name in checkpoint.TEMP_FILES:  # left by a process killed while saving
        if os.path.isfile(os.path.join(rt.run_dir, name)):
            os.remove(os.path.join(rt.run_dir, name))
    with disk_errors(os.path.join(rt.run_dir, "args.txt")):
        with open(os.path.join(rt.run_dir, "args.txt"), "w") as f:
            f.write(args_file(parser, args))


def remove_if_unused():
    """After a run failed: each run folder this process created that holds nothing but its own
    args.txt (it failed before its first checkpoint or evaluation) is removed, so a failed start
    leaves no folder behind. A folder that existed before, or holds anything else, is left as it
    is."""
    for folder in MADE:
        try:
            names = os.listdir(folder)
            if set(names) <= {"args.txt"}:
                for name in names:
                    os.remove(os.path.join(folder, name))
                os.rmdir(folder)  # fails (and keeps it) if another process wrote into it meanwhile
        except OSError:
            pass


def args_file(parser, args):
    """The resolved flags as an @FILE that parses back to `args` (flags.Parser reads it): the
    positionals, then one flag per line. Flags that are off or None are left out: they parse back to
    that."""
    words, lines = [], []
    for action in parser.actions:  # flags.Parser records them as they are added
        value = getattr(args, action.dest, None)
        if not action.option_strings:
            words += [] if value is None else [str(value)]
        elif value is not None and value is not False:
            flag = next(s for s in action.option_strings if s.startswith("--"))
            values = value if isinstance(value, (list, tuple)) else [] if value is True else [value]
            lines.append(shlex.join([flag, *map(str, values)]))
    return "\n".join([shlex.join(words), *lines]) + "\n"


def open_tensorboard(args, rt):
    """--tensorboard: rank 0 writes event files to RUN/tensorboard (append_log adds each epoch's
    scalars)."""
    if args.tensorboard and rt.rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            fail("--tensorboard needs the tensorboard package: pip install tensorboard")
        rt.tensorboard = SummaryWriter(os.path.join(rt.run_dir, "tensorboard"))


def append_log(rt, log):
    """Rank 0: the epoch's line in log.jsonl, curves.png redrawn from it, and the TensorBoard
    scalars."""
    if rt.rank != 0:
        return
    path = os.path.join(rt.run_dir, "log.jsonl")
    with disk_errors(path):
        with open(path, "a") as f:
            f.write(json.dumps(log) + "\n")
        report.save_curves_png(path, os.path.join(rt.run_dir, "curves.png"))
    if not rt.tensorboard:
        return
    for key, value in log.items():
        # a list (a probe grid's probe_top1): one scalar per entry, key/0, key/1, ... (its order)
        values = enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, v in values:
            if v is not None and key != "epoch":
                rt.tensorboard.add_scalar(key if i is None else f"{key}/{i}", v, log["epoch"])


def evaluation_files(args, rt, flags):
    """--evaluate's files (report.evaluation_paths), named <clips>x<crops>_<test_sampling>_<hash of
    the checkpoint file, the values of `flags` (flags.flag_sets().scores: those that may change the
    scores) and the normalisation>: two protocols never overwrite each other. Rank 0 checks it can
    write them all BEFORE evaluating: a failure is one line at once, not after it."""
    # a flag left unset is not named: adding a flag does not rename earlier runs' evaluations
    settings = {k: getattr(args, k) for k in flags if getattr(args, k, None) is not None}
    resume = os.path.realpath(args.resume) if args.resume else ""  # "": --evaluate --pretrained
    settings.update(resume=resume, mean=list(rt.mean), std=list(rt.std))
    text = json.dumps(settings, sort_keys=True, default=str)
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    tag = f"{args.test_clips}x{args.test_crops}_{args.test_sampling}_{digest}"
    paths = report.evaluation_paths(rt.run_dir, tag, args.save_scores)
    if rt.rank == 0:
        for path in paths.values():
            writable(path)
    return tag


def writable(path):
    """Fail in one line, before any work, where `path` cannot be written; leave it as it was."""
    existed = os.path.exists(path)
    try:
        open(path, "ab").close()  # appends nothing: an existing file is left as it was
        if not existed:
            os.remove(path)
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}; nothing evaluated (--output_root / --run_name)")


# ---- stopping at a step boundary: signals and bad videos -----------------------------------------
@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM (preemption, `scontrol requeue`), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's warning before
    the time limit, #SBATCH --signal=USR1@T) only set STOP: the step finishes, end_of_step saves and
    exits 128 + signal, after requeueing the Slurm job on SIGUSR1. The previous handlers come back
    afterwards (callers running main() in-process)."""
    STOP["signal"] = 0
    old = {
        sig: signal.signal(sig, lambda signum, frame: STOP.update(signal=signum))
        for sig in STOP_SIGNALS
    }
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def end_of_step(args, rt, net, progress, d, bad, next_iter):
    """After each optimizer step, on every rank: report the videos replaced in it (`bad`: this
    rank's lines); save and exit on a signal (here or on another rank) or when more than
    --max_bad_videos were replaced. Ranks may see a signal at different steps: the decision is one
    collective, so all ranks stop together."""
    signum, n_bad = agreed_signal(rt, len(bad))
    if n_bad:  # rare: only then the lines themselves travel
        record_bad_videos(bad, rt, progress)
    too_many = len(progress.bad_seen) > args.max_bad_videos
    if not (signum or too_many):
        return
    progress.iter = next_iter
    checkpoint.save(args, rt, net, progress, d)
    where = f"at epoch {progress.epoch} iteration {next_iter}"
    if not too_many:
        exit_on_signal(rt, signum, where)
    fail(
        f"{len(progress.bad_seen)} bad videos replaced, more than --max_bad_videos "
        f"{args.max_bad_videos} "
        f"(listed in {rt.run_dir}/bad_videos.txt); saved checkpoint.pth {where}. Fix them "
        "(python prepare.py check LIST), then --resume auto"
    )


def exit_if_signalled(rt, progress):
    """Between epochs: a signal during validation. checkpoint.pth is saved already; all ranks
    exit."""
    (signum,) = agreed_signal(rt)
    if signum:
        exit_on_signal(rt, signum, f"at epoch {progress.epoch} iteration {progress.iter}")


def agreed_signal(rt, *counts):
    """The signal every rank acts on, in one collective with `counts` (summed): SIGUSR1 if any rank
    got it (the job is then requeued), else the one this rank got (SIGTERM if only another rank got
    one), or 0."""
    got, usr1, *sums = rt.all_sum([STOP["signal"] != 0, STOP["signal"] == signal.SIGUSR1, *counts])
    return (signal.SIGUSR1 if usr1 else STOP["signal"] or signal.SIGTERM) if got else 0, *sums


def exit_on_signal(rt, signum, where):
    """After the save (every rank took part). SIGUSR1: rank 0 first requeues the Slurm job, whose
    rerun continues with --resume auto. Trap: every rank waits for rank 0 before leaving, as `srun
    --kill-on-bad-exit` ends all tasks at the first non-zero exit, which would cut rank 0's save
    short."""
    text = f"{signal.Signals(signum).name}: saved {rt.run_dir}/checkpoint.pth {where}"
    if signum == signal.SIGUSR1 and rt.rank == 0:
        text += "; " + requeue_slurm_job()
    event(rt, text)
    rt.all_sum([0])  # a barrier: an all-reduce returns on no rank before every rank has joined
    sys.exit(128 + signum)


def requeue_slurm_job():
    """`scontrol requeue $SLURM_JOB_ID`: the job goes back to the queue (Slurm sends SIGTERM to the
    steps, then reruns the batch script with SLURM_RESTART_COUNT + 1). A failure is a warning: the
    checkpoint is saved, so submitting the job again continues it. Returns what happened, for the
    log."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return "not in a Slurm job: nothing requeued (continue with --resume auto)"
    try:
        r = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
        why = (
            ""
            if r.returncode == 0
            else (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        why = str(e)
    if why:
        warn(
            f"scontrol requeue {job} failed ({why.splitlines()[0]}); checkpoint.pth is saved: "
            "submit the "
            "job again and --resume auto continues it"
        )
        return f"Slurm job {job} not requeued"
    return f"requeued Slurm job {job}"


def resumed(args, rt, ckpt, flags):
    """After checkpoint.resume: where the run continues from, and the recipe's flags it changes
    (checkpoint.changed_flags; `flags`: flags.flag_sets()), printed and (training) in events.log,
    one line each."""
    if ckpt is None:
        return
    text = (
        f"resumed from {args.resume} at epoch {ckpt.get('epoch')} iteration {ckpt.get('iter', 0)}"
    )
    job, restart = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_RESTART_COUNT", 0)
    if job:  # a job's first run is restart 0 (Slurm sets the variable from the first requeue on)
        text += f" (Slurm job {job}, restart {restart})"
    if args.evaluate:  # an evaluation leaves the run's events alone
        print(text)
        return
    event(rt, text)
    changes = checkpoint.changed_flags(args, ckpt, flags)
    if changes:
        event(rt, f"this resume changes the recipe: {', '.join(changes)}")


def event(rt, text):
    """An interruption or a resume: printed, and (rank 0) a line with the time in the run's
    events.log."""
    print(text)
    if rt.rank == 0:
        path = os.path.join(rt.run_dir, "events.log")
        with disk_errors(path):
            with open(path, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")


def record_bad_videos(lines, rt, progress):
    """Every rank learns every rank's lines (so all count the same and stop together); each video
    counts once; rank 0 reports it, on stderr and in bad_videos.txt."""
    new = {}  # video ("<list>:<line>", how decode.BadVideo's line starts) -> its first report
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
