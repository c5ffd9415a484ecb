"""One place for each fact: the flags sort themselves by their argparse group (flags.FLAG_GROUPS),
and the archs are one registry (model.ARCHS). A flag or an arch added there reaches every use with
no other edit; these tests add one in a scratch copy and follow it."""

import pytest
import torch

import flags
import model as models
import predict
import train
from conftest import TINY, one_line_error, run_dir, run_main


def ungrouped(parser):
    """The flags of `parser` in none of flags.FLAG_GROUPS (argparse's own groups hold them)."""
    grouped = {a.dest for g in flags.FLAG_GROUPS for a in parser.groups[g.title].actions}
    return [a.dest for a in parser.actions if a.dest not in grouped and a.dest != "help"]


def test_every_flag_belongs_to_a_group():
    parser = train.get_args_parser()
    assert ungrouped(parser) == []
    parser.add_argument("--stray", help="a flag added with no group")  # what a forker might do
    assert ungrouped(parser) == ["stray"]
    parser.add_argument_group("mine").add_argument("--own", help="a flag in a group of its own")
    assert ungrouped(parser) == ["stray", "own"]
    for group in flags.FLAG_GROUPS:  # each group is in the parser, and holds flags
        assert parser.groups[group.title].actions, group.title


def test_the_lists_derived_from_the_groups():
    sets = flags.flag_sets()
    assert {"batch_size", "resume", "device", "test_clips", "pretrained"} <= sets.process
    assert not {"arch", "t_length", "image_tmpl", "mean", "test_sampling"} & sets.process
    assert {"arch", "t_length", "val_list", "amp", "use_ema"} <= set(sets.scores)
    assert not {"lr", "workers", "print_freq", "mixup_alpha"} & set(sets.scores)
    probing = {"probe", "probe_lrs", "probe_wds", "probe_blocks", "probe_heads"}
    model = {"arch", "num_classes", "multi_label", "heads", "mode", "shift", "slowfast_variant"}
    assert set(sets.kept) == model | probing
    assert {"t_length", "crop_size", "num_segments", "opt", "layer_decay", "fc_only"} <= set(
        sets.kept_training
    )
    assert sets.names["layer_decay"] == "--layer-decay" and sets.names["t_length"] == "--t_length"


def scratch_parser(real=train.get_args_parser):
    """train.py's parser with one more flag in the clips group, as a forker adds one."""
    parser = real()
    clips = parser.groups["clips"]
    clips.add_argument("--scratch", default=1, type=int, help="a flag added by a test")
    return parser


@pytest.mark.slow
def test_a_flag_added_to_a_group_reaches_evaluate_predict_and_the_file_names(
    lists, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(flags, "get_args_parser", scratch_parser)
    common = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*common, "--epochs", "1", "--scratch", "3"])
    folder = run_dir(tmp_path, common)
    ckpt = str(folder / "checkpoint.pth")
    assert torch.load(ckpt, weights_only=False)["args"]["scratch"] == 3
    # --evaluate and predict take it from the checkpoint, as every model and clip flag.
    assert train.parse_args([*common, "--evaluate", "--resume", ckpt]).scratch == 3
    assert predict.load_checkpoint(ckpt, "cpu", 1, 1)[1].scratch == 3
    # Its value names the evaluation files: another value is another file, the same value the same.
    for value in ("3", "5", "3"):
        run_main([*common, "--evaluate", "--resume", ckpt, "--scratch", value])
    assert len(list(folder.glob("per_class_1x1_ours_*.csv"))) == 2
    # A resumed training run keeps it, as it keeps the other clip flags.
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*common, "--epochs", "2", "--resume", ckpt, "--scratch", "5"])
    one_line_error(capsys, "--scratch 3, not 5", "cannot change", exc=e)


def scratch_group(p):
    p.add_argument("--scratch", default=1, type=int, help="a flag added by a test")


