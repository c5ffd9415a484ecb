"""Clip features over whole videos: the pooled output of a trained (or zoo) model for consecutive
windows.

    python train.py features val.txt --resume model_best.pth --out feats/        # a list file
    python features.py clip.mp4 frames/v_Biking_g01_c01/ --arch resnet50_3d --pretrained \
        kinetics400 --out f/
    torchrun --nproc_per_node=4 features.py train.txt --resume ckpt.pth --out feats/ --ddp

For each video, windows of --window frames (--t_stride apart; default 16, or the clip a TSM
checkpoint is built for; a window the model cannot take is refused before anything is written) start
every --stride frames from frame 0, as long as a whole window fits; then, if frames remain after the
last window, one more window at the next start whose frames past the end repeat the last frame (a
video shorter than a window: that one window). Every frame lands in a window when --stride <= the
window's span. A window's feature is the model's input to its classifier (`fc`, `head` or
`classifier`), averaged over whatever axes remain besides batch and channels: ResNet3D / r3d /
r2plus1d: the global average pool (before dropout and fc); s3d: its classifier's input averaged over
(T, H, W); a model folding segments into the batch (TSN: (B * segments, C)): the segment average, as
its logits average. --layer NAME pools that module's output over (T, H, W) instead. A V-JEPA 2 arch
or a --probe checkpoint: the mean of the encoder's tokens (what its attentive head or probe reads,
averaged); --probe-query: the attentive probe's pooled query instead (the input of its linear layer;
a grid's best probe).

Frames are decoded by data.py (the dataset's load_frames for frame folders; decode.open_video,
opened once per video, for video files) and cropped as the checkpoint's --evaluate crops them: the
centre square of the short side scaled crop_size/new_size, resized to crop_size (--crop center), or
the whole frame with its short side resized to crop_size (--crop resize); normalised with the
checkpoint's mean/std. -j loader workers decode (one video each), --batch windows at a time, so
memory does not grow with a video's length.

A list's segment (by frames or by time, an EPIC-KITCHENS row) is a video of its frames only: its
windows start at its first frame, as if its frames were given alone.

Written to --out, per video id (the frame folder's name, or the video file's name without
extension; a segment's adds its first and last frame, 0-based: `P01_01_120-239`):
    <id>.npy           float32 (windows, channels) features (float64 with --dtype float64)
    <id>.starts.npy    int64 (windows,): each window's first frame, 0-based from the video's first
    <id>.logits.npy    (windows, classes), with --logits
    <id>.json          input, frames, first_frame (a segment's offset), windows, window settings
and index.csv (one row per video done), failed.txt (one line per video that could not be read),
settings.json (what every file in the folder was made with: a rerun with other settings is refused).
Each file is written to a temp name and renamed, <id>.npy last: a video whose .npy exists is
complete and is skipped on a rerun; a killed run leaves no partial file under a final name. With
--ddp, process r of N takes videos r, r + N, ... of the input order: each video is written by
exactly one process.

Like the I3D feature extractors used for temporal action localisation (THUMOS14 / ActivityNet
features: 16-frame snippets every 16 frames, e.g. piergiaj/pytorch-i3d extract_features.py,
v-iashin/video_features), which read the features after the last average pool; here the model and
clips are the checkpoint's own.
"""

import csv
import dataclasses
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

import checkpoint
import data
import decode
import flags
import prepare
import train
from errors import fail

