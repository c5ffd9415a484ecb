"""One path for a weights file (weights.py reads it once, zoo.LAYOUTS recognises it, its family
loads it) and the refusals that name the fix. The networks are tiny or on the meta device."""

import sys
from unittest import mock

import pytest
import torch

import checkpoint
import model as models
import train
import vjepa_zoo
import weights
import zoo
from conftest import one_line_error, run_cli

FAMILY_MODULES = {"vit_zoo", "vjepa_zoo", "slowfast_zoo", "mvit_net"}


def save(tmp_path, obj, name="w.pth"):
    torch.save(obj, tmp_path / name)
    return str(tmp_path / name)


def refusal(net, path, **kw):
    with pytest.raises(ValueError) as e:
        zoo.load_pretrained(net, path, **kw)
    return one_line_error(str(e.value))


def readers(fn):
    """The family modules whose functions run while fn() loads a file, and how often the file is
    read (checkpoint.load)."""
    entered, real = set(), checkpoint.load

    def prof(frame, event, arg):
        name = frame.f_globals.get("__name__")
        if event == "call" and name in FAMILY_MODULES:
            entered.add(name)

    with mock.patch.object(checkpoint, "load", side_effect=real) as load:
        sys.setprofile(prof)
        try:
            fn()
        finally:
            sys.setprofile(None)
    return entered, load.call_count


@pytest.mark.parametrize(
    "arch, family",
    [("resnet10_3d", set()), ("vit_t16", {"vit_zoo"}), ("vjepa2_vitt16", {"vjepa_zoo"})],
)
def test_a_file_is_read_once_and_only_its_familys_reader_runs(tmp_path, capsys, arch, family):
    """The table decides: a ResNet file never enters the ViT reader, a ViT file never the SlowFast
    one (before: each family's reader asked the others whether the file was theirs)."""
    with torch.device("meta"):
        net = models.build_network(arch, 5, t_length=4, crop_size=32)
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in net.state_dict().items()}
    if arch.startswith("vjepa"):
        state = {"target_encoder": {k: v for k, v in state.items() if not k.startswith("head.")}}
    path = save(tmp_path, state)
    entered, reads = readers(lambda: zoo.load_pretrained(net, path))
    assert entered == family and reads == 1, (entered, reads)
    assert capsys.readouterr().out.startswith(f"pretrained {path} (")


def test_every_layout_names_a_family_and_a_family_fits_archs():
    for lay in zoo.LAYOUTS:
        assert lay.family in ("", *zoo.FAMILIES), lay
    fits = {f: [a for a in models.ARCHS if fam.fits(a)] for f, fam in zoo.FAMILIES.items()}
    assert "mvitv2_b" in fits["mvit"] and "vit_t16" in fits["videomae"]
    assert "vjepa2_vitl16" in fits["vjepa"] and "x3d_xs" in fits["x3d"] and not fits["probe"]
    assert zoo.family_of("resnet50_3d") == "resnet" and zoo.family_of("slowfast_r50_8x8") == (
        "slowfast"
    )


def test_a_file_no_layout_recognises_names_the_closest(tmp_path):
    """mmaction2 names for the blocks, but no patch embedding: the refusal says which layouts come
    closest rather than another family's reason."""
    with torch.device("meta"):
        net = models.build_network("vit_t16", 5, t_length=4, crop_size=32)
    z = torch.zeros(2)
    path = save(tmp_path, {"backbone.blocks.0.norm1.weight": z, "something.else": z})
    msg = refusal(net, path)
    assert "no known layout (2 tensors" in msg and "1 of 2 names are mmaction2 videomae's" in msg


# torchvision's MViT names -> mmaction2's (mmaction/models/backbones/mvit.py, heads/mvit_head.py):
# the inverse of mvit_net.MMACTION2_RULES, written out to check them
TO_MMACTION2 = (
    (r"conv_proj\.(\w+)", r"backbone.patch_embed.projection.\1"),
    (r"pos_encoding\.class_token", "backbone.cls_token"),
    (r"blocks\.(\d+)\.attn\.project\.0\.(\w+)", r"backbone.blocks.\1.attn.proj.\2"),
    (r"blocks\.(\d+)\.attn\.pool_(\w)\.pool\.weight", r"backbone.blocks.\1.attn.pool_\2.weight"),
    (r"blocks\.(\d+)\.attn\.pool_(\w)\.norm_act\.0\.(\w+)", r"backbone.blocks.\1.attn.norm_\2.\3"),
    (r"blocks\.(\d+)\.mlp\.0\.(\w+)", r"backbone.blocks.\1.mlp.fc1.\2"),
    (r"blocks\.(\d+)\.mlp\.3\.(\w+)", r"backbone.blocks.\1.mlp.fc2.\2"),
    (r"blocks\.(\d+)\.project\.(\w+)", r"backbone.blocks.\1.proj.\2"),
    (r"(blocks\..+)", r"backbone.\1"),
    (r"norm\.(\w+)", r"backbone.norm3.\1"),
    (r"head\.1\.(\w+)", r"cls_head.fc_cls.\1"),
)


