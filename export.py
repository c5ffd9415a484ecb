"""Export a trained model to a file other programs run without this code: ONNX, torch.export's .pt2,
or a transformers folder.

    python train.py export --resume model_best.pth --format onnx model.onnx
    python export.py --resume model_best.pth --format pt2 model.pt2 --dynamic-batch
    # a ViT: VideoMAEForVideoClassification
    python train.py export --resume model_best.pth --format hf OUT/

The model is rebuilt from the checkpoint as --evaluate and predict rebuild it
(predict.load_checkpoint), in eval mode, and traced on a clip of the checkpoint's size. Its input is
a float32 clip batch (B, 3, T, H, W), RGB, already normalised: (pixel / 255 - mean) / std; its
output the logits (B, classes). OUT.json, beside the model, says all of it: the input layout and
size, mean/std, the crop, class names. Batch size: fixed at 1, or any with --dynamic-batch (T, H, W
stay the checkpoint's clip).

ONNX goes through torch's exporter (torch.onnx.export(dynamo=True): torch.export, then onnxscript),
.pt2 through torch.export.export + torch.export.save (load: torch.export.load(OUT).module()). An
arch either exporter cannot take is refused in one line (s3d and mvit need their 16x224x224 input).
ONNX writes the weights to OUT.data beside OUT (ONNX's external data, named inside OUT): the two
travel together. OUT's folder is made if missing; a missing onnx / onnxscript is one line naming
what to install.

--format hf (the ViTs, vit.py): OUT/ becomes a folder that transformers'
VideoMAEForVideoClassification.from_pretrained(OUT) loads with no missing or unexpected key
(config.json, model.safetensors in the Hub files' names, preprocessor_config.json for
VideoMAEImageProcessor), id2label from the class names. Written with safetensors and json alone:
transformers is not imported. The blocks' LayerNorm eps goes into the config (layer_norm_eps);
transformers fixes fc_norm's at 1e-5, so a model whose fc_norm ran at another eps (the official
weights' 1e-6) gives logits that differ by that eps alone (said when written). Layer scale and a
learned position table have no place in transformers' VideoMAE: refused.
"""

import importlib
import json
import logging
import os
import sys

import torch

import checkpoint
import data
import flags
import predict
from errors import fail

FORMATS = ("onnx", "pt2", "hf")


def get_parser():
    p = flags.Parser(prog="train.py export", description="A checkpoint's model as ONNX or .pt2.")
    p.add_argument(
        "out",
        metavar="OUT",
        help="file to write (model.onnx, model.pt2; OUT.json beside it), or the folder of "
        "--format hf",
    )
    p.add_argument(
        "--resume", required=True, metavar="CKPT", help="train.py checkpoint: model_best.pth..."
    )
    p.add_argument(
        "--use-ema", dest="use_ema", action="store_true", help="the checkpoint's EMA weights"
    )
    p.add_argument(
        "--format",
        default="onnx",
        choices=FORMATS,
        help="onnx (ONNX Runtime...), pt2, or hf (a transformers VideoMAE folder: the ViTs)",
    )
    p.add_argument(
        "--dynamic-batch", dest="dynamic_batch", action="store_true", help="any batch size"
    )
    p.add_argument("--opset", type=flags.positive, default=18, help="ONNX opset version")
    flags.add_trust_arg(p)
    return p


def example_input(args, dynamic):
    # torch.export specialises a dimension of size 1: a dynamic batch is traced at 2
    # TSN: the snippets one after the other
    frames = args.t_length * getattr(args, "num_segments", 1)
    return torch.randn(2 if dynamic else 1, 3, frames, args.crop_size, args.crop_size)


def export(model, x, out, fmt, dynamic, opset=18):
    """Write `model` traced at `x`; any exporter failure is a ValueError of one line."""
    shapes = ({0: torch.export.Dim("batch", min=1)},) if dynamic else None
    # torch logs a failed attempt as a traceback: the one line below says it
    logging.disable(logging.ERROR)
    try:
        if fmt == "onnx":
            torch.onnx.export(
                model,
                (x,),
                out,
                dynamo=True,
                dynamic_shapes=shapes,
                opset_version=opset,
                input_names=["clips"],
                output_names=["logits"],
                verbose=False,
            )
        else:
            torch.export.save(torch.export.export(model, (x,), dynamic_shapes=shapes), out)
    except Exception as e:  # the exporters raise many kinds; the first line says what
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(
            f"--format {fmt}: cannot export this model ({type(e).__name__}: {why})"
        ) from None
    finally:
        logging.disable(logging.NOTSET)