# the classifier's name in model.py and torchvision's video models
HEADS = ("fc", "head", "classifier")
CROPS = ("center", "resize")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def get_parser():
    p = flags.Parser(
        prog="train.py features", description="Per-window clip features of whole videos."
    )
    p.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="list file, video file or frame folder"
    )
    p.add_argument(
        "--out", required=True, metavar="DIR", help="folder for <video id>.npy, index.csv ..."
    )
    p.add_argument(
        "--resume", metavar="CKPT", help="train.py checkpoint: model, clips, normalisation"
    )
    p.add_argument(
        "--use-ema", dest="use_ema", action="store_true", help="the checkpoint's EMA weights"
    )
    p.add_argument(
        "-a", "--arch", help="without --resume: this arch (random or --pretrained weights)"
    )
    p.add_argument("--pretrained", help="with --arch: imagenet, kinetics400 or PATH (see train.py)")
    p.add_argument(
        "--num_classes", type=flags.positive, default=400, help="with --arch: classifier size"
    )
    p.add_argument(
        "--new_size", type=flags.positive, help="with --arch: short side before the crop (256)"
    )
    p.add_argument("--crop_size", type=flags.positive, help="with --arch: crop side in px (224)")
    p.add_argument(
        "--window",
        type=flags.positive,
        help="frames per window (default: 16, or the clip a TSM model is built for)",
    )
    p.add_argument("--stride", type=flags.positive, default=16, help="frames between window starts")
    p.add_argument(
        "--t_stride", type=flags.positive, default=1, help="frames between a window's frames"
    )
    p.add_argument(
        "--crop", default="center", choices=CROPS, help="centre crop, or whole frame resized"
    )
    p.add_argument(
        "--layer", help="pool this module's output (e.g. layer3) instead of the fc input"
    )
    p.add_argument("--logits", action="store_true", help="also save the classifier's logits")
    p.add_argument(
        "--probe-query",
        dest="probe_query",
        action="store_true",
        help="V-JEPA 2 head / --probe: the attentive probe's pooled query, not the mean token",
    )
    p.add_argument(
        "-b", "--batch", type=flags.positive, default=8, help="windows per forward (memory)"
    )
    p.add_argument(
        "-j",
        "--workers",
        type=flags.natural,
        default=flags.default_workers(),
        help="loader processes decoding windows (default: 4, at most the CPUs this process may "
        "use)",
    )
    p.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="model and features precision"
    )
    p.add_argument(
        "--data_root", help="folder a list file's paths are relative to (default: the list's)"
    )
    p.add_argument("--image_tmpl", help="frame file name (default: the checkpoint's)")
    p.add_argument("--fps", type=flags.above_zero, help="frame folders' frames/s (time segments)")
    p.add_argument(
        "--video_decoder", default="auto", choices=decode.VIDEO_DECODERS, help="video files"
    )
    p.add_argument(
        "--ddp", action="store_true", help="one process per torchrun/srun task, videos sharded"
    )
    p.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu"
    )
    flags.add_trust_arg(p)
    return p


def check(a):
    """What the flags alone tell, before anything is read."""
    if bool(a.resume) == bool(a.arch):
        fail(
            "give --resume CKPT (a train.py checkpoint) or --arch ARCH (with --pretrained for "
            "weights)"
        )
    if a.resume and (a.pretrained or a.new_size or a.crop_size):
        fail(
            "--pretrained, --new_size, --crop_size go with --arch; a --resume checkpoint has its "
            "own"
        )
    if a.use_ema and not a.resume:
        fail("--use-ema reads a --resume checkpoint's EMA weights: give --resume CKPT")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {a.device} but no CUDA GPU is visible; use --device cpu")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        fail(f"--out {a.out}: exists and is not a folder")
    why = unwritable(a.out)
    if why:
        fail(f"--out {a.out}: {why}; give a folder you can write")


def unwritable(folder):
    """Why `folder` cannot be made or written into, or None: its nearest existing ancestor
    decides."""
    parent = os.path.abspath(folder)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"no permission to write in {parent}"
    return None


