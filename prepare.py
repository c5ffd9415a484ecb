"""Dataset preparation: frame folders, videos and list files for data.py, from videos, split files
or nothing.

    python prepare.py synth OUT [--classes 4 --videos 24 --frames 32 --size 340x256]
    python prepare.py extract VIDEOS_DIR FRAMES_DIR [--short-side 256 --quality 95 -j N]
    python prepare.py reencode VIDEOS_DIR OUT_DIR [--short-side 256 -j N]
    python prepare.py lists DIR --ucf101 SPLITS_DIR [--split 1 --force]    (or --hmdb51 SPLITS_DIR)
    python prepare.py lists DIR --kinetics train.csv validate.csv
    python prepare.py lists DIR --sthv2 LABELS_DIR     # Something-Something v2's JSON files
    python prepare.py check LIST [--root R --image_tmpl T --full]

synth writes a small dataset whose only cue is motion (the demo's); extract decodes video files into
JPEG frame folders (PyAV); reencode re-encodes video files for random access (short side, frequent
keyframes: docs/video.md); lists writes the train/val list files and the classes file of an official
split or of Kinetics' CSV files, naming frame folders or video files with their frame counts; check
reads a list and its frames or videos and prints every problem, one line each. The list format, and
how a list is read and loaded, are data.py's.

References
- K. Soomro, A. R. Zamir, M. Shah, "UCF101: A Dataset of 101 Human Actions Classes From Videos in
  The Wild", CRCV-TR-12-01, 2012: classInd.txt, trainlist0N.txt / testlist0N.txt (N = 1, 2, 3).
- H. Kuehne et al., "HMDB: A Large Video Database for Human Motion Recognition", ICCV 2011:
  <class>_test_splitN.txt, one line per video, 1 = train, 2 = test, 0 = unused.
- L. Wang et al., "Temporal Segment Networks", ECCV 2016: frame folders of img_00001.jpg, ... and
  the `<frame_dir> <num_frames> <label>` list files that `lists` writes.
- W. Kay et al., "The Kinetics Human Action Video Dataset", arXiv:1705.06950, 2017: the CSV
  annotations (label, youtube_id, time_start, time_end, split); the downloaders name clips
  <id>_<start>_<end>.
"""

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
from PIL import Image
from tqdm import tqdm

import data
import decode


