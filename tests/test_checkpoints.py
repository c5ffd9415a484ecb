"""Checkpoint files are data, never code: a pickle that would run code is refused in one line at
every entry point that reads one (nothing of it runs), --trust-checkpoint reads it as before, and
every kind of file the project and the zoos write still loads (checkpoint.read_torch / read_caffe2's
allowlists)."""

import argparse
import os
import pickle
import random
import sys

import numpy as np
import pytest
import torch

import checkpoint
import features
import predict
from conftest import TINY, one_line_error, run_main, tiny_checkpoint


class MakesADirectory:
    """Unpickling it calls os.mkdir(path): what a hostile checkpoint could do instead."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


CODE = f"{os.mkdir.__module__}.mkdir"  # the global the pickle asks for: posix.mkdir on Linux


def hostile(tmp_path, kind):
    """(a checkpoint file whose pickle would create a directory, that directory)."""
    marker = tmp_path / f"ran_{kind}"
    if kind == "caffe2":  # a Caffe2-style .pkl: a plain pickle of blobs
        path = tmp_path / "evil.pkl"
        with open(path, "wb") as f:
            pickle.dump({"blobs": {"conv1_w": MakesADirectory(marker)}}, f, protocol=2)
        return str(path), marker
    path = tiny_checkpoint(tmp_path / f"evil_{kind}.pth")  # a train.py checkpoint, and one more key
    ckpt = torch.load(path, weights_only=False)
    ckpt["extra"] = MakesADirectory(marker)
    torch.save(ckpt, path)
    return path, marker


def train_argv(lists, tmp_path, *flags):
    return ["ucf101", *lists, *TINY, "--epochs", "1", "--output_root", str(tmp_path / "o"), *flags]


ENTRY_POINTS = ["pretrained", "pretrained-caffe2", "resume", "evaluate", "predict", "features"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_pickle_that_runs_code_is_refused_at_every_entry_point(entry, lists, tmp_path, capsys):
    path, marker = hostile(tmp_path, "caffe2" if entry.endswith("caffe2") else entry)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        if entry.startswith("pretrained"):
            run_main(train_argv(lists, tmp_path, "--pretrained", path))
        elif entry == "resume":
            run_main(train_argv(lists, tmp_path, "--resume", path))
        elif entry == "evaluate":
            run_main(train_argv(lists, tmp_path, "--evaluate", "--resume", path))
        elif entry == "predict":
            sys.exit(predict.main(["--resume", path, lists[0], "--device", "cpu"]))
        else:
            out = str(tmp_path / "feats")
            sys.exit(features.main([lists[1], "--resume", path, "--out", out, "--device", "cpu"]))
    one_line_error(capsys, path, CODE, "refused", "--trust-checkpoint", exc=e)
    assert not marker.exists()  # nothing of the pickle ran


def test_trust_checkpoint_reads_a_trusted_file_as_before(lists, tmp_path, capsys):
    """The flag is the old behaviour: the same file's pickle runs (so the refusal above is real)."""
    path, marker = hostile(tmp_path, "trusted")
    video = os.path.join(os.path.dirname(lists[1]), open(lists[1]).read().split()[0])
    assert predict.main(["--resume", path, video, "--device", "cpu", "--trust-checkpoint"]) == 0
    assert marker.is_dir()
    assert "1." in capsys.readouterr().out  # and it labelled the video
    # the flag does not outlive its command: the next one refuses again
    marker.rmdir()
    assert predict.main(["--resume", path, video, "--device", "cpu"]) == 2
    assert not marker.exists()


def test_every_kind_of_checkpoint_data_still_loads(tmp_path, monkeypatch):
    """Ours (args as a dict or an argparse.Namespace, every RNG state: torch's, numpy's, Python's),
    numpy arrays and scalars under numpy 1's module names (numpy.core) and 2's, a Caffe2 pickle of
    them, and a mmaction2 run's checkpoint with mmengine's HistoryBuffer logs (read as fields,
    mmengine absent)."""
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    ours = {
        "model": {"w": torch.ones(2)},
        "args": argparse.Namespace(arch="resnet10_3d", lr_steps=[1, 2]),
        "rng": [{**state, "cuda": None}],
        "lr": np.float32(0.5),
    }
    torch.save(ours, tmp_path / "ours.pth")
    got = checkpoint.load(str(tmp_path / "ours.pth"))
    assert got["args"].lr_steps == [1, 2] and got["lr"] == np.float32(0.5)
    assert np.array_equal(got["rng"][0]["numpy"][1], state["numpy"][1])
    checkpoint.set_rng_state(got["rng"][0])
    assert random.getstate() == state["python"]
    # Caffe2 (PySlowFast's zoo): protocol 2, numpy 1's names as Python 2 wrote them
    blobs = {"conv1_w": np.arange(6, dtype=np.float32).reshape(2, 3), "model_iter": np.int64(9)}
    raw = pickle.dumps({"blobs": blobs}, protocol=2).replace(b"numpy._core.", b"numpy.core.")
    assert b"numpy.core.multiarray" in raw
    (tmp_path / "c2.pkl").write_bytes(raw)
    got = checkpoint.load(str(tmp_path / "c2.pkl"), "--pretrained")["blobs"]
    assert np.array_equal(got["conv1_w"], blobs["conv1_w"]) and got["model_iter"] == 9
    # mmengine's HistoryBuffer: a class of that module path, present only while saving
    package = tmp_path / "pkgs" / "mmengine" / "logging"
    package.mkdir(parents=True)
    for folder in (package.parent, package):
        (folder / "__init__.py").write_text("")
    (package / "history_buffer.py").write_text(
        "class HistoryBuffer:\n    def __init__(self, x):\n        self._log_history = x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    from mmengine.logging.history_buffer import HistoryBuffer

    logs = {"log_scalars": {"train/loss": HistoryBuffer(np.array([0.5, 0.25]))}}
    torch.save({"state_dict": {"w": torch.ones(1)}, "message_hub": logs}, tmp_path / "mm.pth")
    for name in [m for m in sys.modules if m.startswith("mmengine")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "pkgs" not in p])
    got = checkpoint.load(str(tmp_path / "mm.pth"), "--pretrained")
    buffer = got["message_hub"]["log_scalars"]["train/loss"]
    assert isinstance(buffer, checkpoint.Record)
    assert buffer._log_history.tolist() == [0.5, 0.25]


def test_a_folder_given_as_a_checkpoint_names_the_files_in_it(lists, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    tiny_checkpoint(run / "checkpoint.pth")
    with pytest.raises(SystemExit) as e:
        run_main(train_argv(lists, tmp_path, "--evaluate", "--resume", str(run)))
    one_line_error(capsys, f"--resume {run} is a folder", str(run / "checkpoint.pth"), exc=e)
