"""Probing's flags and files refused in one line before any work, and what a probe run reports:
the grid's values checked as --lr / --wd are, --lr 0, the grid flags without --probe, the bound of
--num_sample, an empty probe file, a head picked from an official probe file (FILE:K) or every head
scored in one evaluation pass (FILE:all), a grid's numbers in TensorBoard and a non-finite loss.

The probe files are written as the official eval saves them (eval.py save_checkpoint: a list of
AttentiveClassifier state dicts under `module.`), from vjepa.AttentiveClassifier, whose names and
logits equal the official class's (tests/test_vjepa.py).
"""

import re

import pytest
import torch

import vjepa
import vjepa_zoo
from conftest import one_line_error, run_cli, run_dir, run_main

# the tiny V-JEPA 2 probe run of tests/test_vjepa.py: 4 frames of 32 px, batch 4, one epoch
PROBE = [
    *("--arch", "vjepa2_vitt16", "--t_length", "4", "--new_size", "36", "--crop_size", "32"),
    *("-b", "4", "--epochs", "1", "-j", "0", "--device", "cpu", "--opt", "adamw"),
    *("--probe", "attentive", "--probe-blocks", "1", "--seed", "3"),
]


def save_probe_file(path, heads, classes=4, blocks=1):
    """An official probe checkpoint of `heads` heads (each its own random init): the list eval.py
    saves, one head per point of its lr x wd grid."""
    sds = []
    for i in range(heads):
        torch.manual_seed(100 + i)
        clf = vjepa.AttentiveClassifier(192, classes, 16, blocks)
        sds.append({"module." + k: v for k, v in clf.state_dict().items()})
    torch.save({"classifiers": sds, "opt": [], "epoch": 20}, path)
    return sds


def save_encoder_file(path):
    """An official pretraining checkpoint of vjepa2_vitt16's encoder (random): `target_encoder`
    under DDP's and the wrapper's prefixes, as the probe evals read it."""
    torch.manual_seed(0)
    enc = vjepa.build("vjepa2_vitt16", 4).state_dict()
    state = {"module.backbone." + k: v for k, v in enc.items() if not k.startswith("head.")}
    torch.save({"target_encoder": state, "epoch": 10}, path)
    return str(path)


def missing_lists(tmp_path):
    """Lists that do not exist: a refusal naming anything else came before the lists were read."""
    return [str(tmp_path / "no_train.txt"), str(tmp_path / "no_val.txt")]


@pytest.mark.parametrize(
    "given, needle",
    [
        (["--probe-lrs", "-0.001", "0.001"], "--probe-lrs: must be a number > 0, got '-0.001'"),
        (["--probe-lrs", "-1e-3"], "--probe-lrs: must be a number > 0, got '-1e-3'"),
        (["--probe-lrs", "0"], "--probe-lrs: must be a number > 0, got '0'"),
        (["--probe-lrs", "nan"], "--probe-lrs: must be a number > 0, got 'nan'"),
        (["--probe-wds", "-0.1"], "--probe-wds: must be a number >= 0, got '-0.1'"),
        (["--probe-wds", "inf"], "--probe-wds: must be a number >= 0, got 'inf'"),
        (["--lr", "0"], "--lr 0 with --probe: the probes' lrs are --probe-lrs"),
        (["--clip-grad", "1", "--probe-lrs", "1e-3", "3e-4"], "--clip-grad 1 with a grid"),
    ],
)
def test_the_grid_is_checked_as_lr_and_wd_before_any_work(tmp_path, capsys, given, needle):
    """Each refused in one line (exit 2) with lists that do not exist: before the model and the data
    are built. The grid's values as --lr's and --wd's: finite, lrs > 0, wds >= 0; a negative number
    in any notation reaches the check (argparse's "expected at least one argument" otherwise)."""
    base = ["ucf101", *missing_lists(tmp_path), *PROBE, "--output_root", str(tmp_path)]
    with pytest.raises(SystemExit) as e:
        run_main([*base, *given])
    one_line_error(capsys, needle, exc=e)


