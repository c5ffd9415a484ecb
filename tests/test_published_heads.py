"""The published checkpoints of multi-label and two-head models load exactly: PySlowFast's Charades
SlowFast, the EPIC-Kitchens team's EPIC-100 SlowFast and TSM.

Nothing is downloaded: each reference network is built from its authors' code with random weights
and saved as their training code saves a checkpoint (the same top-level keys and prefixes), then
read through --pretrained; the logits are compared in float64 on the same clip.
- Charades: PySlowFast's own code (tests/reference/pyslowfast) with configs/Charades/*.yaml.
- EPIC-100 SlowFast: epic-kitchens/epic-kitchens-slowfast (commit bf50519) is CC BY-NC-SA and is
  not vendored; its network is PySlowFast's with one head changed (slowfast/models/head_helper.py
  ResNetBasicHead with MODEL.NUM_CLASSES [97, 300]: projection_verb, projection_noun), rebuilt here
  on the vendored PySlowFast SlowFast (EpicHead).
- EPIC-100 TSM: epic-kitchens/C1-Action-Recognition-TSN-TRN-TSM (commit e8e1a79) is CC BY-NC and
  needs Lightning; its TSM (src/models/tsm.py, src/ops/temporal_shift.py, src/ops/basic_ops.py) is
  rebuilt here on torchvision's ResNet (EpicTSM), and its Lightning checkpoint as
  pytorch_lightning 1.1.8 (its environment.yml) writes one.
"""

import collections
import re
import sys
import types
import typing

import pytest
import torch
import torch.nn as nn
import torchvision

import zoo
from conftest import RUN_SLOW, one_line_error, randomise_zoo, run_main, write_frames, write_list

pytest.importorskip("pytorchvideo")  # the vendored PySlowFast imports its layers
from test_slowfast import REF, get_cfg, slowfast_net_pack, video_model_builder  # noqa: E402


def max_rel_diff(got, want):
    """The largest difference over the largest logit: printed, and asserted ~1e-12 in float64."""
    d = ((got - want).abs().max() / want.abs().max()).item()
    print(f"max |ours - theirs| / max |theirs| = {d:.2e}")
    return d


def clip(frames, crop, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, frames, crop, crop, dtype=torch.float64, generator=g)


def logits(net, x):
    with torch.no_grad():
        return net.double().eval()(x)


def float32_values(net):
    """Float32 values in a float64 network, as the published files hold them: the float32 model a
    file loads into is then exact, and the float64 comparison measures the computation alone."""
    for t in net.state_dict().values():
        if t.is_floating_point():
            t.copy_(t.float().double())
    return net


# ---- PySlowFast: Charades -----------------------------------------------------------------------
def pyslowfast_slowfast(yaml, frames, crop, classes):
    """PySlowFast's SlowFast from its defaults + the yaml (sizes shrunk), random float32 values."""
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / yaml))
    cfg.NUM_GPUS, cfg.MODEL.NUM_CLASSES = 0, classes
    cfg.DATA.NUM_FRAMES, cfg.DATA.TRAIN_CROP_SIZE = frames, crop
    # Charades' BN.NORM_TYPE sync_batchnorm: NaiveSyncBatchNorm3d, a BatchNorm3d that syncs in
    # training only (the same names and eval numbers); the installed pytorchvideo's takes no
    # num_sync_devices, so the plain BN it subclasses
    cfg.BN.NORM_TYPE = "batchnorm"
    torch.manual_seed(0)
    ref = float32_values(randomise_zoo(video_model_builder.SlowFast(cfg).double()))
    ref.head.act = None  # eval mode ends in MODEL.HEAD_ACT (Charades: sigmoid): the logits before
    return cfg, ref


def pyslowfast_checkpoint(ref, cfg, epoch):
    """slowfast/utils/checkpoint.py save_checkpoint's dict (float32 weights, as trained)."""
    sd = {k: v.float() if v.is_floating_point() else v for k, v in ref.state_dict().items()}
    optimizer = torch.optim.SGD(ref.parameters(), lr=0.0375, momentum=0.9)
    return {
        "epoch": epoch,
        "model_state": sd,
        "optimizer_state": optimizer.state_dict(),
        "cfg": cfg.dump(),
    }


