"""Results people can read: per-class accuracy, the confusion matrix, training curves.

    m = class_metrics(scores, labels, num_classes)   # scores float (N, C) softmax, labels int (N,)
    print(per_class_table(m, class_names))           # worst classes first
    save_confusion_png(m["confusion"], class_names, "run/confusion_10x3.png")
    save_per_class_csv(m, class_names, "run/per_class_10x3.csv")
    save_curves_png("run/log.jsonl", "run/curves.png")

Mean class accuracy is the mean over classes of each class's top-1 accuracy (classes without videos
left out): it weighs a rare class as much as a frequent one, unlike top-1. It is what mmaction2
reports as `mean_class_accuracy` (mmaction/evaluation/functional/accuracy.py); the confusion matrix
layout (rows = true class, columns = predicted) follows sklearn.metrics.confusion_matrix.

Pictures are drawn by matplotlib with its Agg backend (no display needed: training nodes have none).
Training's own reporting is here too: Meter, one epoch's running numbers and the progress line
printed every --print-freq steps (`epoch E [i/n] loss .. lr .. clips/s data .. eta .. mem ..`). The
demo scripts that label one video are in predict.py.
"""

import csv
import json
import os
import resource
import time
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # headless: a training node has no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from errors import fail  # noqa: E402

# inches of one row of CURVES_COLUMNS panels; curves.png is rows x CURVES_FIGSIZE * DPI pixels
CURVES_FIGSIZE = (13.5, 3.6)
DPI = 100


