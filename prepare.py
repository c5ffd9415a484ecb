"""Dataset preparation: frame folders and list files for data.py, from videos, split files or nothing.

    python prepare.py synth OUT [--classes 4 --videos 24 --frames 32 --size 340x256]
    python prepare.py extract VIDEOS_DIR FRAMES_DIR [--short-side 256 --quality 95 -j N]
    python prepare.py lists FRAMES_DIR --ucf101 SPLITS_DIR [--split 1]    (or --hmdb51 SPLITS_DIR)
    python prepare.py check LIST [--root R --image_tmpl T --full]

synth writes a small dataset whose only cue is motion (the demo's); extract decodes video files into
JPEG frame folders (PyAV); lists writes the train/val list files and the classes file of an official
split, counting the frames on disk; check reads a list and its frames and prints every problem, one line
each. The list format, and how a list is read and loaded, are data.py's. `python data.py COMMAND ...`
runs the same commands.

References
- K. Soomro, A. R. Zamir, M. Shah, "UCF101: A Dataset of 101 Human Actions Classes From Videos in The
  Wild", CRCV-TR-12-01, 2012: classInd.txt, trainlist0N.txt / testlist0N.txt (N = 1, 2, 3).
- H. Kuehne et al., "HMDB: A Large Video Database for Human Motion Recognition", ICCV 2011:
  <class>_test_splitN.txt, one line per video, 1 = train, 2 = test, 0 = unused.
- L. Wang et al., "Temporal Segment Networks", ECCV 2016: frame folders of img_00001.jpg, ... and the
  `<frame_dir> <num_frames> <label>` list files that `lists` writes.
"""
import argparse
import importlib.util
import math
import os
import re
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image
from tqdm import tqdm

import data