@pytest.mark.slow
def test_a_new_flags_group_keeps_it_on_resume_by_default(lists, tmp_path, monkeypatch, capsys):
    """The safe default: a flag in a new group that says nothing about resuming (FlagGroup's
    default) is kept, so a resume with another value is refused in one line, not run silently."""
    group = flags.FlagGroup("scratch", "a new group", scratch_group)
    monkeypatch.setattr(flags, "FLAG_GROUPS", (*flags.FLAG_GROUPS, group))
    assert "scratch" in flags.flag_sets().kept_training
    common = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*common, "--epochs", "1", "--scratch", "3"])
    ckpt = str(run_dir(tmp_path, common) / "checkpoint.pth")
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*common, "--epochs", "2", "--resume", ckpt, "--scratch", "5"])
    one_line_error(capsys, "--scratch 3, not 5", "cannot change", exc=e)


def test_dropout_on_an_arch_without_one_is_refused(monkeypatch, capsys):
    """--dro where the arch's entry has no dropout before its classifier (convnext_tiny): one line,
    before anything is read; left at its default, or 0, it is no request and the run goes on."""
    entry = models.Arch(models.torchvision_2d, ("2D", "TSN"), dropout=False)
    monkeypatch.setitem(models.ARCHS, "convnext_tiny", entry)
    common = ["ucf101", "t.txt", "v.txt", "--arch", "convnext_tiny", "--mode", "TSN"]
    with pytest.raises(SystemExit) as e:
        flags.check_recipe_args(train.parse_args([*common, "--dro", "0.5"]))
    one_line_error(capsys, "--dro 0.5 does nothing without an arch with a dropout", exc=e)
    for given in ([], ["--dro", "0"]):
        flags.check_recipe_args(train.parse_args([*common, *given]))
    flags.check_recipe_args(train.parse_args([*common[:4], "resnet18", "--dro", "0.5"]))


@pytest.mark.slow
def test_efficientnet_b0_as_a_tsn_backbone_is_one_registry_entry(lists, tmp_path, monkeypatch):
    monkeypatch.setitem(
        models.ARCHS, "efficientnet_b0", models.Arch(models.torchvision_2d, ("2D", "TSN"))
    )
    assert "efficientnet_b0" in train.get_args_parser().format_help()  # -h lists it
    common = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path), "--arch", "efficientnet_b0"]
    common += ["--mode", "TSN", "--num_segments", "2", "--t_length", "1", "--num_classes", "4"]
    init = models.build_network("efficientnet_b0", 4, mode="TSN", num_segments=2)
    assert isinstance(init, models.Consensus) and isinstance(init, torch.nn.Module)
    run_main([*common, "--epochs", "1"])
    trained = torch.load(run_dir(tmp_path, common) / "checkpoint.pth", weights_only=False)["model"]
    # torchvision's own names, so its ImageNet files load as they are
    assert trained.keys() == init.state_dict().keys()
    assert trained["classifier.1.weight"].shape == (4, 1280)
    assert not torch.equal(trained["classifier.1.weight"], init.state_dict()["classifier.1.weight"])
    with pytest.raises(SystemExit):  # its entry says which modes it runs in
        flags.check_args(train.parse_args([*common, "--mode", "3D", "--num_segments", "1"]))


def test_a_mistyped_recipe_names_the_closest_recipes(capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "t.txt", "v.txt", "@recipes/ucf101_i3dd.txt"])
    one_line_error(
        capsys, "@recipes/ucf101_i3dd.txt", "closest recipes: @recipes/ucf101_i3d.txt", exc=e
    )


def test_help_names_every_list_format_and_what_save_scores_writes():
    text = " ".join(train.get_args_parser().format_help().split())
    for form in (
        "<frame_dir> <num_frames> <label>",
        "<video> <label>",
        ".csv",
        ".json",
        "--labels",
    ):
        assert form in text, form
    assert "softmax probabilities averaged over the views" in text
