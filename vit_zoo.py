"""Pretrained weights for vit.py's VideoMAE / VideoMAEv2 ViTs, from every layout they are published
in.

    # or a pretraining .pth, a transformers folder, mmaction2
    vit_zoo.load(model, "vit_b_k400_ft.pth")

Layouts (recognised by a key only they have, renamed by a small table of rules, each citing its
files):
- videomae: the official fine-tuned checkpoints, MCG-NJU/VideoMAE and OpenGVLab/VideoMAEv2
  models/modeling_finetune.py; vit.py uses their names, so this is a copy. Saved under "model",
  "module" (DeepSpeed, run_class_finetuning.py --model_key model|module), "state_dict", or bare.
- videomae-pretrain: the official pretraining checkpoints (models/modeling_pretrain.py
  PretrainVisionTransformer): encoder.* kept; the decoder, encoder_to_decoder and mask_token
  dropped; the encoder's final norm dropped (the fine-tuning model pools and normalises with fc_norm
  instead: what run_class_finetuning.py's load leaves as unexpected); fc_norm and head are new.
- transformers: a folder of transformers' VideoMAEForVideoClassification / VideoMAEModel /
  VideoMAEForPreTraining (config.json + model.safetensors or pytorch_model.bin;
  transformers/models/videomae/modeling_videomae.py). Read with safetensors / torch.load, never by
  importing transformers. query / key / value are joined into qkv; the q and v biases (q_bias /
  v_bias in transformers 4 and the hub files, query.bias / value.bias in transformers 5) are kept.
- mmaction2: mmaction/models/backbones/vit_mae.py VisionTransformer under Recognizer3D's backbone.*
  (mmcv PatchEmbed `projection`, FFN `layers.0.0` / `layers.1`, pos_embed a buffer) and
  cls_head.fc_cls (heads/timesformer_head.py).

Every load prints one line: loaded, new, dropped and rebuilt / interpolated tensors. Everything else
is strict: a tensor missing or of another shape, or one the file has that nothing takes, refuses the
file in one line that names its layout and the network it holds.

Position tables: the official models add a fixed sinusoid table that no checkpoint stores (mmaction2
stores it as a buffer: recognised by its values and dropped); vit.py builds it for the model's own
token grid, which is what the official code constructed at another clip length or crop size
computes. A learned table (use_learnable_pos_emb) is interpolated to the model's grid as
VideoMAEv2's run_class_finetuning.py does: bicubic over H, W per time step (align_corners=False),
then linear over T.
"""

import os
import re

import torch
import torch.nn.functional as F

import vit
import vjepa
import weights
from weights import DROP, convert, few

# run_class_finetuning.py --imagenet_default_mean_and_std (default True): timm's ImageNet mean /
# std.
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


