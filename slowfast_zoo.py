"""SlowFast / X3D checkpoints of every layout renamed to slowfast_net.py's (= PySlowFast's) names.

zoo.load_pretrained reads the file and recognises its layout (zoo.ZOOS); for these archs it asks
here for the rename rules and the one-line refusals of files that belong to another network; the
copy, the shape checks and the load report are zoo.py's.

Layouts followed (each rule table cites its files)
- facebookresearch/SlowFast (PySlowFast) .pyth: our names (video_model_builder.py SlowFast / X3D).
- PySlowFast's Caffe2 .pkl of SlowFast: utils/c2_model_loading.py (get_name_convert_func).
- facebookresearch/pytorchvideo hub .pyth: models/slowfast.py (create_slowfast: blocks.0
  multipathway_blocks / multipathway_fusion, blocks.1-4 res stages, blocks.6 head), models/x3d.py
  (create_x3d: stem conv.conv_xy / conv_t, norm_b = [BN, SE], head pool.pre_conv / post_conv),
  head.py.
- open-mmlab/mmaction2 .pth of X3D: models/backbones/x3d.py (conv1_s, conv1_t, layerN.i.conv1..3,
  se_module, downsample, conv5 as mmcv ConvModules .conv / .bn), models/heads/x3d_head.py (fc1,
  fc2).
- open-mmlab/mmaction2 .pth of SlowFast (commit 4d6c934): models/backbones/resnet3d_slowfast.py
  (ResNet3dSlowFast: slow_path / fast_path ResNet3dPathways, the laterals conv1_lateral and
  layer1..3_lateral on the slow one), resnet3d.py (conv1, layerN.i.conv1..3, downsample as
  ConvModules .conv / .bn), heads/slowfast_head.py (fc_cls over cat(fast, slow)). Its network is
  one of slowfast_net's mmaction2 variants, which file_variant picks for its files.
- epic-kitchens/epic-kitchens-slowfast .pyth of EPIC-100 (commit bf50519): PySlowFast's names but
  the head (slowfast/models/head_helper.py ResNetBasicHead with MODEL.NUM_CLASSES [97, 300]:
  projection_verb and projection_noun over the same features), which `fit` makes our one
  projection, verbs first (the column blocks of --heads 97 300).
"""

import re

import torch

import slowfast_net

_BN = {"s": "weight", "b": "bias", "rm": "running_mean", "riv": "running_var"}  # Caffe2 suffixes
_WB = {"w": "weight", "b": "bias"}


def _p(t):
    """Caffe2's "t_" prefix marks the fast pathway (pathway1)."""
    return 1 if t else 0