def sidecar(args, names, a):
    """What a program needs to feed the exported model, written to OUT.json."""
    return {
        "format": a.format,
        "checkpoint": os.path.abspath(a.resume),
        "arch": args.arch,
        "input": {
            "name": "clips",
            "layout": "B, 3, T, H, W",
            "dtype": "float32",
            "channels": "RGB",
            "batch": "any" if a.dynamic_batch else 1,
            "frames": args.t_length * getattr(args, "num_segments", 1),  # TSN: all snippets
            "frame_stride": args.t_stride,
            "height": args.crop_size,
            "width": args.crop_size,
        },
        "normalisation": {
            "formula": "(pixel / 255 - mean) / std",
            "mean": list(args.mean),
            "std": list(args.std),
        },
        "crop": f"short side scaled to {args.new_size} px, centre {args.crop_size} px square",
        "output": {"name": "logits", "shape": "B, classes", "classes": args.num_classes},
        "class_names": names,
    }


def missing_packages(fmt):
    """The packages --format `fmt` needs that do not import (torch's ONNX exporter: onnx,
    onnxscript)."""
    missing = []
    if fmt != "onnx":
        return missing
    for name in ("onnx", "onnxscript"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def check_out(a):
    """OUT is a file name whose folder exists or can be made (hf: a folder); its exporter is
    installed."""
    if a.format == "hf" and os.path.exists(a.out) and not os.path.isdir(a.out):
        fail(f"OUT {a.out}: is a file; --format hf writes a folder")
    if a.format != "hf" and os.path.isdir(a.out):
        fail(f"OUT {a.out}: is a folder; give a file name (model.{a.format})")
    missing = missing_packages(a.format)
    if missing:
        fail(
            f"--format {a.format} needs {' and '.join(missing)} (torch's ONNX exporter): "
            f"pip install {' '.join(missing)}"
        )
    folder = os.path.abspath(a.out) if a.format == "hf" else os.path.dirname(os.path.abspath(a.out))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        fail(f"OUT {a.out}: cannot make its folder {folder} ({e.strerror or e})")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"OUT {a.out}: no permission to write in {folder}")


def hf_config(model, args, names):
    """config.json of transformers' VideoMAEConfig for `model` (configuration_videomae.py's
    fields)."""
    s, (blocks_eps, _) = model.spec, model.norm_eps
    names = names or [f"class_{i}" for i in range(args.num_classes)]
    # q and v biases: transformers 4 names the flag qkv_bias, transformers 5 qv_bias
    return {
        "architectures": ["VideoMAEForVideoClassification"],
        "model_type": "videomae",
        "image_size": args.crop_size,
        "patch_size": s.patch,
        "num_channels": 3,
        "num_frames": args.t_length,
        "tubelet_size": s.tubelet,
        "hidden_size": s.width,
        "num_hidden_layers": s.depth,
        "num_attention_heads": s.heads,
        "intermediate_size": model.blocks[0].mlp.fc1.out_features,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "initializer_range": 0.02,
        "layer_norm_eps": blocks_eps,
        "qkv_bias": True,
        "qv_bias": True,
        "use_mean_pooling": True,
        "id2label": {str(i): name for i, name in enumerate(names)},
        "label2id": {name: i for i, name in enumerate(names)},
        "torch_dtype": "float32",
    }


def hf_preprocessor(args):
    """preprocessor_config.json: VideoMAEImageProcessor resizing, cropping, normalising as
    --evaluate."""
    return {
        "image_processor_type": "VideoMAEImageProcessor",
        "do_resize": True,
        "size": {"shortest_edge": args.new_size},
        "resample": 2,  # bilinear
        "do_center_crop": True,
        "crop_size": {"height": args.crop_size, "width": args.crop_size},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": list(args.mean),
        "image_std": list(args.std),
    }


