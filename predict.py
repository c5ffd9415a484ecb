"""Label videos with a trained checkpoint: the top-5 classes and their probabilities.

    python train.py predict --resume model_best.pth clip.mp4 frames/v_Biking_g01_c01/
    python predict.py --resume model_best.pth clip.avi --test_clips 10 --test_crops 3 --json

An INPUT is a video file or a folder of frames named by the checkpoint's --image_tmpl. The model and
its clips are rebuilt from the checkpoint's own flags by train.py itself (checkpoint_args,
make_dataset, make_model), exactly as --evaluate rebuilds them: arch, clip length and stride, sizes,
test sampling, normalisation, the video decoding, and any flag added there later. The views
(test_clips x test_crops, softmax averaged) are data.py's test-mode sampling of a one-video dataset.

Like the demo scripts of PySlowFast (tools/demo_net.py) and mmaction2 (demo/demo.py), which label a
video with a trained model; those read a config, we read the checkpoint's args.
"""

import json
import os
import sys
import tempfile

import torch

import checkpoint
import data
import decode
import flags
import prepare
import report
import train


class PredictError(Exception):
    """A user error: one line, exit status 2."""


def load_checkpoint(path, device, test_clips, test_crops, use_ema=False):
    """CKPT -> (model in eval mode on device, train.py args rebuilt from it, class names or None);
    use_ema: its --model-ema weights."""
    try:
        ckpt = checkpoint.load(path)
    except ValueError as e:
        raise PredictError(str(e)) from None
    saved = ckpt.get("args")
    if not isinstance(saved, dict):
        raise PredictError(
            f"--resume {path}: no 'args' in it (only checkpoints written by train.py carry "
            "the clip settings)"
        )
    missing = [
        k
        for k in ("arch", "num_classes", "t_length", "t_stride", "new_size", "crop_size")
        if saved.get(k) is None
    ]
    if missing:
        raise PredictError(f"--resume {path}: no {', '.join(missing)} in its args")
    names = ckpt.get("class_names")
    if names is not None and len(names) != saved["num_classes"]:
        raise PredictError(
            f"--resume {path}: {len(names)} class names for {saved['num_classes']} classes"
        )
    args = flags.checkpoint_args(
        ckpt,
        [
            str(saved.get("dataset", "predict")),
            "--device",
            device,
            "--test_clips",
            str(test_clips),
            "--test_crops",
            str(test_crops),
        ],
    )
    try:
        # no --pretrained: a process flag, never taken from a checkpoint
        model = train.make_model(args)
        checkpoint.load_weights(model, ckpt, path, args, ema=use_ema)
    except (ValueError, OSError) as e:
        raise PredictError(str(e)) from None
    return model.to(device).eval(), args, names


def one_video_dataset(source, args):
    """A frame folder or a video file -> (test-mode dataset of that one video, its frame count),
    built by train.make_dataset from a one-line list file like any other video: the frames, decoder,
    crops and resize of --evaluate, whatever a fork changes there."""
    path = os.path.abspath(source)
    # a placeholder label (--heads: one a head)
    label = ",".join(["0"] * len(args.heads)) if getattr(args, "heads", None) else "0"
    if os.path.isdir(path):
        num_frames = prepare.count_frames(path, args.image_tmpl)
        line = f"{path} {num_frames} {label}"
        if num_frames == 0:
            raise PredictError(
                f"no frames named {args.image_tmpl.format(1)} ({args.image_tmpl}) in {source}"
            )
    elif decode.is_video_file(path):
        line = f"{path} {label}"  # mmaction2's `<video> <label>`: the dataset counts its frames
    else:
        kinds = " ".join(decode.VIDEO_FILES)
        raise PredictError(f"{source}: neither a frame folder nor a video file ({kinds})")
    with tempfile.TemporaryDirectory() as tmp:
        list_file = os.path.join(tmp, "predict.txt")
        with open(list_file, "w", encoding="utf-8") as f:
            f.write(line + "\n")
        try:
            ds = train.make_dataset(args, list_file, "test")
        # settings data.py refuses (say a checkpoint's image_tmpl without a number)
        except ValueError as e:
            raise PredictError(f"checkpoint settings: {e}") from None
    return ds, ds.videos[0].num_frames


@torch.no_grad()
def predict_one(model, source, args, batch=8):
    """One input -> (probabilities float (C,) combined over the views as the run evaluates them,
    frames in the input): softmaxes averaged; --multi-label: sigmoids, their maximum; --heads: a
    softmax per head, averaged."""
    ds, num_frames = one_video_dataset(source, args)
    try:
        views = ds[0][0]  # uint8 (V, 3, T, crop, crop); ds[0] is (clip, label, info)
    except (OSError, RuntimeError, decode.BadVideo) as e:
        what = "cannot decode video" if decode.is_video_file(source) else "cannot read"
        # BadVideo's reason: no temp list in it
        why = getattr(e, "reason", None) or str(e).splitlines()[0]
        raise PredictError(f"{what} {source}: {why}") from None
    assert views.shape[0] == args.test_clips * args.test_crops, views.shape
    mean, std = tuple(args.mean or data.MEAN), tuple(args.std or data.STD)
    probs = []
    for chunk in views.split(batch):  # a few views at a time: 30 views of 16x224x224 are large
        # layout changed in uint8: cheap
        x = data.normalize(chunk.to(args.device).contiguous(), mean, std)
        probs.append(train.view_probabilities(model(x).float(), args).cpu())
    return train.combine_views(torch.cat(probs)[None], args)[0], num_frames