CAFFE2_SLOWFAST_RULES = (
    # c2_model_loading.py: res3_1_branch2a_bn_riv, t_res3_1_..., t_pool1_subsample (the first
    # lateral), t_res2_2_branch2c_bn_subsample (the lateral after res2), nonlocal_conv4_6_theta_w.
    (r"(t_)?conv1_w", lambda m: f"s1.pathway{_p(m[1])}_stem.conv.weight"),
    (r"(t_)?res_conv1_bn_(s|b|rm|riv)", lambda m: f"s1.pathway{_p(m[1])}_stem.bn.{_BN[m[2]]}"),
    (
        r"(t_)?res(\d)_(\d+)_branch1_w",
        lambda m: f"s{m[2]}.pathway{_p(m[1])}_res{m[3]}.branch1.weight",
    ),
    (
        r"(t_)?res(\d)_(\d+)_branch1_bn_(s|b|rm|riv)",
        lambda m: f"s{m[2]}.pathway{_p(m[1])}_res{m[3]}.branch1_bn.{_BN[m[4]]}",
    ),
    (
        r"(t_)?res(\d)_(\d+)_branch2([abc])_w",
        lambda m: f"s{m[2]}.pathway{_p(m[1])}_res{m[3]}.branch2.{m[4]}.weight",
    ),
    (
        r"(t_)?res(\d)_(\d+)_branch2([abc])_bn_(s|b|rm|riv)",
        lambda m: f"s{m[2]}.pathway{_p(m[1])}_res{m[3]}.branch2.{m[4]}_bn.{_BN[m[5]]}",
    ),
    (r"t_pool1_subsample_w", lambda m: "s1_fuse.conv_f2s.weight"),
    (r"t_pool1_subsample_bn_(s|b|rm|riv)", lambda m: f"s1_fuse.bn.{_BN[m[1]]}"),
    (r"t_res(\d)_\d+_branch2c_bn_subsample_w", lambda m: f"s{m[1]}_fuse.conv_f2s.weight"),
    (
        r"t_res(\d)_\d+_branch2c_bn_subsample_bn_(s|b|rm|riv)",
        lambda m: f"s{m[1]}_fuse.bn.{_BN[m[2]]}",
    ),
    (
        r"nonlocal_conv(\d)_(\d+)_(theta|phi|g|out)_(w|b)",
        lambda m: f"s{m[1]}.pathway0_nonlocal{m[2]}.conv_{m[3]}.{_WB[m[4]]}",
    ),
    (
        r"nonlocal_conv(\d)_(\d+)_bn_(s|b|rm|riv)",
        lambda m: f"s{m[1]}.pathway0_nonlocal{m[2]}.bn.{_BN[m[3]]}",
    ),
    (r"pred_(w|b)", lambda m: f"head.projection.{_WB[m[1]]}"),
)
# pytorchvideo's ResBlock / BottleneckBlock names inside a stage, after the stage prefix.
# X3D: norm_b is Sequential(BN, SqueezeExcitation(block = fc1, ReLU, fc2, Sigmoid)).
_PTV_BLOCK = (
    (r"branch1_conv\.(\w+)", "branch1.{}"),
    (r"branch1_norm\.(\w+)", "branch1_bn.{}"),
    (r"branch2\.conv_([abc])\.(\w+)", "branch2.{}.{}"),
    (r"branch2\.norm_([abc])\.(\w+)", "branch2.{}_bn.{}"),
    (r"branch2\.norm_b\.0\.(\w+)", "branch2.b_bn.{}"),
    (r"branch2\.norm_b\.1\.block\.0\.(\w+)", "branch2.se.fc1.{}"),
    (r"branch2\.norm_b\.1\.block\.2\.(\w+)", "branch2.se.fc2.{}"),
)


def _ptv_block(prefix, ours):
    """Rules for pytorchvideo's res blocks under `prefix`, a regex whose groups and the block's
    index `ours` turns into our block's name."""
    n = re.compile(prefix).groups + 1

    def rule(tail, to):
        name = lambda m: f"{ours(*m.groups()[:n])}.{to.format(*m.groups()[n:])}"  # noqa: E731
        return (rf"{prefix}\.res_blocks\.(\d+)\.{tail}", name)

    return tuple(rule(tail, to) for tail, to in _PTV_BLOCK)


