"""Pretrained weights for vjepa.py's V-JEPA 2 encoders and attentive probes, in every published
layout.

    # an official .pt, a transformers folder, or one of our checkpoints
    vjepa_zoo.load(model, "vitl.pt")
    vjepa_zoo.load_probe(model.head, "ssv2-vitl-16x2x3.pt")  # an official probe onto the probe

Layouts (each recognised by keys only it has):
- official: facebookresearch/vjepa2's pretraining checkpoints (vitl.pt, vith.pt, vitg.pt,
  vitg-384.pt): a dict holding `encoder`, `target_encoder` (and `predictor`, optimiser state, ...),
  each a state dict under `module.` / `backbone.` prefixes. The frozen-probe evals read
  `target_encoder` (configs/eval/*/*.yaml checkpoint_key;
  evals/video_classification_frozen/modelcustom/ vit_encoder_multiclip.py init_module): so does
  `key=None`; `key` picks another (`encoder`, `ema_encoder`). vision_transformer.py's names are
  vjepa.py's; a stored `pos_embed` (unused with RoPE, src/hub/backbones.py drops it the same way) is
  dropped and reported.
- official-probe: the eval's probe checkpoints (ssv2-vitl-16x2x3.pt, diving48-vitl-256.pt, ...):
  `classifiers`, a list of AttentiveClassifier state dicts under DDP's `module.` (eval.py
  save_checkpoint), one per point of the eval's lr x wd grid; FILE reads the first, as
  notebooks/vjepa2_demo.py does, FILE:K the K-th, FILE:all every one (--evaluate scores them all in
  one pass).
- transformers: a folder of VJEPA2Model / VJEPA2ForVideoClassification (config.json and
  model.safetensors; transformers/models/vjepa2/modeling_vjepa2.py), read with safetensors, never by
  importing transformers: query / key / value joined into qkv, the pooler's k_proj / v_proj into kv,
  the predictor dropped. Where transformers computes otherwise than the official code, the loaded
  model follows transformers for its own files: its pooler LayerNorms use eps 1e-6 (the official
  probe: PyTorch's default 1e-5) and its pooler has the encoder's number of heads; both are set on
  the probe and said in the load line. Its RoPE takes rows and columns from config.crop_size rather
  than from the clip: the same positions at that crop (the published folders' 256 px), other
  positions at another.
Every load prints one line; anything missing, of another shape, or left over refuses the file in one
line naming what it holds and the arch that would take it.
"""

import os
import re

import torch

import checkpoint
import vjepa
from model import strip_prefixes
from weights import DROP, convert, few

# The official eval's normalisation (eval.py DEFAULT_NORMALIZATION: ImageNet's mean / std).
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
ENCODER_KEYS = ("target_encoder", "encoder", "ema_encoder")

# modeling_vjepa2.py's names -> vjepa.py's (the first rule that matches wins; DROP: dropped,
# reported).
_E, _L = r"(?:vjepa2\.)?encoder\.", r"(?:vjepa2\.)?encoder\.layer\.(\d+)\."
_X, _S = r"pooler\.cross_attention_layer\.", r"pooler\.self_attention_layers\.(\d+)\."
_XO, _SO = "head.pooler.cross_attention_block.", r"head.pooler.blocks.\1."
TRANSFORMERS_RULES = (
    (_E + r"embeddings\.patch_embeddings\.proj\.(\w+)", r"patch_embed.proj.\1"),
    (_L + r"attention\.(query|key|value|proj)\.(\w+)", r"blocks.\1.attn.\2.\3"),
    (_L + r"(norm1|norm2|mlp\.fc1|mlp\.fc2)\.(\w+)", r"blocks.\1.\2.\3"),
    (_E + r"layernorm\.(\w+)", r"norm.\1"),
    (r"(?:vjepa2\.)?predictor\..+", DROP),
    (r"pooler\.query_tokens", "head.pooler.query_tokens"),
    (_X + r"layer_norm(\d)\.(\w+)", _XO + r"norm\1.\2"),
    (_X + r"cross_attn\.(q|k|v)_proj\.(\w+)", _XO + r"xattn.\1.\2"),
    (_X + r"mlp\.(\w+)\.(\w+)", _XO + r"mlp.\1.\2"),
    (_S + r"layer_norm(\d)\.(\w+)", _SO + r"norm\2.\3"),
    (_S + r"self_attn\.(q|k|v)_proj\.(\w+)", _SO + r"attn.\2_proj.\3"),
    (_S + r"self_attn\.out_proj\.(\w+)", _SO + r"attn.proj.\2"),
    (_S + r"mlp\.(\w+)\.(\w+)", _SO + r"mlp.\2.\3"),
    (r"classifier\.(\w+)", r"head.linear.\1"),
)


