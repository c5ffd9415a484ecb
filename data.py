"""Frame folders and video files -> uint8 clips: list files, exact clip sampling, a decode-speed
pipeline.

A dataset is a list file, one video per line: `<frame_dir> <num_frames> <label>` (the TSN / TSM /
mmaction2 "rawframes" format; the original project's). Frame i of a video is
`frame_dir/image_tmpl.format(i)`, i = start_index .. start_index + num_frames - 1. A line may name a
video file (decode.VIDEO_FILES), as `<video> <num_frames> <label>` or mmaction2's `<video> <label>`:
its frame i is the (i - start_index)-th frame a plain decode gives, read exactly by
`decode.open_video` (TorchCodec, else PyAV; docs/video.md). Kinetics' CSV files and
Something-Something v2's JSON lists (with its labels file) are read as lists too: `read_list` picks
the format by the file (LIST_FORMATS).

    # root: the list's folder
    ds = VideoFrameDataset("ucf101_train_split1_list.txt", DataSpec(), "train")
    clip, label, info = ds[0]            # uint8 (3, T, 224, 224); test mode: (V, 3, T, crop, crop)
    # a collated train batch; "size": multi-scale crops, whole frames shipped (`load_clip`)
    x = crop_resize(normalize(clips.to("cuda")), info["box"], info.get("size"))

prepare.py makes frame folders, lists and classes files. Frames are decoded in decode.py
(TorchCodec, Pillow without it); with `encoded=True` the loader only reads files and gpudecode.py
decodes batches on the GPU (--decode_device cuda). A clip is its decodes, one crop, at most one
resize.

References
- L. Wang et al., "Temporal Segment Networks", ECCV 2016: the frame-folder list format.
- J. Carreira, A. Zisserman, "Quo Vadis, Action Recognition?" (I3D), CVPR 2017: clips, 2D->3D
  inflation.
- X. Wang et al., "Non-local Neural Networks", CVPR 2018, and PySlowFast / mmaction2
  (`SampleFrames`, `ThreeCrop`): dense clips with scale jitter [256, 320] for training; multi-view
  testing (clips spread evenly over the video x 3 crops along the long side).
- torchvision `references/video_classification`: uint8 clips, resizing on stacked tensors.
- R. Goyal et al., "The 'something something' video database", ICCV 2017: v2's JSON lists and
  labels.
"""

import copy
import csv
import dataclasses
import functools
import json
import math
import os
import re

import numpy as np
import torch
import torch.nn.functional as F
from torchvision import tv_tensors
from torchvision.transforms import v2

import decode
import gpudecode

MEAN = (0.485, 0.456, 0.406)  # ImageNet RGB statistics, the inflated 2D weights expect them
STD = (0.229, 0.224, 0.225)
MODES = ("train", "val", "test")


# ---- list files ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Video:
    path: str  # frame folder (root joined)
    num_frames: int
    label: int
    line: int  # 1-based line number in the list file, for error messages
    list_file: str = ""  # the list it came from, for error messages
    # a segment of a long video: its first frame is frame start_index + offset (mmaction2's
    # `with_offset` lists); num_frames counts the segment's frames only
    offset: int = 0
    # frame i is image_tmpl.format(i) in this video's folder; None: the spec's (--image_tmpl).
    # Charades names its frames after the video (<id>/<id>-000001.jpg)
    image_tmpl: str = None
    # the labels by frame, for training clips: ((label, first, last), ...), frames counted from 0
    # in the listed ones (Charades: the frames its actions span, `charades_label_frames`); None: a
    # clip takes the video's labels
    label_frames: tuple = None
    # the line names a part of its video (a segment by frames or by time, an EPIC-KITCHENS row),
    # not the whole: features names it by its frames
    segment: bool = False


def read_text_lines(path):
    """A text file -> [(line number, line)], for list, split and class files. A UTF-8 BOM is dropped
    (Notepad writes one; U+FEFF would otherwise become part of the first path). Text that is not
    UTF-8 (latin-1, a binary file) is a ValueError naming the file and the line, not a bare codec
    error."""
    path = str(path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")  # utf-8-sig strips one leading BOM, if any
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValueError(f"{path}:{line}: a NUL byte: a binary file, not a text list")
    # universal newlines, as open() in text mode: a list made on Windows (CRLF) or old macOS (CR)
    # works
    return list(enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1))


# A list line is a path, which may hold spaces, then integer columns: how many tells the line's
# form. The label may be several, joined by commas (`3,17,40`: a multi-label list, --multi-label;
# `verb,noun` with --heads). Four columns: a segment, mmaction2's RawframeDataset(with_offset=True)
# line: frames start_index + offset .. start_index + offset + num_frames - 1 of a long video.
LINE_FORMS = {
    1: "<video> <label>",
    2: "<frame_dir or video> <num_frames> <label>",
    3: "<frame_dir or video> <offset> <num_frames> <label>",
}
# a label column: one integer, or several joined by commas
LABEL_COLUMN = r"[+-]?\d+(,[+-]?\d+)*"
# A segment by time: start and end in seconds, each with an 's' (`12.5s`), never read as frames.
# Frames k with start <= k / fps < end (`time_segment`), k counted from the video's first frame.
TIME_FORM = "<frame_dir or video> <start>s <end>s <label>"
SECONDS = r"\d+(\.\d*)?s"


def _columns(fields, ints):
    """What is wrong with a line of `fields` whose last `ints` are integers (none of LINE_FORMS)."""
    expected = " or ".join(f"'{form}'" for form in LINE_FORMS.values())
    # read as the path, an extra column would surface later as a missing folder
    if ints > max(LINE_FORMS):
        return f"{ints + 1} columns, expected {expected} (a path may not end in ' <integer>')"
    if len(fields) > 2:
        return "num_frames and label must be integers (labels: joined by commas, no spaces)"
    return f"expected {expected}"


def parse_label(text):
    """A label column -> int, or a tuple of ints for several joined by commas (`3,17`)."""
    labels = tuple(int(t) for t in text.split(","))
    return labels[0] if len(labels) == 1 else labels


def read_list(
    list_file,
    root=None,
    num_classes=None,
    problems=None,
    decoder="auto",
    labels=None,
    unlabelled=False,
    fps=None,
):
    """Parse a list file into Videos; its format is picked by the file (LIST_FORMATS): text lines
    (`_text_rows`), a Kinetics CSV (`_kinetics_rows`) or a Something-Something v2 JSON list
    (`_sthv2_rows`). A bad entry raises ValueError("list:LINE: what: the line"), or, if `problems`
    is a list, goes into it as (LINE, message) and is skipped (`check` reports them all). A path may
    be a frame folder or a video file (decode.VIDEO_FILES); videos listed without a frame count
    (mmaction2's `<video> <label>`, the CSV and JSON formats) have their frames counted here with
    `decoder` (0 if unreadable: loading it is then a BadVideo), so only they open a file:
    three-column lists open none. `labels`: Something-Something v2's labels file (default:
    STHV2_LABELS beside the list). `unlabelled` (pretraining, whose labels are unused): '<frame_dir>
    <num_frames>' lines too, as label 0. `fps`: the frame rate of frame folders, for segments by
    time (`time_segment`; a video file's is its own)."""
    list_file = str(list_file)
    root = os.path.dirname(os.path.abspath(list_file)) if root is None else str(root)
    rows = LIST_FORMATS.get(os.path.splitext(list_file)[1].lower(), (_text_rows,))[0]
    videos, rates = [], {}  # rates: video file -> frame rate, read once
    # the CSV formats that count frames or pick a folder or a file look under the root
    more = dict(root=root) if rows is _csv_rows else {}
    for n, line, row in rows(list_file, labels, **more):
        try:
            if isinstance(row, ValueError):
                raise row
            # a 4th item: the Video's other fields (a segment's offset, the frames' names)
            path, num_frames, label, *extra = row
            if label is None and not unlabelled:
                raise ValueError(UNLABELLED)
            label = 0 if label is None else label
            path = os.path.normpath(os.path.join(root, path.replace("\\", "/")))
            extra = dict(extra[0]) if extra else {}
            if "times" in extra:  # a segment by time: its frames
                extra["offset"], num_frames = time_segment(path, *extra.pop("times"), fps, rates)
            if num_frames is None and os.path.isdir(path):
                raise ValueError(
                    "a frame folder without its frame count: frame folders take "
                    f"'{LINE_FORMS[2]}' (`prepare.py lists` counts the frames)"
                )
            for k in label if isinstance(label, tuple) else (label,):
                if k < 0 or (num_classes is not None and k >= num_classes):
                    raise ValueError(f"label {k} outside [0, {num_classes or 'num_classes'})")
            num_frames = num_frames or decode.video_frames(path, decoder)
        except ValueError as e:
            if problems is None:
                raise ValueError(f"{list_file}:{n}: {e}: {line}") from None
            problems.append((n, f"{list_file}:{n}: {e}: {line}"))
            continue
        videos.append(Video(path, num_frames, label, n, list_file, **extra))
    if not videos and problems is None:
        raise ValueError(f"{list_file}: no videos listed")
    return videos


# A '<frame_dir> N' line: the frame count without a label (pretraining's lists), or a label without
# the count.
UNLABELLED = (
    f"a frame folder and one number: training reads '{LINE_FORMS[2]}' (`prepare.py lists` writes "
    "them); unlabelled '<frame_dir> <num_frames>' lists are for `train.py pretrain`"
)


def _text_rows(list_file, labels=None):
    """Text lines -> (line number, line, (path, num_frames or None, label) or the ValueError); a
    frame folder with one number: (path, that number as its frame count, None). Only whole lines
    starting with '#' are comments: a frame folder may contain '#' or spaces (but not end in '
    <integer>': columns are counted from the right). Backslashes become '/': a Windows list
    works."""
    for n, text in read_text_lines(list_file):
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        # the two columns before the label, never the path: `5s 30 1` is a folder named 5s
        times = fields[max(1, len(fields) - 3) : -1]
        if any(re.fullmatch(r"[+-]?[\d.]+s", f) for f in times):
            yield n, line, _time_row(line)
            continue
        # the label column (maybe several, `3,17`), then the integer columns before it
        ints = int(len(fields) > 1 and bool(re.fullmatch(LABEL_COLUMN, fields[-1])))
        while ints and ints < len(fields) - 1 and re.fullmatch(r"[+-]?\d+", fields[-1 - ints]):
            ints += 1
        if ints not in LINE_FORMS:
            yield n, line, ValueError(_columns(fields, ints))
            continue
        path, *numbers = line.rsplit(maxsplit=ints)
        if ints == 1 and not decode.is_video_file(path):
            # "dir x 3": a frame folder's line gone wrong; "dir 3": its frame count (read_list
            # decides)
            if len(fields) > 2 or "," in numbers[0]:
                yield n, line, ValueError(_columns(fields, ints))
            elif int(numbers[0]) < 1:
                yield n, line, ValueError(f"num_frames must be >= 1, got {numbers[0]}")
            else:
                yield n, line, (path, int(numbers[0]), None)
            continue
        *columns, label = numbers
        *offset, num_frames = [int(c) for c in columns] or [None]
        if num_frames is not None and num_frames < 1:
            yield n, line, ValueError(f"num_frames must be >= 1, got {num_frames}")
        elif offset and offset[0] < 0:
            yield n, line, ValueError(f"a segment's offset must be >= 0, got {offset[0]}")
        else:
            extra = dict(offset=offset[0], segment=True) if offset else {}
            yield n, line, (path, num_frames, parse_label(label), extra)