def as_mmaction2(net):
    """An mvitv2_b's state dict as mmaction2's .pth holds it (the class token (1, 1, C))."""
    state, _, left = weights.convert(net.state_dict(), TO_MMACTION2)
    assert not left, left
    state["backbone.cls_token"] = state["backbone.cls_token"].reshape(1, 1, -1)
    return state


def test_an_mmaction2_mvit_file_loads_into_mvitv2_b_and_is_refused_by_a_vit(tmp_path, capsys):
    """Every tensor renamed back and copied; for a ViT arch the refusal names mvitv2_b (before:
    "a ViT file ... 7 px patches")."""
    import mvit_net

    # every block of MViTv2-B, a sixth of its width (as test_mvit.py): seconds, not minutes
    narrow = mvit_net.MVITS["mvitv2_b"]._replace(embed_dim=16)
    with mock.patch.dict(mvit_net.MVITS, {"mvitv2_b": narrow}):
        net = models.build_network("mvitv2_b", 5, t_length=4, crop_size=64)
        path = save(tmp_path, {"state_dict": as_mmaction2(net), "meta": {}})
        other = models.build_network("mvitv2_b", 5, t_length=4, crop_size=64)
        zoo.load_pretrained(other, path)
    line = capsys.readouterr().out
    assert f"pretrained {path} (mmaction2, 3D): inflated 0, copied {len(net.state_dict())}" in line
    assert all(torch.equal(v, other.state_dict()[k]) for k, v in net.state_dict().items())
    assert other.pretrained_info["mean"] == (0.45, 0.45, 0.45)
    with torch.device("meta"), mock.patch.dict(mvit_net.MVITS, {"mvitv2_b": narrow}):
        vit = models.build_network("vit_t16", 5, t_length=4, crop_size=32)
        msg = refusal(vit, path)
    assert "7 px patches" not in msg and "(mmaction2 layout)" in msg, msg
    assert "use --arch mvitv2_b" in msg, msg


def test_an_mvit_file_of_other_clips_names_t_length(tmp_path):
    """PySlowFast's 32x3 file at the default --t_length 16: the length its tables imply."""
    with torch.device("meta"):
        net = models.build_network("mvitv2_b", 5, t_length=32, crop_size=224)
        short = models.build_network("mvitv2_b", 5, t_length=16, crop_size=224)
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in net.state_dict().items()}
    path = save(tmp_path, {"state_dict": as_mmaction2_meta(state)})
    msg = refusal(short, path)
    assert "trained on 32x224x224 clips" in msg and msg.endswith("give --t_length 32"), msg


def as_mmaction2_meta(state):
    out, _, left = weights.convert(state, TO_MMACTION2)
    assert not left
    return out


def test_vjepa_and_videomae_files_name_the_arch_of_the_other_family(tmp_path):
    with torch.device("meta"):
        vit = models.build_network("vit_t16", 5, t_length=4, crop_size=32)
        vj = models.build_network("vjepa2_vitt16", 5, t_length=4, crop_size=32)
    z = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in vit.state_dict().items()}
    msg = refusal(vj, save(tmp_path, {"model": z}, "videomae.pth"))
    assert "not a V-JEPA 2 encoder; give --arch vit_t16" in msg, msg
    enc = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in vj.state_dict().items()}
    enc = {k: v for k, v in enc.items() if not k.startswith("head.")}
    msg = refusal(vit, save(tmp_path, {"target_encoder": enc}, "vitt.pt"))
    assert "V-JEPA 2 encoder" in msg and "give --arch vjepa2_vitt16" in msg, msg


def test_a_vit_file_with_a_block_missing_is_described_with_its_depth(tmp_path):
    with torch.device("meta"):
        vit = models.build_network("vit_t16", 5, t_length=4, crop_size=32)
    z = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in vit.state_dict().items()}
    z = {k: v for k, v in z.items() if not k.startswith("blocks.1.")}
    msg = refusal(vit, save(tmp_path, z))
    depth = vit.spec.depth
    assert f"{depth} blocks (1 missing)" in msg and "(--arch vit_t16)" not in msg, msg