PYTORCHVIDEO_SLOWFAST_RULES = (
    (
        r"blocks\.0\.multipathway_blocks\.(\d)\.conv\.(\w+)",
        lambda m: f"s1.pathway{m[1]}_stem.conv.{m[2]}",
    ),
    (
        r"blocks\.0\.multipathway_blocks\.(\d)\.norm\.(\w+)",
        lambda m: f"s1.pathway{m[1]}_stem.bn.{m[2]}",
    ),
    (
        r"blocks\.(\d)\.multipathway_fusion\.conv_fast_to_slow\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}_fuse.conv_f2s.{m[2]}",
    ),
    (
        r"blocks\.(\d)\.multipathway_fusion\.norm\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}_fuse.bn.{m[2]}",
    ),
    *_ptv_block(
        r"blocks\.(\d)\.multipathway_blocks\.(\d)",
        lambda b, p, i: f"s{int(b) + 1}.pathway{p}_res{i}",
    ),
    (r"blocks\.\d+\.proj\.(\w+)", lambda m: f"head.projection.{m[1]}"),
)
PYTORCHVIDEO_X3D_RULES = (
    # zoo.read_checkpoint has renamed the stages blocks.1-4 to stage1-4 already.
    # create_x3d_stem names its 1x3x3 conv conv_t and its depthwise 5x1x1 conv conv_xy (and runs
    # conv_t first): the other way round from PySlowFast's X3DStem. The copy checks the shapes.
    (r"blocks\.0\.conv\.conv_t\.(\w+)", lambda m: f"s1.pathway0_stem.conv_xy.{m[1]}"),
    (r"blocks\.0\.conv\.conv_xy\.(\w+)", lambda m: f"s1.pathway0_stem.conv.{m[1]}"),
    (r"blocks\.0\.norm\.(\w+)", lambda m: f"s1.pathway0_stem.bn.{m[1]}"),
    *_ptv_block(r"stage(\d)", lambda s, i: f"s{int(s) + 1}.pathway0_res{i}"),
    (r"blocks\.\d+\.pool\.pre_conv\.(\w+)", lambda m: f"head.conv_5.{m[1]}"),
    (r"blocks\.\d+\.pool\.pre_norm\.(\w+)", lambda m: f"head.conv_5_bn.{m[1]}"),
    (r"blocks\.\d+\.pool\.post_conv\.(\w+)", lambda m: f"head.lin_5.{m[1]}"),
    (r"blocks\.\d+\.proj\.(\w+)", lambda m: f"head.projection.{m[1]}"),
)
_MM_CONV = {"conv1": "a", "conv2": "b", "conv3": "c"}
# fc1 is an nn.Linear (2048, C) where PySlowFast has a 1x1x1 conv: reshaped by `fit`.
MMACTION2_X3D_RULES = (
    (r"backbone\.conv1_s\.conv\.(\w+)", lambda m: f"s1.pathway0_stem.conv_xy.{m[1]}"),
    (r"backbone\.conv1_t\.conv\.(\w+)", lambda m: f"s1.pathway0_stem.conv.{m[1]}"),
    (r"backbone\.conv1_t\.bn\.(\w+)", lambda m: f"s1.pathway0_stem.bn.{m[1]}"),
    (
        r"backbone\.layer(\d)\.(\d+)\.(conv[123])\.conv\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}.pathway0_res{m[2]}.branch2.{_MM_CONV[m[3]]}.{m[4]}",
    ),
    (
        r"backbone\.layer(\d)\.(\d+)\.(conv[123])\.bn\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}.pathway0_res{m[2]}.branch2.{_MM_CONV[m[3]]}_bn.{m[4]}",
    ),
    (
        r"backbone\.layer(\d)\.(\d+)\.se_module\.(fc[12])\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}.pathway0_res{m[2]}.branch2.se.{m[3]}.{m[4]}",
    ),
    (
        r"backbone\.layer(\d)\.(\d+)\.downsample\.conv\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}.pathway0_res{m[2]}.branch1.{m[3]}",
    ),
    (
        r"backbone\.layer(\d)\.(\d+)\.downsample\.bn\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}.pathway0_res{m[2]}.branch1_bn.{m[3]}",
    ),
    (r"backbone\.conv5\.conv\.(\w+)", lambda m: f"head.conv_5.{m[1]}"),
    (r"backbone\.conv5\.bn\.(\w+)", lambda m: f"head.conv_5_bn.{m[1]}"),
    (r"cls_head\.fc1\.weight", lambda m: "head.lin_5.weight"),
    (r"cls_head\.fc2\.(\w+)", lambda m: f"head.projection.{m[1]}"),
)
_PATHWAY = {"slow": 0, "fast": 1}
_MM_PATH = r"backbone\.(slow|fast)_path\."
# resnet3d_slowfast.py: slow_path.conv1_lateral follows the stems (s1_fuse), layerN_lateral follows
# res(N+1) (s(N+1)_fuse); the laterals are ConvModules, without norm (a .conv only) but where
# lateral_norm is set.
MMACTION2_SLOWFAST_RULES = (
    (_MM_PATH + r"conv1\.conv\.(\w+)", lambda m: f"s1.pathway{_PATHWAY[m[1]]}_stem.conv.{m[2]}"),
    (_MM_PATH + r"conv1\.bn\.(\w+)", lambda m: f"s1.pathway{_PATHWAY[m[1]]}_stem.bn.{m[2]}"),
    (r"backbone\.slow_path\.conv1_lateral\.conv\.(\w+)", lambda m: f"s1_fuse.conv_f2s.{m[1]}"),
    (
        r"backbone\.slow_path\.layer(\d)_lateral\.conv\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}_fuse.conv_f2s.{m[2]}",
    ),
    # lateral_norm True (the 8x8x1-steplr config): a BN after each lateral conv
    (r"backbone\.slow_path\.conv1_lateral\.bn\.(\w+)", lambda m: f"s1_fuse.bn.{m[1]}"),
    (
        r"backbone\.slow_path\.layer(\d)_lateral\.bn\.(\w+)",
        lambda m: f"s{int(m[1]) + 1}_fuse.bn.{m[2]}",
    ),
    (
        _MM_PATH + r"layer(\d)\.(\d+)\.(conv[123])\.conv\.(\w+)",
        lambda m: (
            f"s{int(m[2]) + 1}.pathway{_PATHWAY[m[1]]}_res{m[3]}.branch2.{_MM_CONV[m[4]]}.{m[5]}"
        ),
    ),
    (
        _MM_PATH + r"layer(\d)\.(\d+)\.(conv[123])\.bn\.(\w+)",
        lambda m: (
            f"s{int(m[2]) + 1}.pathway{_PATHWAY[m[1]]}_res{m[3]}.branch2.{_MM_CONV[m[4]]}_bn.{m[5]}"
        ),
    ),
    (
        _MM_PATH + r"layer(\d)\.(\d+)\.downsample\.conv\.(\w+)",
        lambda m: f"s{int(m[2]) + 1}.pathway{_PATHWAY[m[1]]}_res{m[3]}.branch1.{m[4]}",
    ),
    (
        _MM_PATH + r"layer(\d)\.(\d+)\.downsample\.bn\.(\w+)",
        lambda m: f"s{int(m[2]) + 1}.pathway{_PATHWAY[m[1]]}_res{m[3]}.branch1_bn.{m[4]}",
    ),
    # SlowFastHead: fc_cls over cat(fast, slow); `fit` puts its columns in our order (slow first).
    (r"cls_head\.fc_cls\.(\w+)", lambda m: f"head.projection.{m[1]}"),
)
SAME_NAMES = ((r"(.+)", lambda m: m[1]),)
# epic-kitchens-slowfast: PySlowFast's names; its two projections keep theirs until `fit`
EPIC_SLOWFAST_RULES = (
    (r"head\.projection_(verb|noun)\.(weight|bias)", r"head.projection_\1.\2"),
    *SAME_NAMES,
)
RULES = {  # (zoo layout name, family) -> rules
    ("pyslowfast", "slowfast"): SAME_NAMES,
    ("pyslowfast", "x3d"): SAME_NAMES,
    ("pyslowfast-caffe2", "slowfast"): CAFFE2_SLOWFAST_RULES,
    ("pytorchvideo", "slowfast"): PYTORCHVIDEO_SLOWFAST_RULES,
    ("pytorchvideo", "x3d"): PYTORCHVIDEO_X3D_RULES,
    ("mmaction2", "x3d"): MMACTION2_X3D_RULES,
    ("mmaction2", "slowfast"): MMACTION2_SLOWFAST_RULES,
    ("epic-kitchens", "slowfast"): EPIC_SLOWFAST_RULES,
}
# A key only that family has, in any layout (ours = PySlowFast's, Caffe2, pytorchvideo, mmaction2).
_FAMILY_KEYS = {
    "slowfast": r"s1\.pathway1_stem\.|t_conv1_w|blocks\.0\.multipathway_blocks\.1\."
    r"|backbone\.(fast|slow)_path\.",
    "x3d": r"s1\.pathway0_stem\.conv_xy\.|conv1_xy_w|blocks\.0\.conv\.conv_xy\."
    r"|backbone\.conv1_s\.",
}