def _time_row(line):
    """A `TIME_FORM` line -> (path, None, label, its times), or the ValueError saying what is
    wrong."""
    path, start, end, label = (line.rsplit(maxsplit=3) + [""])[:4]
    if not (re.fullmatch(SECONDS, start) and re.fullmatch(SECONDS, end)):
        return ValueError(f"a segment by time is '{TIME_FORM}' (seconds >= 0, like 12.5s)")
    if not re.fullmatch(LABEL_COLUMN, label):
        return ValueError("the label must be an integer (labels: joined by commas, no spaces)")
    start, end = float(start[:-1]), float(end[:-1])
    if end <= start:
        return ValueError(f"a segment's end must come after its start, got {start:g}s, {end:g}s")
    return path, None, parse_label(label), dict(times=(start, end), segment=True)


def time_segment(path, start, end, fps=None, rates=None):
    """A segment by time (seconds) -> (offset, num_frames): the frames k, counted from 0, whose time
    k / fps lies in [start, end). fps: a video file's own (its stream's, `decode.video_fps`; cached
    in `rates`; an unreadable one: (0, 0), read as a bad video), else `fps` (--fps: a frame
    folder's). ValueError for a frame folder without `fps`, or when no frame falls inside."""
    rates = {} if rates is None else rates
    if decode.is_video_file(path):
        if path not in rates:
            rates[path] = decode.video_fps(path)
        rate = rates[path]
        if not rate:  # unreadable or missing: a bad video, as a `<video> <label>` line's (BadVideo)
            return 0, 0
    elif fps:
        rate = fps
    else:
        raise ValueError("a segment by time of a frame folder needs its frame rate: --fps")
    # rounded first: 1.2 s x 25 fps is 30.000000000000004 in floating point, frame 30, not 31
    first, stop = (math.ceil(round(t * rate, 6)) for t in (start, end))
    if stop <= first:
        raise ValueError(f"no frame between {start:g}s and {end:g}s at {rate:g} fps")
    return first, stop - first


KINETICS_COLUMNS = ("label", "youtube_id", "time_start", "time_end", "split")


def csv_with_columns(path, columns):
    """A CSV file with a header naming at least `columns` -> [(line number, row dict)]; ValueError
    naming the file's first line if a column is missing."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if not set(columns) <= set(reader.fieldnames or ()):
            raise ValueError(
                f"{path}:1: expected the columns {','.join(columns)}, got {reader.fieldnames}"
            )
        return list(enumerate(reader, 2))


def kinetics_csv(path):
    """A Kinetics annotation file (`label,youtube_id,time_start,time_end,split`, the official
    train.csv / validate.csv) -> [(line number, row dict)]; ValueError if a column is missing."""
    return csv_with_columns(path, KINETICS_COLUMNS)


def kinetics_name(row):
    """A Kinetics row's video name, the downloaders' file name:
    <youtube_id>_<start:06d>_<end:06d>."""
    try:
        start, end = int(float(row["time_start"])), int(float(row["time_end"]))
    except ValueError:
        raise ValueError("time_start and time_end must be numbers") from None
    return f"{row['youtube_id']}_{start:06d}_{end:06d}"


def _kinetics_rows(list_file, labels=None):
    """A Kinetics CSV read as a list: label = the index of its class among the file's sorted class
    names (the label order of every public Kinetics checkpoint; every official split holds every
    class); the video is <label>/<name>.mp4 under the root (--data_root), the downloaders' layout.
    (`prepare.py lists --kinetics` finds videos anywhere, re-encoded ones included, and writes a
    text list.)"""
    rows = kinetics_csv(list_file)
    lookup = {name: k for k, name in enumerate(_kinetics_classes(rows))}
    for n, row in rows:
        line = ",".join(str(row.get(c)) for c in KINETICS_COLUMNS)
        try:
            name = kinetics_name(row)
        except ValueError as e:
            yield n, line, e
            continue
        yield n, line, (os.path.join(row["label"], name + ".mp4"), None, lookup[row["label"]])


def _kinetics_classes(rows):
    return sorted({row["label"] for _, row in rows})


STHV2_LABELS = "something-something-v2-labels.json"  # beside a Something-Something v2 JSON list


def sthv2_labels(labels_file):
    """something-something-v2-labels.json ({template: "index"}) -> {template without brackets:
    index}. The train / validation entries name their class by a template with '[something]'
    placeholders; the labels file's keys are the same templates (with or without the brackets)."""
    try:
        with open(labels_file, encoding="utf-8") as f:
            labels = json.load(f)
        return {_template(k): int(v) for k, v in labels.items()}
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
        raise ValueError(f"{labels_file}: not a labels file of {{template: index}}: {e}") from None


def _template(text):
    return text.replace("[", "").replace("]", "")


def sthv2_template(entry):
    """A JSON list entry's template as the labels file's keys (sthv2_labels) hold it."""
    return _template(entry["template"])


def sthv2_entries(list_file):
    """A Something-Something v2 JSON list ([{"id", "label", "template", "placeholders"}], the
    official something-something-v2-train.json / -validation.json) -> [(entry number, entry)]."""
    try:
        with open(list_file, encoding="utf-8") as f:
            entries = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{list_file}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{list_file}: expected a JSON list of videos")
    return list(enumerate(entries, 1))


def sthv2_labels_file(list_file, labels=None):
    """The labels file of a Something-Something v2 JSON list: `labels` (--labels), else STHV2_LABELS
    beside the list."""
    return labels or os.path.join(os.path.dirname(os.path.abspath(list_file)), STHV2_LABELS)


def sthv2_label(entry, labels, labels_file):
    """A JSON list entry's label: the labels file's index of its "template", or an integer "label"
    where it has no template (lists that carry the index). ValueError saying what is missing."""
    if not isinstance(entry, dict) or "id" not in entry:
        raise ValueError('expected {"id", "template", ...}')
    template, label = entry.get("template"), entry.get("label")
    if isinstance(template, str):
        if _template(template) not in labels:
            raise ValueError(f"template not in {labels_file}")
        return labels[_template(template)]
    if isinstance(label, int) and not isinstance(label, bool):
        return label
    if template is not None:
        raise ValueError(f'"template" must be text, got {json.dumps(template)}')
    if "template" in entry:
        raise ValueError('"template" is null and there is no integer "label"')
    raise ValueError('no "template" nor integer "label" (the test split has no labels)')


def _sthv2_rows(list_file, labels=None):
    """A Something-Something v2 JSON list: video <id>.webm, label `sthv2_label` (the labels file's
    index of its template, `sthv2_labels_file`); entry k is "line" k of the messages."""
    labels_file = sthv2_labels_file(list_file, labels)
    lookup = sthv2_labels(labels_file) if os.path.isfile(labels_file) else None
    for n, entry in sthv2_entries(list_file):
        line = json.dumps(entry)
        try:
            if (
                lookup is None
                and isinstance(entry, dict)
                and isinstance(entry.get("template"), str)
            ):
                raise ValueError(
                    f"its class is a template, and there is no labels file {labels_file} (--labels "
                    "FILE names it)"
                )
            label = sthv2_label(entry, lookup or {}, labels_file)
        except ValueError as e:
            yield n, line, e
            continue
        yield n, line, (f"{entry['id']}.webm", None, label)


def list_classes(list_file, labels=None):
    """The class names a list's own format gives (line i = label i), None for text lists (their
    classes file is <dataset>_classes.txt, see `class_names`); `labels`: as read_list's."""
    names = LIST_FORMATS.get(os.path.splitext(str(list_file))[1].lower(), (None, None))[1]
    return names(str(list_file), labels) if names else None


def _sthv2_classes(list_file, labels=None):
    labels_file = sthv2_labels_file(list_file, labels)
    if not os.path.isfile(labels_file):
        return None  # integer labels, no names
    with open(labels_file, encoding="utf-8") as f:
        labels = json.load(f)
    return [name for name, _ in sorted(labels.items(), key=lambda kv: int(kv[1]))]


# ---- multi-label and verb-noun CSV lists: Charades, PySlowFast's Charades frame lists, EPIC-100 --
CHARADES_COLUMNS = ("id", "actions")  # Charades_v1_{train,test}.csv, among others
CHARADES_CLASSES = "Charades_v1_classes.txt"  # beside the list: `c000 Holding some clothes`
PYSLOWFAST_FRAME_LIST = "original_vido_id video_id frame_id path labels"
EPIC_COLUMNS = ("participant_id", "video_id", "start_frame", "stop_frame")
EPIC_CLASSES = ("EPIC_100_verb_classes.csv", "EPIC_100_noun_classes.csv")  # `id,key,...`
EPIC_HEADS = (97, 300)  # verbs, nouns: --dataset epic100's --heads


def csv_header(list_file):
    """The first line of a CSV list, for telling the formats that share the suffix apart."""
    lines = read_text_lines(list_file)
    return lines[0][1].strip() if lines else ""


def count_numbered(folder, image_tmpl, start_index=1):
    """Frames start_index, start_index + 1, ... in `folder` (stops at the first gap); 0 without
    it."""
    names = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    n = 0
    while image_tmpl.format(start_index + n) in names:
        n += 1
    return n


# Charades_v1_rgb's frames are 24 a second: the dataset authors' own loader
# (gsig/charades-algorithms, pytorch/datasets/charadesrgb.py: `FPS, GAP, testGAP = 24, 4, 25`)
# places frame <id>-{ii+1:06d}.jpg at ii / 24 s
CHARADES_FPS = 24


def charades_label_frames(actions, num_frames, fps=CHARADES_FPS):
    """Charades' actions [(label, start s, end s)] over a video of `num_frames` frames -> the
    frames each spans, ((label, first, last), ...) counted from 0: frame j is at j / fps seconds and
    inside an action when start < j / fps < end, the comparison of charades-algorithms'
    charadesrgb.py (an action no frame falls inside spans none)."""
    t = np.arange(num_frames) / fps
    spans = [(k, np.flatnonzero((start < t) & (t < end))) for k, start, end in actions]
    return tuple((k, int(j[0]), int(j[-1])) for k, j in spans if j.size)


def label_runs(frame_labels):
    """Per-frame labels [labels of frame 0, of frame 1, ...] -> ((label, first, last), ...): each
    label's runs of consecutive frames."""
    runs, since = [], {}
    for j, labels in enumerate([*frame_labels, ()]):
        for k in [k for k in since if k not in labels]:
            runs.append((k, since.pop(k), j - 1))
        for k in labels:
            since.setdefault(k, j)
    return tuple(sorted(runs))


def span_labels(label_frames, first, last):
    """The labels of frames first .. last (label_frames' counting): PySlowFast's Charades training
    label, aggregate_labels over the frames from its clip's first to its last (charades.py
    __getitem__: `range(seq[0], seq[-1] + 1)`)."""
    return tuple(sorted({k for k, a, b in label_frames if a <= last and b >= first}))


CHARADES_ACTION = r"c(\d{3}) (\d+(?:\.\d*)?) (\d+(?:\.\d*)?)"