# ---- the model -----------------------------------------------------------------------------------
def load_model(a):
    """-> (model in eval mode, train.py's args for its clips and frames, class names or None)."""
    if a.resume:
        # the checkpoint reader of predict and --evaluate (flags.checkpoint_args, make_model)
        import predict

        try:
            model, args, names = predict.load_checkpoint(a.resume, "cpu", 1, 1, a.use_ema)
        except predict.PredictError as e:
            fail(str(e))
    else:
        argv = ["features", "--arch", a.arch, "--num_classes", str(a.num_classes), "--dro", "0"]
        argv += [
            x
            for flag in ("pretrained", "new_size", "crop_size")
            if getattr(a, flag)
            for x in (f"--{flag}", str(getattr(a, flag)))
        ]
        args = train.get_args_parser().parse_args(argv)
        if args.arch not in train.models.ARCHS:
            fail(f"--arch {args.arch}: unknown; choose one of: {', '.join(train.models.ARCHS)}")
        try:
            model, names = train.make_model(args).eval(), None
        except (ValueError, OSError) as e:
            fail(str(e))
    # zoo weights' normalisation (checkpoints: args)
    info = getattr(model, "pretrained_info", None) or {}
    args.mean = tuple(args.mean or info.get("mean") or data.MEAN)
    args.std = tuple(args.std or info.get("std") or data.STD)
    args.image_tmpl = a.image_tmpl or args.image_tmpl
    args.data_root, args.video_decoder = a.data_root, a.video_decoder
    why = window_error(model, a.window or 16, args)
    # left out: THUMOS14's 16-frame snippets where the model takes them, else its own clip (TSM)
    if a.window is None:
        a.window = 16 if why is None else args.num_segments * (args.t_length or 1)
        why = why and window_error(model, a.window, args)
    if why:
        fail(why)
    # to the device once this process knows its GPU (setup)
    return (model.to(DTYPES[a.dtype]), args, names)


def window_error(model, window, args):
    """Why `model` cannot take clips of `window` frames, or None: checked before anything is
    written."""
    arch, frames = args.arch, getattr(model, "frames", None)
    clip = f"--num_segments {args.num_segments} x --t_length {args.t_length}"
    if frames is not None:  # TSM: the shift mixes frames of one clip, built for its length
        if window != frames:
            return (
                f"--window {window}: --arch {arch} with --shift takes clips of exactly {frames} "
                f"frames ({clip}); use --window {frames}"
            )
    elif isinstance(model, train.models.Consensus) and window % model.snippet:
        return (
            f"--window {window}: --arch {arch} in --mode {args.mode} takes a multiple of "
            f"{model.snippet} frames (its --t_length snippets); e.g. --window {model.snippet}"
        )
    elif window < getattr(model, "min_t", 1):
        return f"--window {window} is too short for --arch {arch} (needs >= {model.min_t})"
    elif train.models.ARCHS[arch].build is train.models.torchvision_video:
        # torchvision's video archs state no rule: one clip through the model says it
        x = torch.zeros(1, 3, window, args.crop_size, args.crop_size)
        try:
            with torch.no_grad():
                model(x)
        except (RuntimeError, ValueError, IndexError) as e:
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            return f"--window {window}: --arch {arch} cannot take it ({why})"
    return None


def pool(x, batch):
    """A (B, C, ...) activation -> (B, C), averaged over the rest. A batch of B * S rows (a model
    folding S segments into the batch, TSN) is averaged over its segments first."""
    if x.shape[0] != batch:
        x = x.unflatten(0, (batch, -1)).mean(1)
    return x.flatten(2).mean(2) if x.dim() > 2 else x


class Extractor:
    """model(clips) -> (pooled features, logits) in one forward: a hook keeps the classifier's input
    (or --layer's output). No arch is edited: a forked model with a head named fc/head/classifier
    just works."""

    def __init__(self, model, layer=None, query=False):
        modules = dict(model.named_modules())
        if layer:
            if layer not in modules:
                stages = [n for n in modules if n.startswith("layer") and "." not in n]
                raise ValueError(
                    f"--layer {layer}: no such module in --arch {getattr(model, 'arch', '?')} "
                    f"(e.g. {', '.join(stages) or 'a name from model.named_modules()'})"
                )
            arch = train.models.ARCHS.get(getattr(model, "arch", None))
            if arch and arch.tokens:  # tokens, channels-last stages
                raise ValueError(
                    f"--layer: not for --arch {model.arch} (its stages are not (B, C, T, H, "
                    "W)); leave it out for the classifier's input"
                )
            modules[layer].register_forward_hook(lambda m, i, o: self.kept.append(o))
        else:
            heads = sorted(
                (n for n in modules if n.split(".")[-1] in HEADS), key=lambda n: n.count(".")
            )
            if hasattr(model, "probes"):  # probe.ProbedModel: its best probe reads the tokens
                heads = [f"probes.{int(model.best)}"]
            if not heads:
                raise ValueError(f"no classifier module named {' / '.join(HEADS)} in the model")
            if query and heads[0] + ".pooler" not in modules:
                raise ValueError("--probe-query: this model has no attentive probe")
            head = heads[0] + ".linear" if query else heads[0]
            # tokens (B, N, D) (a V-JEPA head, a probe): their mean; else pool() below
            modules[head].register_forward_pre_hook(
                lambda m, i: self.kept.append(i[0].mean(1) if i[0].dim() == 3 else i[0])
            )
        self.model, self.kept = model, []

    @torch.no_grad()
    def __call__(self, x):
        self.kept.clear()
        logits = self.model(x)
        return pool(self.kept[-1], x.shape[0]), logits