def family(names):
    """ "slowfast", "x3d" or None: which network a checkpoint's keys (any layout) belong to."""
    return next(
        (f for f, key in _FAMILY_KEYS.items() if any(re.match(key, k) for k in names)), None
    )


def family_of(arch):
    return (
        "slowfast" if arch in slowfast_net.SLOWFAST else "x3d" if arch in slowfast_net.X3D else None
    )


def rules(arch, zoo_name, names, src):
    """The rename rules for a `zoo_name` file of keys `names` into `arch`; ValueError (one line)
    when the file holds another network."""
    want, have = family_of(arch), family(names)
    others = [a for a in slowfast_net.SLOWFAST if have == "slowfast"] or list(slowfast_net.X3D)
    if have is None:
        raise ValueError(
            f"--pretrained {src}: not a SlowFast / X3D checkpoint ({zoo_name} layout); "
            f"--arch {arch} takes PySlowFast, pytorchvideo, mmaction2"
            f"{' or Caffe2' if want == 'slowfast' else ''} {want} files"
        )
    if have != want:
        name = {"slowfast": "a SlowFast", "x3d": "an X3D"}[have]
        raise ValueError(
            f"--pretrained {src}: {name} checkpoint ({zoo_name} layout), not {arch}'s network: "
            f"use --arch {' / '.join(others)}"
        )
    if (zoo_name, have) not in RULES:
        raise ValueError(
            f"--pretrained {src}: a {zoo_name} file of {have}; {arch} loads {have} from "
            f"{', '.join(z for z, f in RULES if f == have)} files"
        )
    return RULES[(zoo_name, have)]


