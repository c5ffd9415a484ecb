"""Dataset preparation for video files (to move into prepare.py): reencode, lists on videos, Kinetics."""
import csv
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction

from tqdm import tqdm

import _video_scratch as vid

VIDEO_EXTS = (".avi", ".mp4", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".flv", ".3gp")

# Re-encoding for random access (measured: docs/video.md). A clip of 16 frames 4 apart spans 61 frames,
# all of which are decoded from the keyframe before the first; MPEG-4 part 2 decodes ~3x faster than
# h264 on one core, a keyframe every 16 frames bounds the lead-in, no B-frames keep decode order =
# presentation order, and mp4 keeps real timestamps (AVI has none: see data.open_video).
REENCODE = dict(codec="mpeg4", gop=12, q=3)


def _reencode_one(job):
    """One video -> DST (mp4), short side `short_side`, every frame of a plain decode kept in order:
    frame k of the output is frame k of the input (and img_{k+1:05d}.jpg of `extract`). Written to a
    temporary name, renamed when complete: an interrupted run never leaves a file that looks finished."""
    src, dst, short_side = job
    import av
    tmp = dst + ".part.mp4"
    n = 0
    try:
        with av.open(src) as inp, av.open(tmp, "w") as out:
            stream = inp.streams.video[0]
            stream.codec_context.thread_count = 1  # -j runs one video per core
            w, h = stream.codec_context.width, stream.codec_context.height
            s = short_side / min(w, h) if short_side else 1
            size = max(2, 2 * round(w * s / 2)), max(2, 2 * round(h * s / 2))  # 4:2:0 needs even sizes
            # constant frame rate, frame k at k / rate: a variable frame rate source keeps its frames
            rate = stream.average_rate or stream.guessed_rate or Fraction(25)
            q = str(REENCODE["q"])  # a fixed quantiser: qmin = qmax (ffmpeg -q:v needs a per-frame field)
            enc = out.add_stream(REENCODE["codec"], rate=rate, options={"qmin": q, "qmax": q})
            enc.width, enc.height, enc.pix_fmt = *size, "yuv420p"
            enc.codec_context.time_base = 1 / Fraction(rate)
            enc.codec_context.gop_size = REENCODE["gop"]
            enc.codec_context.max_b_frames = 0
            for frame in inp.decode(stream):
                frame = frame.reformat(*size, "yuv420p", interpolation="BILINEAR")
                frame.pts, frame.time_base = n, enc.codec_context.time_base
                out.mux(enc.encode(frame))
                n += 1
            out.mux(enc.encode(None))
    except Exception as e:  # a corrupt video must not stop the others
        if os.path.exists(tmp):
            os.remove(tmp)
        return src, 0, " ".join(f"{type(e).__name__}: {e}".split())
    if n == 0:
        os.remove(tmp)
        return src, 0, "no video frames decoded"
    os.replace(tmp, dst)
    return src, n, None


def reencode(src_dir, dst_dir, short_side=256, jobs=1):
    """Every video under src_dir -> dst_dir/<same relative path>.mp4 (see _reencode_one), in parallel.
    Finished files are skipped. Returns the failures [(video, reason)]."""
    if not os.path.isdir(src_dir):
        raise ValueError(f"SRC {src_dir} is not a folder")
    todo, skipped = [], 0
    for dirpath, _, files in os.walk(src_dir):
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in VIDEO_EXTS and not name.endswith(".part.mp4"):
                rel = os.path.relpath(os.path.join(dirpath, os.path.splitext(name)[0]), src_dir)
                dst = os.path.join(dst_dir, rel + ".mp4")
                if os.path.exists(dst):
                    skipped += 1
                else:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    todo.append((os.path.join(dirpath, name), dst, short_side))
    if not todo and not skipped:
        raise ValueError(f"no video file ({', '.join(VIDEO_EXTS)}) under SRC {src_dir}")
    failed, frames = [], 0
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        results = pool.map(_reencode_one, todo, chunksize=1) if jobs > 1 else map(_reencode_one, todo)
        for src, n, err in tqdm(results, total=len(todo), desc="reencode", unit="video", disable=None):
            frames += n
            if err:
                failed.append((src, err))
    print(f"re-encoded {len(todo) - len(failed)} videos ({frames} frames) to {dst_dir}; "
          f"{skipped} already there, {len(failed)} failed")
    for src, err in failed:
        print(f"failed: {src}: {err}", file=sys.stderr)
    return failed


def _count_one(job):
    path, decoder = job
    try:
        return vid.open_video(path, decoder)[0], None
    except RuntimeError as e:
        return 0, str(e)


def find_videos(videos_dir, decoder, jobs=1):
    """Video files under videos_dir -> {name without extension: (path, frame count)}, counted in
    parallel; files that cannot be read are left out and printed (one line each)."""
    paths = [os.path.join(d, f) for d, _, files in os.walk(videos_dir) for f in sorted(files)
             if vid.is_video_file(f)]
    found = {}
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        counts = pool.map(_count_one, [(p, decoder) for p in paths], chunksize=16) if jobs > 1 else \
            map(_count_one, [(p, decoder) for p in paths])
        for path, (n, err) in tqdm(zip(paths, counts), total=len(paths), desc="count", unit="video",
                                   disable=None):
            if err or not n:
                print(f"warning: {path}: unreadable, not listed: {err or 'no frames'}", file=sys.stderr)
            else:
                found[os.path.splitext(os.path.basename(path))[0]] = (path, n)
    return found


def kinetics_entries(csv_files):
    """Kinetics annotations (`label,youtube_id,time_start,time_end,split`, one file per split or all
    in one) -> (classes, {"train": [(video name, label, "file:line")], "val": [...]}). Video names are
    `<youtube_id>_<start:06d>_<end:06d>`, the downloaders' file names. Classes: the sorted names of the
    train rows (the label order of every public Kinetics checkpoint)."""
    rows = []
    for path in csv_files:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            need = {"label", "youtube_id", "time_start", "time_end", "split"}
            if not need <= set(reader.fieldnames or ()):
                raise ValueError(f"{path}:1: expected the columns {','.join(sorted(need))}, "
                                 f"got {reader.fieldnames}")
            for n, row in enumerate(reader, 2):
                rows.append((row, f"{path}:{n}"))
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
            start, end = int(float(row["time_start"])), int(float(row["time_end"]))
        except ValueError:
            raise ValueError(f"{where}: time_start and time_end must be numbers") from None
        entries[part].append((f"{row['youtube_id']}_{start:06d}_{end:06d}", lookup[row["label"]], where))
    return classes, entries
