"""train.py under a DCP writer that SIGKILLs its own process inside a sharded save: on rank
$KILL_RANK, in save number $KILL_AT_SAVE, after that rank's shard files are written and before the
save is complete (no metadata yet, no rename, checkpoint.pth not yet replaced). A real kill at a
chosen point, for tests/test_fsdp.py:

    torchrun --nproc_per_node=2 tests/fsdp_kill_in_save.py TRAIN.PY-ARGS --fsdp
"""

import os
import runpy
import signal
import sys

from torch.distributed.checkpoint import FileSystemWriter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
saves = [0]
write_data = FileSystemWriter.write_data


def write_then_die(self, plan, planner):
    written = write_data(self, plan, planner)
    saves[0] += 1
    if (
        saves[0] == int(os.environ["KILL_AT_SAVE"])
        and os.environ["RANK"] == os.environ["KILL_RANK"]
    ):
        written.wait()
        os.kill(os.getpid(), signal.SIGKILL)
    return written


FileSystemWriter.write_data = write_then_die
sys.argv = [os.path.join(REPO, "train.py"), *sys.argv[1:]]
sys.path.insert(0, REPO)
runpy.run_path(sys.argv[0], run_name="__main__")