# ---- windows and frames --------------------------------------------------------------------------
def window_frames(num_frames, window, stride, t_stride):
    """int64 (windows, window): 0-based frame indices of every window (see the module docstring)."""
    span = (window - 1) * t_stride + 1
    starts = list(range(0, max(num_frames - span, 0) + 1, stride))
    # frames left: a padded window
    if starts[-1] + span < num_frames and starts[-1] + stride < num_frames:
        starts.append(starts[-1] + stride)
    idx = np.array(starts, dtype=np.int64)[:, None] + np.arange(window, dtype=np.int64) * t_stride
    return np.minimum(idx, num_frames - 1)


def collect(a, args, tmp):
    """INPUTs -> (test-mode dataset of every video, their ids, a report line per input that is no
    video). A list file's entries stay as data.read_list reads them: a segment's offset and length
    (by frames or by time, --fps for frame folders), a video's own frame names (Charades, EPIC).
    A video file given alone is read whole (num_frames 0: counted when opened)."""
    videos, bad = [], []
    decoder = decode.pick_video_decoder(a.video_decoder)
    for src in a.inputs:
        path = os.path.abspath(src)
        # a list file: its entries, its own errors
        if os.path.isfile(path) and not decode.is_video_file(path):
            try:
                videos += data.read_list(path, a.data_root, decoder=decoder, fps=a.fps)
            except (ValueError, OSError) as e:
                fail(str(e))
        elif decode.is_video_file(path) and os.path.isfile(path):
            videos.append(data.Video(path, 0, 0, 0))
        elif os.path.isdir(path):
            n = prepare.count_frames(path, args.image_tmpl)
            if n:
                videos.append(data.Video(path, n, 0, 0))
            else:
                bad.append(
                    f"{src}: no frames named {args.image_tmpl.format(1)} ({args.image_tmpl})"
                )
        else:
            bad.append(f"{src}: no such list file, video file or frame folder")
    if not videos:
        return None, [], bad
    # the checkpoint's data settings (train.make_dataset) over a list of the paths, then the
    # entries themselves: a text line cannot carry a video's frame names
    list_file = os.path.join(tmp, "features.txt")
    with open(list_file, "w", encoding="utf-8") as f:
        f.write("".join(f"{v.path} 1 0\n" for v in videos))
    try:
        ds = train.make_dataset(args, list_file, "val")
    except (ValueError, OSError) as e:
        fail(f"checkpoint settings: {e}")
    ds.videos = [dataclasses.replace(v, label=0, label_frames=None) for v in videos]
    ids = [video_id(v) for v in ds.videos]
    seen = {}
    for v, i in zip(ds.videos, ids):
        if i in seen:
            fail(
                f"two inputs would write {i}.npy: {seen[i]} and {v.path} (one --out per dataset "
                "split)"
            )
        seen[i] = v.path
    return ds, ids, bad