# (regex over a whole source name, our name from the match, or DROP); the first rule that matches
# wins.
VIDEOMAE_RULES = ((r"(.+)", r"\1"),)  # modeling_finetune.py's names are vit.py's
PRETRAIN_RULES = (
    # modeling_pretrain.py: PretrainVisionTransformer.encoder (PretrainVisionTransformerEncoder: its
    # patch_embed, blocks and final `norm`), .decoder, .encoder_to_decoder, .mask_token.
    (r"encoder\.norm\.\w+", DROP),
    (r"encoder\.(.+)", r"\1"),
    (r"decoder\..+|encoder_to_decoder\..+|mask_token", DROP),
)
_HF = r"encoder\.layer\.(\d+)\."  # VideoMAEEncoder.layer[i] (VideoMAELayer)
TRANSFORMERS_RULES = (
    # modeling_videomae.py: VideoMAEEmbeddings.patch_embeddings.projection; VideoMAELayer attention.
    # attention.{query,key,value} (VideoMAESelfAttention), attention.output.dense,
    # intermediate.dense, output.dense, layernorm_before / _after; VideoMAEForVideoClassification
    # fc_norm / classifier.
    (r"embeddings\.patch_embeddings\.projection\.(\w+)", r"patch_embed.proj.\1"),
    (_HF + r"attention\.attention\.(query|key|value)\.weight", r"blocks.\1.attn.\2.weight"),
    (_HF + r"attention\.attention\.(?:q_bias|query\.bias)", r"blocks.\1.attn.q_bias"),
    (_HF + r"attention\.attention\.(?:v_bias|value\.bias)", r"blocks.\1.attn.v_bias"),
    (_HF + r"attention\.output\.dense\.(\w+)", r"blocks.\1.attn.proj.\2"),
    (_HF + r"intermediate\.dense\.(\w+)", r"blocks.\1.mlp.fc1.\2"),
    (_HF + r"output\.dense\.(\w+)", r"blocks.\1.mlp.fc2.\2"),
    (_HF + r"layernorm_before\.(\w+)", r"blocks.\1.norm1.\2"),
    (_HF + r"layernorm_after\.(\w+)", r"blocks.\1.norm2.\2"),
    (r"fc_norm\.(\w+)", r"fc_norm.\1"),
    (r"classifier\.(\w+)", r"head.\1"),
    # VideoMAEForPreTraining: the encoder's last norm (VideoMAEModel.layernorm) and the decoder.
    (r"layernorm\.\w+|decoder\..+|encoder_to_decoder\..+|mask_token", DROP),
)
# The way back (export.py --format hf): vit.py's names -> VideoMAEForVideoClassification's, as the
# Hub files hold them (q_bias / v_bias: transformers 4 reads them as they are, transformers 5
# renames them to query.bias / value.bias on loading); qkv.weight is split into query / key / value
# (split_qkv).
_L = r"videomae.encoder.layer.\1."
TO_TRANSFORMERS_RULES = (
    (r"patch_embed\.proj\.(\w+)", r"videomae.embeddings.patch_embeddings.projection.\1"),
    (r"blocks\.(\d+)\.attn\.(query|key|value)\.weight", _L + r"attention.attention.\2.weight"),
    (r"blocks\.(\d+)\.attn\.([qv]_bias)", _L + r"attention.attention.\2"),
    (r"blocks\.(\d+)\.attn\.proj\.(\w+)", _L + r"attention.output.dense.\2"),
    (r"blocks\.(\d+)\.mlp\.fc1\.(\w+)", _L + r"intermediate.dense.\2"),
    (r"blocks\.(\d+)\.mlp\.fc2\.(\w+)", _L + r"output.dense.\2"),
    (r"blocks\.(\d+)\.norm1\.(\w+)", _L + r"layernorm_before.\2"),
    (r"blocks\.(\d+)\.norm2\.(\w+)", _L + r"layernorm_after.\2"),
    (r"fc_norm\.(\w+)", r"fc_norm.\1"),
    (r"head\.(\w+)", r"classifier.\1"),
)
MMACTION2_RULES = (
    # mmaction/models/backbones/vit_mae.py (VisionTransformer, Block, Attention; mmcv's PatchEmbed
    # and FFN), Recognizer3D's backbone. / cls_head. prefixes, TimeSformerHead.fc_cls.
    (r"backbone\.patch_embed\.projection\.(\w+)", r"patch_embed.proj.\1"),
    (r"backbone\.blocks\.(\d+)\.mlp\.layers\.0\.0\.(\w+)", r"blocks.\1.mlp.fc1.\2"),
    (r"backbone\.blocks\.(\d+)\.mlp\.layers\.1\.(\w+)", r"blocks.\1.mlp.fc2.\2"),
    (r"backbone\.(blocks\.\d+\.(?:norm[12]\.\w+|attn\.\w+(?:\.\w+)?|gamma_[12]))", r"\1"),
    (r"backbone\.(pos_embed|fc_norm\.\w+)", r"\1"),
    (r"cls_head\.fc_cls\.(\w+)", r"head.\1"),
)
# layout -> rules (zoo.LAYOUTS says how each is recognised)
LAYOUTS = {
    "videomae": VIDEOMAE_RULES,
    "videomae-pretrain": PRETRAIN_RULES,
    "mmaction2": MMACTION2_RULES,
    "transformers": TRANSFORMERS_RULES,
    "ours": VIDEOMAE_RULES,
}