def _numpy(x):
    """torch tensor (any device) or array-like -> numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def class_metrics(scores, labels, num_classes=None):
    """Scores float (N, C), labels int (N,) (torch or numpy) -> dict of numpy values:

    top1, top5 (percent, of all N videos), mean_class_acc (percent, mean over classes that have
    videos), per_class_acc float (C,) percent (NaN for a class without videos), per_class_count int
    (C,), confusion int (C, C) (rows = true class, columns = predicted top-1), confused_with int
    (C,): the class each class is most often mistaken for (-1 if never mistaken), confused_count int
    (C,).
    """
    scores, labels = _numpy(scores).astype(np.float64), _numpy(labels).astype(np.int64)
    if scores.ndim != 2 or labels.shape != (scores.shape[0],):
        raise ValueError(
            f"need scores (N, C) and labels (N,), got {scores.shape} and {labels.shape}"
        )
    N, C = scores.shape
    C = num_classes or C
    if scores.shape[1] != C:
        raise ValueError(f"scores have {scores.shape[1]} columns, num_classes is {num_classes}")
    if N and (labels.min() < 0 or labels.max() >= C):
        raise ValueError(f"labels must lie in [0, {C}), got [{labels.min()}, {labels.max()}]")
    pred = scores.argmax(1)
    confusion = np.zeros((C, C), np.int64)
    np.add.at(confusion, (labels, pred), 1)
    count = confusion.sum(1)
    has = count > 0
    per_class = np.full(C, np.nan)
    per_class[has] = 100.0 * np.diag(confusion)[has] / count[has]
    topk = np.argsort(-scores, axis=1, kind="stable")[:, : min(5, C)]
    off = confusion.copy()
    np.fill_diagonal(off, 0)
    confused_with = off.argmax(1)
    confused_count = off[np.arange(C), confused_with]
    confused_with[confused_count == 0] = -1
    return {
        "num_videos": N,
        "num_classes": C,
        "top1": 100.0 * float((pred == labels).mean()) if N else 0.0,
        "top5": 100.0 * float((topk == labels[:, None]).any(1).mean()) if N else 0.0,
        "mean_class_acc": float(per_class[has].mean()) if has.any() else 0.0,
        "per_class_acc": per_class,
        "per_class_count": count,
        "confusion": confusion,
        "confused_with": confused_with,
        "confused_count": confused_count,
    }


def average_precision(scores, positives):
    """One class's average precision: scores float (N,), positives 0/1 (N,) -> the sum over the
    distinct scores, highest first, of (recall gained) x precision there; NaN without positives.
    scikit-learn's average_precision_score (what PySlowFast's get_map calls), no interpolation:
    tied scores are one threshold."""
    if not len(scores):
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], positives[order].astype(np.float64)
    # the last clip of each run of equal scores: one threshold each
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]
    tps = np.cumsum(y)[last]
    precision = tps / (last + 1)
    if not tps.size or tps[-1] == 0:
        return float("nan")
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def multilabel_metrics(scores, targets):
    """Scores float (N, C) and 0/1 targets (N, C) -> mAP (percent): the mean AP of the classes
    with a positive video, as PySlowFast's get_map (slowfast/utils/meters.py) drops the classes
    absent from the set; per_class_ap (C,) percent, NaN for those; per_class_count (C,) positives;
    absent: their labels."""
    scores, targets = _numpy(scores).astype(np.float64), _numpy(targets) > 0
    if scores.shape != targets.shape or scores.ndim != 2:
        raise ValueError(f"need scores and targets (N, C), got {scores.shape}, {targets.shape}")
    aps = np.array([average_precision(scores[:, c], targets[:, c]) for c in range(scores.shape[1])])
    has = ~np.isnan(aps)
    return {
        "num_videos": scores.shape[0],
        "mAP": 100.0 * float(aps[has].mean()) if has.any() else 0.0,
        "per_class_ap": 100.0 * aps,
        "per_class_count": targets.sum(0),
        "absent": np.flatnonzero(~has),
    }


def epic_actions(verb_scores, noun_scores, k=5, top_n=100):
    """EPIC-KITCHENS-100's action ranking (C1-Action-Recognition utils/scoring.py
    compute_action_scores): the top_n verbs' and nouns' scores each softmaxed again, their outer
    product ranked -> the top-k (verbs, nouns, action scores), (N, k) each."""
    verb, noun = _numpy(verb_scores).astype(np.float64), _numpy(noun_scores).astype(np.float64)
    top_v = np.argsort(verb, axis=1)[:, ::-1][:, :top_n]
    top_n_ = np.argsort(noun, axis=1)[:, ::-1][:, :top_n]
    rows = np.arange(len(verb))[:, None]
    pv, pn = _softmax(verb[rows, top_v]), _softmax(noun[rows, top_n_])
    product = (pv[:, :, None] * pn[:, None, :]).reshape(len(verb), -1)
    best = np.argsort(product, axis=1)[:, ::-1][:, :k]
    v, n = np.unravel_index(best, (pv.shape[1], pn.shape[1]))
    return top_v[rows, v], top_n_[rows, n], product[rows, best]


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def heads_metrics(scores, labels, heads):
    """--heads: per-head probabilities (N, sum(heads)) and labels (N, heads) -> <head>_acc1 and
    <head>_acc5 (percent) for each head, and with two (EPIC-100's verb and noun) action_acc1 /
    action_acc5: an action right when the verb and the noun of one of its top-k actions both are
    (`epic_actions`), as EPIC-100's evaluate.py."""
    scores, labels = _numpy(scores).astype(np.float64), _numpy(labels).astype(np.int64)
    parts = np.split(scores, np.cumsum(heads)[:-1], axis=1)
    names = head_names(len(heads))
    out = {}
    for h, (name, part) in enumerate(zip(names, parts)):
        top = np.argsort(-part, axis=1, kind="stable")[:, : min(5, part.shape[1])]
        hit = top == labels[:, h : h + 1]
        out[f"{name}_acc1"] = 100.0 * float(hit[:, 0].mean()) if len(hit) else 0.0
        out[f"{name}_acc5"] = 100.0 * float(hit.any(1).mean()) if len(hit) else 0.0
    if len(heads) == 2 and len(scores):
        verbs, nouns, _ = epic_actions(*parts)
        hit = (verbs == labels[:, :1]) & (nouns == labels[:, 1:2])
        out["action_acc1"] = 100.0 * float(hit[:, 0].mean())
        out["action_acc5"] = 100.0 * float(hit.any(1).mean())
    return out


def head_names(count):
    """Two heads are EPIC-100's verb and noun; more are head0, head1, ..."""
    return ("verb", "noun") if count == 2 else tuple(f"head{h}" for h in range(count))


def save_per_class_ap_csv(metrics, class_names, path):
    """--multi-label: one row per class (label order): label, name, AP (percent, empty for a class
    without positive videos), positive videos."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["label", "name", "ap", "positives"])
        for c, (ap, n) in enumerate(zip(metrics["per_class_ap"], metrics["per_class_count"])):
            w.writerow([c, _name(class_names, c), "" if np.isnan(ap) else f"{ap:.4f}", int(n)])


def _name(class_names, label):
    return str(label) if class_names is None else class_names[label]


def _worst_first(metrics):
    """Labels of classes with videos, lowest accuracy first (ties: more videos first, then
    label)."""
    acc, count = metrics["per_class_acc"], metrics["per_class_count"]
    return sorted(np.flatnonzero(count > 0), key=lambda c: (acc[c], -count[c], c))


def per_class_table(metrics, class_names=None):
    """The per-class table as text, worst classes first: class (name, or label number), accuracy,
    videos, and the class it is most often mistaken for with how many of its videos went there."""
    if class_names is not None and len(class_names) != metrics["num_classes"]:
        raise ValueError(f"{len(class_names)} class names for {metrics['num_classes']} classes")
    rows = []
    for c in _worst_first(metrics):
        other = metrics["confused_with"][c]
        confused = (
            "-" if other < 0 else f"{_name(class_names, other)} ({metrics['confused_count'][c]})"
        )
        acc, count = f"{metrics['per_class_acc'][c]:.1f}", str(metrics["per_class_count"][c])
        rows.append((_name(class_names, c), acc, count, confused))
    width = max([len("class")] + [len(r[0]) for r in rows])
    lines = [f"{'class':<{width}}  {'acc%':>6}  {'videos':>6}  most confused with"]
    lines += [f"{name:<{width}}  {acc:>6}  {n:>6}  {confused}" for name, acc, n, confused in rows]
    return "\n".join(lines)


def save_per_class_csv(metrics, class_names, path):
    """One row per class (label order): label, name, accuracy, videos, correct, most confused
    with."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "label",
                "name",
                "accuracy",
                "videos",
                "correct",
                "confused_with_label",
                "confused_with_name",
                "confused_count",
            ]
        )
        for c in range(metrics["num_classes"]):
            n, other = int(metrics["per_class_count"][c]), int(metrics["confused_with"][c])
            w.writerow(
                [
                    c,
                    _name(class_names, c),
                    f"{metrics['per_class_acc'][c]:.4f}" if n else "",
                    n,
                    int(metrics["confusion"][c, c]),
                    other if other >= 0 else "",
                    _name(class_names, other) if other >= 0 else "",
                    int(metrics["confused_count"][c]),
                ]
            )