@pytest.mark.slow
@pytest.mark.parametrize("yaml", ["SLOWFAST_16x8_R50.yaml", "SLOWFAST_16x8_R50_multigrid.yaml"])
def test_charades_slowfast_loads_exactly(tmp_path, capsys, yaml):
    """MODEL_ZOO.md's Charades files (SLOWFAST_16x8_R50.pkl: a torch pickle, legacy format, named
    .pkl) into --arch slowfast_r50_16x8 with 157 classes (--dataset charades)."""
    cfg, ref = pyslowfast_slowfast(f"Charades/{yaml}", 8, 64, 157)
    path = tmp_path / yaml.replace(".yaml", ".pkl")
    torch.save(pyslowfast_checkpoint(ref, cfg, 56), path, _use_new_zipfile_serialization=False)
    net = zoo.build_model("slowfast_r50_16x8", 157, pretrained=str(path))
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"({'pyslowfast'}, 3D)" in line and "skipped 0" in line, line
    # DATA.REVERSE_INPUT_CHANNEL: its loader's cv2 frames (BGR) are reversed: the model sees RGB
    x = clip(8, 64)
    want = logits(ref, slowfast_net_pack(cfg, x))
    assert max_rel_diff(logits(net, x), want) < 1e-10


# ---- epic-kitchens-slowfast: EPIC-100 -----------------------------------------------------------
class EpicHead(nn.Module):
    """epic-kitchens-slowfast's slowfast/models/head_helper.py ResNetBasicHead with a list of
    classes, rebuilt: each pathway average-pooled (over the whole clip at the training size),
    concatenated, dropout, projection_verb and projection_noun; in eval mode each softmaxed and
    returned as (verb, noun); here the logits before the softmax."""

    def __init__(self, dim_in, num_classes, pool_size, dropout_rate):
        super().__init__()
        self.num_pathways = len(pool_size)
        for pathway in range(self.num_pathways):
            avg_pool = nn.AvgPool3d(pool_size[pathway], stride=1)
            self.add_module("pathway{}_avgpool".format(pathway), avg_pool)
        if dropout_rate > 0.0:
            self.dropout = nn.Dropout(dropout_rate)
        self.projection_verb = nn.Linear(sum(dim_in), num_classes[0], bias=True)
        self.projection_noun = nn.Linear(sum(dim_in), num_classes[1], bias=True)

    def forward(self, inputs):
        pool_out = [getattr(self, f"pathway{p}_avgpool")(inputs[p]) for p in range(len(inputs))]
        x = torch.cat(pool_out, 1).permute((0, 2, 3, 4, 1))
        if hasattr(self, "dropout"):
            x = self.dropout(x)
        x_v, x_n = self.projection_verb(x), self.projection_noun(x)
        return x_v.mean([1, 2, 3]), x_n.mean([1, 2, 3])


def epic_slowfast(frames, crop, heads):
    """PySlowFast's SlowFast R50 8x8 (configs/EPIC-KITCHENS/SLOWFAST_8x8_R50.yaml is the Kinetics
    SLOWFAST_8x8_R50 network: alpha 4, beta 8, fusion kernel 7) with EpicHead."""
    cfg, ref = pyslowfast_slowfast("Kinetics/SLOWFAST_8x8_R50.yaml", frames, crop, 5)
    pool = [p.kernel_size for p in (ref.head.pathway0_avgpool, ref.head.pathway1_avgpool)]
    ref.head = EpicHead([2048, 256], heads, pool, 0.5)
    torch.manual_seed(1)
    randomise_zoo(ref.head.double())
    return cfg, float32_values(ref.eval())