def settings(source):
    """The weights' source's (LayerNorm eps, mean, std): a transformers folder's config.json
    layer_norm_eps for the blocks, 1e-5 for fc_norm (modeling_videomae.py) and
    preprocessor_config.json's image_mean / image_std; ours as it was trained; the official
    files' otherwise."""
    if source.config is not None:
        return folder_settings(source)
    args = source.outer.get("args")
    if source.ours:  # as it was trained
        return {
            "norm_eps": tuple(args.get("norm_eps") or vit.OFFICIAL_EPS),
            "mean": tuple(args.get("mean") or MEAN),
            "std": tuple(args.get("std") or STD),
        }
    return {"norm_eps": vit.OFFICIAL_EPS, "mean": MEAN, "std": STD}


def folder_settings(source):
    config, name = source.config, source.name
    if config.get("use_mean_pooling") is False and any(
        k.startswith("classifier.") for k in source.state
    ):
        raise ValueError(
            f"--pretrained {name}: a transformers VideoMAE classifier without mean pooling "
            "(use_mean_pooling false): vit.py's head reads the mean of the tokens"
        )
    eps = config.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        raise ValueError(f"--pretrained {name}: config.json's layer_norm_eps {eps!r} is not an eps")
    mean, std = MEAN, STD
    pre = os.path.join(source.folder, "preprocessor_config.json")
    if os.path.isfile(pre):
        pre = weights.read_json(pre, "--pretrained", name)
        mean, std = tuple(pre.get("image_mean") or mean), tuple(pre.get("image_std") or std)
    return {"norm_eps": (float(eps), vit.TRANSFORMERS_FC_EPS), "mean": mean, "std": std}


def join_qkv(state):
    """transformers' separate query / key / value weights -> one qkv weight (q rows, then k, then v:
    the order modeling_finetune.py's Attention splits its qkv output in)."""
    for k in [k for k in state if k.endswith(".attn.query.weight")]:
        p = k[: -len("query.weight")]
        q, kk, v = (state.pop(p + f"{n}.weight") for n in ("query", "key", "value"))
        assert q.shape == kk.shape == v.shape, f"{p}: q {q.shape}, k {kk.shape}, v {v.shape}"
        state[p + "qkv.weight"] = torch.cat((q, kk, v))
    return state


def split_qkv(state):
    """join_qkv undone: each qkv weight -> query, key, value weights (rows in that order)."""
    for k in [k for k in state if k.endswith(".attn.qkv.weight")]:
        p, w = k[: -len("qkv.weight")], state.pop(k)
        assert w.shape[0] % 3 == 0, f"{k}: {tuple(w.shape)}"
        for name, part in zip(("query", "key", "value"), w.chunk(3)):
            state[p + f"{name}.weight"] = part.contiguous()
    return state


