"""Slurm: srun without torchrun, preemption (SIGTERM) and time limits (SIGUSR1) with exact resume.

- Without Slurm (always run): processes given the SLURM_* variables srun would set train like torchrun's;
  environments that cannot work (no launcher, a batch shell without srun, more tasks than GPUs) end with
  one line, never a hang.
- With a real one-node Slurm (tests/slurm_cluster.py; skipped, with the reason, where it cannot start):
  slurm/train.sbatch on CPU with 2 tasks: uninterrupted, requeued mid-run by `scontrol requeue`, and sent
  SIGUSR1 (what --signal=USR1@180 sends before the time limit); both interrupted jobs end with the
  uninterrupted one's weights, bit for bit.
"""
from pathlib import Path
import re
import time

import pytest

from slurm_cluster import SlurmCluster, Unavailable

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        c = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    except Unavailable as e:
        pytest.skip(f"no Slurm here: {e}")
    try:
        yield c
    finally:
        c.stop()


def wait_for_line(path, pattern, timeout, job=None, cluster=None):
    """Poll a job's output file until a line matches; fail early if the job ended first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if re.search(pattern, text, re.M):
            return text
        if cluster is not None and cluster.job(job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"):
            pytest.fail(f"job {job} ended before printing {pattern!r}:\n{text[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no line {pattern!r} in {path} after {timeout}s:\n{text[-3000:]}")


def test_cluster_runs_a_two_task_step(cluster, tmp_path):
    script = tmp_path / "hello.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=1\n"
                      f"#SBATCH --output={tmp_path}/hello-%j.out\n"
                      'srun bash -c \'echo "task $SLURM_PROCID of $SLURM_NTASKS step $SLURM_STEP_ID"\'\n')
    job = cluster.sbatch(script)
    cluster.wait(job, "COMPLETED", timeout=60)
    out = (tmp_path / f"hello-{job}.out").read_text()
    assert sorted(re.findall(r"task (\d) of 2 step 0", out)) == ["0", "1"], out
