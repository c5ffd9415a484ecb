"""Label videos with a trained checkpoint: the top-5 classes and their probabilities.

    python train.py predict --resume model_best.pth clip.mp4 frames/v_Biking_g01_c01/
    python predict.py --resume model_best.pth clip.avi --test_clips 10 --test_crops 3 --json

An INPUT is a video file (decoded with PyAV) or a folder of frames named by the checkpoint's
image_tmpl. Every setting of the clip comes from the checkpoint's own args -- arch, num_classes,
t_length, t_stride, new_size, crop_size, mean/std, test_sampling -- so a prediction sees exactly
what evaluation saw; the views (test_clips x test_crops, softmax averaged) are data.py's test-mode
sampling, reused through a one-video VideoFrameDataset, not re-implemented here.

Like the demo scripts of PySlowFast (tools/demo_net.py) and mmaction2 (demo/demo.py), which label a
video with a trained model; those read a config, we read the checkpoint's args.
"""
import argparse
import inspect
import json
import os
import sys
import tempfile

import torch

import data
import model as models


class PredictError(Exception):
    """A user error: one line, exit status 2."""


class _DecodedVideo(data.VideoFrameDataset):
    """A one-video test-mode dataset whose frames are already decoded (a video file): load_frames
    returns them from memory instead of reading files. Everything else -- which frames, which crops,
    the resize and the layout -- is VideoFrameDataset's own."""

    def __init__(self, frames, **kwargs):
        super().__init__(**kwargs)
        self.decoded = frames  # list of uint8 (H, W, 3), frame number i is decoded[i - start_index]

    def load_frames(self, video, numbers):
        return [self.decoded[int(i) - self.start_index] for i in numbers]


def decode_video(path, short_side=None):
    """A video file -> list of uint8 (H, W, 3) RGB tensors, every frame of its first video stream.

    short_side: frames larger than that are scaled (bilinear, by FFmpeg's swscale) to that short side as
    they are decoded, as `data.py extract --short-side` makes training frames. predict passes the
    checkpoint's new_size: the crops are then the ones evaluation takes, and a long HD video does not
    hold every full-size frame in memory (a 10 s 1080p clip would be 1.9 GB; at short side 256, 80 MB)."""
    def rgb(frame):
        w, h = frame.width, frame.height
        if short_side and min(w, h) > short_side:
            s = short_side / min(w, h)  # the rounding of data.py extract
            return frame.to_ndarray(width=max(1, round(w * s)), height=max(1, round(h * s)), format="rgb24",
                                    interpolation="BILINEAR")
        return frame.to_ndarray(format="rgb24")

    try:
        import av  # optional dependency (pip install av), imported where it is needed
        with av.open(path) as container:
            frames = [torch.from_numpy(rgb(f)) for f in container.decode(video=0)]
    except ImportError:
        raise PredictError(f"{path}: decoding a video file needs PyAV: pip install av") from None
    except Exception as e:  # PyAV raises many kinds (InvalidDataError, ValueError for no video stream, ...)
        raise PredictError(f"cannot decode video {path}: {type(e).__name__}: {e}".replace("\n", " ")) from None
    if not frames:
        raise PredictError(f"cannot decode video {path}: no video frames in it")
    return frames


def load_checkpoint(path, device):
    """CKPT -> (model in eval mode on device, args dict, class names or None)."""
    if not os.path.isfile(path):
        raise PredictError(f"--resume: no checkpoint at {path}")
    try:  # weights_only=False: our checkpoints hold args and RNG state. Load only files you trust.
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise PredictError(f"--resume {path}: not a readable checkpoint ({type(e).__name__}: {e})".replace("\n", " ")) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("args"), dict):
        raise PredictError(f"--resume {path}: no 'args' in it (only checkpoints written by train.py carry the clip settings)")
    args = ckpt["args"]
    missing = [k for k in ("arch", "num_classes", "t_length", "t_stride", "new_size", "crop_size") if args.get(k) is None]
    if missing or "model" not in ckpt:
        raise PredictError(f"--resume {path}: no {', '.join(missing or ['model'])} in it")
    names = ckpt.get("class_names")
    if names is not None and len(names) != args["num_classes"]:
        raise PredictError(f"--resume {path}: {len(names)} class names for {args['num_classes']} classes")
    try:
        model = models.build_model(args["arch"], args["num_classes"])
        model.load_state_dict(models.strip_prefixes(ckpt["model"]))
    except (ValueError, RuntimeError, KeyError) as e:
        raise PredictError(f"--resume {path}: weights do not load into {args['arch']}: {str(e).splitlines()[0]}") from None
    return model.to(device).eval(), args, names