def video_id(video):
    """The name of a video's files: its frame folder's or file's name; a segment's adds its first
    and last frame, 0-based (`P01_01_120-239`)."""
    name = os.path.basename(video.path)
    name = os.path.splitext(name)[0] if decode.is_video_file(video.path) else name
    if not video.segment:
        return name
    return f"{name}_{video.offset}-{video.offset + video.num_frames - 1}"


def frame_reader(ds, video):
    """-> (frames in the video, read(0-based indices) -> list of uint8 (H, W, 3)); a segment's
    frames only, index 0 its first. A video file is opened once (its packets indexed once), read
    whole unless the line names a segment; a frame folder reads only the asked frames. BadVideo /
    RuntimeError."""
    if not decode.is_video_file(video.path):
        # frames start_index + offset ..: a segment, or a frame list's video named from frame > 1
        first = ds.spec.start_index + video.offset
        return video.num_frames, lambda idx: ds.load_frames(video, [int(i) + first for i in idx])
    # a FIFO, a dead mount: BadVideo
    decode.read_files(video, [video.path], ds.spec.read_timeout, count=12)
    n, read = decode.open_video(video.path, ds.video_decoder)
    if not video.segment:
        return n, read
    # a segment past the file's end: as training reads it (data.VideoFrameDataset.read_video)
    if n < video.offset + video.num_frames:
        raise RuntimeError(f"{video.offset + video.num_frames} frames listed, the video has {n}")
    return video.num_frames, lambda idx: read([int(i) + video.offset for i in idx])


def to_clips(frames, inverse, shape, args, crop):
    """Decoded frames, the index of each window frame among them, (windows, window) -> uint8 clips
    (windows, 3, window, size, size): the checkpoint's val crop, or the whole frame (--crop
    resize)."""
    H, W, _ = frames[0].shape
    size = args.crop_size
    if crop == "center":
        x = data.resized_crop(frames, data.crop_boxes(H, W, "val", args.new_size, size)[0], size)
    # short side to crop_size, aspect kept: bilinear uint8 with antialias, as data.resized_crop does
    else:
        scale = size / min(H, W)
        x = torch.stack(frames).permute(0, 3, 1, 2)
        x = F.interpolate(
            x,
            size=(round(H * scale), round(W * scale)),
            mode="bilinear",
            antialias=scale < 1,
            align_corners=False,
        ).permute(0, 2, 3, 1)
    x = x[torch.from_numpy(inverse)].view(*shape, *x.shape[1:])  # (windows, window, h, w, 3)
    return x.permute(0, 4, 1, 2, 3)