# ---- synthetic data: motion is the only cue -------------------------------------------------------
def _texture(rng, h, w, octaves=(64, 16, 4)):
    """Smooth random texture with natural-image-like spectrum (noise upsampled from coarse to fine
    grids, amplitude halving), zero mean, unit std: JPEGs of it are as large as real frames'."""
    out = np.zeros((h, w), np.float32)
    for k, o in enumerate(octaves):
        noise = rng.standard_normal((h // o + 2, w // o + 2)).astype(np.float32)
        out += 0.5 ** k * np.asarray(Image.fromarray(noise, mode="F").resize((w, h), Image.BICUBIC))
    return out / (out.std() + 1e-6)


def _synth_video(rng, label, classes, frames, width, height):
    """(frames, H, W, 3) uint8: a textured patch (half the short side) crossing a fainter textured
    background in direction 2*pi*label/classes at ~short/32 px per frame. It moves inside the central
    short x short square, which every crop sees most of, wrapping around its edges from a random start:
    a single frame says nothing about the label. (Tuned so that resnet10_3d learns it from scratch at
    56 px crops in ~100 SGD steps; a smaller, faster patch or a busier background took far longer.)"""
    short = min(width, height)
    side = max(2, short // 2)
    oy, ox = (height - short) // 2, (width - short) // 2  # the central square
    bg = 110 + 15 * _texture(rng, height, width)[..., None] * rng.uniform(0.6, 1.4, 3).astype(np.float32)
    patch = rng.uniform(60, 200, 3).astype(np.float32) + 45 * _texture(rng, side, side, (16, 4))[..., None]
    angle = 2 * math.pi * label / classes
    speed = short / 32 * rng.uniform(0.75, 1.25)
    y0, x0 = rng.uniform(0, short, 2)
    out = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        img = bg.copy()
        rows = oy + (round(y0 + t * speed * math.sin(angle)) + np.arange(side)) % short
        cols = ox + (round(x0 + t * speed * math.cos(angle)) + np.arange(side)) % short
        img[np.ix_(rows, cols)] = patch
        img += rng.standard_normal(img.shape, dtype=np.float32) * 2  # sensor noise: no two frames alike
        out[t] = np.clip(img, 0, 255)
    return out


SYNTH_DIRECTIONS = ("right", "down-right", "down", "down-left", "left", "up-left", "up", "up-right")


def make_synth(out_dir, classes=4, videos=24, frames=32, size=(340, 256), quality=95, seed=0, name="demo"):
    """Write `videos` train AND `videos` val frame folders (labels round-robin, so balanced) of
    `frames` JPEG frames of size (W, H), plus train.txt / val.txt (paths relative to out_dir) and
    <name>_classes.txt (the directions: what train.py's reports call the classes of dataset `name`).
    Class c = a patch moving in direction 2*pi*c/classes (1 <= classes <= 8: right, down, left, up, ...).
    Returns (train_list, val_list)."""
    if not 1 <= classes <= 8 or videos < 1 or frames < 1:
        raise ValueError(f"need 1 <= classes <= 8, videos >= 1, frames >= 1; "
                         f"got {classes}, {videos}, {frames}")
    width, height = size
    rng = np.random.default_rng(seed)
    lists = []
    for split in ("train", "val"):
        lines = []
        for i in range(videos):
            label, folder = i % classes, f"{split}/video_{i:04d}"
            os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
            for t, img in enumerate(_synth_video(rng, label, classes, frames, width, height), 1):
                Image.fromarray(img).save(os.path.join(out_dir, folder, f"img_{t:05d}.jpg"), quality=quality)
            lines.append(f"{folder} {frames} {label}\n")
        lists.append(os.path.join(out_dir, f"{split}.txt"))
        with open(lists[-1], "w") as f:
            f.writelines(lines)
    names = [SYNTH_DIRECTIONS[8 * c // classes] if 8 * c % classes == 0
             else f"{360 * c / classes:.0f} degrees" for c in range(classes)]
    with open(os.path.join(out_dir, f"{name}_classes.txt"), "w") as f:
        f.writelines(n + "\n" for n in names)
    return tuple(lists)


# ---- extract: video files -> frame folders ------------------------------------------------------
VIDEO_EXTS = (".avi", ".mp4", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".flv", ".3gp")


def _extract_one(job):
    """One video -> FRAMES/<name>/img_00001.jpg ... Frames go to a temporary folder that is renamed
    when complete, so an interrupted run never leaves a half folder that looks finished."""
    video, out_dir, short_side, quality = job
    import av  # optional dependency, imported where it is needed
    tmp = out_dir + ".part"
    shutil.rmtree(tmp, ignore_errors=True)  # an interrupted run's: stale, maybe more frames than the video
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
    """Every video under videos_dir -> frames_dir/<same relative path without extension>/img_%05d.jpg,
    short side resized to short_side (0: keep), in parallel over videos. Existing folders are skipped.
    ValueError if videos_dir is not a folder or holds no video file."""
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
        for video, n, err in tqdm(results, total=len(todo), desc="extract", unit="video", disable=None):
            frames += n
            if err:
                failed += 1
                tqdm.write(f"{video}: {err}", file=sys.stderr)
    print(f"extracted {len(todo) - failed} videos ({frames} frames) to {frames_dir}; "
          f"{skipped} already there, {failed} failed")
    return failed


# ---- lists: official splits -> list files -----------------------------------------------------
def _ucf101_classes(path):
    """classInd.txt ("1 ApplyEyeMakeup", 1-based, in label order) -> class names, label order."""
    names = {}
    for n, line in data.read_text_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit() or int(parts[0]) < 1 or int(parts[0]) in names:
            raise ValueError(f"{path}:{n}: expected '<index from 1> <class name>', each index once: "
                             f"{line.strip()}")
        names[int(parts[0])] = parts[1]
    if sorted(names) != list(range(1, len(names) + 1)):
        raise ValueError(f"{path}: class indices must be 1..{len(names)} without gaps")
    return [names[k] for k in range(1, len(names) + 1)]


def _split_entries(dataset, splits_dir, split):
    """Official split files -> (classes, {"train": [(video_name, label, "file:line")], "val": [...]})."""
    entries = {"train": [], "val": []}
    if dataset == "ucf101":
        # classInd.txt: "1 ApplyEyeMakeup" (1-based). trainlist01.txt: "ApplyEyeMakeup/v_..._c01.avi 1";
        # testlist01.txt: the same without the label. The class comes from the folder part, looked up
        # case-insensitively (UCF101 spells HandstandPushups two ways).
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
                        raise ValueError(f"{path}:{n}: class {rel.split('/')[0]!r} is not in {ind}: "
                                         f"{line.strip()}")
                    name = os.path.splitext(os.path.basename(rel))[0]
                    entries[part].append((name, lookup[cls], f"{path}:{n}"))
        return classes, entries
    # HMDB51: <class>_test_split<N>.txt, lines "<video>.avi <0|1|2>": 1 train, 2 test, 0 unused. Labels
    # index the sorted class names (not the sorted file names: "sword_exercise_..." < "sword_test...").
    suffix = f"_test_split{split}.txt"
    classes = sorted(f[:-len(suffix)] for f in os.listdir(splits_dir) if f.endswith(suffix))
    if not classes:
        raise ValueError(f"no *{suffix} files in {splits_dir}")
    for label, name in enumerate(classes):
        path = os.path.join(splits_dir, name + suffix)
        for n, line in data.read_text_lines(path):
            parts = line.split()
            if len(parts) == 2 and parts[1] in ("1", "2"):
                entries["train" if parts[1] == "1" else "val"].append(
                    (os.path.splitext(parts[0])[0], label, f"{path}:{n}"))
            elif parts and (len(parts) != 2 or parts[1] != "0"):
                raise ValueError(f"{path}:{n}: expected '<video> <0|1|2>': {line.strip()}")
    return classes, entries


def make_lists(frames_dir, dataset, splits_dir, split=1, out_dir=None, image_tmpl="img_{:05d}.jpg",
               start_index=1):
    """Write <out_dir>/<dataset>_{train,val}_split<N>_list.txt from the official splits, counting the
    frames on disk. Frame folders are found by video name anywhere under frames_dir (flat or per class).
    Paths are relative to out_dir (default: frames_dir's parent), the lists' default root.
    Also writes <out_dir>/<dataset>_classes.txt: line i = the name of label i (read_class_names).
    ValueError, and nothing written, if frames_dir is not a folder or a list would be empty."""
    data.check_image_tmpl(image_tmpl, start_index)
    if not os.path.isdir(frames_dir):
        raise ValueError(f"FRAMES_DIR {frames_dir} is not a folder")
    out_dir = out_dir or os.path.dirname(os.path.abspath(frames_dir))
    folders = {}  # video name -> (folder, frame count)
    for dirpath, _, files in os.walk(frames_dir):
        n = data.count_frames(dirpath, image_tmpl, start_index, files) if files else 0
        if n:
            folders[os.path.basename(dirpath)] = (dirpath, n)
    classes, entries = _split_entries(dataset, splits_dir, split)
    lists, warnings_ = {}, []
    for part in ("train", "val"):
        lines, missing = [], 0
        for name, label, where in entries[part]:
            if name not in folders:
                missing += 1
                warnings_.append(f"warning: {where}: no frame folder for {name} under {frames_dir}")
                continue
            folder, n = folders[name]
            rel = os.path.relpath(folder, out_dir)
            rel = "./" + rel if rel.startswith("#") else rel  # HMDB51 names may start with '#': no comment
            lines.append(f"{rel} {n} {label}\n")
        if not lines:  # a wrong FRAMES_DIR, --image_tmpl or split: say so rather than write an empty list
            example = entries[part][0][0] if entries[part] else "(none listed)"
            raise ValueError(f"no frame folder under {frames_dir} matches a {part} video of split {split} "
                             f"(looked for folders named like {example!r} holding "
                             f"{image_tmpl.format(start_index)}, ...)")
        lists[part] = lines, missing
    for message in warnings_:  # only now: an error above is one line, not thousands of warnings first
        print(message, file=sys.stderr)
    written = []
    for part, (lines, missing) in lists.items():
        path = os.path.join(out_dir, f"{dataset}_{part}_split{split}_list.txt")
        with open(path, "w") as f:
            f.writelines(lines)
        print(f"wrote {path}: {len(lines)} videos, {len(classes)} classes ({missing} without frames)")
        written.append(path)
    path = os.path.join(out_dir, f"{dataset}_classes.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(name + "\n" for name in classes)
    print(f"wrote {path}: {len(classes)} class names (line 1 = label 0)")
    return written


# ---- check: a list and its frames ---------------------------------------------------------------
def check(list_file, root=None, image_tmpl="img_{:05d}.jpg", start_index=1, num_classes=None, full=False):
    """Every problem of a list file and its frames, one line each with the list line; returns them.
    Checks the list syntax and labels, that every listed frame exists, and decodes the first and last
    frame of each video (full=True: every frame, and that all have one size)."""
    data.check_image_tmpl(image_tmpl, start_index)
    problems = []  # (line, message)
    videos = data.read_list(list_file, root, num_classes, problems)
    if not videos:
        problems.append((0, f"{list_file}: no videos listed"))
    frames = 0
    for v in tqdm(videos, desc="check", unit="video", disable=None):  # a bar on a terminal only
        where = f"{list_file}:{v.line}"
        if not os.path.isdir(v.path):
            problems.append((v.line, f"{where}: missing folder {v.path}"))
            continue
        on_disk = data.count_frames(v.path, image_tmpl, start_index)
        if on_disk < v.num_frames:
            first = os.path.join(v.path, image_tmpl.format(start_index + on_disk))
            problems.append((v.line, f"{where}: {v.num_frames} frames listed, {on_disk} on disk "
                                     f"(first missing: {first})"))
        numbers = range(start_index, start_index + min(on_disk, v.num_frames))
        size = None
        for i in (numbers if full else sorted({numbers[0], numbers[-1]}) if numbers else []):
            path = os.path.join(v.path, image_tmpl.format(i))
            try:
                img = data.decode_frame(path)
            except (OSError, RuntimeError, ValueError) as e:
                problems.append((v.line, f"{where}: unreadable frame {path}: {data._why(e)}"))
                continue
            if size is not None and img.shape != size:
                problems.append((v.line, f"{where}: frame {path} is {tuple(img.shape)}, "
                                         f"the first {tuple(size)}"))
            size = size or img.shape
        frames += v.num_frames
    problems.sort(key=lambda p: p[0])  # in list order
    for _, message in problems:
        print(message)
    print(f"{list_file}: {len(videos)} videos, {frames} frames, {len({v.label for v in videos})} labels: "
          + (f"{len(problems)} problem(s)" if problems else "OK"))
    return [message for _, message in problems]


# ---- the command line ---------------------------------------------------------------------------
class _OneLineParser(argparse.ArgumentParser):
    """argparse errors as one line (no usage block), exit 2: like every other error of these commands."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _size(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 340x256, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _parser():
    p = _OneLineParser(description="Video frame-folder datasets: make, extract, list, check.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synth", help="a small motion-only dataset of JPEG frame folders + train.txt/val.txt")
    s.add_argument("out")
    s.add_argument("--classes", type=int, default=4, help="1..8 motion directions")
    s.add_argument("--videos", type=int, default=24, help="videos per split (train and val each)")
    s.add_argument("--frames", type=int, default=32, help="frames per video")
    s.add_argument("--size", type=_size, default=(340, 256), help="WIDTHxHEIGHT (default 340x256)")
    s.add_argument("--quality", type=int, default=95, help="JPEG quality")
    s.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("extract", help="video files -> JPEG frame folders (needs PyAV: pip install av)")
    e.add_argument("videos_dir")
    e.add_argument("frames_dir")
    e.add_argument("--short-side", type=int, default=256, help="resize the short side to this (0: keep)")
    e.add_argument("--quality", type=int, default=95, help="JPEG quality")
    e.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    li = sub.add_parser("lists", help="train/val list files from the official UCF101 / HMDB51 splits")
    li.add_argument("frames_dir")
    g = li.add_mutually_exclusive_group(required=True)
    g.add_argument("--ucf101", metavar="SPLITS_DIR",
                   help="folder with classInd.txt, trainlist0N.txt, testlist0N.txt")
    g.add_argument("--hmdb51", metavar="SPLITS_DIR", help="folder with <class>_test_splitN.txt")
    li.add_argument("--split", type=int, default=1, choices=(1, 2, 3))
    li.add_argument("--out", help="folder for the lists (default: FRAMES_DIR's parent)")
    c = sub.add_parser("check", help="scan a list file's videos; print every problem; exit 1 if any")
    c.add_argument("list")
    c.add_argument("--full", action="store_true", help="decode every frame (default: first and last)")
    c.add_argument("--num_classes", type=int, help="labels must be < this")
    for q in (li, c):
        q.add_argument("--image_tmpl", default="img_{:05d}.jpg", help="frame file name template")
        q.add_argument("--start_index", type=int, default=1, help="number of the first frame")
    c.add_argument("--root", help="folder the list's paths are relative to (default: the list's folder)")
    return p


def main(argv=None):
    """Run one command; exit status 0, 1 (extract: a video failed; check: a problem) or 2 (an error,
    one line on stderr, named after the script that ran: prepare.py, or data.py forwarding here)."""
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.cmd == "synth":
            print("wrote", *make_synth(a.out, a.classes, a.videos, a.frames, a.size, a.quality, a.seed))
        elif a.cmd == "extract":
            return 1 if extract(a.videos_dir, a.frames_dir, a.short_side, a.quality, a.jobs) else 0
        elif a.cmd == "lists":
            dataset, splits = ("ucf101", a.ucf101) if a.ucf101 else ("hmdb51", a.hmdb51)
            make_lists(a.frames_dir, dataset, splits, a.split, a.out, a.image_tmpl, a.start_index)
        else:
            return 1 if check(a.list, a.root, a.image_tmpl, a.start_index, a.num_classes, a.full) else 0
    except (ValueError, OSError) as err:
        print(f"{p.prog} {a.cmd}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