def to_transformers(model):
    """A vit.VideoViT's weights in VideoMAEForVideoClassification's names (float32, contiguous)."""
    state = split_qkv(
        {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    )
    out, dropped, unexpected = convert(state, TO_TRANSFORMERS_RULES)
    assert not dropped and not unexpected, f"no transformers name for {unexpected}"
    return out


def describe(state, arch=None):
    """'a ViT D wide, L blocks, P px patches (--arch ...)' of a state dict in our names (for
    refusals): the arch of that width and patch, other than `arch` (the one it does not fit), and
    the blocks missing between the first and the last."""
    w = state.get("patch_embed.proj.weight")
    if w is None:
        return "a file without a patch embedding"
    depth = 1 + max((int(k.split(".")[1]) for k in state if k.startswith("blocks.")), default=-1)
    blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    held = f"{depth} blocks" if blocks == depth else f"{depth} blocks ({depth - blocks} missing)"
    fits = [
        a
        for a, s in vit.VIT_SPECS.items()
        if (s.width, s.patch) == (w.shape[0], w.shape[-1]) and a != arch
    ]
    return f"a ViT {w.shape[0]} wide, {held}, {w.shape[-1]} px patches" + (
        f" (--arch {fits[0]})" if fits and blocks == depth else ""
    )


def is_fixed_table(table):
    """A stored table that is the sinusoid one (mmaction2's buffer): the same values to float32."""
    return torch.allclose(table.float(), vit.sinusoid_table(*table.shape[1:]), atol=1e-5)


def resize_table(table, src_grid, grid):
    """A learned (1, T*H*W, C) table from src_grid to grid as VideoMAEv2's run_class_finetuning.py:
    bicubic over (H, W) per time step, align_corners=False, then linear over T."""
    (T0, H0, W0), (T, H, W) = src_grid, grid
    C = table.shape[-1]
    x = table.reshape(T0, H0, W0, C).permute(0, 3, 1, 2).double()  # (T0, C, H0, W0)
    if (H0, W0) != (H, W):
        x = F.interpolate(x, size=(H, W), mode="bicubic", align_corners=False)
    x = x.permute(2, 3, 1, 0).reshape(H * W, C, T0)  # (HW, C, T0)
    if T0 != T:
        x = F.interpolate(x, size=T, mode="linear", align_corners=False)
    return x.permute(2, 0, 1).reshape(1, T * H * W, C).to(table.dtype)  # (1, T*H*W, C)


def source_grid(n, grid):
    """The token grid of a learned table of n tokens: the model's T if it fits (VideoMAEv2's script
    assumes that), else 8 (16 frames, the published clips); square in space."""
    for T in (grid[0], 8):
        side = round((n // T) ** 0.5)
        if n == T * side * side:
            return (T, side, side)
    return None


def position_table(model, state, src):
    """Handle the file's pos_embed (if any): drop a fixed table, fit a learned one. -> report
    phrase."""
    T, H, W = model.grid
    table = state.pop("pos_embed", None)
    if table is None or is_fixed_table(table):
        dropped = " (the file's fixed table dropped)" if table is not None else ""
        return f"fixed sinusoid table built for {T}x{H}x{W} tokens{dropped}"
    D = model.spec.width
    grid = source_grid(table.shape[1], model.grid) if table.dim() == 3 else None
    if grid is None or table.shape[-1] != D:
        raise ValueError(
            f"--pretrained {src}: a pos_embed of shape {tuple(table.shape)} fits no grid of width "
            f"{D}"
        )
    if grid == model.grid:
        model.set_pos_embed(table)
        return f"learned table {T}x{H}x{W} copied"
    model.set_pos_embed(resize_table(table, grid, model.grid))
    g = "x".join(map(str, grid))
    return (
        f"learned table interpolated {g} -> {T}x{H}x{W} tokens (bicubic over H, W, linear over T, "
        "as VideoMAEv2 run_class_finetuning.py)"
    )


def to_our_names(source, layout):
    """A source's tensors in a LAYOUTS layout -> (ours, dropped, unexpected)."""
    # transformers: VideoMAEForVideoClassification / ForPreTraining hold VideoMAEModel as
    # `videomae.`
    state = {re.sub(r"^videomae\.", "", k): v for k, v in source.state.items()}
    state, dropped, unexpected = convert(state, LAYOUTS[layout])
    return join_qkv(state), dropped, unexpected


def refusal(source, layout, arch):
    """The one line refusing a VideoMAE file (`layout`) for `arch`, a network of another family,
    naming the ViT arch it fits."""
    state, _, _ = to_our_names(source, layout)
    what = (
        "a transformers VideoMAE folder"
        if source.config is not None
        else f"a ViT file ({layout} layout)"
    )
    if arch in vjepa.VJEPA_SPECS:
        return (
            f"--pretrained {source.name}: {what}, {describe(state)}: a VideoMAE ViT, not a "
            f"V-JEPA 2 encoder; give --arch {closest_arch(state)}"
        )
    return (
        f"--pretrained {source.name}: {what}, {describe(state)}; --arch {arch} is a ConvNet: "
        f"give the ViT arch (--arch {closest_arch(state)})"
    )


def closest_arch(state):
    """The VideoMAE arch of the file's width and patch (of its depth where one is)."""
    w = state.get("patch_embed.proj.weight")
    if w is None:
        return "vit_*"
    depth = 1 + max((int(k.split(".")[1]) for k in state if k.startswith("blocks.")), default=-1)
    same = [a for a, s in vit.VIT_SPECS.items() if (s.width, s.patch) == (w.shape[0], w.shape[-1])]
    deep = [a for a in same if vit.VIT_SPECS[a].depth == depth]
    return (deep or same or ["vit_*"])[0]


@torch.no_grad()
def load(model, source, layout):
    """Fill a vit.VideoViT from `source` (weights.Source) of the LAYOUTS layout `layout` (ours:
    train.py's checkpoints, vit.py's names). Prints the report line; sets model.pretrained_info
    (with `head`: the file's classifier was loaded) and the LayerNorm eps of the weights' source."""
    src = source.name
    settings_ = settings(source)
    if source.ours:  # a run of train.py pretrain holds the official pretraining names
        layout = "videomae-pretrain" if source.outer["args"].get("pretrain") else "videomae"
    state, dropped, unexpected = to_our_names(source, layout)
    if unexpected:
        raise ValueError(
            f"--pretrained {src}: {len(unexpected)} tensors of the {layout} layout that vit.py "
            f"has no place for ({few(unexpected)}): another network?"
        )
    pos = position_table(model, state, src)
    own = model.state_dict()
    bad = [
        f"{k} {tuple(v.shape)} here, {tuple(state[k].shape) if k in state else 'missing'} in the "
        "file"
        for k, v in own.items()
        if k != "pos_embed" and state.get(k, v).shape != v.shape
    ]
    missing = [k for k in own if k not in state and k != "pos_embed"]
    new = [k for k in missing if k.startswith(("head.", "fc_norm."))]
    extra = [k for k in state if k not in own]
    absent = [f"{k} missing" for k in missing if k not in new]
    if [k for k in bad if not k.startswith("head.")] or len(new) != len(missing) or extra:
        raise ValueError(
            f"--pretrained {src}: {describe(state, model.arch)} ({layout} layout) does not fit "
            f"--arch {model.arch} ({model.spec.width} wide, {model.spec.depth} blocks, "
            f"{model.spec.patch} px patches): {few(bad + absent + [k + ' extra' for k in extra])}"
        )
    loaded = 0
    for k, v in state.items():
        if k.startswith("head.") and v.shape != own[k].shape:
            new.append(k)  # another number of classes: the head keeps its fresh init
            continue
        assert own[k].shape == v.shape, (
            f"{k}: {tuple(v.shape)} in the file, {tuple(own[k].shape)} here"
        )
        own[k].copy_(v)
        loaded += 1
    model.set_norm_eps(settings_["norm_eps"])
    head = state.get("head.weight")
    line = f"pretrained {src} ({layout}): loaded {loaded}, new {len(new)}"
    line += f" ({few(new)})" if new else ""
    groups = sorted({re.sub(r"\.\d+\..*|\.(weight|bias)$", ".*", k) for k in dropped})
    line += f", dropped {len(dropped)}" + (f" ({few(groups, 6)})" if dropped else "")
    blocks_eps, fc_eps = model.norm_eps
    print(f"{line}; position: {pos}; LayerNorm eps {blocks_eps:g} (blocks), {fc_eps:g} (fc_norm)")
    # the file's classifier: its number of classes (None: it has none), loaded or not
    model.pretrained_info = {
        "format": layout,
        "mean": tuple(settings_["mean"]),
        "std": tuple(settings_["std"]),
        "head_classes": None if head is None else head.shape[0],
        "head_loaded": not any(k.startswith("head.") for k in new),
    }
    return {"loaded": loaded, "new": new, "dropped": dropped, "format": layout, "position": pos}