def join(state, parts, joined):
    """Separate projections (transformers) -> one (the official): rows of parts[0], then parts[1],
    ..."""
    pattern = re.compile(rf"(.+)\.{parts[0]}\.(weight|bias)")
    for k in [k for k in state if pattern.fullmatch(k)]:
        p, kind = pattern.fullmatch(k).groups()
        state[f"{p}.{joined}.{kind}"] = torch.cat([state.pop(f"{p}.{n}.{kind}") for n in parts])
    return state


# V-JEPA 2.1's encoder names -> vjepa.py's (app/vjepa_2_1/models/vision_transformer.py): the
# forward's last norm is norms_block[-1] (of 4, hierarchical_layers); the other three normalise the
# deep-supervision outputs of training, and the image tokenizer (patch_embed_img, img_mod_embed)
# embeds single images: dropped, reported.
V21_RULES = (
    (r"norms_block\.3\.(weight|bias)", r"norm.\1"),
    (r"norms_block\.[0-2]\..+|patch_embed_img\..+|img_mod_embed", DROP),
    (r".+", r"\g<0>"),
)
# The distilled 2.1 ViT-B and ViT-L are read from `ema_encoder` (src/hub/backbones.py
# vjepa2_1_vit_base_384 / vjepa2_1_vit_large_384 checkpoint_key); every other file `target_encoder`
# (configs/eval/*/*.yaml checkpoint_key).
DEFAULT_KEY = {"vjepa2_1_vitb16": "ema_encoder", "vjepa2_1_vitl16": "ema_encoder"}


def describe(state):
    """'a V-JEPA 2 encoder of width D, L blocks (--arch ...)' of a state dict in vjepa.py's names;
    2.1 if it has the modality embedding."""
    w = state.get("patch_embed.proj.weight")
    if w is None:
        return "no encoder"
    depth = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    v21 = "video_mod_embed" in state
    fits = [
        a
        for a, s in vjepa.VJEPA_SPECS.items()
        if (s.width, s.depth, s.mod_embed) == (w.shape[0], depth, v21)
    ]
    return f"a V-JEPA {'2.1' if v21 else '2'} encoder {w.shape[0]} wide, {depth} blocks" + (
        f" (--arch {fits[0]})" if fits else ""
    )


def read_official(outer, src, key):
    """The encoder's state dict of an official .pt (or a refusal naming the keys it has)."""
    have = [k for k in ENCODER_KEYS if isinstance(outer.get(k), dict)]
    if key not in have:
        raise ValueError(
            f"--pretrained {src}: no '{key}' in this V-JEPA checkpoint (it has {', '.join(have)}): "
            f"pick one with --vjepa-key"
        )
    state = {re.sub(r"^(module\.|backbone\.)+", "", k): v for k, v in outer[key].items()}
    dropped = [k for k in ("pos_embed",) if state.pop(k, None) is not None]
    if any(k.startswith("norms_block.") for k in state):
        state, more, _ = convert(state, V21_RULES)
        return state, dropped + more, f"official 2.1 '{key}'"
    return state, dropped, f"official '{key}'"


def read_transformers(source):
    """A transformers VJEPA2 folder's tensors -> (state in vjepa.py's names, dropped)."""
    state, dropped, unexpected = convert(source.state, TRANSFORMERS_RULES)
    if unexpected:
        raise ValueError(
            f"--pretrained {source.name}: {len(unexpected)} tensors vjepa.py has no place for "
            f"({few(unexpected)})"
        )
    state = join(state, ("query", "key", "value"), "qkv")  # the encoder's blocks
    state = join(state, ("q_proj", "k_proj", "v_proj"), "qkv")  # the pooler's self-attention
    state = join(state, ("k", "v"), "kv")  # the pooler's cross-attention
    return state, dropped