@pytest.mark.slow
def test_epic_slowfast_loads_exactly_its_heads_one_fc_and_its_bgr_frames(tmp_path, capsys):
    cfg, ref = epic_slowfast(8, 64, (97, 300))
    path = tmp_path / "SlowFast.pyth"  # their checkpoint.py save_checkpoint: the same dict
    torch.save(pyslowfast_checkpoint(ref, cfg, 29), path)
    net = zoo.build_model("slowfast_r50_8x8", 397, pretrained=str(path))
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "(epic-kitchens, 3D)" in line and "skipped 0" in line, line
    assert net.pretrained_info["heads"] == (97, 300)
    x = clip(8, 64)
    # their frame_loader reads cv2.imread's BGR frames and feeds them as they are
    verb, noun = logits(ref, slowfast_net_pack(cfg, x.flip(1)))
    got = logits(net, x)
    assert max_rel_diff(got, torch.cat([verb, noun], 1)) < 1e-10
    # the same file fed without reversing the channels is another network: the flip is needed
    assert max_rel_diff(logits(net, x.flip(1)), torch.cat([verb, noun], 1)) > 1e-6


# ---- C1-Action-Recognition-TSN-TRN-TSM: EPIC-100 TSM --------------------------------------------
class TemporalShift(nn.Module):
    """src/ops/temporal_shift.py TemporalShift (inplace False), rebuilt: wraps a conv as `.net`."""

    def __init__(self, net, n_segment=3, n_div=8):
        super().__init__()
        self.net, self.n_segment, self.fold_div = net, n_segment, n_div

    def forward(self, x):
        nt, c, h, w = x.size()
        x = x.view(nt // self.n_segment, self.n_segment, c, h, w)
        fold = c // self.fold_div
        out = torch.zeros_like(x)
        out[:, :-1, :fold] = x[:, 1:, :fold]  # shift left
        out[:, 1:, fold : 2 * fold] = x[:, :-1, fold : 2 * fold]  # shift right
        out[:, :, 2 * fold :] = x[:, :, 2 * fold :]  # not shift
        return self.net(out.view(nt, c, h, w))


class EpicTSM(nn.Module):
    """src/models/tsm.py TSM (RGB, segment_length 1, consensus avg, before_softmax, shift_place
    blockres, no temporal pool, no non-local), rebuilt: base_model = torchvision's ResNet with each
    block's conv1 in a TemporalShift (make_temporal_shift: every block where layer3 has < 23),
    its fc a Dropout, new_fc the classifier; the segments' logits averaged."""

    def __init__(self, num_class, num_segments, base_model="resnet50", dropout=0.7, shift_div=8):
        super().__init__()
        self.num_segments = num_segments
        self.base_model = getattr(torchvision.models, base_model)()
        base = self.base_model
        for layer in (base.layer1, base.layer2, base.layer3, base.layer4):
            for b in layer.children():
                b.conv1 = TemporalShift(b.conv1, n_segment=num_segments, n_div=shift_div)
        feature_dim = self.base_model.fc.in_features
        self.base_model.fc = nn.Dropout(p=dropout)
        self.new_fc = nn.Linear(feature_dim, num_class)
        self.base_model.avgpool = nn.AdaptiveAvgPool2d(1)

    def forward(self, input):
        base_out = self.base_model(input.view((-1, 3) + input.size()[-2:]))
        base_out = self.new_fc(base_out)
        base_out = base_out.view((-1, self.num_segments) + base_out.size()[1:])
        return base_out.mean(dim=1).squeeze(1)


def lightning_checkpoint(tsm):
    """What pytorch_lightning 1.1.8's Trainer.save_checkpoint writes for
    EpicActionRecognitionSystem (its network as `self.model`): CheckpointConnector.dump_checkpoint's
    top-level keys, the weights under "state_dict" with the "model." prefix, the callbacks' states
    keyed by their classes, and the hyperparameters (save_hyperparameters(cfg)) as the omegaconf
    DictConfig with its type. Saved with save_lightning."""
    sd = {f"model.{k}": v.float() for k, v in tsm.state_dict().items() if v.is_floating_point()}
    sd.update({f"model.{k}": v for k, v in tsm.state_dict().items() if not v.is_floating_point()})
    optimizer = torch.optim.SGD(tsm.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [20, 40], 0.1)  # its Counter
    return {
        "epoch": 79,
        "global_step": 12345,
        "pytorch-lightning_version": "1.1.8",
        "callbacks": {LIGHTNING["ModelCheckpoint"]: {"best_model_score": torch.tensor(1.5)}},
        "optimizer_states": [optimizer.state_dict()],
        "lr_schedulers": [scheduler.state_dict()],
        "state_dict": sd,
        "hparams_name": "cfg",
        "hyper_parameters": dict_config({"modality": "RGB", "model": {"shift_div": 8}}),
        "hparams_type": LIGHTNING["DictConfig"],
    }


# omegaconf's and Lightning's classes (neither installed here) as a pickle names them: the globals
# a pickled omegaconf 2.0.1 DictConfig holds (checked with it: DictConfig, ContainerMetadata,
# Metadata, AnyNode, typing.Any, dict, list, int, collections.defaultdict) and ModelCheckpoint
MODULES = {
    "DictConfig": "omegaconf.dictconfig",
    "ContainerMetadata": "omegaconf.base",
    "Metadata": "omegaconf.base",
    "AnyNode": "omegaconf.nodes",
    "ModelCheckpoint": "pytorch_lightning.callbacks.model_checkpoint",
}
LIGHTNING = {name: type(name, (), {"__module__": m}) for name, m in MODULES.items()}


def dict_config(content, parent=None):
    """A DictConfig's fields as omegaconf 2.0 pickles them (__getstate__: its __dict__)."""
    node = LIGHTNING["DictConfig"]()
    meta = LIGHTNING["ContainerMetadata"]()
    meta.__dict__.update(ref_type=typing.Any, object_type=dict, optional=True, key=None, flags={})
    meta.__dict__.update(key_type=typing.Any, element_type=typing.Any)
    meta.resolver_cache = collections.defaultdict(dict)
    node.__dict__.update(_metadata=meta, _parent=parent, _content={})
    for k, v in content.items():
        if isinstance(v, dict):
            node._content[k] = dict_config(v, node)
        else:
            leaf = LIGHTNING["AnyNode"]()
            leaf_meta = LIGHTNING["Metadata"]()
            leaf_meta.__dict__.update(ref_type=typing.Any, object_type=None, optional=True, key=k)
            leaf.__dict__.update(_val=v, _metadata=leaf_meta, _parent=node)
            node._content[k] = leaf
    return node


def save_lightning(obj, path):
    """torch.save with the stand-ins importable under their modules' names (only while saving)."""
    added = []
    for name, cls in LIGHTNING.items():
        parts = cls.__module__.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            if module not in sys.modules:
                sys.modules[module] = types.ModuleType(module)
                added.append(module)
        setattr(sys.modules[cls.__module__], name, cls)
    try:
        torch.save(obj, path)
    finally:
        for module in added:
            del sys.modules[module]


def epic_tsm(base_model, segments, heads=(97, 300)):
    torch.manual_seed(0)
    tsm = EpicTSM(sum(heads), segments, base_model)
    return float32_values(randomise_zoo(tsm.double()))


def tsm_clip(segments, crop, seed=3):
    """Their input (B, T * 3, H, W) and ours (B, 3, T, H, W): the same frames."""
    x = clip(segments, crop, seed)  # (1, 3, T, H, W)
    return x.transpose(1, 2).reshape(1, segments * 3, crop, crop), x


def test_epic_layouts_map_every_name_and_the_heads():
    """The fast tier's check (meta tensors: names and shapes only): every name of their TSM-R50
    .ckpt and of their SlowFast .pyth becomes one of ours, of the same shape; the two projections
    become one classifier, the verb rows first."""
    import weights

    with torch.device("meta"):
        tsm = EpicTSM(397, 8, "resnet50")
        ours = zoo.models.build_network("resnet50", 397, mode="TSN", num_segments=8, shift=8)
        sf = zoo.models.build_network("slowfast_r50_8x8", 397)
    ckpt = {"state_dict": {f"model.{k}": v for k, v in tsm.state_dict().items()}, "epoch": 1}
    source = weights.from_dict(ckpt, "tsm_rgb.ckpt")
    lay = zoo.match(source)
    assert (lay.name, lay.family, lay.heads) == ("epic-kitchens", "resnet", (97, 300))
    state, unexpected = zoo.convert_state_dict(source.state, lay.rules)
    assert not unexpected and state.keys() == ours.state_dict().keys()
    assert all(v.shape == ours.state_dict()[k].shape for k, v in state.items())
    # SlowFast: PySlowFast's names, a projection per head (real numbers: their order is checked)
    state = {k: v for k, v in sf.state_dict().items() if not k.startswith("head.")}
    verb, noun = torch.randn(97, 2304), torch.randn(300, 2304)
    state.update({"head.projection_verb.weight": verb, "head.projection_noun.weight": noun})
    state.update({"head.projection_verb.bias": verb[:, 0], "head.projection_noun.bias": noun[:, 0]})
    source = weights.from_dict({"model_state": state, "cfg": ""}, "SlowFast.pyth")
    lay = zoo.match(source)
    assert (lay.name, lay.family, lay.heads, lay.bgr) == ("epic-kitchens", "slowfast", (97, 300), 1)
    assert zoo.file_heads(lay, source.state, "SlowFast.pyth") == (97, 300)
    one = zoo.slowfast_zoo.one_projection(dict(state))
    assert torch.equal(one["head.projection.weight"], torch.cat([verb, noun]))
    assert torch.equal(one["head.projection.bias"], torch.cat([verb[:, 0], noun[:, 0]]))
    # a TSM-R101 file shifting every other block (tsm.py's n_round 2): another network, refused
    with torch.device("meta"):
        r101 = zoo.models.build_network("resnet101", 397, mode="TSN", num_segments=8, shift=8)
    names = {f"model.base_model.{k}": v for k, v in r101.state_dict().items() if k != "fc.weight"}
    even = re.compile(r"(layer\d\.(\d+)\.conv1)\.")
    names = {
        even.sub(lambda m: m[1] + (".net." if int(m[2]) % 2 == 0 else "."), k): v
        for k, v in names.items()
    }
    names["model.new_fc.weight"] = r101.state_dict()["fc.weight"]
    source = weights.from_dict({"state_dict": names}, "tsm_r101.ckpt")
    shifting = r"tsm_r101.ckpt: a TSM checkpoint .* shifting 18 of its 33 blocks"
    with pytest.raises(ValueError, match=shifting):
        zoo.load_pretrained(r101, source)
    # a TSM file whose one fc is not 97 + 300 outputs: refused in one line naming it
    lay = zoo.match(weights.from_dict(ckpt, "tsm_rgb.ckpt"))
    wrong = {"model.new_fc.weight": torch.zeros(396, 2048)}
    with pytest.raises(
        ValueError, match=r"^--pretrained w.ckpt: epic-kitchens layout, whose .*396"
    ):
        zoo.file_heads(lay, wrong, "w.ckpt")


@pytest.mark.parametrize("yaml", ["SLOWFAST_16x8_R50.yaml", "SLOWFAST_16x8_R50_multigrid.yaml"])
def test_slowfast_r50_16x8_is_the_charades_configs_network(yaml):
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Charades" / yaml))
    spec = zoo.models.slowfast_net.SLOWFAST["slowfast_r50_16x8"]
    assert (spec.alpha, spec.beta_inv, spec.fusion_kernel, spec.fusion_ratio) == (
        cfg.SLOWFAST.ALPHA,
        cfg.SLOWFAST.BETA_INV,
        cfg.SLOWFAST.FUSION_KERNEL_SZ,
        cfg.SLOWFAST.FUSION_CONV_CHANNEL_RATIO,
    )
    assert spec.layers == (3, 4, 6, 3) and cfg.RESNET.DEPTH == 50
    assert spec.temporal_blocks == tuple(b[0] for b in cfg.RESNET.NUM_BLOCK_TEMP_KERNEL)
    assert cfg.MODEL.NUM_CLASSES == 157 and cfg.DATA.NUM_FRAMES == 64  # --t_length 64


@pytest.mark.slow
def test_epic_tsm_names_and_shift_exactly_resnet18(tmp_path, capsys):
    """Their TSM on a ResNet-18 (tsm.py takes any torchvision resnet): the Lightning .ckpt's names
    mapped and the shift placed as theirs, logits equal in float64."""
    ref = epic_tsm("resnet18", 4)
    path = tmp_path / "tsm_rgb.ckpt"
    save_lightning(lightning_checkpoint(ref), path)
    net = zoo.build_model(
        "resnet18", 397, mode="TSN", num_segments=4, t_length=1, shift=8, pretrained=str(path)
    )
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "(epic-kitchens, 2D)" in line and "skipped 0" in line, line
    assert net.pretrained_info["heads"] == (97, 300)
    assert net.pretrained_info["mean"] == net.pretrained_info["std"] == zoo.IMAGENET_MEAN
    theirs, ours = tsm_clip(4, 32)
    assert max_rel_diff(logits(net, ours), logits(ref, theirs)) < 1e-10
    # without --shift the file is refused, in one line naming it
    refused = "a TSM checkpoint .epic-kitchens layout, shifted convs.*--shift 8"
    with pytest.raises(ValueError, match=refused):
        zoo.build_model("resnet18", 397, mode="TSN", num_segments=4, pretrained=str(path))


@pytest.mark.slow
def test_epic_tsm_resnet50_loads_exactly(tmp_path):
    ref = epic_tsm("resnet50", 8)
    path = tmp_path / "tsm_rgb.ckpt"
    save_lightning(lightning_checkpoint(ref), path)
    net = zoo.build_model(
        "resnet50", 397, mode="TSN", num_segments=8, t_length=1, shift=8, pretrained=str(path)
    )
    theirs, ours = tsm_clip(8, 64)
    assert max_rel_diff(logits(net, ours), logits(ref, theirs)) < 1e-10


def test_wrong_heads_for_the_file_are_refused_in_one_line(tmp_path, capsys):
    """An EPIC-100 file's classifier is verbs then nouns: training with --heads of another split,
    or --evaluate with heads of another size, stops in one line naming the file (exit 2), before a
    step."""
    from test_multilabel import grey_frames

    path = tmp_path / "tsm_rgb.ckpt"
    save_lightning(lightning_checkpoint(epic_tsm("resnet18", 4)), path)
    videos = [grey_frames(tmp_path / f"v{k}", 8, size=(40, 36)) for k in range(2)]
    lst = write_list(tmp_path / "l.txt", [f"{v} 8 {k},{k + 5}" for k, v in enumerate(videos)])
    tsm = ["--arch", "resnet18", "--mode", "TSN", "--shift", "8", "--num_segments", "4"]
    common = ["x", str(lst), str(lst), *tsm, "--new_size", "36", "--crop_size", "32", "-b", "2"]
    common += ["--pretrained", str(path), "--device", "cpu", "--output_root", str(tmp_path / "o")]
    cases = [(["300", "97"], [], "--heads 300 97 reads it otherwise: give --heads 97 300")]
    if RUN_SLOW:  # --evaluate with heads of another sum: their classifier is still refused
        cases += [(["97", "299"], ["--evaluate"], "--heads 97 299 reads it otherwise")]
    for heads, evaluate, needle in cases:
        with pytest.raises(SystemExit) as e:
            run_main([*common, "--heads", *heads, *evaluate, "--workers", "0"])
        said = f"--pretrained {path}: its classifier is 2 heads of 97 + 300"
        one_line_error(capsys, said, needle, exc=e)


def evaluate(tmp_path, path, flags, labels, clips=1):
    """train.py --evaluate --pretrained PATH --save_scores on two random-colour videos: (the scores
    it saved, each video's normalised views (views, 3, T, H, W) in float64, as the run fed them)."""
    import numpy as np

    import train

    videos = [write_frames(tmp_path / f"v{k}", 16, size=(40, 36), seed=k) for k in range(2)]
    lst = write_list(tmp_path / "l.txt", [f"{v} 16 {lab}" for v, lab in zip(videos, labels)])
    argv = ["x", str(lst), str(lst), *flags, "--new_size", "36", "--crop_size", "32"]
    argv += ["--pretrained", str(path), "--evaluate", "--save_scores", "--device", "cpu"]
    argv += ["--test_clips", str(clips), "--workers", "0", "--output_root", str(tmp_path / "o")]
    run_main(argv)
    saved = np.load(next((tmp_path / "o").rglob("scores_*.npz")))["scores"]
    args = train.parse_args(argv)
    args.t_length = args.t_length or 1
    ds = train.make_dataset(args, lst, "test")
    mean, std = (torch.tensor(v, dtype=torch.float64).view(3, 1, 1, 1) for v in NORM[flags[1]])
    views = [(ds[k][0].double() / 255 - mean) / std for k in range(len(ds))]
    return torch.as_tensor(saved, dtype=torch.float64), views


# the normalisation each file expects, as its authors' loaders apply it (zoo.LAYOUTS' mean / std)
NORM = {
    "slowfast_r50_16x8": (zoo.KINETICS_MEAN, zoo.KINETICS_STD),
    "slowfast_r50_8x8": (zoo.KINETICS_MEAN, zoo.KINETICS_STD),
    "resnet18": (zoo.IMAGENET_MEAN, zoo.IMAGENET_MEAN),
}


def per_head(logits, heads=(97, 300)):
    return torch.cat([p.softmax(-1) for p in logits.split(list(heads), -1)], -1)


@pytest.mark.slow
def test_evaluate_pretrained_scores_the_charades_file_as_it_is(tmp_path):
    """--multi-label: each view's sigmoids, the views' maximum (PySlowFast's TEST ENSEMBLE_METHOD
    max)."""
    cfg, ref = pyslowfast_slowfast("Charades/SLOWFAST_16x8_R50.yaml", 8, 32, 157)
    path = tmp_path / "SLOWFAST_16x8_R50.pkl"
    torch.save(pyslowfast_checkpoint(ref, cfg, 56), path, _use_new_zipfile_serialization=False)
    flags = ["--arch", "slowfast_r50_16x8", "--t_length", "8", "--multi-label"]
    got, views = evaluate(tmp_path, path, [*flags, "--num_classes", "157"], ["3,17", "156"], 2)
    for k, x in enumerate(views):
        want = torch.sigmoid(logits(ref, slowfast_net_pack(cfg, x))).amax(0)
        assert max_rel_diff(got[k], want) < 1e-5  # the run computes in float32


@pytest.mark.slow
def test_evaluate_pretrained_scores_the_epic_slowfast_as_it_is(tmp_path):
    """--heads 97 300: a softmax a head, the views averaged; their network fed BGR frames."""
    cfg, ref = epic_slowfast(8, 32, (97, 300))
    path = tmp_path / "SlowFast.pyth"
    torch.save(pyslowfast_checkpoint(ref, cfg, 29), path)
    flags = ["--arch", "slowfast_r50_8x8", "--t_length", "8", "--heads", "97", "300"]
    got, views = evaluate(tmp_path, path, flags, ["3,17", "96,299"], 2)
    for k, x in enumerate(views):
        verb, noun = logits(ref, slowfast_net_pack(cfg, x.flip(1)))
        assert max_rel_diff(got[k], per_head(torch.cat([verb, noun], 1)).mean(0)) < 1e-5


@pytest.mark.slow
def test_evaluate_pretrained_scores_the_epic_tsm_as_it_is(tmp_path):
    """--heads 97 300 on the TSM file, normalised as it expects (mean = std = ImageNet's mean)."""
    ref = epic_tsm("resnet18", 4)
    path = tmp_path / "tsm_rgb.ckpt"
    save_lightning(lightning_checkpoint(ref), path)
    flags = ["--arch", "resnet18", "--mode", "TSN", "--shift", "8", "--num_segments", "4"]
    got, views = evaluate(tmp_path, path, [*flags, "--heads", "97", "300"], ["3,17", "96,299"])
    for k, x in enumerate(views):
        theirs = logits(ref, x.transpose(1, 2).reshape(x.shape[0], -1, *x.shape[-2:]))
        assert max_rel_diff(got[k], per_head(theirs).mean(0)) < 1e-5