def _charades_rows(list_file, root):
    """Charades' own CSV (Charades_v1_train.csv: `id,...,actions,length`, actions
    `c092 11.90 21.20;c147 0.00 12.60`) over its frame folders (Charades_v1_rgb:
    <id>/<id>-000001.jpg): labels = every action of the video (a video without actions has none),
    and for training clips the frames each action spans (`charades_label_frames`, 24 frames a
    second); the frames are counted here."""
    with open(list_file, newline="", encoding="utf-8-sig") as f:
        rows = list(enumerate(csv.DictReader(f), 2))
    for n, row in rows:
        line = f"{row.get('id')},...,{row.get('actions')}"
        actions = [a for a in (row.get("actions") or "").split(";") if a.strip()]
        try:
            found = [re.fullmatch(CHARADES_ACTION, a.strip()) for a in actions]
            if not all(found):
                raise ValueError("actions must be 'c<3 digits> <start s> <end s>' joined by ';'")
            tmpl = f"{row['id']}-{{:06d}}.jpg"
            frames = count_numbered(os.path.join(root, row["id"]), tmpl)
            actions = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in found]
            labels = tuple(sorted({k for k, _, _ in actions}))
        except ValueError as e:
            yield n, line, e
            continue
        spans = charades_label_frames(actions, frames)
        yield n, line, (row["id"], frames or 1, labels, dict(image_tmpl=tmpl, label_frames=spans))


def _pyslowfast_frame_rows(list_file):
    """PySlowFast's Charades frame lists (slowfast/datasets/utils.py load_image_lists: one frame a
    line, `original_vido_id video_id frame_id path labels`, labels "" or "12,40"): a video's
    consecutive lines -> its folder (the paths' own), frames and labels (the union over its frames,
    as its val / test labels: convert_to_video_level_labels), and for training clips each frame's
    own (`label_runs`); the video's first line names it."""
    videos = {}  # original_vido_id -> [first line, text, paths, each frame's labels]
    # a labels cell -> its tuple, made once: a frame list has a line per frame, few distinct cells
    parsed = {}
    for n, text in read_text_lines(list_file)[1:]:
        row = text.split()
        if not row:
            continue
        if len(row) != 5:
            yield n, text, ValueError(f"{len(row)} columns, expected '{PYSLOWFAST_FRAME_LIST}'")
            continue
        frame_labels = row[4].replace('"', "")
        if frame_labels and not re.fullmatch(r"\d+(,\d+)*", frame_labels):
            yield n, text, ValueError('labels must be integers joined by commas, or ""')
            continue
        video = videos.setdefault(row[0], [n, text, [], []])
        video[2].append(row[3])
        if frame_labels not in parsed:
            parsed[frame_labels] = tuple(int(k) for k in frame_labels.split(",") if k)
        video[3].append(parsed[frame_labels])
    for n, text, paths, frame_labels in videos.values():
        folder, name = os.path.split(paths[0].replace("\\", "/"))
        digits = re.fullmatch(r"(.*?)(\d+)(\.\w+)", name)
        if digits is None:
            yield n, text, ValueError(f"frame name {name!r} does not end in a frame number")
            continue
        tmpl = f"{digits.group(1)}{{:0{len(digits.group(2))}d}}{digits.group(3)}"
        first = int(digits.group(2))
        expected = [os.path.join(folder, tmpl.format(first + k)) for k in range(len(paths))]
        if [p.replace("\\", "/") for p in paths] != expected:
            yield (n, text, ValueError(f"the video's frames are not consecutive from {name}"))
            continue
        # frame numbers as named: the offset from frame 1 (Charades' first)
        extra = dict(image_tmpl=tmpl, offset=first - 1, label_frames=label_runs(frame_labels))
        found = {k for labels in frame_labels for k in labels}
        yield n, text, (folder, len(paths), tuple(sorted(found)), extra)


def _epic_rows(list_file, root):
    """EPIC-Kitchens-100's EPIC_100_{train,validation}.csv: each row a segment, frames start_frame
    .. stop_frame (numbered from 1) of <participant_id>/rgb_frames/<video_id>/frame_0000000001.jpg,
    else of the video file <participant_id>/videos/<video_id>.MP4; labels (verb_class,
    noun_class)."""
    with open(list_file, newline="", encoding="utf-8-sig") as f:
        rows = list(enumerate(csv.DictReader(f), 2))
    for n, row in rows:
        line = ",".join(str(row.get(c)) for c in (*EPIC_COLUMNS, "verb_class", "noun_class"))
        numbers = [row.get(c) for c in ("start_frame", "stop_frame", "verb_class", "noun_class")]
        if not all(re.fullmatch(r"\d+", v or "") for v in numbers):
            # the test split has no verb_class / noun_class
            yield n, line, ValueError("start_frame, stop_frame, verb_class, noun_class: integers")
            continue
        start, stop, verb, noun = map(int, numbers)
        if not 1 <= start <= stop:
            yield n, line, ValueError(f"need 1 <= start_frame <= stop_frame, got {start}, {stop}")
            continue
        path = os.path.join(row["participant_id"], "rgb_frames", row["video_id"])
        if not os.path.isdir(os.path.join(root, path)):
            video = os.path.join(row["participant_id"], "videos", row["video_id"] + ".MP4")
            path = video if os.path.isfile(os.path.join(root, video)) else path
        extra = dict(offset=start - 1, image_tmpl="frame_{:010d}.jpg", segment=True)
        yield n, line, (path, stop - start + 1, (verb, noun), extra)


def _csv_rows(list_file, labels=None, root=None):
    """A CSV list, told apart by its header: EPIC-100, Charades, PySlowFast's Charades frame
    lists, else Kinetics."""
    header = csv_header(list_file)
    columns = set(header.split(","))
    root = root or os.path.dirname(os.path.abspath(list_file))
    if header.startswith("original_vido_id"):
        return _pyslowfast_frame_rows(list_file)
    if set(EPIC_COLUMNS) <= columns:
        return _epic_rows(list_file, root)
    if set(CHARADES_COLUMNS) <= columns:
        return _charades_rows(list_file, root)
    return _kinetics_rows(list_file)


def _csv_classes(list_file, labels=None):
    """The class names of a CSV list: Kinetics' sorted labels; Charades' and EPIC-100's files
    beside the list (EPIC: the 97 verbs, then the 300 nouns, as --heads counts them); else None."""
    header, folder = csv_header(list_file), os.path.dirname(os.path.abspath(list_file))
    columns = set(header.split(","))
    if set(EPIC_COLUMNS) <= columns:
        files = [os.path.join(folder, name) for name in EPIC_CLASSES]
        if not all(map(os.path.isfile, files)):
            return None
        names = []
        for path in files:
            with open(path, newline="", encoding="utf-8-sig") as f:
                rows = sorted(csv.DictReader(f), key=lambda r: int(r["id"]))
            names += [r["key"] for r in rows]
        return names
    if header.startswith("original_vido_id") or set(CHARADES_COLUMNS) <= columns:
        path = os.path.join(folder, CHARADES_CLASSES)
        if not os.path.isfile(path):
            return None
        return [line.split(maxsplit=1)[-1].strip() for _, line in read_text_lines(path) if line]
    return _kinetics_classes(kinetics_csv(list_file))


# list file suffix -> (rows, class names); anything else is text lines
LIST_FORMATS = {".csv": (_csv_rows, _csv_classes), ".json": (_sthv2_rows, _sthv2_classes)}


def check_image_tmpl(image_tmpl, start_index=1):
    """The frame-name template needs one unnamed integer field, like 'img_{:05d}.jpg': without one
    every frame has the same name (counting frames would never end); a named one ('{idx:05d}')
    cannot be filled."""
    try:
        distinct = image_tmpl.format(start_index) != image_tmpl.format(start_index + 1)
    except (IndexError, KeyError, ValueError, TypeError, AttributeError):
        distinct = False
    if not distinct:
        raise ValueError(
            f"--image_tmpl {image_tmpl!r} needs one unnamed integer field ('img_{{:05d}}.jpg')"
        )


# ---- sampling: pure functions of (sizes, mode, rng) ----------------------------------------------
# where test clips go: see sample_indices
PLACEMENTS = ("ours", "pyslowfast", "pyslowfast-offset", "mmaction2", "videomae", "videomae-ssv2")
# where train clips go: a random start, or `_videomae_ssv2_train`
TRAIN_PLACEMENTS = ("ours", "videomae-ssv2")