def test_the_probe_flags_name_what_the_user_typed(tmp_path, capsys):
    """--probe without --opt (sgd is the default) is not told to drop an --opt it never typed;
    --probe-lrs / --probe-wds without --probe would do nothing: refused."""
    base = ["ucf101", *missing_lists(tmp_path), "--output_root", str(tmp_path)]
    no_opt = [a for a in PROBE if a not in ("--opt", "adamw")]
    with pytest.raises(SystemExit) as e:
        run_main([*base, *no_opt])
    err = one_line_error(capsys, "not --opt sgd: give --opt adamw", exc=e)
    assert "drop" not in err
    no_probe = PROBE[: PROBE.index("--probe")]
    for flag in ("--probe-lrs", "--probe-wds"):
        with pytest.raises(SystemExit) as e:
            run_main([*base, *no_probe, flag, "0.5"])
        one_line_error(capsys, f"{flag} 0.5 does nothing without --probe attentive", exc=e)


def test_num_sample_is_bounded_by_the_memory_of_its_clips(tmp_path, capsys):
    """`train.py pretrain --num_sample 1000000` (pretrain.main, as train.py hands it over): one line
    giving the size of one step's views against this machine's memory, before the lists are read
    (the run would die out of memory after building everything)."""
    argv = ["ucf101", *missing_lists(tmp_path), "--pretrain", "--arch", "vit_t16"]
    with pytest.raises(SystemExit) as e:
        run_main([*argv, "--num_sample", "1000000", "--output_root", str(tmp_path)])
    err = one_line_error(capsys, "--ra-reps / --num_sample 1000000: one step's views", exc=e)
    assert re.search(r"would take [\d.]+ GiB, more than this machine's [\d.]+ GiB", err), err
    with pytest.raises(SystemExit) as e:  # VideoMAEv2's 2 passes the bound: the lists' error
        run_main([*argv, "--num_sample", "2", "--output_root", str(tmp_path)])
    one_line_error(capsys, "no_train.txt", exc=e)


def test_an_empty_probe_file_and_a_head_past_its_end_are_refused_naming_it(tmp_path, capsys):
    """An official probe file whose classifiers list is empty, and FILE:K past its heads: one line
    naming the file (an IndexError traceback before), as the lists are not yet read."""
    torch.save({"classifiers": [], "epoch": 0}, tmp_path / "empty.pt")
    save_probe_file(tmp_path / "three.pt", 3)
    base = ["ucf101", *missing_lists(tmp_path), *PROBE, "--output_root", str(tmp_path / "o")]
    cases = [
        ("empty.pt", f"--probe-weights {tmp_path / 'empty.pt'}: its classifiers list is empty"),
        ("three.pt:3", f"the file holds 3 probe(s), {tmp_path / 'three.pt'}:0 to :2"),
        ("three.pt:all", "scores every head of the file with --evaluate"),
    ]
    for name, needle in cases:
        with pytest.raises(SystemExit) as e:
            run_main([*base, "--num_classes", "4", "--probe-weights", str(tmp_path / name)])
        one_line_error(capsys, needle, exc=e)


def test_file_k_loads_head_k_and_says_how_many_the_file_holds(tmp_path, capsys):
    """FILE:K fills the probe with the K-th head, bit for bit; the line names K and the count.
    FILE alone: the first head, the line says so and how to pick another."""
    sds = save_probe_file(tmp_path / "ssv2.pt", 3)
    for src, k in ((f"{tmp_path / 'ssv2.pt'}:2", 2), (str(tmp_path / "ssv2.pt"), 0)):
        head = vjepa.AttentiveClassifier(192, 4, 16, 1)
        vjepa_zoo.load_probe(head, src)
        for name, v in head.state_dict().items():
            assert torch.equal(v, sds[k]["module." + name]), name
        line = capsys.readouterr().out
        assert f"head {k} of 3" in line and line.count("\n") == 1, line
    assert f"({tmp_path / 'ssv2.pt'}:K picks another)" in line