def get_parser():
    p = flags.Parser(
        prog="train.py predict", description="Top-5 classes of videos or frame folders."
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="video file or frame folder")
    p.add_argument(
        "--resume", required=True, metavar="CKPT", help="train.py checkpoint: model_best.pth..."
    )
    p.add_argument(
        "--test_clips", type=flags.positive, default=1, help="clips per input, spread over it"
    )
    p.add_argument("--test_crops", type=int, default=1, choices=[1, 3, 10], help="crops per clip")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.add_argument(
        "--use-ema", dest="use_ema", action="store_true", help="the checkpoint's EMA weights"
    )
    p.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu"
    )
    p.add_argument("-k", "--top", type=flags.positive, default=5, help="classes to show per input")
    flags.add_trust_arg(p)
    return p


def _report(result, top):
    """Text for one input: a header line, then rank, class and probability of the top classes
    (--heads: of each head's, and the top actions)."""
    lines = [f"{result['input']}: {result['frames']} frames, {result['views']} views"]
    for title, entries in result.get("heads", {"": result["top"]}).items():
        lines += [f"  {title}:"] if title else []
        lines += [
            f"  {r + 1}. {e['name']:<30} {e['prob']:.4f}" for r, e in enumerate(entries[:top])
        ]
    return "\n".join(lines)


def top_classes(probs, names, k, first=0):
    """The k most probable of `probs` (a head's columns from `first`): label, name, probability."""
    order = probs.argsort(descending=True).tolist()[:k]
    return [
        {"label": c, "name": names[first + c] if names else str(c), "prob": float(probs[c])}
        for c in order
    ]


def head_tops(probs, names, args, k):
    """--heads: each head's top-k, and with two (verb, noun) the top-k actions by the product of
    their probabilities. (The evaluation's action_acc5 ranks as EPIC-100's code does:
    report.epic_actions; the top action is the same.)"""
    parts = probs.split(list(args.heads))
    firsts = [sum(args.heads[:h]) for h in range(len(args.heads))]
    heads_names = report.head_names(len(args.heads))
    tops = {n: top_classes(p, names, k, f) for n, p, f in zip(heads_names, parts, firsts)}
    if len(parts) == 2:
        joint = parts[0][:, None] * parts[1][None, :]  # (verbs, nouns)
        best = joint.flatten().topk(min(k, joint.numel()))
        tops["action"] = [
            {
                "label": [v, n],
                "name": f"{tops_name(names, v)} {tops_name(names, args.heads[0] + n)}",
                "prob": float(p),
            }
            for p, (v, n) in zip(best.values, (divmod(int(i), args.heads[1]) for i in best.indices))
        ]
    return tops


def tops_name(names, label):
    return names[label] if names else str(label)


def main(argv=None):
    a = get_parser().parse_args(argv)
    checkpoint.TRUST["on"] = a.trust_checkpoint
    failed = False
    try:
        if a.device.startswith("cuda") and not torch.cuda.is_available():
            raise PredictError(f"--device {a.device} but no CUDA GPU is visible; use --device cpu")
        model, args, names = load_checkpoint(
            a.resume, a.device, a.test_clips, a.test_crops, a.use_ema
        )
    except PredictError as e:
        print(f"train.py predict: error: {e}", file=sys.stderr)
        return 2
    if names is None:
        print(f"note: {a.resume} has no class names; showing label numbers", file=sys.stderr)
    results = []
    for path in a.inputs:  # a bad input is reported and skipped: the others still get their labels
        try:
            if not os.path.exists(path):
                raise PredictError(f"no such file or folder: {path}")
            probs, n = predict_one(model, path, args)
        except PredictError as e:
            print(f"train.py predict: error: {e}", file=sys.stderr)
            failed = True
            results.append({"input": path, "error": str(e)})
            continue
        top = top_classes(probs, names, a.top)
        results.append(
            {
                "input": path,
                "frames": n,
                "views": a.test_clips * a.test_crops,
                "top": top,
                "probs": probs.tolist(),
            }
        )
        if getattr(args, "heads", None):  # a verb and a noun (and the actions), not one label
            tops = results[-1]["heads"] = head_tops(probs, names, args, a.top)
            results[-1]["top"] = tops.get("action", next(iter(tops.values())))
        if not a.json:
            print(_report(results[-1], a.top), flush=True)
    if a.json:
        print(
            json.dumps(
                {
                    "checkpoint": a.resume,
                    "arch": args.arch,
                    "class_names": names is not None,
                    "test_clips": a.test_clips,
                    "test_crops": a.test_crops,
                    "results": results,
                },
                indent=1,
            )
        )
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