def file_variant(spec, state, zoo_name, src):
    """The SlowFast variant (slowfast_net.VARIANTS) whose network a file of `zoo_name` layout holds:
    mmaction2's for its files (with lateral_norm where its laterals have BN), for ours without the
    laterals' BN mmaction2's, PySlowFast's otherwise (or mmaction2_lateral_norm if the flag says so:
    the frames are not in the weights); the ModelSpec's own where the file is no SlowFast (refused
    when loaded). ValueError (one line): a --slowfast-variant that is not the file's."""
    if family(state) != "slowfast":
        return spec.slowfast_variant
    if zoo_name == "mmaction2":
        normed = any(re.match(r"backbone\.slow_path\.\w+_lateral\.bn\.", k) for k in state)
        fits = ["mmaction2_lateral_norm"] if normed else ["mmaction2"]
    elif "s1_fuse.conv_f2s.weight" in state and "s1_fuse.bn.weight" not in state:
        fits = ["mmaction2"]  # PySlowFast's names: ours, trained as mmaction2's network
    else:
        fits = ["pyslowfast", "mmaction2_lateral_norm"]
    if spec.slowfast_variant in (None, *fits):
        return spec.slowfast_variant or fits[0]
    raise ValueError(
        f"--pretrained {src}: {fits[0]}'s SlowFast network ({zoo_name} layout), not "
        f"--slowfast-variant {spec.slowfast_variant}'s: leave the flag out (the file's network "
        f"is built) or give --slowfast-variant {' / '.join(fits)}"
    )


def signature(state):
    """What the weights fix of a SlowFast / X3D network (our names): blocks per stage, the stem's
    width, the laterals' kernel, the non-local and the temporal blocks."""
    blocks = tuple(
        len({m[1] for k in state if (m := re.match(rf"s{s}\.pathway0_res(\d+)\.", k))})
        for s in (2, 3, 4, 5)
    )
    fast_blocks = tuple(
        len({m[1] for k in state if (m := re.match(rf"s{s}\.pathway1_res(\d+)\.", k))})
        for s in (2, 3, 4, 5)
    )
    nonlocal_ = tuple(
        tuple(
            sorted(
                {int(m[1]) for k in state if (m := re.match(rf"s{s}\.pathway0_nonlocal(\d+)\.", k))}
            )
        )
        for s in (2, 3, 4, 5)
    )
    lateral = state.get("s1_fuse.conv_f2s.weight")
    stem = state.get("s1.pathway0_stem.conv_xy.weight", state.get("s1.pathway0_stem.conv.weight"))
    res4_kt = tuple(
        state[f"s4.pathway{p}_res{i}.branch2.a.weight"].shape[2]
        for p in (0, 1)
        for i in range(blocks[2])
        if f"s4.pathway{p}_res{i}.branch2.a.weight" in state
    )
    return (
        blocks,
        None if stem is None else stem.shape[0],
        None if lateral is None else lateral.shape[2],
        nonlocal_,
        res4_kt,
        fast_blocks,
    )