def read(source, layout, key):
    """(state in vjepa.py's names, dropped names, layout phrase) of a weights.Source in `layout`
    (official, transformers, ours); `key`: --vjepa-key, which only an official file has a choice
    of."""
    if key and layout != "official":
        what = "a transformers folder" if layout == "transformers" else "a train.py checkpoint"
        raise ValueError(
            f"--vjepa-key {key}: --pretrained {source.name} is {what}, which holds one encoder "
            "(--vjepa-key picks one of an official V-JEPA 2 .pt): leave the flag out"
        )
    if layout == "transformers":
        return (*read_transformers(source), "transformers")
    if layout == "official":
        return read_official(source.outer, source.name, key)
    return source.state, [], "ours"


def refusal(source, layout, arch):
    """The one line refusing a V-JEPA 2 file (`layout`) for `arch`, a network of another family,
    naming the V-JEPA arch it fits."""
    try:
        state, _, _ = read(source, layout, None if layout != "official" else _first_key(source))
        what = describe(state)
    except ValueError:
        what = "a V-JEPA 2 checkpoint"
    fits = re.search(r"--arch (\S+)\)", what)
    return (
        f"--pretrained {source.name}: {what} ({layout} layout): a V-JEPA 2 encoder (RoPE), not "
        f"{arch}'s network; give --arch {fits[1] if fits else 'vjepa2_*'}"
    )


def _first_key(source):
    return next(k for k in ENCODER_KEYS if isinstance(source.outer.get(k), dict))


def follow_transformers(model, state, config, name):
    """The probe computes as transformers' pooler: its depth (config.json's num_pooler_layers
    self-attention layers, then the cross-attention), its eps and its (encoder's) number of
    heads."""
    layers = config.get("num_pooler_layers")
    held = len({k.split(".")[3] for k in state if k.startswith("head.pooler.blocks.")})
    if layers is not None and layers != held:
        raise ValueError(
            f"--pretrained {name}: config.json's num_pooler_layers is {layers}, its weights hold "
            f"{held} pooler self-attention layers: a damaged folder"
        )
    head = model.head
    if held != len(head.pooler.blocks):  # the folder's depth, not the official 4
        w = head.linear.weight
        new = vjepa.AttentiveClassifier(
            w.shape[1], w.shape[0], depth=held + 1, dropout=head.dropout.p
        )
        head = model.head = new.to(device=w.device, dtype=w.dtype).train(head.training)
    for m in head.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.eps = config.get("layer_norm_eps", 1e-6)
        if hasattr(m, "heads"):
            m.heads = config["num_attention_heads"]
    return (
        f"probe as transformers: {config['num_attention_heads']} heads, {held} pooler layers "
        "(num_pooler_layers), LayerNorm eps 1e-6"
    )


@torch.no_grad()
def load(model, source, layout, key=None, head_note=None):
    """Fill a vjepa.VJEPAViT from a weights.Source of `layout` (official, transformers, ours);
    prints the report line, sets model.pretrained_info. head_note: what becomes of the head when the
    file holds none (the line says it, so a head filled next, or never used, does not read as one
    left random)."""
    src = source.name
    key = key or (DEFAULT_KEY.get(model.arch, "target_encoder") if layout == "official" else None)
    state, dropped, layout = read(source, layout, key)
    has_head = any(k.startswith("head.") for k in state)
    line = ""
    if source.config is not None and has_head:
        line = "; " + follow_transformers(model, state, source.config, src)
    own = model.state_dict()
    bad = [
        f"{k} {tuple(v.shape)} here, {tuple(state[k].shape)} in the file"
        for k, v in own.items()
        if k in state and state[k].shape != v.shape and not k.startswith("head.linear.")
    ]
    missing = [k for k in own if k not in state and not (k.startswith("head.") and not has_head)]
    extra = [k for k in state if k not in own]
    if bad or missing or extra:
        wrong = bad + [k + " missing" for k in missing] + [k + " extra" for k in extra]
        raise ValueError(
            f"--pretrained {src}: {describe(state)} ({layout}) does not fit --arch {model.arch} "
            f"({model.spec.width} wide, {model.spec.depth} blocks): {few(wrong)}"
        )
    new = [k for k in own if k not in state or own[k].shape != state[k].shape]
    for k, v in state.items():
        if k not in new:
            own[k].copy_(v)
    head = f"pretrained {src} ({layout}): loaded {len(own) - len(new)}, new {len(new)}"
    head += f" ({few(new)})" if new else ""
    if head_note and new and all(k.startswith("head.") for k in new):
        head += f": the head, {head_note}"
    head += f", dropped {len(dropped)}" + (f" ({few(dropped)})" if dropped else "")
    print(head + line)
    model.pretrained_info = {"format": layout.split()[0], "mean": MEAN, "std": STD}
    return {"loaded": len(own) - len(new), "new": new, "dropped": dropped, "format": layout}