class Chunks(torch.utils.data.IterableDataset):
    """The uint8 clips of videos `todo` (dataset indices), --batch windows per item, in window
    order; a video that cannot be read is one {"error"} item. Loader workers take every
    num_workers-th video."""

    def __init__(self, ds, todo, a, args):
        self.ds, self.todo, self.a, self.args = ds, todo, a, args

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        for k in self.todo[worker.id :: worker.num_workers] if worker else self.todo:
            yield from self.video(k)

    def video(self, k):
        a = self.a
        try:
            n, read = frame_reader(self.ds, self.ds.videos[k])
            if n < 1:
                raise RuntimeError("no frames")
            idx = window_frames(n, a.window, a.stride, a.t_stride)
            parts = np.array_split(idx, -(-len(idx) // a.batch))
            for j, chunk in enumerate(parts):
                # each frame decoded once per chunk
                numbers, inverse = np.unique(chunk, return_inverse=True)
                clips = to_clips(
                    read(numbers.tolist()), inverse.reshape(-1), chunk.shape, self.args, a.crop
                )
                yield {
                    "k": k,
                    "part": j,
                    "parts": len(parts),
                    "clips": clips,
                    # counted from the video's first frame, a segment's offset added
                    "starts": chunk[:, 0] + self.ds.videos[k].offset,
                    "frames": n,
                }
        except (decode.BadVideo, RuntimeError, OSError, ValueError) as e:
            why = getattr(e, "reason", None) or (str(e).splitlines() or [type(e).__name__])[0]
            yield {"k": k, "error": why}


# ---- files ---------------------------------------------------------------------------------------
def save_atomic(path, write):
    """write(file object) to a temp name beside `path`, flushed to disk, then renamed onto it."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, Ctrl-C: no temp file left behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_video(out, vid, source, result, a):
    """A video's files; <id>.npy, the mark of a complete video, last."""
    meta = {
        "input": source,
        "frames": result["frames"],
        "first_frame": result["first_frame"],
        "windows": result["windows"],
        "window": a.window,
        "stride": a.stride,
        "t_stride": a.t_stride,
    }
    save_atomic(os.path.join(out, f"{vid}.starts.npy"), lambda f: np.save(f, result["starts"]))
    if a.logits:
        save_atomic(os.path.join(out, f"{vid}.logits.npy"), lambda f: np.save(f, result["logits"]))
    save_atomic(os.path.join(out, f"{vid}.json"), lambda f: f.write(json.dumps(meta).encode()))
    save_atomic(os.path.join(out, f"{vid}.npy"), lambda f: np.save(f, result["features"]))


def settings(a, args, names):
    """What every file in --out is made with; a rerun into the same folder must agree."""
    return {
        "checkpoint": os.path.abspath(a.resume) if a.resume else None,
        "arch": args.arch,
        "pretrained": a.pretrained,
        "window": a.window,
        "stride": a.stride,
        "t_stride": a.t_stride,
        "crop": a.crop,
        "crop_size": args.crop_size,
        "new_size": args.new_size,
        "layer": a.layer,
        "dtype": a.dtype,
        "mean": list(args.mean),
        "std": list(args.std),
        "class_names": names,
    }


def check_out(a, s, rank):
    """--out holds nothing or features made with the same settings (else they would mix)."""
    path = os.path.join(a.out, "settings.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        diff = [
            f"{k} {old.get(k)} -> {v}"
            for k, v in s.items()
            if k != "class_names" and old.get(k) != v
        ]
        if diff:
            fail(
                f"--out {a.out} holds features made with other settings ({'; '.join(diff)}); "
                "use another --out"
            )
    elif rank == 0:
        try:  # what os.access cannot see (root on a read-only mount, a full disk): one line too
            os.makedirs(a.out, exist_ok=True)
            save_atomic(path, lambda f: f.write(json.dumps(s, indent=1).encode()))
        except OSError as e:
            fail(
                f"--out {a.out}: cannot write {path} ({e.strerror or e}); give a folder you can "
                "write"
            )
    # a killed run's temp files (no process writes yet)
    if rank != 0:
        return
    for name in os.listdir(a.out):
        if name.startswith(".") and name.endswith(".tmp"):
            os.remove(os.path.join(a.out, name))


def write_reports(a, ds, ids, bad):
    """index.csv: every video of the inputs whose features exist (from this run or an earlier one);
    failed.txt: this run's unreadable inputs, one line each."""
    rows = []
    for vid in ids:
        meta = os.path.join(a.out, f"{vid}.json")
        if os.path.isfile(os.path.join(a.out, f"{vid}.npy")) and os.path.isfile(meta):
            with open(meta, encoding="utf-8") as f:
                m = json.load(f)
            rows.append([vid, m["input"], m["frames"], m["windows"]])

    def index(f):
        text = tempfile.SpooledTemporaryFile(mode="w+", newline="")
        csv.writer(text).writerows([["video", "input", "frames", "windows"]] + rows)
        text.seek(0)
        f.write(text.read().encode())

    save_atomic(os.path.join(a.out, "index.csv"), index)
    save_atomic(
        os.path.join(a.out, "failed.txt"),
        lambda f: f.write("".join(b + "\n" for b in bad).encode()),
    )
    return len(rows)


# ---- the command ---------------------------------------------------------------------------------
def setup(a, args):
    """(rank, world size): one process, or with --ddp one per torchrun/srun task (gloo on CPU)."""
    args.ddp, args.device, args.evaluate, args.run_name = a.ddp, a.device, True, "features"
    # rank from torchrun/srun, process group, print silenced off rank 0
    rt = train.setup_runtime(args)
    if rt.device.type == "cuda":
        a.device = str(rt.device)
    return rt


def extract_all(a, args, ext, ds, ids, rt):
    """This process's share of the videos; -> (report lines of videos that failed, windows written).
    Loader workers decode; this process runs the model and writes each video once its last chunk is
    in."""
    mine = [k for k in range(len(ids)) if k % rt.world_size == rt.rank]
    todo = [k for k in mine if not os.path.isfile(os.path.join(a.out, f"{ids[k]}.npy"))]
    if len(todo) < len(mine):
        print(f"{len(mine) - len(todo)} of {len(mine)} videos already in {a.out}: skipped")
    loader = torch.utils.data.DataLoader(
        Chunks(ds, todo, a, args),
        batch_size=None,
        num_workers=a.workers,
        worker_init_fn=train.worker_init_fn,
    )
    bad, windows, pending, t0 = [], 0, {}, time.time()
    bar = tqdm(  # on a terminal only: in a log file its redraws are one long line of '\r's
        total=len(todo),
        unit="video",
        disable=rt.rank != 0 or not sys.stderr.isatty(),
        dynamic_ncols=True,
        desc="features",
    )
    for item in loader:
        k = item["k"]
        if "error" in item:
            pending.pop(k, None)  # a video that broke midway: its chunks so far are dropped
            bad.append(f"{ds.videos[k].path}: {item['error']}")
            tqdm.write(f"train.py features: error: {bad[-1]}", file=sys.stderr)
            bar.update(1)
            continue
        x = data.normalize(
            item["clips"].to(a.device).contiguous(), args.mean, args.std, DTYPES[a.dtype]
        )
        parts = pending.setdefault(k, [])
        parts.append((*(t.cpu() for t in ext(x)), item["starts"]))
        if len(parts) < item["parts"]:
            continue
        done = pending.pop(k)
        feats, logits, starts = (np.concatenate([np.asarray(p[i]) for p in done]) for i in range(3))
        result = {
            "features": feats,
            "logits": logits,
            "starts": starts,
            "frames": item["frames"],
            "first_frame": ds.videos[k].offset,
            "windows": len(starts),
        }
        save_video(a.out, ids[k], ds.videos[k].path, result, a)
        windows += len(starts)
        bar.update(1)
        bar.set_postfix_str(f"{windows / max(time.time() - t0, 1e-9):.1f} windows/s", refresh=False)
    bar.close()
    return bad, windows


def main(argv=None):
    a = get_parser().parse_args(argv)
    checkpoint.TRUST["on"] = a.trust_checkpoint
    check(a)
    model, args, names = load_model(a)
    try:
        ext = Extractor(model, a.layer, a.probe_query)
    except ValueError as e:
        fail(str(e))
    with tempfile.TemporaryDirectory() as tmp:
        ds, ids, bad = collect(a, args, tmp)
    rt = setup(a, args)
    model.to(a.device)
    check_out(a, settings(a, args, names), rt.rank)
    if rt.world_size > 1:
        dist.barrier()  # settings.json written before any process writes a video
    t0 = time.time()
    failed, windows = extract_all(a, args, ext, ds, ids, rt) if ds else ([], 0)
    failed = [line for lines in rt.gather(failed) for line in lines]
    windows = sum(rt.gather(windows))
    if rt.rank == 0:
        for line in bad:
            print(f"train.py features: error: {line}", file=sys.stderr)
        done = write_reports(a, ds, ids, bad + failed)
        print(
            f"{done} of {len(ids)} videos have features in {a.out} ({windows} windows written in "
            f"{time.time() - t0:.1f}s); {len(bad + failed)} failed (failed.txt)"
        )
    if rt.world_size > 1:
        # every rank waits for rank 0's reports: torchrun ends the others at a first exit
        dist.barrier()
        dist.destroy_process_group()
    # Every rank, after every rank's videos and the summary: a pipeline checking the status stops on
    # missing features (torchrun then prints its own failure banner after the summary).
    return 2 if bad or failed else 0


if __name__ == "__main__":
    sys.exit(main())