def check(model, state, src):
    """Refuse (one line) weights of another SlowFast / X3D than `model`, naming the archs that
    fit."""
    arch = model.arch
    want = signature(model.state_dict())
    got = signature(state)
    if got == want:
        # Only the classifier may be missing (another num_classes): X3D's head.conv_5 / lin_5 not.
        missing = [
            k
            for k in model.state_dict()
            if k not in state
            and not k.startswith("head.projection.")
            and not k.endswith("num_batches_tracked")
        ]
        if missing:
            raise ValueError(
                f"--pretrained {src}: {len(missing)} tensors of {arch} are not in the file "
                f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
            )
        return
    variant = getattr(model, "slowfast_variant", None)
    fits = [
        a
        for a in (slowfast_net.SLOWFAST if family_of(arch) == "slowfast" else slowfast_net.X3D)
        if a != arch and _spec_signature(a, variant) == got
    ]
    what = f"blocks per stage {got[0]}, stem width {got[1]}"
    if family_of(arch) == "slowfast":
        what += f", lateral kernel {got[2]}, non-local after {got[3]}"
        what += f", fast blocks {got[5]}" if got[5] != got[0] else ""
    hint = f": use --arch {' / '.join(fits)}" if fits else ": no arch here has that network"
    raise ValueError(
        f"--pretrained {src}: weights of another {family_of(arch)} network than {arch} "
        f"({what}; {arch} has {want[0]}, {want[1]}{', ' + str(want[2]) if want[2] else ''}){hint}"
    )


_SIGNATURES = {}


def _spec_signature(arch, variant=None):
    """signature() of a fresh `arch` as `variant` builds it (built once, on the meta device: no
    memory, no init cost)."""
    if (arch, variant) not in _SIGNATURES:
        with torch.device("meta"):
            if arch in slowfast_net.SLOWFAST:
                net = slowfast_net.SlowFast(slowfast_net.variant(arch, variant), 1)
            else:
                net = slowfast_net.X3DNet(slowfast_net.X3D[arch], 1)
            _SIGNATURES[(arch, variant)] = signature(net.state_dict())
    return _SIGNATURES[(arch, variant)]


def fit(model, state, layout):
    """Tensors that another layout keeps in another form, made ours (same numbers):
    - mmaction2's X3D head fc1 is an nn.Linear where PySlowFast's lin_5 is a 1x1x1 conv: viewed.
    - mmaction2's SlowFast classifier takes the fast pathway's features first: columns swapped.
    - epic-kitchens-slowfast's two projections (verb, noun) are one, their rows stacked.
    - pytorchvideo's X3D has no BN on a shortcut that keeps the channels (create_x3d_res_block:
      branch1_norm only when dim_in != dim_out; res2's first block strides 24 -> 24), PySlowFast's
      has one: an identity BN there (weight 1, bias 0, mean 0, var 1 - eps) computes its network."""
    ours = model.state_dict()
    w, dst = state.get("head.lin_5.weight"), ours.get("head.lin_5.weight")
    if w is not None and dst is not None and w.dim() == 2 and w.numel() == dst.numel():
        state["head.lin_5.weight"] = w.view(dst.shape)
    w = state.get("head.projection.weight")
    if layout == "mmaction2" and w is not None and isinstance(model, slowfast_net.SlowFast):
        # SlowFastHead's fc_cls reads cat(fast, slow), ours cat(slow, fast): the same columns
        # swapped. A file of another width keeps its shape (and is refused by its other tensors).
        C, C_fast = model.head.projection.in_features, model.head.fast_channels
        if w.shape[1] == C:
            state["head.projection.weight"] = torch.cat([w[:, C_fast:], w[:, :C_fast]], 1)
    if layout == "epic-kitchens":
        return one_projection(state)
    if layout != "pytorchvideo":
        return state
    for k in [k for k in state if k.endswith(".branch1.weight")]:
        bn = k.replace(".branch1.weight", ".branch1_bn.")
        if bn + "weight" in ours and bn + "weight" not in state:
            C, eps = state[k].shape[0], model.get_submodule(bn[:-1]).eps
            one = state[k].new_ones(C)
            state.update({bn + "weight": one, bn + "bias": one * 0, bn + "running_mean": one * 0})
            state[bn + "running_var"] = one - eps
    return state


def one_projection(state):
    """epic-kitchens-slowfast's head_helper.ResNetBasicHead: projection_verb and projection_noun,
    both over the pooled features -> head.projection, the verb rows first (--heads 97 300's column
    blocks: the same logits, concatenated)."""
    for leaf in ("weight", "bias"):
        verb = state.pop(f"head.projection_verb.{leaf}")
        noun = state.pop(f"head.projection_noun.{leaf}")
        assert verb.shape[1:] == noun.shape[1:], (verb.shape, noun.shape)
        state[f"head.projection.{leaf}"] = torch.cat([verb, noun])
    return state