def confusion_side(num_classes):
    """Side of the confusion figure in inches: 0.14 in per class (a 14 px row at DPI 100, room for
    an 8 pt label), plus room for the tick labels and the colour bar; at least 6 in."""
    return max(6.0, 3.0 + 0.14 * num_classes)


def save_confusion_png(cm, class_names, path, title=None):
    """Row-normalised confusion matrix (each row: where that true class's videos went, fractions
    summing to 1) as a square PNG; size and fonts scale with the class count, so 101 UCF101 names
    stay readable. Cells carry their value when there are few classes."""
    cm = _numpy(cm).astype(np.float64)
    C = cm.shape[0]
    if cm.shape != (C, C):
        raise ValueError(f"confusion matrix must be square, got {cm.shape}")
    names = [str(c) for c in range(C)] if class_names is None else list(class_names)
    rows = cm.sum(1, keepdims=True)
    norm = np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)
    side = confusion_side(C)
    font = 10 if C <= 40 else 8  # 8 pt = 11 px: fits a 14 px row
    fig = plt.figure(figsize=(side, side), dpi=DPI, layout="constrained")
    try:
        ax = fig.add_subplot()
        im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks(range(C), names, rotation=90, fontsize=font)
        ax.set_yticks(range(C), names, fontsize=font)
        ax.set_xlabel("predicted class")
        ax.set_ylabel("true class")
        ax.set_title(title or f"confusion matrix, rows normalised ({int(cm.sum())} videos)")
        if C <= 20:
            for i, j in np.ndindex(C, C):
                if cm[i, j]:
                    ax.text(
                        j,
                        i,
                        f"{norm[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=font,
                        color="white" if norm[i, j] > 0.5 else "black",
                    )
        fig.colorbar(im, ax=ax, shrink=0.6, label="fraction of the true class")
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def read_log(log_jsonl_path):
    """log.jsonl -> list of dicts, one per epoch in epoch order; an epoch logged twice (a resumed
    run) keeps its last line. Raises ValueError naming the file and line for a line that is not
    JSON."""
    by_epoch = {}
    with open(log_jsonl_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                by_epoch[int(row["epoch"])] = row
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(
                    f"{log_jsonl_path}:{n}: not a log line with an epoch ({e})"
                ) from None
    return [by_epoch[e] for e in sorted(by_epoch)]


# The panels' y labels for the numbers the trainer logs; a number not named here is labelled by its
# key.
YLABELS = {
    "loss": "loss",
    "top1": "top-1 (%)",
    "top5": "top-5 (%)",
    "lr": "learning rate",
    "epoch_time": "epoch time (s)",
}
SPLITS = ("train", "val")
SERIES_COLORS = {"train": "C0", "val": "C1", "EMA": "C2"}
CURVES_COLUMNS = 3


def curve_panels(rows):
    """{panel: [(key, series label)]} for every number in the log rows, by the keys' naming rule:
    `train_X`, `val_X` and `val_X_ema` share panel X (series "train", "val", "EMA"); any other
    number (lr, epoch_time) is a panel of its own. Panels of the split numbers first, each in the
    order its first key appears; booleans (`mixed`) and the epoch are no curves."""
    split, other = {}, {}
    for key in dict.fromkeys(k for r in rows for k in r):
        values = [r[key] for r in rows if r.get(key) is not None]
        if key == "epoch" or not values or any(isinstance(v, bool) for v in values):
            continue
        prefix, _, rest = key.partition("_")
        if prefix not in SPLITS or not rest:
            other[key] = [(key, None)]
            continue
        panel, ema = (rest[: -len("_ema")], True) if rest.endswith("_ema") else (rest, False)
        split.setdefault(panel, []).append((key, "EMA" if ema else prefix))
    return {**split, **other}


def save_curves_png(log_jsonl_path, png_path):
    """A panel per logged number against the epoch (curve_panels: train and val of one number share
    a panel), CURVES_COLUMNS panels a row; the lr on a log scale. Null values are left out of their
    series."""
    rows = read_log(log_jsonl_path)
    panels = curve_panels(rows)
    # MixUp/CutMix: train top-1 is against the dominant label
    train = "train, dominant label" if any(r.get("mixed") for r in rows) else "train"
    n = max(len(panels), 1)
    cols, lines = min(n, CURVES_COLUMNS), -(-n // CURVES_COLUMNS)
    width, height = CURVES_FIGSIZE
    fig, axes = plt.subplots(
        lines, cols, figsize=(width, height * lines), dpi=DPI, layout="constrained", squeeze=False
    )
    try:
        for ax in axes.flat[len(panels) :]:
            ax.set_axis_off()
        for ax, (panel, keys) in zip(axes.flat, panels.items()):
            for key, label in keys:
                pts = [(r["epoch"], r[key]) for r in rows if r.get(key) is not None]
                x, y = [p[0] for p in pts], [p[1] for p in pts]
                # a series keeps its colour in every panel (val alone in top-5 is still val's)
                color = SERIES_COLORS.get(label)
                label = train if label == "train" and panel == "top1" else label
                marker = "o" if len(x) < 30 else None
                ax.plot(x, y, marker=marker, markersize=3, label=label, color=color)
            ax.set_xlabel("epoch")
            ax.set_ylabel(YLABELS.get(panel, panel))
            ax.grid(alpha=0.3)
            if keys[0][1]:
                ax.legend()
            if panel == "lr" and any(r.get("lr") for r in rows):
                ax.set_yscale("log")
        fig.savefig(png_path, dpi=DPI)
    finally:
        plt.close(fig)


def save_scores_npz(path, scores, labels, videos=None, class_names=None):
    """scores_<tag>.npz: the per-video scores, labels (a label, 0/1 rows for --multi-label, a label
    a head for --heads), videos and class names."""
    np.savez(
        path,
        scores=_numpy(scores),
        labels=_numpy(labels),
        videos=np.asarray(videos if videos is not None else []),
        class_names=np.asarray(class_names if class_names is not None else []),
    )


def evaluation_paths(run_dir, tag, save_scores=True):
    """{kind: path} of the files write_evaluation writes for `tag` (scores only if
    `save_scores`)."""
    kinds = (("per_class", "csv"), ("confusion", "png")) + (
        (("scores", "npz"),) if save_scores else ()
    )
    return {k: os.path.join(run_dir, f"{k}_{tag}.{ext}") for k, ext in kinds}


def write_evaluation(
    run_dir,
    scores,
    labels,
    class_names,
    clips,
    crops,
    videos=None,
    tag=None,
    save_scores=True,
    what="confusion matrix",
):
    """Everything `--evaluate` writes, for the trainer to call on rank 0: per_class_<tag>.csv,
    confusion_<tag>.png (titled `what`, ...) and (save_scores) scores_<tag>.npz (scores, labels,
    videos, class_names); `tag` defaults to <clips>x<crops>. Returns (metrics, {kind: path})."""
    scores, labels = _numpy(scores), _numpy(labels)
    metrics = class_metrics(scores, labels, scores.shape[1])
    tag = tag or f"{clips}x{crops}"
    paths = evaluation_paths(run_dir, tag, save_scores)
    os.makedirs(run_dir, exist_ok=True)
    if save_scores:
        save_scores_npz(paths["scores"], scores, labels, videos, class_names)
    save_per_class_csv(metrics, class_names, paths["per_class"])
    save_confusion_png(
        metrics["confusion"],
        class_names,
        paths["confusion"],
        f"{what}, {clips}x{crops} views, rows normalised",
    )
    return metrics, paths


def save_confusion_csv(cm, class_names, path):
    """The confusion matrix's counts: a row per true class, a column per predicted one (label
    order, named), the first column the true class."""
    cm = _numpy(cm)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["true \\ predicted", *(_name(class_names, c) for c in range(len(cm)))])
        w.writerows([_name(class_names, c), *map(int, row)] for c, row in enumerate(cm))


def write_heads_evaluation(run_dir, scores, labels, heads, class_names, clips, crops, tag):
    """--heads: each head's single-label report (`write_evaluation`'s per_class_<head>_<tag>.csv and
    confusion_<head>_<tag>.png, head as `head_names`: verb, noun) and its confusion matrix,
    confusion_<head>_<tag>.csv. scores (N, sum(heads)), labels (N, heads); class_names: every
    head's, one after the other (EPIC-100: the verbs, then the nouns), or None. Returns
    ({head: metrics}, [paths])."""
    scores, labels = _numpy(scores), _numpy(labels)
    bounds = np.cumsum(heads)[:-1]
    if class_names is not None and len(class_names) != sum(heads):
        class_names = None  # not the heads' names: label numbers
    columns = np.split(np.arange(sum(heads)), bounds)
    out, written = {}, []
    for h, name in enumerate(head_names(len(heads))):
        names = None if class_names is None else [class_names[c] for c in columns[h]]
        part = scores[:, columns[h]]
        metrics, paths = write_evaluation(
            run_dir, part, labels[:, h], names, clips, crops, None, f"{name}_{tag}", False, name
        )
        matrix = os.path.join(run_dir, f"confusion_{name}_{tag}.csv")
        save_confusion_csv(metrics["confusion"], names, matrix)
        out[name], written = metrics, [*written, *paths.values(), matrix]
    return out, written


# ---- one epoch's numbers (train.train_one_epoch) -------------------------------------------------
@dataclass
class Meter:
    """One epoch's running numbers on this rank, and the timing behind the progress line.

    Each number is a sum and a count (`add`): update adds the loss and top-1 per clip, a fork adds
    its own (`meter.add("grad_norm", norm, 1)`: per step); totals gives their means as the epoch's
    train_<name> numbers, which reach log.jsonl, TensorBoard and curves.png with no other edit."""

    # first batch of this (maybe resumed) epoch
    start: int
    # the numbers every epoch's line holds, None when no clip was seen (resumed at the epoch's end);
    # pretraining: ("loss",), no classes
    names: tuple = ("loss", "top1")
    # GPU trap: a host read (.item(), .tolist(), `if loss`) per step stalls the GPU's queue. The
    # sums and the first non-finite loss stay on the device; `totals` reads them at print time and
    # at the epoch's end. name -> sum on the device; name -> how many values it holds, on the host
    sums: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    # (iteration, loss) of the first non-finite loss, on the device; -1: none
    bad: tuple = (-1, 0.0)
    # what a non-finite loss asks of the user: the flags that set this run's step sizes
    advice: str = "lower --lr, or --clip-grad"
    clips: int = 0
    # clips since the last line
    n_log: int = 0
    # seconds spent waiting for the loader
    t_wait: float = 0.0
    t_epoch: float = field(default_factory=time.time)
    t_log: float = field(default_factory=time.time)

    def add(self, name, total, count):
        """`total`: the sum of `count` values of number `name` (a device tensor, or a float)."""
        self.sums[name] = self.sums.get(name, 0.0) + total
        self.counts[name] = self.counts.get(name, 0) + count

    def update(self, loss, logits, labels, it):
        """One batch: its mean loss and, given logits (not pretraining's None), its top-1 per
        clip."""
        n, loss = len(labels), loss.detach().float()
        self.add("loss", loss * n, n)
        if logits is not None:
            self.add("top1", (logits.argmax(1) == labels).sum().float() * 100, n)
        first = ~loss.isfinite() & (self.bad[0] < 0)
        self.bad = (torch.where(first, it, self.bad[0]), torch.where(first, loss, self.bad[1]))
        self.clips, self.n_log = self.clips + n, self.n_log + n

    def totals(self, epoch, all_sum=None):
        """{"train_<name>": mean} of every number added (the `names` first; None without values), on
        the host (one sync); all_sum (rt.all_sum): over every rank's values. A non-finite loss so
        far stops."""
        if int(self.bad[0]) >= 0:
            fail(
                f"loss is {float(self.bad[1])} at epoch {epoch} iteration {int(self.bad[0])}; "
                f"stopping ({self.advice})",
                code=1,
            )
        names = [*self.names, *(k for k in self.sums if k not in self.names)]
        added = [k for k in names if k in self.sums]
        on = next((v.device for v in self.sums.values() if torch.is_tensor(v)), "cpu")
        sums = [torch.as_tensor(self.sums[k], device=on).double() for k in added]
        sums = torch.stack(sums).tolist() if added else []
        values = [*sums, *(self.counts[k] for k in added)]
        values = all_sum(values) if all_sum else values
        means = {k: s / c if c else None for k, s, c in zip(added, values, values[len(added) :])}
        return {f"train_{k}": means.get(k) for k in names}

    def line(self, args, rt, progress, loss, lr, it, batches):
        """The progress line. lr: the step's lr, or a list of them (a grid of probes: each probe's
        own, and the loss shown per probe, the mean of their sum)."""
        # the step's one host sync
        mean_loss = self.totals(progress.epoch)["train_loss"]
        n = len(lr) if isinstance(lr, list) else 1
        per = f" per probe (mean of {n})" if n > 1 else ""
        lrs = " ".join(f"{x:.2e}" for x in lr) if isinstance(lr, list) else f"{lr:.2e}"
        now = time.time()
        left = (args.epochs - progress.epoch) * batches - it - 1  # batches
        eta = (now - self.t_epoch) / (it + 1 - self.start) * left
        h, s = divmod(int(eta), 3600)  # hours unbounded: a 30 h run shows 30:00:00
        mem = (
            torch.cuda.max_memory_allocated(rt.device)
            if rt.device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        ) / 2**30
        text = (
            f"epoch {progress.epoch} [{it + 1}/{batches}] loss {loss.item() / n:.4f} "
            f"({mean_loss / n:.4f}){per} lr{'s' if n > 1 else ''} {lrs} "
            f"{self.n_log * rt.world_size / (now - self.t_log):.1f} clips/s "
            f"data {self.t_wait / (now - self.t_epoch):.0%} eta {h}:{s // 60:02d}:{s % 60:02d} "
            f"mem {mem:.2f}GiB"
        )
        self.t_log, self.n_log = now, 0
        return text