@pytest.mark.slow
def test_file_all_scores_every_head_in_one_evaluation_pass(lists, tmp_path, capsys):
    """--evaluate --pretrained ENCODER --probe-weights FILE:all: one line per run with every head's
    top-1 (the grid's table), each equal to --probe-weights FILE:K alone, the best one's as the
    run's Acc@1. The encoder's load line says the head is filled next, not left random."""
    from conftest import acc_line

    src = save_encoder_file(tmp_path / "vitt.pt")
    save_probe_file(tmp_path / "probe.pt", 3, classes=101)
    base = ["ucf101", *lists, *PROBE, "--pretrained", src, "--evaluate", "--test_crops", "1"]
    run_main([*base, "--probe-weights", f"{tmp_path / 'probe.pt'}:all", "--run_name", "all"])
    out = capsys.readouterr().out
    assert "new 0" in out or "filled by --probe-weights" in out, out
    table = re.search(r"^probes \(val Acc@1, \* the best\): (.*)$", out, re.M)
    assert table, out
    each = dict(re.findall(r"(\*?head \d): ([\d.]+)", table.group(1)))
    assert len(each) == 3, table.group(0)
    best = acc_line(out)[0]
    for k in range(3):
        run_main([*base, "--probe-weights", f"{tmp_path / 'probe.pt'}:{k}", "--run_name", f"h{k}"])
        alone = acc_line(capsys.readouterr().out)[0]
        got = each.get(f"head {k}", each.get(f"*head {k}"))
        assert float(got) == pytest.approx(alone, abs=1e-3), (k, table.group(0))
    starred = next(v for name, v in each.items() if name.startswith("*"))
    assert float(starred) == pytest.approx(best, abs=1e-3)


@pytest.mark.slow
def test_a_probe_grid_logs_each_probe_to_tensorboard(lists, tmp_path):
    """--tensorboard with a grid of probes: each probe's val top-1 is its own scalar (probe_top1/i,
    i its place in the grid), equal to log.jsonl's; no traceback."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from conftest import logs

    argv = ["ucf101", *lists, *PROBE, "--probe-lrs", "1e-3", "3e-4", "--tensorboard"]
    argv += ["--output_root", str(tmp_path)]
    run_main(argv)
    run = run_dir(tmp_path, argv)
    events = accumulator.EventAccumulator(str(run / "tensorboard")).Reload()
    want = logs(run)[-1]["probe_top1"]
    for i, top1 in enumerate(want):
        (scalar,) = events.Scalars(f"probe_top1/{i}")
        assert scalar.value == pytest.approx(top1)


@pytest.mark.slow
def test_a_nan_loss_in_a_probe_grid_names_the_probes_lrs(lists, tmp_path):
    """A probe lr that blows up (1e30): the stop names --probe-lrs, not --lr or --clip-grad (which a
    grid refuses)."""
    argv = ["ucf101", *lists, *PROBE, "--probe-lrs", "1e30", "1e-3", "--epochs", "2"]
    r = run_cli([*argv, "--output_root", str(tmp_path)], timeout=240)
    assert r.returncode == 1, r.stderr
    err = one_line_error(r.stderr, "stopping (lower --probe-lrs)", code=1)
    assert re.search(r"loss is (nan|inf) at epoch \d+ iteration \d+", err), err


def test_the_progress_line_of_a_grid_shows_the_mean_per_probe_and_each_lr():
    """The step's loss of a grid is the sum of its probes' losses: the line shows it per probe,
    labelled, and each probe's lr (not the trainer's --lr schedule, which no probe follows)."""
    import types

    import report

    meter = report.Meter(0)
    loss = torch.tensor(4.0)  # 4 probes, each at loss 1
    meter.update(loss, None, torch.zeros(8, dtype=torch.long), 0)
    rt = types.SimpleNamespace(device=torch.device("cpu"), world_size=1)
    args, progress = types.SimpleNamespace(epochs=1), types.SimpleNamespace(epoch=0)
    line = meter.line(args, rt, progress, loss, [3e-3, 1e-3, 3e-3, 1e-3], 0, 16)
    want = "loss 1.0000 (1.0000) per probe (mean of 4) lrs 3.00e-03 1.00e-03 3.00e-03 1.00e-03 "
    assert want in line, line
    one = meter.line(args, rt, progress, torch.tensor(1.0), [1e-3], 0, 16)
    assert "loss 1.0000 (4.0000) lr 1.00e-03 " in one, one