# ---- synthetic data: motion is the only cue ------------------------------------------------------
def _texture(rng, h, w, octaves=(64, 16, 4)):
    """Smooth random texture with natural-image-like spectrum (noise upsampled from coarse to fine
    grids, amplitude halving), zero mean, unit std: JPEGs of it are as large as real frames'."""
    out = np.zeros((h, w), np.float32)
    for k, o in enumerate(octaves):
        noise = rng.standard_normal((h // o + 2, w // o + 2)).astype(np.float32)
        out += 0.5**k * np.asarray(Image.fromarray(noise, mode="F").resize((w, h), Image.BICUBIC))
    return out / (out.std() + 1e-6)


def _synth_video(rng, label, classes, frames, width, height):
    """(frames, H, W, 3) uint8: a textured patch (half the short side) crossing a fainter textured
    background in direction 2*pi*label/classes at ~short/32 px per frame. It moves inside the
    central short x short square, which every crop sees most of, wrapping around its edges from a
    random start: a single frame says nothing about the label. (Tuned so that resnet10_3d learns it
    from scratch at 56 px crops in ~100 SGD steps; a smaller, faster patch or a busier background
    took far longer.)"""
    short = min(width, height)
    side = max(2, short // 2)
    oy, ox = (height - short) // 2, (width - short) // 2  # the central square
    bg = 110 + 15 * _texture(rng, height, width)[..., None] * rng.uniform(0.6, 1.4, 3).astype(
        np.float32
    )
    patch = (
        rng.uniform(60, 200, 3).astype(np.float32)
        + 45 * _texture(rng, side, side, (16, 4))[..., None]
    )
    angle = 2 * math.pi * label / classes
    speed = short / 32 * rng.uniform(0.75, 1.25)
    y0, x0 = rng.uniform(0, short, 2)
    out = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        img = bg.copy()
        rows = oy + (round(y0 + t * speed * math.sin(angle)) + np.arange(side)) % short
        cols = ox + (round(x0 + t * speed * math.cos(angle)) + np.arange(side)) % short
        img[np.ix_(rows, cols)] = patch
        # sensor noise: no two frames alike
        img += rng.standard_normal(img.shape, dtype=np.float32) * 2
        out[t] = np.clip(img, 0, 255)
    return out


SYNTH_DIRECTIONS = ("right", "down-right", "down", "down-left", "left", "up-left", "up", "up-right")


def make_synth(
    out_dir, classes=4, videos=24, frames=32, size=(340, 256), quality=95, seed=0, name="demo"
):
    """Write `videos` train AND `videos` val frame folders (labels round-robin, so balanced) of
    `frames` JPEG frames of size (W, H), plus train.txt / val.txt (paths relative to out_dir) and
    <name>_classes.txt (the directions: what train.py's reports call the classes of dataset `name`).
    Class c = a patch moving in direction 2*pi*c/classes (1 <= classes <= 8: right, down, left, up,
    ...). Returns (train_list, val_list)."""
    if not 1 <= classes <= 8 or videos < 1 or frames < 1:
        raise ValueError(
            f"need 1 <= classes <= 8, videos >= 1, frames >= 1; got {classes}, {videos}, {frames}"
        )
    width, height = size
    rng = np.random.default_rng(seed)
    lists = []
    for split in ("train", "val"):
        lines = []
        for i in range(videos):
            label, folder = i % classes, f"{split}/video_{i:04d}"
            os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
            for t, img in enumerate(_synth_video(rng, label, classes, frames, width, height), 1):
                Image.fromarray(img).save(
                    os.path.join(out_dir, folder, f"img_{t:05d}.jpg"), quality=quality
                )
            lines.append(f"{folder} {frames} {label}\n")
        lists.append(os.path.join(out_dir, f"{split}.txt"))
        with open(lists[-1], "w") as f:
            f.writelines(lines)
    names = [
        SYNTH_DIRECTIONS[8 * c // classes]
        if 8 * c % classes == 0
        else f"{360 * c / classes:.0f} degrees"
        for c in range(classes)
    ]
    with open(os.path.join(out_dir, f"{name}_classes.txt"), "w") as f:
        f.writelines(n + "\n" for n in names)
    return tuple(lists)


# The verb x noun demo's nouns: the patch's colour (RGB), its verbs the directions.
SYNTH_COLOURS = {"red": (205, 50, 45), "green": (50, 170, 60), "blue": (55, 80, 215)}
# kind -> the dataset name its recipe trains it as (<name>_classes.txt names its classes)
SYNTH_KINDS = {"multilabel": "demo_ml", "verbnoun": "demo_vn"}


def _synth_bands(rng, patches, frames, width, height):
    """(frames, H, W, 3) uint8: `_synth_video`'s textured patches, one per (direction 0..3, RGB
    colour or None: a random one) in `patches`, patch k crossing the k-th horizontal band of the
    central square (wrapping around its edges), so that several move at once without hiding each
    other."""
    short = min(width, height)
    band = short // len(patches)
    oy, ox = (height - short) // 2, (width - short) // 2
    bg = 110 + 15 * _texture(rng, height, width)[..., None] * rng.uniform(0.6, 1.4, 3).astype(
        np.float32
    )
    moving = []
    for k, (direction, colour) in enumerate(patches):
        side = max(2, min(band, short // 2) * 3 // 4)
        base = rng.uniform(60, 200, 3) if colour is None else np.array(colour, np.float64)
        patch = base.astype(np.float32) + 30 * _texture(rng, side, side, (16, 4))[..., None]
        angle = math.pi / 2 * direction
        speed = short / 32 * rng.uniform(0.75, 1.25)
        moving.append((k, side, patch, angle, speed, *rng.uniform(0, [band, short])))
    out = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        img = bg.copy()
        for k, side, patch, angle, speed, y0, x0 in moving:
            dy, dx = (
                round(y0 + t * speed * math.sin(angle)),
                round(x0 + t * speed * math.cos(angle)),
            )
            rows = oy + k * band + (dy + np.arange(side)) % band
            cols = ox + (dx + np.arange(side)) % short
            img[np.ix_(rows, cols)] = patch
        img += rng.standard_normal(img.shape, dtype=np.float32) * 2
        out[t] = np.clip(img, 0, 255)
    return out


def make_synth_labels(out_dir, kind, videos=24, frames=32, size=(340, 256), quality=95, seed=0):
    """The demos beyond one label a video, as `make_synth` writes its own: kind "multilabel": two
    patches at once, each moving right, down, left or up (two different directions), labelled
    with both (`<frame_dir> <num_frames> a,b`, --multi-label); kind "verbnoun": one patch, its
    direction the verb (4) and its colour the noun (SYNTH_COLOURS, 3), labelled `verb,noun`
    (--heads 4 3; balanced). demo_ml_classes.txt / demo_vn_classes.txt (SYNTH_KINDS): the
    directions (then the colours). Returns
    (train_list, val_list)."""
    if kind not in SYNTH_KINDS:
        raise ValueError(f"kind must be one of {tuple(SYNTH_KINDS)}, got {kind!r}")
    width, height = size
    rng = np.random.default_rng(seed)
    colours = list(SYNTH_COLOURS.values())
    lists = []
    for split in ("train", "val"):
        lines = []
        for i in range(videos):
            if kind == "multilabel":
                labels = sorted(rng.choice(4, 2, replace=False).tolist())
                patches = [(d, None) for d in rng.permutation(labels)]
            else:
                labels = [i % 4, (i // 4) % 3]
                patches = [(labels[0], colours[labels[1]])]
            folder = f"{split}/video_{i:04d}"
            os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
            for t, img in enumerate(_synth_bands(rng, patches, frames, width, height), 1):
                path = os.path.join(out_dir, folder, f"img_{t:05d}.jpg")
                Image.fromarray(img).save(path, quality=quality)
            lines.append(f"{folder} {frames} {','.join(map(str, labels))}\n")
        lists.append(os.path.join(out_dir, f"{split}.txt"))
        with open(lists[-1], "w") as f:
            f.writelines(lines)
    names = ["right", "down", "left", "up"] + (list(SYNTH_COLOURS) if kind == "verbnoun" else [])
    with open(os.path.join(out_dir, f"{SYNTH_KINDS[kind]}_classes.txt"), "w") as f:
        f.writelines(n + "\n" for n in names)
    return tuple(lists)


# ---- extract: video files -> frame folders -------------------------------------------------------
VIDEO_EXTS = (".avi", ".mp4", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".flv", ".3gp")


def _extract_one(job):
    """One video -> FRAMES/<name>/img_00001.jpg ... Frames go to a temporary folder that is renamed
    when complete, so an interrupted run never leaves a half folder that looks finished."""
    video, out_dir, short_side, quality = job
    import av  # optional dependency, imported where it is needed

    tmp = out_dir + ".part"
    # an interrupted run's: stale, maybe more frames than the video
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    n = 0
    try:
        with av.open(video) as container:
            for frame in container.decode(video=0):
                img = frame.to_image()  # PIL RGB
                w, h = img.size
                if short_side and min(w, h) != short_side:
                    s = short_side / min(w, h)
                    img = img.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR)
                n += 1
                img.save(os.path.join(tmp, f"img_{n:05d}.jpg"), quality=quality)
    except Exception as e:  # a corrupt video must not stop the other 13000
        shutil.rmtree(tmp, ignore_errors=True)
        return video, 0, f"{type(e).__name__}: {e}"
    if n == 0:
        os.rmdir(tmp)
        return video, 0, "no video frames decoded"
    os.replace(tmp, out_dir)
    return video, n, None


def extract(videos_dir, frames_dir, short_side=256, quality=95, jobs=1):
    """Every video under videos_dir -> frames_dir/<same relative path without
    extension>/img_%05d.jpg, short side resized to short_side (0: keep), in parallel over videos.
    Existing folders are skipped. ValueError if videos_dir is not a folder or holds no video
    file."""
    if importlib.util.find_spec("av") is None:
        raise SystemExit("prepare.py extract: PyAV is not installed: pip install av")
    if not os.path.isdir(videos_dir):
        raise ValueError(f"VIDEOS_DIR {videos_dir} is not a folder")
    todo, skipped = [], 0
    for dirpath, _, files in os.walk(videos_dir):
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in VIDEO_EXTS:
                rel = os.path.relpath(os.path.join(dirpath, os.path.splitext(name)[0]), videos_dir)
                out = os.path.join(frames_dir, rel)
                if os.path.isdir(out):
                    skipped += 1
                else:
                    todo.append((os.path.join(dirpath, name), out, short_side, quality))
    if not todo and not skipped:
        raise ValueError(f"no video file ({', '.join(VIDEO_EXTS)}) under VIDEOS_DIR {videos_dir}")
    frames = failed = 0
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        results = pool.map(_extract_one, todo, chunksize=4) if jobs > 1 else map(_extract_one, todo)
        # a bar with rate and ETA on a terminal only (disable=None): logs stay clean
        for video, n, err in tqdm(
            results, total=len(todo), desc="extract", unit="video", disable=None
        ):
            frames += n
            if err:
                failed += 1
                tqdm.write(f"{video}: {err}", file=sys.stderr)
    print(
        f"extracted {len(todo) - failed} videos ({frames} frames) to {frames_dir}; "
        f"{skipped} already there, {failed} failed"
    )
    return failed


# ---- reencode: video files -> video files made for random access ---------------------------------
# Measured with `python bench.py video --sweep` on real camera clips (docs/video.md): a train clip
# (16 frames 4 apart) decodes every frame from the keyframe before each frame it needs. MPEG-4 part
# 2 takes ~half h264's CPU per clip on one core, no B-frames keeps decode order = presentation
# order, a fixed quantiser 3 keeps ~37 dB PSNR, and mp4 keeps timestamps (AVI has none:
# decode.open_video). A keyframe every 2 frames: train clips at ~0.82x the speed of their JPEG
# frames for ~0.24x their disk (every 12: ~0.72x for 0.12x; `--keyint 1`, all-intra: ~0.86x for
# 0.41x).
REENCODE = {"codec": "mpeg4", "gop": 2, "q": 3}


def _reencode_one(job):
    """One video -> DST.mp4, short side `short_side`: every frame of a plain decode, in order, so
    frame k of the output is frame k of the input (and `extract`'s img_{k+1:05d}.jpg); a variable
    frame rate becomes a constant one. Written under a temporary name and renamed when complete."""
    src, dst, short_side, keyint = job
    import av  # optional dependency, imported where it is needed

    tmp, n, why = dst + ".part.mp4", 0, "no video frames decoded"
    try:
        with av.open(src) as inp, av.open(tmp, "w") as out:
            stream = inp.streams.video[0]
            stream.codec_context.thread_count = 1  # -j runs one video per core
            w, h = stream.codec_context.width, stream.codec_context.height
            s = short_side / min(w, h) if short_side else 1
            # 4:2:0 needs even sizes
            size = (max(2, 2 * round(w * s / 2)), max(2, 2 * round(h * s / 2)))
            opts = {"g": str(keyint or REENCODE["gop"]), "bf": "0"} | {
                k: str(v) for k, v in REENCODE.items() if k not in ("codec", "gop", "q")
            }
            # a fixed quantiser: qmin = qmax (ffmpeg's -q:v is a per-frame field)
            if "q" in REENCODE:
                opts["qmin"] = opts["qmax"] = str(REENCODE["q"])
            enc = out.add_stream(
                REENCODE["codec"],
                rate=stream.average_rate or stream.guessed_rate or 25,
                options=opts,
            )
            enc.width, enc.height, enc.pix_fmt = *size, "yuv420p"
            for frame in inp.decode(stream):
                frame = frame.reformat(*size, "yuv420p", interpolation="BILINEAR")
                frame.pts, frame.time_base = n, 1 / enc.codec_context.framerate
                out.mux(enc.encode(frame))
                n += 1
            out.mux(enc.encode(None))
    except Exception as e:  # PyAV raises many kinds; a corrupt video must not stop the others
        n, why = 0, " ".join(f"{type(e).__name__}: {e}".split())
    if n == 0:
        if os.path.exists(tmp):
            os.remove(tmp)
        return src, 0, why
    os.replace(tmp, dst)
    return src, n, None


def reencode(src_dir, dst_dir, short_side=256, jobs=1, keyint=None):
    """Every video under src_dir -> dst_dir/<same relative path>.mp4 (_reencode_one), in parallel,
    a keyframe every `keyint` frames (None: REENCODE's; 1: every frame a keyframe, all-intra).
    Finished files are skipped. Returns the failures [(video, reason)], also printed one a line."""
    if not os.path.isdir(src_dir):
        raise ValueError(f"SRC {src_dir} is not a folder")
    if keyint is not None and keyint < 1:
        raise ValueError(f"--keyint must be >= 1 (1: every frame a keyframe), got {keyint}")
    todo, skipped, failed, seen = [], 0, [], {}
    for dirpath, _, files in os.walk(src_dir):
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in VIDEO_EXTS and not name.endswith(".part.mp4"):
                rel = os.path.relpath(os.path.join(dirpath, os.path.splitext(name)[0]), src_dir)
                src, dst = os.path.join(dirpath, name), os.path.join(dst_dir, rel + ".mp4")
                if dst in seen:  # a.avi and a.mkv: one name for the lists, one file for it
                    failed.append((src, f"{seen[dst]} is re-encoded to the same {dst}"))
                elif os.path.exists(dst):
                    skipped += 1
                else:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    todo.append((src, dst, short_side, keyint))
                seen.setdefault(dst, src)
    if not seen:
        raise ValueError(f"no video file ({', '.join(VIDEO_EXTS)}) under SRC {src_dir}")
    frames, done = 0, len(todo) + len(failed)
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        results = pool.map(_reencode_one, todo) if jobs > 1 else map(_reencode_one, todo)
        for src, n, err in tqdm(
            results, total=len(todo), desc="reencode", unit="video", disable=None
        ):
            frames += n
            failed += [(src, err)] if err else []
    for src, err in failed:
        print(f"failed: {src}: {err}", file=sys.stderr)
    print(
        f"re-encoded {done - len(failed)} videos ({frames} frames) to {dst_dir}; "
        f"{skipped} already there, {len(failed)} failed"
    )
    return failed


# ---- lists: official splits -> list files --------------------------------------------------------
def _ucf101_classes(path):
    """classInd.txt ("1 ApplyEyeMakeup", 1-based, in label order) -> class names, label order."""
    names = {}
    for n, line in data.read_text_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit() or int(parts[0]) < 1 or int(parts[0]) in names:
            raise ValueError(
                f"{path}:{n}: expected '<index from 1> <class name>', each index once: "
                f"{line.strip()}"
            )
        names[int(parts[0])] = parts[1]
    if sorted(names) != list(range(1, len(names) + 1)):
        raise ValueError(f"{path}: class indices must be 1..{len(names)} without gaps")
    return [names[k] for k in range(1, len(names) + 1)]


def _split_entries(dataset, splits_dir, split):
    """Official split files -> (classes, {"train": [(video_name, label, "file:line")], "val":
    [...]})."""
    entries = {"train": [], "val": []}
    if dataset == "ucf101":
        # classInd.txt: "1 ApplyEyeMakeup" (1-based). trainlist01.txt: "ApplyEyeMakeup/v_..._c01.avi
        # 1"; testlist01.txt: the same without the label. The class comes from the folder part,
        # looked up case-insensitively (UCF101 spells HandstandPushups two ways).
        ind = os.path.join(splits_dir, "classInd.txt")
        classes = _ucf101_classes(ind)
        lookup = {name.lower(): label for label, name in enumerate(classes)}
        for part, fname in (("train", f"trainlist0{split}.txt"), ("val", f"testlist0{split}.txt")):
            path = os.path.join(splits_dir, fname)
            for n, line in data.read_text_lines(path):
                if line.strip():
                    rel = line.split()[0].replace("\\", "/")
                    cls = rel.split("/")[0].lower()
                    if cls not in lookup:
                        raise ValueError(
                            f"{path}:{n}: class {rel.split('/')[0]!r} is not in {ind}: "
                            f"{line.strip()}"
                        )
                    name = os.path.splitext(os.path.basename(rel))[0]
                    entries[part].append((name, lookup[cls], f"{path}:{n}"))
        return classes, entries
    # HMDB51: <class>_test_split<N>.txt, lines "<video>.avi <0|1|2>": 1 train, 2 test, 0 unused.
    # Labels index the sorted class names (not the sorted file names: "sword_exercise_..." <
    # "sword_test...").
    suffix = f"_test_split{split}.txt"
    classes = sorted(f[: -len(suffix)] for f in os.listdir(splits_dir) if f.endswith(suffix))
    if not classes:
        raise ValueError(f"no *{suffix} files in {splits_dir}")
    for label, name in enumerate(classes):
        path = os.path.join(splits_dir, name + suffix)
        for n, line in data.read_text_lines(path):
            parts = line.split()
            if len(parts) == 2 and parts[1] in ("1", "2"):
                entries["train" if parts[1] == "1" else "val"].append(
                    (os.path.splitext(parts[0])[0], label, f"{path}:{n}")
                )
            elif parts and (len(parts) != 2 or parts[1] != "0"):
                raise ValueError(f"{path}:{n}: expected '<video> <0|1|2>': {line.strip()}")
    return classes, entries


def _count_video(job):
    return decode.video_frames(*job)


def _find_videos(frames_dir, image_tmpl, start_index, jobs=1, decoder="auto"):
    """Frame folders and video files anywhere under frames_dir -> {video name: (path, frame count)}.
    Video files are counted as data.py counts them (no decoding), in parallel; unreadable ones are
    left out, and said so."""
    folders, files_ = {}, []  # video name -> (folder, frame count); video files to count
    for dirpath, _, files in os.walk(frames_dir):
        n = count_frames(dirpath, image_tmpl, start_index, files) if files else 0
        if n:
            folders[os.path.basename(dirpath)] = (dirpath, n)
        files_ += [
            os.path.join(dirpath, f)
            for f in sorted(files)  # not an interrupted reencode's
            if decode.is_video_file(f) and not f.endswith(".part.mp4")
        ]
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        jobs_ = [(f, decoder) for f in files_]
        counts = (
            pool.map(_count_video, jobs_, chunksize=16) if jobs > 1 else map(_count_video, jobs_)
        )
        for path, n in zip(
            files_, tqdm(counts, total=len(files_), desc="count", unit="video", disable=None)
        ):
            if n:
                folders[os.path.splitext(os.path.basename(path))[0]] = (path, n)
            else:
                print(
                    f"warning: {path}: unreadable video, not listed (`check` says why)",
                    file=sys.stderr,
                )
    return folders


def _kinetics_entries(csv_files):
    """Kinetics annotations (`label,youtube_id,time_start,time_end,split`, one file per split or all
    in one) -> (classes, {"train": [(video name, label, "file:line")], "val": [...]}). Video names
    are `<youtube_id>_<start:06d>_<end:06d>` (data.kinetics_name), the downloaders' file names.
    Classes: the sorted names of the train rows (the label order of every public Kinetics
    checkpoint)."""
    rows = [(row, f"{path}:{n}") for path in csv_files for n, row in data.kinetics_csv(path)]
    classes = sorted({row["label"] for row, _ in rows if row["split"] == "train"})
    if not classes:
        raise ValueError(f"no train rows (split 'train') in {', '.join(map(str, csv_files))}")
    lookup = {name: k for k, name in enumerate(classes)}
    entries = {"train": [], "val": []}
    for row, where in rows:
        part = {"train": "train", "val": "val", "validate": "val"}.get(row["split"])
        if part is None:  # test rows: no labels published
            continue
        if row["label"] not in lookup:
            raise ValueError(f"{where}: class {row['label']!r} has no train video")
        try:
            entries[part].append((data.kinetics_name(row), lookup[row["label"]], where))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return classes, entries


STHV2_LISTS = {
    "train": "something-something-v2-train.json",
    "val": "something-something-v2-validation.json",
}


def _sthv2_entries(labels_dir):
    """Something-Something v2's annotations (LABELS_DIR: something-something-v2-labels.json,
    -train.json, -validation.json) -> (classes, {"train": [(video id, label, "file:entry")], "val":
    [...]}): the videos are <id>.webm, a label is the labels file's index of the entry's
    template."""
    labels_file = os.path.join(labels_dir, data.STHV2_LABELS)
    classes = data.list_classes(os.path.join(labels_dir, STHV2_LISTS["train"]))
    labels = data.sthv2_labels(labels_file)
    entries = {"train": [], "val": []}
    for part, name in STHV2_LISTS.items():
        path = os.path.join(labels_dir, name)
        for n, entry in data.sthv2_entries(path):
            try:
                label = data.sthv2_label(entry, labels, labels_file)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: {e}: {json.dumps(entry)}") from None
            entries[part].append((str(entry["id"]), label, f"{path}:{n}"))
    return classes, entries


SEGMENT_COLUMNS = ("video", "start", "end", "label", "split")
SPLITS = {"train": "train", "val": "val", "validate": "val", "validation": "val"}


def seconds(text):
    """A time as annotations write it -> seconds: `12.5`, or EPIC-KITCHENS' `HH:MM:SS.ff`
    (start_timestamp) and `MM:SS`. ValueError otherwise."""
    parts = text.strip().split(":")
    if len(parts) > 3 or not all(re.fullmatch(r"\d+(\.\d*)?", p) for p in parts):
        raise ValueError(f"a time is seconds (12.5) or HH:MM:SS.ff, got {text!r}")
    return sum(float(p) * 60**k for k, p in enumerate(reversed(parts)))


def _segment_entries(csv_file):
    """An annotation CSV of segments (SEGMENT_COLUMNS: the video's name, start and end as
    `seconds` reads them, label, split train / val; other splits, test, are left out) -> (classes,
    {"train": [(video, label, "file:line", (start, end))], "val": [...]}). Labels: integers as
    they are (class names "0", "1", ...), else class names, numbered in the sorted order of the
    train rows' (as Kinetics')."""
    rows = [(row, f"{csv_file}:{n}") for n, row in data.csv_with_columns(csv_file, SEGMENT_COLUMNS)]
    rows = [(row, where) for row, where in rows if row["split"] in SPLITS]
    numbered = all(re.fullmatch(r"\d+", row["label"] or "") for row, _ in rows)
    if numbered:
        classes = [str(k) for k in range(1 + max((int(r["label"]) for r, _ in rows), default=0))]
    else:
        classes = sorted({row["label"] for row, _ in rows if SPLITS[row["split"]] == "train"})
    lookup = {name: k for k, name in enumerate(classes)}
    entries = {"train": [], "val": []}
    for row, where in rows:
        try:
            start, end = seconds(row["start"]), seconds(row["end"])
            if end <= start:
                raise ValueError(f"end {row['end']} is not after start {row['start']}")
            if row["label"] not in lookup:
                raise ValueError(f"class {row['label']!r} has no train segment")
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        entries[SPLITS[row["split"]]].append(
            (row["video"], lookup[row["label"]], where, (start, end))
        )
    for part, found in entries.items():
        if not found:
            raise ValueError(f"{csv_file}: no {part} rows (split {part!r})")
    return classes, entries


def _time(t):
    """Seconds as a list line writes them (data.TIME_FORM): `12.5s`, to the microsecond."""
    return f"{t:.6f}".rstrip("0").rstrip(".") + "s"


def _official_entries(dataset, splits_dir, split):
    """-> (the lists' dataset name, classes, entries as _split_entries gives them, what they come
    from)."""
    if dataset == "kinetics":
        classes, entries = _kinetics_entries(splits_dir)
        return f"kinetics{len(classes)}", classes, entries, "the CSV files"
    if dataset == "sthv2":
        return dataset, *_sthv2_entries(splits_dir), "the JSON files"
    if dataset == "segments":  # the lists are named after the CSV file
        name = os.path.splitext(os.path.basename(splits_dir))[0]
        return name, *_segment_entries(splits_dir), "the CSV file"
    return dataset, *_split_entries(dataset, splits_dir, split), f"split {split}"


def make_lists(
    frames_dir,
    dataset,
    splits_dir,
    split=1,
    out_dir=None,
    image_tmpl="img_{:05d}.jpg",
    start_index=1,
    jobs=1,
    decoder="auto",
    force=False,
):
    """Write <out_dir>/<dataset>_{train,val}_split<N>_list.txt from the official splits (kinetics:
    <out_dir>/kinetics<classes>_{train,val}_list.txt from its CSV files, `splits_dir` a list of
    them: a kinetics400 list is train.py's dataset kinetics400, its classes file found beside it;
    sthv2: sthv2_{train,val}_list.txt from the JSON files in `splits_dir`; segments:
    <csv name>_{train,val}_list.txt of segments by time from the CSV file `splits_dir`,
    `_segment_entries`), with the frame counts.
    Frame folders and video files are found by video name anywhere under frames_dir (flat or per
    class). Paths are relative to out_dir (default: frames_dir's parent), the lists' default root.
    Also writes <out_dir>/<dataset>_classes.txt: line i = the name of label i (read_class_names).
    Every listed video without a folder or file is reported, one line each. ValueError, and nothing
    written, if frames_dir is not a folder, a list would be empty, or (unless `force`) a list file
    exists, or a classes file with other names."""
    data.check_image_tmpl(image_tmpl, start_index)
    if not os.path.isdir(frames_dir):
        raise ValueError(f"FRAMES_DIR {frames_dir} is not a folder")
    out_dir = out_dir or os.path.dirname(os.path.abspath(frames_dir))
    dataset, classes, entries, of = _official_entries(dataset, splits_dir, split)
    suffix = f"_split{split}" if of.startswith("split") else ""
    paths, classes_path = output_paths(out_dir, dataset, suffix, classes, force)  # before the count
    folders = _find_videos(frames_dir, image_tmpl, start_index, jobs, decoder)
    lists, warnings_ = {}, []
    for part in ("train", "val"):
        lines, missing = [], 0
        for name, label, where, *times in entries[part]:
            if name not in folders:
                missing += 1
                warnings_.append(
                    f"warning: {where}: no frame folder or video for {name} under {frames_dir}"
                )
                continue
            folder, n = folders[name]
            rel = os.path.relpath(folder, out_dir)
            # HMDB51 names may start with '#': no comment
            rel = "./" + rel if rel.startswith("#") else rel
            # a segment by time (--segments): its start and end, data.TIME_FORM
            span = f"{_time(times[0][0])} {_time(times[0][1])}" if times else n
            lines.append(f"{rel} {span} {label}\n")
        # a wrong FRAMES_DIR, --image_tmpl or split: say so rather than write an empty list
        if not lines:
            example = entries[part][0][0] if entries[part] else "(none listed)"
            raise ValueError(
                f"no frame folder or video file under {frames_dir} matches a {part} video of "
                f"{of} (looked for folders named like {example!r} holding "
                f"{image_tmpl.format(start_index)}, ..., or files {example}.mp4, .avi, ...)"
            )
        lists[part] = lines, missing
    # only now: an error above is one line, not thousands of warnings first
    for message in warnings_:
        print(message, file=sys.stderr)
    written = []
    for part, (lines, missing) in lists.items():
        path = paths[part]
        with open(path, "w") as f:
            f.writelines(lines)
        print(
            f"wrote {path}: {len(lines)} videos, {len(classes)} classes ({missing} missing, "
            "listed above)"
        )
        written.append(path)
    with open(classes_path, "w", encoding="utf-8") as f:
        f.writelines(name + "\n" for name in classes)
    print(f"wrote {classes_path}: {len(classes)} class names (line 1 = label 0)")
    return written


def output_paths(out_dir, dataset, suffix, classes, force):
    """({part: list path}, classes file path) that `lists` writes. Unless `force`, ValueError naming
    the files it would replace: existing lists (e.g. frame-folder lists of the same name), or a
    classes file naming other classes (the same names are the same file)."""
    paths = {p: os.path.join(out_dir, f"{dataset}_{p}{suffix}_list.txt") for p in ("train", "val")}
    classes_path = os.path.join(out_dir, f"{dataset}_classes.txt")
    taken = [p for p in paths.values() if os.path.exists(p)]
    if os.path.exists(classes_path):
        try:
            same = data.read_class_names(classes_path) == list(classes)
        except (ValueError, OSError):
            same = False
        taken += [] if same else [classes_path]
    if taken and not force:
        verb = "exists" if len(taken) == 1 else "exist"
        raise ValueError(
            f"{', '.join(taken)} already {verb}: nothing written (--force "
            "overwrites them; --out DIR writes elsewhere)"
        )
    return paths, classes_path


# ---- check: a list and its frames ----------------------------------------------------------------
def _check_video(v, where, full, decoder):
    """A listed video file's problem (one line) or None: it opens, holds the listed frames, and its
    first and last listed frames decode (full: every frame, 32 at a time, as a training read
    would)."""
    if not os.path.isfile(v.path):
        return f"{where}: missing file {v.path}"
    try:
        n, read = decode.open_video(v.path, decode.pick_video_decoder(decoder))
        end = v.offset + v.num_frames  # a segment: its last frame
        if n < end:
            return f"{where}: {end} frames listed, the video has {n} ({v.path})"
        for k in range(v.offset, end, 32) if full else [0]:
            read(list(range(k, min(end, k + 32))) if full else sorted({v.offset, end - 1}))
    except RuntimeError as e:
        return f"{where}: unreadable video {v.path}: {e}"
    return None


def check(
    list_file,
    root=None,
    image_tmpl="img_{:05d}.jpg",
    start_index=1,
    num_classes=None,
    full=False,
    decoder="auto",
    labels=None,
    fps=None,
):
    """Every problem of a list file and its frames, one line each with the list line; returns them.
    Checks the list syntax and labels, that every listed frame exists, and decodes the first and
    last frame of each video (full=True: every frame, and that all have one size); video files:
    _check_video."""
    data.check_image_tmpl(image_tmpl, start_index)
    problems = []  # (line, message)
    videos = data.read_list(list_file, root, num_classes, problems, decoder, labels, fps=fps)
    if not videos:
        problems.append((0, f"{list_file}: no videos listed"))
    frames = 0
    for v in tqdm(videos, desc="check", unit="video", disable=None):  # a bar on a terminal only
        where = f"{list_file}:{v.line}"
        frames += v.num_frames
        if decode.is_video_file(v.path):
            problems += [(v.line, p) for p in [_check_video(v, where, full, decoder)] if p]
            continue
        if not os.path.isdir(v.path):
            problems.append((v.line, f"{where}: missing folder {v.path}"))
            continue
        # a segment: frames start_index + offset on; Charades, EPIC: the video's own frame names
        tmpl, first = v.image_tmpl or image_tmpl, start_index + v.offset
        on_disk = count_frames(v.path, tmpl, first)
        if on_disk < v.num_frames:
            missing = os.path.join(v.path, tmpl.format(first + on_disk))
            problems.append(
                (
                    v.line,
                    f"{where}: {v.num_frames} frames listed, {on_disk} on disk "
                    f"(first missing: {missing})",
                )
            )
        numbers = range(first, first + min(on_disk, v.num_frames))
        size = None
        ends = sorted({numbers[0], numbers[-1]}) if numbers else []
        for i in numbers if full else ends:
            path = os.path.join(v.path, tmpl.format(i))
            try:
                img = decode.decode_frame(path)
            except (OSError, RuntimeError, ValueError) as e:
                problems.append((v.line, f"{where}: unreadable frame {path}: {decode._why(e)}"))
                continue
            if size is not None and img.shape != size:
                problems.append(
                    (
                        v.line,
                        f"{where}: frame {path} is {tuple(img.shape)}, the first {tuple(size)}",
                    )
                )
            size = size or img.shape
    problems.sort(key=lambda p: p[0])  # in list order
    for _, message in problems:
        print(message)
    print(
        f"{list_file}: {len(videos)} videos, {frames} frames, "
        f"{len({k for v in videos for k in data.labels(v)})} labels: "
        + (f"{len(problems)} problem(s)" if problems else "OK")
    )
    return [message for _, message in problems]


# ---- frames on disk: counted here and by predict.py, checked as train.py starts ------------------
def count_frames(folder, image_tmpl="img_{:05d}.jpg", start_index=1, names=None):
    """Frames start_index, start_index+1, ... present in folder (stops at the first gap)."""
    names = set(os.listdir(folder) if names is None else names)
    n = 0
    # bounded: whatever the template
    while n < len(names) and image_tmpl.format(start_index + n) in names:
        n += 1
    return n


def check_folders(videos, image_tmpl="img_{:05d}.jpg", start_index=1, max_report=10, threads=32):
    """The fail-early check before training: every video's folder exists and holds its first and
    last listed frame. Stat calls only (no decoding), on `threads` threads: on network storage a
    stat is a round trip, and they overlap. Returns (the first `max_report` problems in list order,
    one line each: "<list>:<line>: missing folder <path>" / "missing frame <path>", the number of
    bad videos)."""
    data.check_image_tmpl(image_tmpl, start_index)

    def problem(v):
        if decode.is_video_file(v.path):
            return (
                None if os.path.exists(v.path) else f"{v.list_file}:{v.line}: missing file {v.path}"
            )
        first = start_index + v.offset  # a segment's first frame
        for i in sorted({first, first + v.num_frames - 1}):
            path = os.path.join(v.path, (v.image_tmpl or image_tmpl).format(i))
            if not os.path.exists(path):
                what = (
                    f"missing frame {path}" if os.path.isdir(v.path) else f"missing folder {v.path}"
                )
                return f"{v.list_file}:{v.line}: {what}"
        return None

    def chunk(vs):  # a task per chunk, not per video: a future costs about as much as a stat
        return [m for m in map(problem, vs) if m]

    size = max(1, min(256, len(videos) // (4 * threads) + 1))
    with ThreadPoolExecutor(threads) as pool:
        chunks = pool.map(chunk, [videos[k : k + size] for k in range(0, len(videos), size)])
        found = [m for ms in chunks for m in ms]
    return found[:max_report], len(found)


# ---- the command line ----------------------------------------------------------------------------
class _OneLineParser(argparse.ArgumentParser):
    """argparse errors as one line (no usage block), exit 2: like every other error of these
    commands."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _size(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 340x256, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _fps(text):
    try:
        fps = float(text)
    except ValueError:
        fps = 0.0
    if not 0 < fps < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return fps


def _lists_parser(sub):
    """prepare.py lists: where the official splits come from (one of)."""
    li = sub.add_parser(
        "lists",
        help="train/val list files from the official UCF101 / HMDB51 splits "
        "or Kinetics' CSV files or Something-Something v2's JSON files, or segments of long "
        "videos from an annotation CSV, for frame folders or video files",
    )
    li.add_argument("frames_dir", help="frame folders and/or video files, found by video name")
    g = li.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--ucf101",
        metavar="SPLITS_DIR",
        help="folder with classInd.txt, trainlist0N.txt, testlist0N.txt",
    )
    g.add_argument("--hmdb51", metavar="SPLITS_DIR", help="folder with <class>_test_splitN.txt")
    g.add_argument(
        "--kinetics",
        metavar="CSV",
        nargs="+",
        help="files of label,youtube_id,time_start,time_end,split rows "
        "(videos named <youtube_id>_<start:06d>_<end:06d>.*)",
    )
    g.add_argument(
        "--segments",
        metavar="CSV",
        help="segments of long videos: rows of video,start,end,label,split (start, end in "
        "seconds or HH:MM:SS.ff; split train or val), written as '<video> <start>s <end>s "
        "<label>' lines named after the CSV",
    )
    g.add_argument(
        "--sthv2",
        metavar="LABELS_DIR",
        help="Something-Something v2: folder with something-something-v2-labels.json, "
        "-train.json, -validation.json (videos named <id>.webm)",
    )
    return li


def _parser():
    p = _OneLineParser(description="Video frame-folder datasets: make, extract, list, check.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser(
        "synth", help="a small motion-only dataset of JPEG frame folders + train.txt/val.txt"
    )
    s.add_argument("out")
    s.add_argument("--classes", type=int, default=4, help="1..8 motion directions")
    s.add_argument("--videos", type=int, default=24, help="videos per split (train and val each)")
    s.add_argument("--frames", type=int, default=32, help="frames per video")
    s.add_argument("--size", type=_size, default=(340, 256), help="WIDTHxHEIGHT (default 340x256)")
    s.add_argument("--quality", type=int, default=95, help="JPEG quality")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--kind",
        choices=list(SYNTH_KINDS),
        help="multilabel: two patches at once, labelled with both directions; verbnoun: a "
        "direction (verb) x a colour (noun) (default: one direction a video)",
    )
    e = sub.add_parser(
        "extract", help="video files -> JPEG frame folders (needs PyAV: pip install av)"
    )
    e.add_argument("videos_dir")
    e.add_argument("frames_dir")
    e.add_argument(
        "--short-side", type=int, default=256, help="resize the short side to this (0: keep)"
    )
    e.add_argument("--quality", type=int, default=95, help="JPEG quality")
    r = sub.add_parser(
        "reencode", help="video files -> mp4 files made for random access (needs PyAV)"
    )
    r.add_argument("src")
    r.add_argument("dst")
    for q in (e, r):
        q.add_argument(
            "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes"
        )
    r.add_argument(
        "--short-side", type=int, default=256, help="resize the short side to this (0: keep)"
    )
    r.add_argument(
        "--keyint",
        type=int,
        default=None,
        help=f"frames from one keyframe to the next (default {REENCODE['gop']}; 1: all-intra, "
        "the fastest clips for the most disk: docs/video.md)",
    )
    li = _lists_parser(sub)
    li.add_argument("--split", type=int, default=1, choices=(1, 2, 3))
    li.add_argument("--out", help="folder for the lists (default: FRAMES_DIR's parent)")
    c = sub.add_parser(
        "check", help="scan a list file's videos; print every problem; exit 1 if any"
    )
    c.add_argument("list")
    c.add_argument(
        "--full", action="store_true", help="decode every frame (default: first and last)"
    )
    c.add_argument("--num_classes", type=int, help="labels must be < this")
    c.add_argument("--fps", type=_fps, help="frames a second of frame folders (segments by time)")
    c.add_argument(
        "--labels", help=f"a .json list's labels file (default: {data.STHV2_LABELS} beside it)"
    )
    li.add_argument("--force", action="store_true", help="overwrite existing list files")
    li.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="count processes")
    for q in (li, c):
        q.add_argument(
            "--video_decoder",
            default="auto",
            choices=decode.VIDEO_DECODERS,
            help="video files: auto (TorchCodec if FFmpeg's libraries load, else PyAV)",
        )
        q.add_argument("--image_tmpl", default="img_{:05d}.jpg", help="frame file name template")
        q.add_argument("--start_index", type=int, default=1, help="number of the first frame")
    c.add_argument(
        "--root", help="folder the list's paths are relative to (default: the list's folder)"
    )
    return p


def main(argv=None):
    """Run one command; exit status 0, 1 (extract, reencode: a video failed; check: a problem) or 2
    (an error, one line on stderr, named after the script that ran: prepare.py, or data.py
    forwarding here)."""
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.cmd == "synth" and a.kind:
            lists = make_synth_labels(a.out, a.kind, a.videos, a.frames, a.size, a.quality, a.seed)
            print("wrote", *lists)
        elif a.cmd == "synth":
            print(
                "wrote",
                *make_synth(a.out, a.classes, a.videos, a.frames, a.size, a.quality, a.seed),
            )
        elif a.cmd == "extract":
            return 1 if extract(a.videos_dir, a.frames_dir, a.short_side, a.quality, a.jobs) else 0
        elif a.cmd == "reencode":
            return 1 if reencode(a.src, a.dst, a.short_side, a.jobs, a.keyint) else 0
        elif a.cmd == "lists":
            dataset, splits = next(
                (d, s)
                for d in ("ucf101", "hmdb51", "kinetics", "sthv2", "segments")
                if (s := getattr(a, d))
            )
            make_lists(
                a.frames_dir,
                dataset,
                splits,
                a.split,
                a.out,
                a.image_tmpl,
                a.start_index,
                a.jobs,
                a.video_decoder,
                a.force,
            )
        else:
            return (
                1
                if check(
                    a.list,
                    a.root,
                    a.image_tmpl,
                    a.start_index,
                    a.num_classes,
                    a.full,
                    a.video_decoder,
                    a.labels,
                    a.fps,
                )
                else 0
            )
    except (ValueError, OSError) as err:
        print(f"{p.prog} {a.cmd}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