def as_umask(path):
    """The mode open() would have given `path`: 0666 less the user's umask (safetensors writes
    through a private temporary file: 0600, unreadable by the group the umask lets read)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def not_videomae(model, args):
    """Why --format hf cannot write `model` (not a vit.VideoViT) as a transformers folder, in one
    line."""
    import probe
    import vjepa

    if isinstance(model, probe.ProbedModel):
        return (
            f"--format hf: a probe checkpoint (--probe {args.probe}) has no transformers class "
            "(transformers' VideoMAE classifies with one linear layer): use --format onnx or pt2"
        )
    if isinstance(model, vjepa.VJEPAViT):
        # transformers' VJEPA2Config: one layer_norm_eps for the encoder and the pooler, and the
        # pooler with the encoder's heads (modeling_vjepa2.py VJEPA2AttentivePooler)
        heads = model.head.pooler.cross_attention_block.xattn.heads
        also = f", and gives it the encoder's {model.spec.heads} heads ({heads} here)"
        return (
            f"--format hf: --arch {args.arch}'s transformers class, VJEPA2ForVideoClassification, "
            "would not give this checkpoint's logits: its config has one LayerNorm eps for the "
            f"encoder ({vjepa.EPS:g}) and the attentive probe ({vjepa.PROBE_EPS:g} here, the "
            f"official probe's){also if heads != model.spec.heads else ''}: use --format onnx "
            "or pt2"
        )
    return (
        f"--format hf: writes transformers' VideoMAE, the VideoMAE ViTs (vit_*); --arch "
        f"{args.arch} is not one: use --format onnx or pt2"
    )


def export_hf(model, args, names, out):
    """OUT/config.json, model.safetensors, preprocessor_config.json (module docstring). -> a
    report."""
    import safetensors.torch

    import vit
    import vit_zoo

    if not isinstance(model, vit.VideoViT):
        raise ValueError(not_videomae(model, args))
    if model.blocks[0].gamma_1 is not None:
        raise ValueError("--format hf: layer scale (gamma_1 / gamma_2) has no place in VideoMAE's")
    if "pos_embed" in dict(model.named_parameters()):
        raise ValueError(
            "--format hf: a learned position table; transformers' VideoMAE has a fixed"
        )
    state = vit_zoo.to_transformers(model)
    safetensors.torch.save_file(state, os.path.join(out, "model.safetensors"), {"format": "pt"})
    as_umask(os.path.join(out, "model.safetensors"))
    for name, obj in (
        ("config.json", hf_config(model, args, names)),
        ("preprocessor_config.json", hf_preprocessor(args)),
    ):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
    blocks_eps, fc_eps = model.norm_eps
    same = fc_eps == vit.TRANSFORMERS_FC_EPS
    return f"LayerNorm eps {blocks_eps:g} (blocks, layer_norm_eps), fc_norm {fc_eps:g}" + (
        ""
        if same
        else f" here, {vit.TRANSFORMERS_FC_EPS:g} in transformers (logits differ by that)"
    )


def main(argv=None):
    a = get_parser().parse_args(argv)
    checkpoint.TRUST["on"] = a.trust_checkpoint
    check_out(a)
    try:
        model, args, names = predict.load_checkpoint(a.resume, "cpu", 1, 1, a.use_ema)
    except predict.PredictError as e:
        fail(str(e))
    args.mean, args.std = tuple(args.mean or data.MEAN), tuple(args.std or data.STD)
    if a.format == "hf":
        try:
            eps = export_hf(model, args, names, a.out)
        except ValueError as e:
            fail(str(e))
        print(
            f"wrote {a.out} (config.json, model.safetensors, preprocessor_config.json: "
            f"VideoMAEForVideoClassification.from_pretrained reads it; {eps}; input mean "
            f"{args.mean} "
            f"std {args.std}, {args.t_length} frames of {args.crop_size} px)"
        )
        return 0
    x = example_input(args, a.dynamic_batch)
    try:
        export(model.float(), x, a.out, a.format, a.dynamic_batch, a.opset)
    except ValueError as e:
        fail(f"--arch {args.arch}: {e}")
    with open(a.out + ".json", "w", encoding="utf-8") as f:
        json.dump(sidecar(args, names, a), f, indent=1)
    weights = f", {a.out}.data (its weights: keep it beside {os.path.basename(a.out)})"
    print(
        f"wrote {a.out} ({a.format}, input float32 ({'B' if a.dynamic_batch else 1}, 3, "
        f"{x.shape[2]}, "
        f"{args.crop_size}, {args.crop_size}), mean {args.mean} std {args.std})"
        f"{weights if os.path.isfile(a.out + '.data') else ''} and {a.out}.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