def probe_blocks(state):
    """An AttentiveClassifier state dict's depth as --probe-blocks counts it: its self-attention
    blocks and the cross-attention one."""
    return len({n.split(".")[2] for n in state if n.startswith("pooler.blocks.")}) + 1


def probe_shape(state):
    """'width D, K classes, B blocks' of an AttentiveClassifier state dict."""
    k, w = state.get("linear.weight", torch.zeros(0, 0)).shape
    return f"width {w}, {k} classes, {probe_blocks(state)} blocks"


def probe_source(src):
    """--probe-weights FILE[:K|:all] -> (FILE, K, or "all", or None: the first head). A path that
    exists as given is a file, colon and all."""
    path, _, pick = (src or "").rpartition(":")
    if path and (pick.isdigit() or pick == "all") and not os.path.exists(src):
        return path, int(pick) if pick.isdigit() else "all"
    return src, None


def probe_states(src):
    """The heads --probe-weights FILE[:K|:all] names in an official probe checkpoint (eval.py saves
    one per grid point in `classifiers`, in its grid's order): ([(index, state dict)], how many the
    file holds). ValueError: one line naming the file."""
    path, pick = probe_source(src)
    outer = checkpoint.load(path, "--probe-weights")
    if not (isinstance(outer, dict) and isinstance(outer.get("classifiers"), list)):
        raise ValueError(
            f"--probe-weights {path}: not an official V-JEPA 2 probe checkpoint (classifiers)"
        )
    heads = outer["classifiers"]
    if not heads:
        raise ValueError(f"--probe-weights {path}: its classifiers list is empty (no probe in it)")
    n = len(heads)
    if isinstance(pick, int) and pick >= n:
        raise ValueError(
            f"--probe-weights {src}: the file holds {n} probe(s), {path}:0 to :{n - 1}"
        )
    chosen = range(n) if pick == "all" else [pick or 0]
    return [(i, strip_prefixes(heads[i])) for i in chosen], n


def probe_classes(src):
    """The class count of the first head --probe-weights names (None without one)."""
    if not src:
        return None
    w = probe_states(src)[0][0][1].get("linear.weight")
    return None if w is None else w.shape[0]


@torch.no_grad()
def load_probe(heads, src):
    """The heads --probe-weights FILE[:K|:all] names (probe_states) onto vjepa.AttentiveClassifiers
    (one, or a list: one each); prints one line: how many the file holds and which were taken."""
    states, n = probe_states(src)
    path = probe_source(src)[0]
    if isinstance(heads, torch.nn.Module) and not isinstance(heads, torch.nn.ModuleList):
        heads = [heads]
    for head, (_, state) in zip(heads, states):
        own = head.state_dict()
        wrong = [
            f"{k} {tuple(state[k].shape) if k in state else 'missing'} in the file, "
            f"{tuple(v.shape)} here"
            for k, v in own.items()
            if k not in state or state[k].shape != v.shape
        ] + [f"{k} extra" for k in state if k not in own]
        if wrong:
            blocks = probe_blocks(state)
            fix = f"; give --probe-blocks {blocks}" if blocks != probe_blocks(own) else ""
            raise ValueError(
                f"--probe-weights {path}: a probe of {probe_shape(state)} does not fit this run's "
                f"({probe_shape(own)}){fix}: {few(wrong)}"
            )
        for k, v in state.items():
            own[k].copy_(v)
    if len(states) > 1:
        took = f"all {n} heads, each scored"
    else:
        took = f"head {states[0][0]} of {n}" + (f" ({path}:K picks another)" if n > 1 else "")
    each = " each" if len(states) > 1 else ""
    print(f"probe {path} (official-probe): {took}, loaded {len(states[0][1])} tensors{each}")
    return len(states[0][1])