def make_dataset(frames_or_folder, args, clips, crops):
    """A one-video test-mode VideoFrameDataset over a frame folder (str) or decoded frames (list),
    built through a one-line list file as for any other video."""
    tmpl, start = args.get("image_tmpl", "img_{:05d}.jpg"), args.get("start_index", 1)
    if isinstance(frames_or_folder, str):
        folder, frames = os.path.abspath(frames_or_folder), None
        num_frames = data.count_frames(folder, tmpl, start)
        if num_frames == 0:
            raise PredictError(f"no frames named {tmpl.format(start)} ({tmpl}) in {frames_or_folder}")
    else:
        folder, frames, num_frames = "decoded_video", frames_or_folder, len(frames_or_folder)
    kwargs = dict(image_tmpl=tmpl, start_index=start, t_length=args["t_length"], t_stride=args["t_stride"],
                  new_size=args["new_size"], crop_size=args["crop_size"], mode="test", num_clips=clips,
                  num_crops=crops, num_classes=args["num_classes"])
    if args.get("test_sampling") is not None and "test_sampling" in inspect.signature(data.VideoFrameDataset).parameters:
        # the checkpoint's test protocol (a data.py that predates the option has only its one protocol)
        kwargs["test_sampling"] = args["test_sampling"]
    with tempfile.TemporaryDirectory() as tmp:
        list_file = os.path.join(tmp, "predict.txt")
        with open(list_file, "w", encoding="utf-8") as f:
            f.write(f"{folder} {num_frames} 0\n")
        try:
            if frames is None:
                return data.VideoFrameDataset(list_file, **kwargs), num_frames
            return _DecodedVideo(frames, list_file=list_file, **kwargs), num_frames
        except ValueError as e:  # settings data.py refuses (say a checkpoint's image_tmpl without a number)
            raise PredictError(f"checkpoint settings: {e}") from None


def _normalize(x, args):
    """data.normalize with the checkpoint's mean/std (ImageNet when it has none)."""
    mean, std = args.get("mean") or data.MEAN, args.get("std") or data.STD
    try:
        return data.normalize(x, mean=tuple(mean), std=tuple(std))
    except TypeError:  # a data.normalize without mean/std arguments: ImageNet statistics only
        if tuple(mean) != tuple(data.MEAN) or tuple(std) != tuple(data.STD):
            raise PredictError("this data.py's normalize takes no mean/std; the checkpoint needs its own") from None
        return data.normalize(x)


@torch.no_grad()
def predict_one(model, source, args, clips, crops, device, batch=8):
    """One input -> (probabilities float (C,) averaged over the views, frames in the input)."""
    ds, num_frames = make_dataset(source, args, clips, crops)
    try:
        views = ds[0][0]  # uint8 (V, 3, T, crop, crop); ds[0] is (clip, label) or (clip, label, info)
    except (OSError, RuntimeError, getattr(data, "BadVideo", RuntimeError)) as e:
        raise PredictError(str(e).splitlines()[0]) from None
    V = views.shape[0]
    assert V == clips * crops, (views.shape, clips, crops)
    probs = []
    for chunk in views.split(batch):  # a few views at a time: 30 views of 16x224x224 are large
        probs.append(model(_normalize(chunk.to(device), args).contiguous()).float().softmax(-1).cpu())
    return torch.cat(probs).mean(0), num_frames


def positive(text):
    """argparse type: a count >= 1 (argparse then prints one line and exits 2)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return int(text)


def get_parser():
    p = argparse.ArgumentParser(prog="train.py predict",
                                description="Top-5 classes of videos or frame folders, with a checkpoint's own clip settings.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="video file (decoded with PyAV) or frame folder")
    p.add_argument("--resume", required=True, metavar="CKPT", help="checkpoint written by train.py (model_best.pth, ...)")
    p.add_argument("--test_clips", type=positive, default=1, help="clips per input, spread over the whole video")
    p.add_argument("--test_crops", type=int, default=1, choices=[1, 3, 10], help="spatial crops per clip (as train.py --test_crops)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda | cpu")
    p.add_argument("-k", "--top", type=positive, default=5, help="classes to show per input")
    return p


def _report(result, top):
    """Text for one input: a header line, then rank, class and probability of the top classes."""
    lines = [f"{result['input']}: {result['frames']} frames, {result['views']} views"]
    lines += [f"  {r + 1}. {e['name']:<30} {e['prob']:.4f}" for r, e in enumerate(result["top"][:top])]
    return "\n".join(lines)


def main(argv=None):
    a = get_parser().parse_args(argv)
    failed = False
    try:
        if a.device.startswith("cuda") and not torch.cuda.is_available():
            raise PredictError(f"--device {a.device} but no CUDA GPU is visible; use --device cpu")
        model, args, names = load_checkpoint(a.resume, torch.device(a.device))
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
            source = path if os.path.isdir(path) else decode_video(path, args["new_size"])
            probs, n = predict_one(model, source, args, a.test_clips, a.test_crops, torch.device(a.device))
        except PredictError as e:
            print(f"train.py predict: error: {e}", file=sys.stderr)
            failed = True
            results.append({"input": path, "error": str(e)})
            continue
        order = probs.argsort(descending=True).tolist()
        top = [{"label": c, "name": names[c] if names else str(c), "prob": float(probs[c])} for c in order[:a.top]]
        results.append({"input": path, "frames": n, "views": a.test_clips * a.test_crops, "top": top,
                        "probs": probs.tolist()})
        if not a.json:
            print(_report(results[-1], a.top), flush=True)
    if a.json:
        print(json.dumps({"checkpoint": a.resume, "arch": args["arch"], "class_names": names is not None,
                          "test_clips": a.test_clips, "test_crops": a.test_crops, "results": results}, indent=1))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