def sample_indices(
    num_frames,
    t_length,
    t_stride,
    mode,
    num_clips=1,
    rng=None,
    start_index=1,
    placement="ours",
    num_segments=1,
):
    """Frame numbers of the clip(s) to read: int64 array (num_clips, t_length).
    A clip is t_length frames, t_stride apart, spanning (t_length - 1) * t_stride + 1 frames.
    - train: a uniformly random start (from `rng`, a numpy Generator); num_clips independent clips.
    - val:   the centred clip (num_clips must be 1).
    - test:  num_clips clips spread evenly: the first starts at the first frame, the last ends at
      the
             last frame (num_clips=1: the centred clip).
    Short videos: the stride shrinks to the largest s <= t_stride whose span fits; if even stride 1
    is too long, the clip is every frame followed by repeats of the last. Frame numbers never leave
    [start_index, start_index + num_frames - 1]. `placement` picks another zoo's val/test clips
    instead: "pyslowfast" (`_pyslowfast_clips`), "pyslowfast-offset" (`_pyslowfast_offset_clips`),
    "mmaction2" (`_mmaction2_clips`), "videomae" (Kinetics, `_videomae_clips`) or "videomae-ssv2"
    (segment-based, `_videomae_ssv2_clips`); their short-video rules are theirs. Train clips are
    ours, or with placement "videomae-ssv2" VideoMAE's segment-based SSv2 train clips
    (`_videomae_ssv2_train`). num_segments > 1 (TSN / TSM): one snippet of t_length frames per
    segment, see `segment_indices`; then a clip is (num_segments * t_length) frames, the snippets
    one after the other."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if mode == "val" and num_clips != 1:
        raise ValueError("val mode samples one clip; use mode='test' for num_clips > 1")
    if num_segments > 1:
        return (
            segment_indices(
                num_frames, t_length, t_stride, mode, num_clips, rng, placement, num_segments
            )
            + start_index
        )
    if mode != "train" and placement != "ours":
        clips = ZOO_CLIPS[placement](num_frames, t_length, t_stride, num_clips)
        return clips.astype(np.int64) + start_index
    if mode == "train" and rng is None:
        raise ValueError("train sampling needs rng (a numpy Generator)")
    if mode == "train" and placement == "videomae-ssv2":
        clips = [_videomae_ssv2_train(num_frames, t_length, rng) for _ in range(num_clips)]
        return np.stack(clips) + start_index
    offsets = _offsets(num_frames, t_length, t_stride)
    room = max(0, num_frames - offsets[-1] - 1)  # possible starts: 0 .. room
    if mode == "train":
        starts = rng.integers(0, room + 1, size=num_clips)
    elif mode == "val":
        starts = np.array([room // 2])
    else:
        starts = (
            np.round(np.linspace(0, room, num_clips)) if num_clips > 1 else np.array([room // 2])
        )
    idx = np.minimum(starts.astype(np.int64)[:, None] + offsets[None, :], num_frames - 1)
    return idx + start_index


def _offsets(num_frames, t_length, t_stride):
    """A clip's frame offsets; short videos: the largest stride <= t_stride whose span fits, at
    least 1."""
    stride = t_stride
    if (t_length - 1) * stride + 1 > num_frames:
        stride = max(1, (num_frames - 1) // max(1, t_length - 1))
    return np.arange(t_length) * stride


def segment_indices(num_frames, t_length, t_stride, mode, num_clips, rng, placement, num_segments):
    """TSN's sparse sampling (Wang et al. 2016, Sec. 3.1): the snippets' possible starts (0 .. room
    - 1, room = frames left for a snippet's start; its stride shrinks on short videos as a clip's
    does) split into N = num_segments equal segments, segment k = starts [floor(k * room / N),
    floor((k + 1) * room / N)), at least one start each (a video shorter than N snippets repeats
    frames). 0-based (num_clips, N * t_length), snippet-major.
    - train: a uniformly random start inside each segment (N independent draws).
    - val / test: view j of num_clips at fraction (j + 1/2) / num_clips of every segment: one view
      is the segment centres, int(tick / 2 + tick * k) with tick = room / N, summed in that order:
      TSN's test sampling (tsn-pytorch dataset.py, _get_test_indices) and mmaction2's 2D
      SampleFrames test, so their 25-snippet test is --num_segments 25 with one view.
    - a zoo's placement ("mmaction2", "pyslowfast", ...): its num_clips * N test clips of t_length
      frames (mmaction2's 2D test is SampleFrames(clip_len=1, frame_interval=1, num_clips=N,
      test_mode=True)), view j taking clips j, j + num_clips, ...: every view spans the video."""
    if mode != "train" and placement != "ours":
        clips = ZOO_CLIPS[placement](num_frames, t_length, t_stride, num_clips * num_segments)
        return (
            clips.reshape(num_segments, num_clips, t_length)
            .transpose(1, 0, 2)
            .reshape(num_clips, -1)
        )
    offsets = _offsets(num_frames, t_length, t_stride)
    room = max(1, num_frames - int(offsets[-1]))  # starts 0 .. room - 1
    k = np.arange(num_segments)
    lo = k * room // num_segments
    if mode == "train":
        if rng is None:
            raise ValueError("train sampling needs rng (a numpy Generator)")
        hi = np.maximum((k + 1) * room // num_segments, lo + 1)
        starts = rng.integers(lo, hi)[None, :]  # (1, N); train draws one view
    else:
        # Trap: TSN's int(tick / 2.0 + tick * k) in that float order; room / N * (k + 1/2) rounds
        # the other way at exact halves (30 frames, 25 segments: segment 12 reads frame 15, not 14).
        tick = room / float(num_segments)
        views = (np.arange(num_clips)[:, None] + 0.5) / num_clips  # (V, 1); one view: 1/2
        starts = np.minimum((tick * views + tick * k[None, :]).astype(np.int64), room - 1)
    idx = np.minimum(starts[..., None] + offsets, num_frames - 1)  # (V, N, t_length)
    return idx.reshape(idx.shape[0], -1).astype(np.int64)


def _pyslowfast_clips(num_frames, t_length, t_stride, num_clips):
    """PySlowFast's test clips (slowfast/datasets/decoder.py: get_start_end_idx with clip_idx k of
    num_clips, USE_OFFSET_SAMPLING False as in its Kinetics configs, then temporal_sampling; fps =
    target fps). Clip k spans t_length * t_stride frames from start = max(N - span, 0) * k /
    num_clips -- so the last clip ends before the video does, and num_clips=1 is the FIRST clip, not
    the centre. Its frames are torch.linspace(start, start + span - 1, t_length) (float32, so the
    step is a little over t_stride), clamped to the video and truncated to integers: short videos
    repeat frames."""
    span = t_length * t_stride
    delta = max(num_frames - span, 0)
    starts = [delta * k / num_clips for k in range(num_clips)]
    return _pyslowfast_frames(starts, span, t_length, num_frames)


def _pyslowfast_offset_clips(num_frames, t_length, t_stride, num_clips):
    """PySlowFast's test clips with DATA.USE_OFFSET_SAMPLING True (MVITv2_*.yaml; decoder.py
    get_start_end_idx / get_multiple_start_end_idx, use_offset branch; fps = target fps): with delta
    = max(N - t_length * t_stride, 0), clip k of num_clips > 1 starts at k * floor(delta /
    (num_clips - 1)) -- the step is floored first, so the last clip may end up to num_clips - 2
    frames before the video does -- and one clip at floor(delta / 2), the centre. Its frames are
    then `_pyslowfast_clips`' linspace over t_length * t_stride frames, clamped and truncated."""
    span = t_length * t_stride
    delta = max(num_frames - span, 0)
    if num_clips == 1:
        starts = [delta // 2]
    else:
        starts = [k * (delta // (num_clips - 1)) for k in range(num_clips)]
    return _pyslowfast_frames(starts, span, t_length, num_frames)


def _pyslowfast_frames(starts, span, t_length, num_frames):
    """decoder.py temporal_sampling: torch.linspace(start, start + span - 1, t_length) in float32,
    clamped to the video and truncated."""
    clips = [torch.linspace(s, s + span - 1, t_length) for s in starts]
    return torch.stack(clips).clamp(0, num_frames - 1).long().numpy()


def _mmaction2_clips(num_frames, t_length, t_stride, num_clips):
    """mmaction2 `SampleFrames(clip_len=t_length, frame_interval=t_stride, num_clips,
    test_mode=True)` (mmaction/datasets/transforms/loading.py, 1.x `_get_test_clips`, default
    out_of_bound_opt='loop'). clip_len 1 (its 2D recognizers: TSN's 25-snippet test): start k =
    int(k * tick + tick / 2), tick = N / num_clips, the segment centres of TSN's _get_test_indices.
    3D recognizers: the clip spans (t_length - 1) * t_stride + 1 frames; max_offset = max(N - span,
    0); starts round(k * max_offset / (num_clips - 1)), or max_offset // 2 for one clip. Frames past
    the end wrap around to the start (modulo N). (mmaction2 0.x instead started clip k at int((k +
    1/2) * (N - span + 1) / num_clips); 1.x changed it to the above, "aligned with PySlowFast".)"""
    if t_length == 1:  # its 2D branch (clip_len 1): the segment centres, as TSN's test indices
        tick = num_frames / float(num_clips)
        starts = np.arange(num_clips) * tick + tick / 2.0
        return np.mod(starts, num_frames).astype(np.int64)[:, None]
    span = (t_length - 1) * t_stride + 1
    max_offset = max(num_frames - span, 0)
    if num_clips > 1:
        starts = np.round(np.arange(num_clips) * (max_offset / float(num_clips - 1)))
    else:
        starts = np.array([max_offset // 2])
    idx = starts.astype(np.int64)[:, None] + np.arange(t_length)[None, :] * t_stride
    return np.mod(idx, num_frames)


def _videomae_clips(num_frames, t_length, t_stride, num_clips):
    """VideoMAE's Kinetics clips (MCG-NJU/VideoMAE and OpenGVLab/VideoMAEv2 datasets.py
    VideoClsDataset). Test (num_clips > 1, --test_num_segment): the frames 0, t_stride, 2 t_stride,
    ... (the last repeated up to t_length), clip k the t_length of them from int(k * step), step =
    max(M - t_length, 0) / (num_clips - 1) for M such frames. One clip (their validation mode):
    converted = t_length * t_stride, end = (converted + N) // 2, the clip np.linspace(end -
    converted, end, t_length) clamped to [end - converted, end - 1] and truncated; a video of at
    most `converted` frames takes np.linspace(0, N, N // t_stride) padded with N, clamped to N -
    1."""
    if num_clips == 1:
        converted = t_length * t_stride
        if num_frames <= converted:
            idx = np.linspace(0, num_frames, num=num_frames // t_stride)
            idx = np.concatenate((idx, np.ones(t_length - num_frames // t_stride) * num_frames))
            return np.clip(idx, 0, num_frames - 1).astype(np.int64)[None, :]
        end = (converted + num_frames) // 2
        idx = np.linspace(end - converted, end, num=t_length)
        return np.clip(idx, end - converted, end - 1).astype(np.int64)[None, :]
    frames = list(range(0, num_frames, t_stride))
    frames += frames[-1:] * (t_length - len(frames))
    step = max((len(frames) - t_length) / (num_clips - 1), 0)
    starts = [int(k * step) for k in range(num_clips)]
    return np.array([frames[s : s + t_length] for s in starts], dtype=np.int64)


def _videomae_ssv2_clips(num_frames, t_length, t_stride, num_clips):
    """VideoMAE's Something-Something v2 test clips (datasets.py SSVideoClsDataset, segment-based;
    the stride is not used): tick = N / t_length; clip v of num_clips takes int(v * tick / num_clips
    + tick * x) for x < t_length -- all clips' frames sorted together, clip v every num_clips-th
    from v, as theirs reads them. One clip (validation): the segment centres int(tick / 2 + tick *
    x), VideoMAEv2's mode 'validation' (VideoMAE's draws train clips there)."""
    tick = num_frames / float(t_length)
    if num_clips == 1:
        return np.array([[int(tick / 2.0 + tick * x) for x in range(t_length)]], dtype=np.int64)
    every = [
        int(v * tick / num_clips + tick * x) for v in range(num_clips) for x in range(t_length)
    ]
    every = np.sort(np.array(every, dtype=np.int64))
    return np.stack([every[v::num_clips] for v in range(num_clips)])


def _videomae_ssv2_train(num_frames, t_length, rng):
    """VideoMAE's Something-Something v2 train clip (datasets.py SSVideoClsDataset.loadvideo_decord,
    train mode; the stride is not used): t_length segments of d = N // t_length frames, frame k * d
    + a uniform draw below d in segment k (the last N mod t_length frames are never read). Trap,
    kept as theirs: a video shorter than t_length frames (d = 0) is frame 0 repeated (their `elif
    len(vr) > num_segment` cannot be reached then)."""
    d = num_frames // t_length
    if d == 0:
        return np.zeros(t_length, dtype=np.int64)
    return np.arange(t_length, dtype=np.int64) * d + rng.integers(0, d, size=t_length)


ZOO_CLIPS = {
    "pyslowfast": _pyslowfast_clips,
    "pyslowfast-offset": _pyslowfast_offset_clips,
    "mmaction2": _mmaction2_clips,
    "videomae": _videomae_clips,
    "videomae-ssv2": _videomae_ssv2_clips,
}


# ---- crops and transforms: uint8 frames -> clips -------------------------------------------------
def crop_boxes(height, width, mode, new_size, crop_size, num_crops=1):
    """Val/test crops: squares (y, x, side) in ORIGINAL frame pixels, each resized to crop_size
    later (train crops: `train_box`). This equals "resize the short side to new_size, then crop
    crop_size" (up to whole source pixels), but resizes only the crop -- nothing if the frames were
    extracted with short side new_size (then side == crop_size).
    - val, and test with num_crops=1: centre crop.
    - test, num_crops=3: the whole short side, three crops at the start, centre and end of the long
      side (together they see the whole frame). At crop_size 256 this is mmaction2's ThreeCrop test
      protocol. (PySlowFast's 3 crops at 256 px go through a fully convolutional head that averages
      the softmaxes of the windows its fixed pooling kernel sees: not implemented here.)
    - test, num_crops=10: the 5 distinct crops of the original project's 10-crop test
      (lib/transforms.py GroupOverSample, from GroupMultiScaleCrop.fill_fix_offset: short side
      scaled to new_size, then crop_size crops at upper-left, upper-right, lower-left, lower-right
      and centre, with steps of (scaled size - crop_size) // 4); the caller adds each one's mirror
      image after it."""
    short = min(height, width)
    side = min(short, round(crop_size * short / new_size))
    if mode in ("train", "val") or num_crops == 1:
        return [((height - side) // 2, (width - side) // 2, side)]
    if num_crops == 10:
        # the scaled frame as torchvision's Resize(new_size) makes it (long side truncated), its
        # offsets
        sh, sw = (
            (new_size, int(new_size * width / height))
            if height <= width
            else (int(new_size * height / width), new_size)
        )
        hs, ws = (sh - crop_size) // 4, (sw - crop_size) // 4
        to_y, to_x = height / sh, width / sw  # scaled -> original pixels
        return [
            (
                min(round(4 * i * hs * to_y), height - side),
                min(round(4 * j * ws * to_x), width - side),
                side,
            )
            for i, j in ((0, 0), (0, 1), (1, 0), (1, 1), (0.5, 0.5))
        ]
    if num_crops != 3:
        raise ValueError(f"num_crops must be 1, 3 or 10, got {num_crops}")
    starts = [0, (max(height, width) - short) // 2, max(height, width) - short]
    return [(0, s, short) if width >= height else (s, 0, short) for s in starts]


def train_box(height, width, new_size, crop_size, rng):
    """The reference training crop of a (height, width) frame as a box (y0, x0, h, w) of ORIGINAL
    frame pixels (floats; edges, so pixel k spans [k, k + 1)). The reference (PySlowFast
    slowfast/datasets/transform.py: random_short_side_scale_jitter, then random_crop): short side
    S = round(U[new_size, 1.25 * new_size]), the long side scaled to floor(long * S / short); then a
    crop_size crop at a uniformly random whole-pixel offset of that rescaled frame, every offset
    0 .. size - crop_size allowed (PySlowFast's np.random.randint leaves out the last one). In
    original pixels that crop is this box; `train_crop` resamples only it."""
    S = int(round(rng.uniform(new_size, 1.25 * new_size)))
    if width < height:
        rw, rh = S, int(math.floor(height / width * S))
    else:
        rh, rw = S, int(math.floor(width / height * S))
    y, x = int(rng.integers(0, rh - crop_size + 1)), int(rng.integers(0, rw - crop_size + 1))
    sy, sx = height / rh, width / rw  # rescaled -> original pixels
    return (y * sy, x * sx, crop_size * sy, crop_size * sx)


MULTISCALE = (1, 0.875, 0.75, 0.66)  # TSN's GroupMultiScaleCrop scales of the short side
TRAIN_CROPS = ("jitter", "multiscale", "multiscale13")  # train_box, multiscale_box (5 / 13 places)
# (y, x) in quarters of the slack: the corners and centre; with more_fix_crop (tsn-pytorch's and
# VideoMAE's GroupMultiScaleCrop default, its pretraining crop) 8 more: the edge centres and quarter
# points.
FIX_PLACES = ((0, 0), (0, 4), (4, 0), (4, 4), (2, 2))
MORE_FIX_PLACES = ((2, 0), (2, 4), (4, 2), (0, 2), (1, 1), (1, 3), (3, 1), (3, 3))


def multiscale_box(height, width, new_size, crop_size, rng, more_places=False):
    """TSN's training crop (tsn-pytorch transforms.py GroupMultiScaleCrop, fix_crop with the 5
    corner / centre offsets; mmaction2 MultiScaleCrop(scales=(1, .875, .75, .66),
    max_wh_scale_gap=1, random_crop=False)) as a `train_box` box in ORIGINAL pixels: crop height and
    width each a scale of the short side, at most one step apart in the list, at one of 5 places
    (corners, centre), then resized to crop_size x crop_size (aspect not kept). new_size plays no
    part: the box is the same fraction of the frame whatever its size, apart from the snap: as
    GroupMultiScaleCrop (tsn-pytorch, VideoMAE) a side within 3 px of crop_size is taken as
    crop_size, in the stored frame's pixels (mmaction2 snaps after its Resize(-1, 256), where a 224
    crop snaps only at exactly 224). A snap that would leave a frame shorter than crop_size is not
    taken (theirs pads the crop with zeros). more_places: at one of 13 places (MORE_FIX_PLACES too:
    MCG-NJU/VideoMAE transforms.py GroupMultiScaleCrop, more_fix_crop=True, the pretraining crop of
    its datasets.py DataAugmentationForVideoMAE)."""
    short = min(height, width)
    sizes = [int(short * s) for s in MULTISCALE]
    sizes = [crop_size if abs(s - crop_size) < 3 and crop_size <= short else s for s in sizes]
    pairs = [(h, w) for i, h in enumerate(sizes) for j, w in enumerate(sizes) if abs(i - j) <= 1]
    h, w = pairs[int(rng.integers(len(pairs)))]
    dy, dx = (height - h) // 4, (width - w) // 4
    places = FIX_PLACES + MORE_FIX_PLACES if more_places else FIX_PLACES
    y, x = places[int(rng.integers(len(places)))]
    return (float(y * dy), float(x * dx), float(h), float(w))


# box (y0, x0, h, w) in fractions of the shipped window: all of it
IDENTITY_BOX = (0.0, 0.0, 1.0, 1.0)


def clip_transforms(rand_augment=False, num_ops=2, magnitude=9, color_jitter=0.0, random_erase=0.0):
    """The train clips' augmentation after crop and flip (PySlowFast's AUG for MViT; torchvision's
    transforms, which take (T, C, H, W) videos): colour jitter (brightness, contrast, saturation),
    RandAugment, random erasing with probability `random_erase`, in this order; None when all are
    off. Erased boxes take the ImageNet mean colour (~0 once normalised, torchvision references'
    value)."""
    ops = (
        ([v2.ColorJitter(color_jitter, color_jitter, color_jitter)] if color_jitter else [])
        + ([v2.RandAugment(num_ops, magnitude)] if rand_augment else [])
        + (
            [v2.RandomErasing(random_erase, value=[round(255 * m) for m in MEAN])]
            if random_erase
            else []
        )
    )
    return v2.Compose(ops) if ops else None


def apply_transforms(crop, augment, rng):
    """uint8 (N, H, W, 3) frames -> the same, `augment` applied once to the whole clip: one draw for
    every frame. torchvision's transforms draw from torch's global generator: seeded here from the
    sample's `rng`, inside fork_rng (the caller's stream is left as it was), so (seed, epoch, index)
    fixes them."""
    seed = int(rng.integers(2**63))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        # (T, C, H, W): torchvision's layout
        video = augment(tv_tensors.Video(crop.permute(0, 3, 1, 2)))
    return video.as_subclass(torch.Tensor).permute(0, 2, 3, 1)


def augment_view(crop, spec, rng):
    """The one place of a train view's augmentation, after its crop and flip: uint8 (N, c, c, 3)
    frames -> (frames, the augment.BatchAugment draws or None). Every path runs it: the loader
    (VideoFrameDataset.load_clip), the device decode (--decode_device cuda: gpudecode.decode_batch
    replays load_clip on the decoded frames, `crop` then on the GPU) and --augment_device batch
    (here, in the loader; spec.augment's transforms are only drawn here, and augment.apply runs them
    on the batch). A new augmentation goes first, before the transforms (so it comes before them on
    both --augment_device paths), draws from `rng` alone in a fixed order, and turns
    DataSpec.augments on (the loader then finishes the crop: the frames are the final pixels)."""
    if hasattr(spec.augment, "draw"):  # augment.BatchAugment: only its draws, here
        return crop, spec.augment.draw(rng, crop)
    if spec.augment:
        crop = apply_transforms(crop, spec.augment, rng)
    return crop, None


def check_augments(spec):
    """ValueError where `augment_view` changes a view, or draws, while spec.augments is off: the
    loader would not finish the crop, so the augmentation would see a window to be resized on the
    device (or, shipping whole frames, no view at all). Run once per train dataset, on a blank
    view."""
    crop, rng = torch.zeros(2, 4, 4, 3, dtype=torch.uint8), np.random.default_rng(0)
    state = rng.bit_generator.state
    out, drawn = augment_view(crop.clone(), spec, rng)
    if drawn is not None or rng.bit_generator.state != state or not torch.equal(out, crop):
        raise ValueError(
            "data.augment_view augments these train views while DataSpec.augments is off: turn "
            "it on with the augmentation (the loader then finishes the crop)"
        )


def train_crop(frames, box, size, flip=False, out=None):
    """List of N uint8 (H, W, 3) frames and a `train_box` -> (uint8 (N, size, size, 3), window box);
    flip: the box mirrored (a width below 0), for `crop_resize` to mirror on the device. out: the
    (N, size, size, 3) memory to cut the windows into (a batch's, `__getitems__`).

    Exactly one bilinear resample in total, as the reference's single rescale:
    - an upscale (box smaller than size; e.g. frames extracted at short side new_size): ship the
      size x size window holding every pixel the box's taps read, and the box in fractions of it,
      for `crop_resize` to enlarge on the device (a CPU resize costs over a third of a clip's
      decoding).
    - a downscale, or taps that fit no window (~3% of clips from short-side-new_size frames):
      `resample_box` here, from the full-resolution pixels; the window box is the identity (which
      `crop_resize` passes through: such a clip is mirrored here)."""
    H, W, _ = frames[0].shape
    y0, x0, h, w = box
    wy, wx = _window(y0, h, size, H), _window(x0, w, size, W)
    if wy is None or wx is None:
        crop = resample_box(frames, box, size)
        return (crop.flip(-2) if flip else crop), IDENTITY_BOX
    # (N, size, size, 3): one copy of the windows. The flip rides on the box: mirroring the pixels
    # here cost a mirrored clip ~0.4 ms more (2.4 MB copied backwards, frame by frame), where the
    # device's bilinear sampling mirrors for free.
    crop = torch.stack([f[wy : wy + size, wx : wx + size] for f in frames], out=out)
    y, x, h, w = (y0 - wy) / size, (x0 - wx) / size, h / size, w / size
    return crop, ((y, x + w, h, -w) if flip else (y, x, h, w))


def finish_box(frames, box, size):
    """A CPU model's `train_box` crop, whole, in uint8 in the loader: `crop_resize`'s grid, in
    torch's uint8 kernel. Trap: F.interpolate's grid starts at its input's start: see `_aligned`."""
    (a, b, n, j), (c, e, m, k) = (
        _aligned(*v, size) for v in zip(box[:2], box[2:], frames[0].shape)
    )
    # (N, 3, h, w) channels-last view
    x = torch.stack([f[a:b, c:e] for f in frames]).permute(0, 3, 1, 2)
    x = F.interpolate(x, size=(n, m), mode="bilinear", align_corners=False, antialias=False)
    # (N, size, size, 3), the decoder's layout
    return x[:, :, j : j + size, k : k + size].permute(0, 2, 3, 1)


def _aligned(start, length, limit, size):
    """finish_box, one axis -> input span [a, b) (a at a whole rescaled pixel), rescaled length,
    first j."""
    # the rescaled frame's side (train_box: length = size * limit / r)
    r = round(size * limit / length)
    step = limit // math.gcd(limit, r)  # input starts the rescaled grid hits at a whole pixel
    # the first tap, start - 0.5 (+0.5 px margin)
    a = step * (max(0, math.floor(start - 1)) // step)
    # past the last tap, as a multiple
    b = min(limit, -(-math.ceil(start + length + 1) // step) * step)
    return a, b, (b - a) * r // limit, round(start * r / limit) - a * r // limit


def _window(start, length, size, limit):
    """Start of a `size` window of a `limit`-sample axis that holds every tap with a weight of the
    `size` outputs over [start, start + length) (`_taps`, in plain floats: per-clip torch calls cost
    more than the copy), centred on them (so the taps just outside the box are real pixels, as in
    the reference); None if no window holds them."""
    first = math.floor(max(0.0, start + 0.5 * length / size - 0.5))
    # the last output's source coordinate
    end = max(0.0, start + (size - 0.5) * length / size - 0.5)
    last = min(math.floor(end) + (end > math.floor(end)), limit - 1)
    if last - first + 1 > size or limit < size:
        return None
    return min(max(round((first + last + 1 - size) / 2), 0), limit - size)


def _taps(start, length, n, limit):
    """1-D bilinear taps of F.interpolate(align_corners=False) for n outputs covering [start, start
    + length) of a signal of `limit` samples: (i0, i1, weight of i1). Output i reads source
    coordinate start + (i + 0.5) * length / n - 0.5, clamped at 0; i1 stops at the last sample
    (ATen's area_pixel_compute_source_index and its bilinear kernel)."""
    c = (start + (torch.arange(n, dtype=torch.float64) + 0.5) * (length / n) - 0.5).clamp(min=0)
    i0 = c.floor().long().clamp(max=limit - 1)
    return i0, (i0 + 1).clamp(max=limit - 1), (c - i0).clamp(0, 1).float()


def resample_box(frames, box, size):
    """Frames -> uint8 (N, size, size, 3): the box (y0, x0, h, w) of original pixels resampled as
    "resize the whole frame (bilinear, align_corners=False, no antialias: PySlowFast's
    F.interpolate, mmaction2's cv2 INTER_LINEAR), then crop" would -- but only the box's pixels are
    read. Separable: rows, then columns, in float32."""
    H, W, _ = frames[0].shape
    y0, x0, h, w = box
    # taps on the frames' device: decode_batch (--decode_device cuda) replays this on GPU-decoded
    # frames
    dev = frames[0].device
    (r0, r1, rw), (c0, c1, cw) = (
        [t.to(dev) for t in _taps(*a)] for a in ((y0, h, size, H), (x0, w, size, W))
    )
    left, right = int(c0[0]), int(c1[-1]) + 1
    # rows first, gathered straight from each frame's box columns (uint8; only the taps are
    # converted) (N, size, w', 3)
    top = torch.stack([f[:, left:right].index_select(0, r0) for f in frames]).float()
    bottom = torch.stack([f[:, left:right].index_select(0, r1) for f in frames]).float()
    N = top.shape[0]
    # (N*size, w'*3) interleaved
    rows = torch.lerp(top, bottom, rw[None, :, None, None]).view(N * size, -1)
    # columns: gather whole RGB triplets from the flat rows (3x faster than indexing dim 2 of (..,
    # w', 3))
    i0, i1 = ((c[:, None] - left) * 3 + torch.arange(3, device=dev) for c in (c0, c1))
    out = torch.lerp(
        rows.index_select(1, i0.flatten()),
        rows.index_select(1, i1.flatten()),
        cw.repeat_interleave(3),
    )
    return out.add_(0.5).to(torch.uint8).view(N, size, size, 3)  # round (values are in [0, 255])


def resized_crop(frames, box, size, out=None):
    """List of N uint8 (H, W, 3) frames -> uint8 (N, size, size, 3): the crop `box` resized to
    `size`, one batched op for the clip, in the decoder's interleaved layout: torch's fast uint8
    resize kernel wants channels-last input (planar uint8 input is ~10x slower in it). out: memory
    for a crop of `size` (a batch's, `__getitems__`)."""
    y, x, side = box
    # (N, side, side, 3); cut into `out` when it is the final crop
    crop = torch.stack(
        [f[y : y + side, x : x + side] for f in frames], out=out if side == size else None
    )
    if side == size:
        return crop
    # bilinear straight on uint8; antialias matters when shrinking (else aliasing), only costs
    # enlarging
    crop = crop.permute(0, 3, 1, 2)  # (N, 3, side, side) channels-last view
    out = F.interpolate(
        crop if crop.is_cpu else crop.float(),
        size=(size, size),
        mode="bilinear",
        antialias=side > size,
        align_corners=False,
    )
    # CUDA has no uint8 bilinear kernel: float there, rounded back (+-1 of the CPU's)
    if not crop.is_cpu:
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out.permute(0, 2, 3, 1)  # (N, size, size, 3), contiguous again


def normalize(x, mean=MEAN, std=STD, dtype=torch.float32):
    """uint8 clips (..., 3, T, H, W) on any device -> `dtype`, /255 then (x - mean) / std per
    channel. mean/std: RGB in [0, 1], what the weights were trained with (ImageNet's for inflated 2D
    weights, 0.45 / 0.225 for PySlowFast / pytorchvideo Kinetics weights: model.pretrained_info says
    which). Keeps the memory format: a batch from `collate` stays channels_last_3d. Trap (CPU): the
    per-channel broadcast is ~3x slower over channels-last memory; change a layout in uint8, before
    this (train.py)."""
    if x.dtype != torch.uint8 or x.dim() < 4 or x.shape[-4] != 3:
        raise ValueError(
            f"normalize expects uint8 (..., 3, T, H, W), got {x.dtype} {tuple(x.shape)}"
        )
    mean, std = _scaled(tuple(mean), tuple(std), x.device, dtype)
    return x.to(dtype).sub_(mean).div_(std)  # == (x / 255 - mean) / std; in place: no temporaries


@functools.lru_cache(maxsize=16)
# once per device: a CUDA tensor from a list is a blocking copy
def _scaled(mean, std, device, dtype):
    return [torch.tensor(v, dtype=dtype).view(3, 1, 1, 1).mul(255).to(device) for v in (mean, std)]


def crop_resize(x, boxes, size=None):
    """The device half of the training crop (see `train_crop`), one batched op: float (B, C, T, H,
    W) and boxes (B, 4) = (y0, x0, h, w) in fractions of H and W, a width below 0 a mirrored box (a
    flipped window) -> the boxes cut out and resized to H x W, bilinear (align_corners=False, border
    clamp: F.interpolate's sampling), the same for every frame. Identity boxes (clips the loader
    already finished) pass through untouched. No randomness: the boxes were drawn in the loader from
    (seed, epoch, index), so a resume repeats them exactly.
    size (the loader's info["size"]: it shipped whole frames): boxes (B, 4) or (B, K, 4) -> (B x K,
    C, T, size, size), each video's K views together, cut from its frames (never copied K times)."""
    if size is not None:
        size = int(size.view(-1)[0]) if torch.is_tensor(size) else int(size)
        boxes = boxes.view(x.shape[0], -1, 4)
        views = [_sample_boxes(x, boxes[:, k], (size, size)) for k in range(boxes.shape[1])]
        return torch.stack(views, 1).flatten(0, 1)
    # pass the loader's CPU boxes: no GPU sync
    if bool((boxes == boxes.new_tensor(IDENTITY_BOX)).all()):
        return x
    return _sample_boxes(x, boxes.view(-1, 4), x.shape[-2:])


def _sample_boxes(x, boxes, size):
    """float (B, C, T, H, W), boxes (B, 4) in fractions -> (B, C, T, *size), bilinear."""
    B, C, T = x.shape[:3]
    boxes = boxes.to(device=x.device, dtype=x.dtype, non_blocking=True)
    y0, x0, h, w = boxes.unbind(1)
    # output (x, y, t) in [-1, 1] -> input
    theta = torch.zeros(B, 3, 4, device=x.device, dtype=x.dtype)
    theta[:, 0, 0], theta[:, 1, 1], theta[:, 2, 2] = w, h, 1  # time maps onto itself exactly
    theta[:, 0, 3], theta[:, 1, 3] = 2 * x0 + w - 1, 2 * y0 + h - 1  # box centre, in [-1, 1] units
    grid = F.affine_grid(theta, [B, C, T, *size], align_corners=False)  # (B, T, h, w, 3)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def new_batch(shape):
    """An uninitialised uint8 batch; in a DataLoader worker in shared memory, as default_collate
    makes its own there: the main process maps it, no copy on the way."""
    if torch.utils.data.get_worker_info() is None:
        return torch.empty(shape, dtype=torch.uint8)
    storage = torch.UntypedStorage._new_shared(math.prod(shape))
    return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)


class Batch(list):
    """Items whose clips were cut straight into one batch tensor, `clips` (uint8 (B, 3, T, H, W),
    VideoFrameDataset.__getitems__): `collate` takes that tensor as it is."""

    def __init__(self, items, clips):
        super().__init__(items)
        self.clips = clips


def collate(batch):
    """DataLoader collate_fn: (clip, label, info) items -> (clips, labels, info). Clips are (.., 3,
    T, H, W) views of the decoder's (.., T, H, W, 3) memory; stacking that memory as it is (no
    transposition) gives a channels_last_3d batch. info: default_collate (strings -> lists). A
    `Batch` whose items are still the slots of its clips: those, no copy."""
    if isinstance(batch, Batch) and len(batch) == len(batch.clips):
        if all(c.data_ptr() == s.data_ptr() for (c, _, _), s in zip(batch, batch.clips)):
            labels, info = torch.utils.data.default_collate([(y, i) for _, y, i in batch])
            return batch.clips, labels, info
    if len({c.shape for c, _, _ in batch}) > 1 and all("size" in i for _, _, i in batch):
        batch = _pad_frames(batch)
    items = [(c.movedim(-4, -1), label, i) for c, label, i in batch]
    clips, labels, info = torch.utils.data.default_collate(items)
    return clips.movedim(-1, -4), labels, info  # (B, [V,] 3, T, H, W)


def _pad_frames(batch):
    """Whole frames of different sizes (`ship_frames`) -> each padded to the batch's largest by
    repeating its last row and column (what the device's border clamp reads past an edge anyway),
    its boxes rescaled to the padded frame."""
    Hp, Wp = (max(c.shape[i] for c, _, _ in batch) for i in (-2, -1))
    out = []
    for c, label, info in batch:
        H, W = c.shape[-2:]
        f = c.movedim(-4, -1)  # (T, H, W, 3): the interleaved memory
        p = f.new_empty(*f.shape[:-3], Hp, Wp, 3)
        p[..., :H, :W, :] = f
        p[..., H:, :W, :] = f[..., H - 1 :, :, :]
        p[..., :, W:, :] = p[..., :, W - 1 : W, :]
        scale = torch.tensor([H / Hp, W / Wp, H / Hp, W / Wp], dtype=info["box"].dtype)
        out.append((p.movedim(-1, -4), label, {**info, "box": info["box"] * scale}))
    return out


# ---- the dataset ---------------------------------------------------------------------------------
# Datasets whose labels name a direction (a flipped "moving left" is "moving right"): no horizontal
# flips.
NO_FLIP = {"sthv1", "sthv2", "demo"}


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """What VideoFrameDataset makes of a list, besides its mode: train.make_dataset fills one from
    the flags (a field added here and there reaches training, evaluation, features and predict). The
    defaults are the reference recipe's."""

    dataset: str = ""  # its name: the flip rule (NO_FLIP) and the classes file (`class_names`)
    root: str = None  # the list's paths are relative to it; None: the list's folder
    image_tmpl: str = "img_{:05d}.jpg"  # frame i of a frame folder: image_tmpl.format(i)
    start_index: int = 1  # number of a video's first frame
    t_length: int = 16  # frames per clip (TSN: per snippet)
    t_stride: int = 4
    num_segments: int = 1  # TSN / TSM: a snippet per segment (`segment_indices`)
    new_size: int = 256  # short side the crops are taken as if resized to
    crop_size: int = 224
    train_crop: str = "jitter"  # TRAIN_CROPS: train_box or multiscale_box
    flip: bool = True  # train flips (and --test_crops 10's mirrors); never for NO_FLIP datasets
    augment: object = None  # clip_transforms' transform for train clips, or None
    reps: int = 1  # train: clips per video (repeated augmentation)
    num_clips: int = 1  # test: clips per video
    num_crops: int = 1  # test: crops per clip (1, 3, 10)
    test_sampling: str = "ours"  # PLACEMENTS: where val / test clips go
    train_sampling: str = "ours"  # TRAIN_PLACEMENTS: where train clips go
    num_classes: int = None  # labels must be below it; None: from the list
    multi_label: bool = False  # several labels a video: targets are 0/1 vectors (`target`)
    heads: tuple = None  # classes of each head (EPIC-100: 97 verbs, 300 nouns): a label each
    class_names: str = None  # a classes file; None: see `class_names`
    labels: str = None  # Something-Something v2's labels file; None: STHV2_LABELS beside the list
    unlabelled: bool = False  # pretraining: '<frame_dir> <num_frames>' lines too (read_list)
    fps: float = None  # frame folders' frame rate, for segments by time (`time_segment`)
    seed: int = 0
    video_decoder: str = "auto"  # decode.VIDEO_DECODERS
    read_timeout: float = None  # s; None: no limit (see decode.read_files)
    # --decode_device: items are EncodedClips, gpudecode.decode_batch decodes them
    encoded: bool = False
    finish_crop: bool = False  # a CPU model: the loader finishes the train crop (finish_box)
    # JPEG frames decoded at 1/2, 1/4 or 1/8 scale in libjpeg where the short side stays >= new_size
    # (decode.decode_draft): faster, not the exact pixels; off unless asked for
    jpeg_draft: bool = False

    @property
    def flips(self):
        return self.flip and self.dataset not in NO_FLIP

    @property
    def augments(self):
        """A train view is augmented (`augment_view`): the loader finishes its crop."""
        return self.augment is not None

    def check(self, mode):
        """ValueError naming what is wrong with this spec for `mode`."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode != "test" and (self.num_clips, self.num_crops) != (1, 1):
            raise ValueError(f"num_clips / num_crops are test-mode options (mode={mode!r})")
        if self.num_crops not in (1, 3, 10) or self.num_clips < 1:
            raise ValueError(
                "need num_clips >= 1 and num_crops in (1, 3, 10), got "
                f"{self.num_clips}, {self.num_crops}"
            )
        if self.num_crops == 10 and not self.flips:  # half its views are mirror images
            raise ValueError(
                "--test_crops 10 mirrors half of its views, but flips are off here (--no_flip, "
                "or a dataset whose labels name a direction): use --test_crops 3 or 1"
            )
        if self.train_crop not in TRAIN_CROPS or self.num_segments < 1:
            raise ValueError(
                f"need train_crop in {TRAIN_CROPS} and num_segments >= 1, got {self.train_crop!r}, "
                f"{self.num_segments}"
            )
        if self.test_sampling not in PLACEMENTS:
            raise ValueError(
                f"test_sampling must be one of {PLACEMENTS}, got {self.test_sampling!r}"
            )
        if self.train_sampling not in TRAIN_PLACEMENTS:
            raise ValueError(
                f"train_sampling must be one of {TRAIN_PLACEMENTS}, got {self.train_sampling!r}"
            )
        if self.train_sampling != "ours" and self.num_segments > 1:
            raise ValueError(
                f"train_sampling {self.train_sampling!r} places 3D clips; TSN segments "
                f"(num_segments {self.num_segments}) have their own"
            )
        if self.t_length < 1 or self.t_stride < 1:
            raise ValueError(
                f"t_length and t_stride must be >= 1, got {self.t_length}, {self.t_stride}"
            )
        if not 1 <= self.crop_size <= self.new_size:
            raise ValueError(
                f"need 1 <= crop_size <= new_size, got {self.crop_size}, {self.new_size}"
            )
        check_image_tmpl(self.image_tmpl, self.start_index)


def class_names(spec, list_file):
    """The class names of `list_file`'s labels (name i = label i), or None: the spec's classes file,
    else <dataset>_classes.txt beside the list (`prepare.py lists` writes it), else those the list's
    own format names (a Something-Something v2 labels file, a Kinetics CSV's classes). ValueError /
    OSError for an unreadable or malformed file."""
    path = spec.class_names or os.path.join(
        os.path.dirname(os.path.abspath(list_file)), f"{spec.dataset}_classes.txt"
    )
    if spec.class_names or (spec.dataset and os.path.isfile(path)):
        return read_class_names(path)
    return list_classes(list_file, spec.labels)


def read_class_names(path):
    """A classes file (`<dataset>_classes.txt`, written by prepare.py): line i = the name of label
    i. ValueError naming file:line for a blank line inside, a duplicate, or no names at all."""
    lines = read_text_lines(path)
    while lines and not lines[-1][1].strip():  # the final newline(s)
        lines.pop()
    names, seen = [], {}
    for n, line in lines:
        name = line.strip()
        if not name:
            raise ValueError(f"{path}:{n}: blank line (line i must name class i - 1)")
        if name in seen:
            raise ValueError(f"{path}:{n}: class {name!r} repeats line {seen[name]}")
        seen[name] = n
        names.append(name)
    if not names:
        raise ValueError(f"{path}: no class names")
    return names


def labels(video):
    """A video's labels as a tuple (one, or several: multi-label, --heads)."""
    return video.label if isinstance(video.label, tuple) else (video.label,)


def check_labels(videos, spec):
    """ValueError naming the list and line of a label the spec cannot take: several labels without
    --multi-label or --heads; with --heads, one label a head, each below its head's classes."""
    for v in videos:
        where = f"{v.list_file}:{v.line}"
        if spec.heads:
            if len(labels(v)) != len(spec.heads) or any(
                not 0 <= k < n for k, n in zip(labels(v), spec.heads)
            ):
                raise ValueError(
                    f"{where}: labels {','.join(map(str, labels(v)))}: --heads "
                    f"{' '.join(map(str, spec.heads))} takes one label a head, each below its size"
                )
        elif len(labels(v)) > 1 and not spec.multi_label:
            raise ValueError(
                f"{where}: {len(labels(v))} labels: a multi-label list trains with --multi-label"
            )


class Wrapped(torch.utils.data.Dataset):
    """A dataset around a VideoFrameDataset whose items add to its info (pretraining's masks, their
    draw's index and epoch): every other attribute (set_epoch, videos, spec, reps, ...) is the
    wrapped one's. Subclasses define __getitem__."""

    # torch's DataLoader fetches a batch with __getitems__ where a dataset has one; __getattr__
    # would hand it the wrapped dataset's, whose items lack what __getitem__ adds
    __getitems__ = None

    def __init__(self, ds):
        self.ds = ds

    def __getattr__(self, name):
        if name == "ds":  # not yet set (unpickling in a worker): no recursion
            raise AttributeError(name)
        return getattr(self.ds, name)

    def __len__(self):
        return len(self.ds)


BAD_ATTEMPTS = 4  # train mode: replacements tried for one unreadable video before giving up
# the methods between __getitems__ and a clip's place in the batch: a subclass (a fork's) that
# overrides one gets its items fetched one by one, through its own methods
SLOTTED = ("__getitem__", "item", "load_clip", "train_view")


class VideoFrameDataset(torch.utils.data.Dataset):
    """`ds[i] -> (clip, label, info)`: clip uint8 (3, T, crop, crop) in train/val mode; in test mode
    (V, 3, T, crop, crop) with V = num_clips * num_crops, clip-major (view = clip * num_crops +
    crop). info: {"bad": ""} and in train mode "box" (see `load_clip`). train_sampling /
    test_sampling: `sample_indices`'s placement of train / val and test clips (TRAIN_PLACEMENTS /
    PLACEMENTS).

    Randomness: sample i of epoch e uses np.random.default_rng([seed, e, i]) and nothing else, so
    clips do not depend on the number of workers, their order or a resume point (numpy's GLOBAL RNG,
    copied into every forked worker, would give all workers the same "random" crops). Call
    set_epoch(e) before iterating: a worker only sees the epoch that the dataset had when the worker
    started."""

    def __init__(self, list_file, spec=DataSpec(), mode="train", **fields):
        """The videos of `list_file` (read_list: text, Kinetics CSV or Something-Something v2 JSON)
        as `spec` says, in `mode`; keyword arguments replace fields of `spec` (DataSpec(), the
        reference recipe, by default)."""
        spec = dataclasses.replace(spec, **fields)
        spec.check(mode)
        decode.keep_heap()  # this process, and the loader workers forked from it (__setstate__)
        self.list_file, self.spec, self.mode, self.epoch = str(list_file), spec, mode, 0
        self.flip = spec.flips
        # a CPU model, or an augmented view (augment_view: the final pixels): finish_box here,
        # uint8 (crop_resize would take ~20x the time)
        self.finish_crop = spec.finish_crop or spec.augments
        if mode == "train" and not spec.augments:
            check_augments(spec)
        self.reps = spec.reps if mode == "train" else 1  # reps: clips per video
        # A multi-scale box is up to the whole short side: many need a shrink, which a crop_size
        # window cannot hold, so the CPU did it (~35 ms a 16-frame clip, ~5x its decoding). For a
        # device model the loader ships the decoded frames once and the device cuts every view's
        # box out of them (crop_resize with a size). Not in gpudecode's replay (frames on the GPU).
        self.ship_frames = (
            mode == "train"
            and not self.finish_crop
            and not spec.encoded
            and spec.train_crop != "jitter"
        )
        # for the list's video files, if any
        self.video_decoder = decode.pick_video_decoder(spec.video_decoder)
        self.videos = read_list(
            list_file,
            spec.root,
            spec.num_classes,
            decoder=self.video_decoder,
            labels=spec.labels,
            unlabelled=spec.unlabelled,
            fps=spec.fps,
        )
        check_labels(self.videos, spec)
        largest = max((k for v in self.videos for k in labels(v)), default=0)
        self.num_classes = spec.num_classes or largest + 1
        self.num_classes = sum(spec.heads) if spec.heads else self.num_classes

    def __setstate__(self, state):
        """A copy unpickled in another process (a spawn or forkserver loader worker): that process
        keeps its heap too."""
        self.__dict__.update(state)
        decode.keep_heap()

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.videos)

    def frame_path(self, video, i):
        return os.path.join(video.path, (video.image_tmpl or self.spec.image_tmpl).format(i))

    def target(self, video, rng=None):
        """What the loss reads of `video`'s label: the label (an int); --multi-label: float32
        (num_classes,), 1 for each of its labels (PySlowFast's as_binary_vector); --heads: int64
        (heads,), one label per head (EPIC-100's verb and noun). A train clip of a video with labels
        by frame (Charades) takes the labels of the frames it spans (`span_labels`): `rng` is the
        generator load_clip then draws the clip from."""
        labels = video.label if isinstance(video.label, tuple) else (video.label,)
        if self.spec.multi_label and self.mode == "train" and video.label_frames is not None:
            # the clip's frames drawn from a copy: load_clip draws the same ones from `rng` itself
            numbers = self.choose_frames(video, copy.deepcopy(rng))
            first, last = numbers.min(), numbers.max()
            shift = self.spec.start_index + video.offset  # frame numbers -> counted from 0
            labels = span_labels(video.label_frames, first - shift, last - shift)
        if self.spec.multi_label:
            hot = torch.zeros(self.num_classes, dtype=torch.float32)
            hot[list(labels)] = 1.0
            return hot
        if self.spec.heads:
            return torch.tensor(labels, dtype=torch.int64)
        return video.label

    def load_frames(self, video, numbers):
        """Decode frames `numbers` of `video` (decode_frame) -> list of uint8 (H, W, 3) tensors.
        Any failure is a BadVideo naming the frame, the reason, the video and its list line."""
        # a first read as frames get (a FIFO, a dead mount: read_timeout)
        if decode.is_video_file(video.path):
            # then the decoder reads the file
            decode.read_files(video, [video.path], self.spec.read_timeout, count=12)
            return self.read_video(video, numbers)
        frames, paths = [], [self.frame_path(video, int(i)) for i in numbers]
        for path, blob in zip(paths, decode.read_files(video, paths, self.spec.read_timeout)):
            try:
                if isinstance(blob, OSError):
                    raise blob
                img = (
                    decode.decode_draft(blob, self.spec.new_size)
                    if self.spec.jpeg_draft
                    else decode.decode_frame(blob)
                )
            # PIL: UnidentifiedImageError is an OSError
            except (OSError, RuntimeError, ValueError) as e:
                if not os.path.isdir(video.path):
                    raise decode.BadVideo(video, video.path, "missing folder") from None
                if not os.path.isfile(path):
                    raise decode.BadVideo(video, path, "missing frame") from None
                if os.path.getsize(path) == 0:
                    raise decode.BadVideo(video, path, "empty file (0 bytes)") from None
                raise decode.BadVideo(video, path, f"unreadable frame: {decode._why(e)}") from None
            if frames and img.shape != frames[0].shape:
                raise decode.BadVideo(video, path, decode._size_change(img, frames[0]))
            frames.append(img)
        return frames

    def read_video(self, video, numbers, source=None, device="cpu"):
        """Frames `numbers` of a video file (or of its bytes, `source`), opened once, on `device`.
        The file must hold the frames the list says (BadVideo otherwise, naming it and its list
        line)."""
        try:
            n, read = decode.open_video(
                video.path if source is None else source, self.video_decoder, device
            )
            # 0: a `<video> <label>` line that could not be counted; a segment: up to its end
            if n < max(1, video.offset + video.num_frames):
                raise RuntimeError(
                    f"{video.offset + video.num_frames} frames listed, the video has {n}"
                    if n
                    else "no frames"
                )
            frames = read([int(i) - self.spec.start_index for i in numbers])
        except RuntimeError as e:
            raise decode.BadVideo(
                video,
                video.path,
                "missing file"
                if not os.path.isfile(video.path) and source is None
                else f"unreadable video: {e}",
            ) from None
        for f in frames[1:]:  # a stream may change size midway
            if f.shape != frames[0].shape:
                raise decode.BadVideo(video, video.path, decode._size_change(f, frames[0]))
        return frames

    def __getitems__(self, indices):
        """A batch as torch's DataLoader fetches it (it calls this where a dataset has one, then
        `collate`): the items of `indices` as a `Batch`, each clip written straight into its place
        in one batch tensor, which `collate` takes as it is: one copy of each clip (2.4 MB a 16x224
        clip) fewer than stacking the items' own. Where a clip's shape is not known before it is
        made (test views, whole frames, repeated views, bytes mode), or a subclass makes its own
        items (its __getitem__ or load_clip), the items as ds[i] gives them."""
        mine = all(getattr(type(self), f) is getattr(VideoFrameDataset, f) for f in SLOTTED)
        if (
            not mine
            or self.mode == "test"
            or self.ship_frames
            or self.reps > 1
            or self.spec.encoded
        ):
            return [self[i] for i in indices]
        T, c = self.spec.t_length * self.spec.num_segments, self.spec.crop_size
        # (B, 3, T, c, c) view of (B, T, c, c, 3) memory: the decoder's layout, as `collate` stacks
        clips = new_batch((len(indices), T, c, c, 3)).permute(0, 4, 1, 2, 3)
        return Batch([self.item(i, out) for i, out in zip(indices, clips)], clips)

    def __getitem__(self, index):
        return self.item(index)

    def item(self, index, out=None):
        """(clip, label, info); out: the clip's place in a batch (`__getitems__`). Train mode: an
        unreadable video (BadVideo) is replaced by another one, drawn from (seed, epoch, index,
        attempt) only -- the same replacement for any worker count or resume point -- and each
        failure is one line of info["bad"]; the label is the replacement's. Val/test never
        substitute (it would change the metric): BadVideo propagates."""
        video = self.videos[index]
        rng = np.random.default_rng([self.spec.seed, self.epoch, index])
        bad = []
        for attempt in range(1, BAD_ATTEMPTS + 2):
            try:
                target = self.target(video, rng)
                clip, info = self.load_clip(video, rng, out=out)
                return clip, target, {**info, "bad": "\n".join(bad)}
            except decode.BadVideo as e:
                if (
                    self.mode != "train"
                    or len(self.videos) < 2
                    or isinstance(e, decode.ReadTimeout)
                ):
                    raise
                bad.append(str(e))
                if attempt > BAD_ATTEMPTS:
                    raise decode.BadVideo(
                        e.video,
                        e.path,
                        f"{e.reason}; the last of {len(bad)} unreadable videos "
                        f"in a row for sample {index} (epoch {self.epoch}): run `python "
                        "prepare.py check`",
                    ) from None
            # another video, never this sample itself; its clip draws from the same generator
            rng = np.random.default_rng([self.spec.seed, self.epoch, index, attempt])
            j = int(rng.integers(len(self.videos) - 1))
            video = self.videos[j + (j >= index)]

    def choose_frames(self, video, rng):
        """The frame numbers of `video`'s clip(s), int64 (clips, T) in clip order: sample_indices as
        the spec says, drawing from `rng` first (gpudecode.defer_clip calls it alone, as load_clip
        does)."""
        if video.num_frames < 1:  # a `<video> <label>` line whose video could not be counted: why
            self.read_video(video, [])
        # a segment (offset > 0): its clips are drawn inside it, as in a video of its frames alone
        return video.offset + sample_indices(
            video.num_frames,
            self.spec.t_length,
            self.spec.t_stride,
            self.mode,
            self.spec.num_clips if self.mode == "test" else 1,
            rng,
            self.spec.start_index,
            self.placement,
            self.spec.num_segments,
        )

    @property
    def placement(self):
        """sample_indices' placement for this dataset's mode: the spec's train or val / test one."""
        if self.mode == "train":
            return self.spec.train_sampling
        return self.spec.test_sampling

    def train_view(self, frames, rng, out=None):
        """One train view of the decoded frames, its draws (box, flip, augment) the next ones of
        `rng`: (uint8 (N, crop, crop, 3) in decode order, box, the augment.BatchAugment draws or
        None). The frames are only read: every view of a video shares them. out: memory for a
        window (`train_crop`)."""
        H, W, _ = frames[0].shape
        if self.spec.train_crop == "jitter":  # one box for every frame (snippet)
            box = train_box(H, W, self.spec.new_size, self.spec.crop_size, rng)
        else:
            more = self.spec.train_crop == "multiscale13"
            box = multiscale_box(H, W, self.spec.new_size, self.spec.crop_size, rng, more)
        if self.ship_frames:  # the box in fractions of the frames; a flip mirrors it (width < 0)
            y0, x0, h, w = box[0] / H, box[1] / W, box[2] / H, box[3] / W
            flip = self.flip and rng.random() < 0.5
            return None, ((y0, x0 + w, h, -w) if flip else (y0, x0, h, w)), None
        # drawn before the crop, as the reference's (nothing between draws from rng)
        flip = self.flip and rng.random() < 0.5
        if self.finish_crop:
            # finish_box follows train_box's rescaled pixel grid; a multi-scale box is off that grid
            finish = finish_box if self.spec.train_crop == "jitter" else resample_box
            crop, box = finish(frames, box, self.spec.crop_size), IDENTITY_BOX
            crop = crop.flip(-2) if flip else crop
        else:  # the window; a flip mirrors its box
            crop, box = train_crop(frames, box, self.spec.crop_size, flip, out)
        crop, drawn = augment_view(crop, self.spec, rng)
        return crop, box, drawn

    def load_clip(self, video, rng, read=None, out=None):
        """(video, numpy Generator) -> (clip, info). Train: clip uint8 (3, T, crop, crop) and
        info["box"], the float32 (4,) box that `crop_resize` still cuts out on the device (identity
        when the clip is final); with an augment.BatchAugment, info["augment"] too (the clip's drawn
        augmentation, for augment.apply). With reps K > 1: (K, 3, T, crop, crop) and (K, 4) boxes.
        `ship_frames` (multi-scale crops for a device model): the decoded frames (3, T, H, W), once
        for all K views, their boxes (K, 4) in fractions of them and info["size"], the crop size.
        Val: (3, T, crop, crop); test: (V, 3, T, crop, crop), clip-major.
        Its frames come from `read(video, numbers)` (default: load_frames, decoding on this CPU).
        With encoded=True, an EncodedClip instead: see gpudecode.defer_clip. out: the clip's place
        in a batch (`__getitems__`): a train window or val crop is cut straight into it, any other
        clip copied.
        """
        if self.spec.encoded and read is None:
            return gpudecode.defer_clip(self, video, rng)
        clips = self.choose_frames(video, rng)  # (clips, T) frame numbers, in clip order
        # each frame decoded once, in the file's order: `numbers`; `inverse` puts them back below
        numbers, inverse = np.unique(clips, return_inverse=True)
        in_order = np.array_equal(numbers, clips.reshape(-1))
        frames = (read or self.load_frames)(video, numbers)
        H, W, _ = frames[0].shape
        info = {}
        # (T, c, c, 3) memory of `out`: one view (`__getitems__`)
        window = out.permute(1, 2, 3, 0) if out is not None and in_order else None
        if self.mode == "train":  # draws: frames, then per clip box, flip, augment -- in this order
            # repeated augmentation (--ra-reps / --num_sample): `reps` views of the same decoded
            # frames
            views, boxes, drawn = zip(
                *(self.train_view(frames, rng, window) for _ in range(self.reps))
            )
            info["box"] = torch.tensor(boxes if self.reps > 1 else boxes[0], dtype=torch.float32)
            # --augment_device batch: augment.apply augments the batch later
            if drawn[0] is not None:
                info["augment"] = torch.stack(drawn) if self.reps > 1 else drawn[0]
            if self.ship_frames:  # the decoded frames once, for every view (`crop_resize`)
                views, info["size"] = [torch.stack(frames)], self.spec.crop_size
        else:
            views = [
                resized_crop(frames, b, self.spec.crop_size, window)
                for b in crop_boxes(
                    H, W, self.mode, self.spec.new_size, self.spec.crop_size, self.spec.num_crops
                )
            ]
            # GroupOverSample's order: each crop, then its mirror image
            if self.spec.num_crops == 10:
                views = [v for crop in views for v in (crop, crop.flip(-2))]
        # Decode order -> clip order, here only: test clips interleave or overlap, short videos
        # repeat frames (a clip read in order as it is, no copy). Each view (N, c, c, 3) -> (clips,
        # T, c, c, 3), TSN: T = N x t_length.
        if not in_order:
            views = [x[torch.from_numpy(inverse.reshape(-1))] for x in views]
        views = [x.reshape(*clips.shape, *x.shape[1:]) for x in views]
        # (clips, crops, T, c, c, 3)
        x = views[0].unsqueeze(1) if len(views) == 1 else torch.stack(views, 1)
        # (V, 3, T, c, c) as a VIEW of the decoder's interleaved memory: no de-interleaving copy
        # here (`collate` keeps it that way; .contiguous() if you need planar memory).
        x = x.flatten(0, 1).permute(0, 4, 1, 2, 3)
        x = x if self.mode == "test" or self.reps > 1 and not self.ship_frames else x[0]
        if out is None or x.data_ptr() == out.data_ptr():  # no place, or cut into it
            return x, info
        assert x.shape == out.shape, (x.shape, out.shape)
        return out.copy_(x), info