def test_a_probe_of_another_depth_names_probe_blocks(tmp_path):
    import vjepa

    theirs = vjepa.AttentiveClassifier(64, 5, heads=4, depth=2).state_dict()
    path = save(tmp_path, {"classifiers": [{"module." + k: v for k, v in theirs.items()}]})
    head = vjepa.AttentiveClassifier(64, 5, heads=4, depth=4)
    with pytest.raises(ValueError) as e:
        vjepa_zoo.load_probe(head, path)
    one_line_error(str(e.value), "2 blocks", "give --probe-blocks 2")


def test_vjepa_key_is_refused_where_it_picks_nothing(tmp_path, capsys):
    """A file with one encoder (a train.py checkpoint; a transformers folder alike)."""
    with torch.device("meta"):
        vj = models.build_network("vjepa2_vitt16", 5, t_length=4, crop_size=32)
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in vj.state_dict().items()}
    path = save(tmp_path, {"model": state, "args": {"arch": "vjepa2_vitt16"}})
    msg = refusal(vj, path, vjepa_key="encoder")
    assert "train.py checkpoint, which holds one encoder" in msg and "leave the flag out" in msg


def test_a_random_pkl_gives_this_projects_reason(tmp_path):
    (tmp_path / "w.pkl").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError) as e:
        checkpoint.load(str(tmp_path / "w.pkl"), "--pretrained")
    msg = one_line_error(str(e.value), "w.pkl: cannot read it as a torch checkpoint")
    assert "weights_only" not in msg and "likely succeed" not in msg, msg


def test_trust_checkpoint_warns_once_naming_the_file(tmp_path, capsys):
    path = save(tmp_path, {"model": {}})
    with mock.patch.dict(checkpoint.TRUST, {"on": True, "warned": set()}):
        checkpoint.load(path)
        checkpoint.load(path)
    err = one_line_error(capsys.readouterr().err, "--trust-checkpoint", path)
    assert err.startswith("warning:")


def test_a_folders_weights_file_reads_the_config_beside_it(tmp_path):
    """FOLDER/model.safetensors is FOLDER: the same tensors, config.json read."""
    import safetensors.torch

    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "videomae", "layer_norm_eps": 2e-5}')
    safetensors.torch.save_file({"a": torch.ones(2)}, str(folder / "model.safetensors"))
    by_folder = weights.read(str(folder))
    by_file = weights.read(str(folder / "model.safetensors"))
    assert by_file.config == by_folder.config == {"model_type": "videomae", "layer_norm_eps": 2e-5}
    assert by_file.folder == by_folder.folder == str(folder) and by_file.wrapper == "folder"
    assert torch.equal(by_file.state["a"], by_folder.state["a"])


def test_make_model_reads_a_pretrained_file_once(tmp_path, capsys):
    """train.make_model's --pretrained path: one read of the file."""
    net = models.build_network("resnet10_3d", 5)
    path = save(tmp_path, {"state_dict": net.state_dict()})
    args = train.parse_args(["x", "a", "b", "--arch", "resnet10_3d", "--num_classes", "5"])
    args.pretrained = path
    _, reads = readers(lambda: train.make_model(args))
    assert reads == 1


@pytest.mark.slow  # train.py subprocesses
def test_vjepa_key_for_a_convnet_is_refused_before_any_work():
    r = run_cli(["ucf101", "no.txt", "no.txt", "--arch", "resnet18_3d", "--vjepa-key", "encoder"])
    assert r.returncode == 2
    one_line_error(r.stderr, "--vjepa-key encoder", "--arch resnet18_3d is no V-JEPA 2 encoder")


@pytest.mark.slow  # train.py subprocesses
def test_refusals_are_one_line_from_the_command_line(tmp_path):
    """train.py's check_weights, before any list is read: a random-bytes .pkl (this project's
    reason, not torch's weights_only advice) and a VideoMAE file for a V-JEPA 2 arch (its arch)."""
    (tmp_path / "w.pkl").write_bytes(bytes(range(256)) * 4)
    r = run_cli(["ucf101", "no.txt", "no.txt", "--pretrained", str(tmp_path / "w.pkl")])
    assert r.returncode == 2
    err = one_line_error(r.stderr, "w.pkl: cannot read it as a torch checkpoint")
    assert "weights_only" not in err, err
    vit = models.build_network("vit_t16", 5, t_length=16, crop_size=32)
    path = save(tmp_path, {"model": vit.state_dict()}, "videomae.pth")
    argv = ["ucf101", "no.txt", "no.txt", "--arch", "vjepa2_vitt16", "--pretrained", path]
    r = run_cli(argv + ["--crop_size", "32"])
    assert r.returncode == 2
    one_line_error(r.stderr, "videomae.pth", "give --arch vit_t16")
