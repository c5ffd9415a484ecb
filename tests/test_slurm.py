"""Slurm: srun without torchrun, preemption (SIGTERM) and time limits (SIGUSR1) with exact resume.

- Without Slurm (always run): processes given the SLURM_* variables srun would set train like
  torchrun's; environments that cannot work (no launcher, a batch shell without srun, more tasks
  than GPUs) end with one line, never a hang.
- With a real one-node Slurm (tests/slurm_cluster.py; skipped, with the reason, where it cannot
  start): slurm/train.sbatch on CPU with 2 tasks: uninterrupted, requeued mid-run by `scontrol
  requeue`, and sent SIGUSR1 (what --signal=USR1@180 sends before the time limit); both interrupted
  jobs end with the uninterrupted one's weights, bit for bit.
"""

import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ENV, REPO, TINY, assert_same_weights, one_line_error
from slurm_cluster import SlurmCluster, Unavailable


# ---- without Slurm: srun's variables, launches that cannot work, SIGUSR1 and scontrol ------------
LAUNCH_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GROUP_RANK",
)
# train.py's progress line (TINY's -p 1: after every step)
STEP_LINE = r"^epoch \d+ \[\d+/\d+\] loss"


def clean_env(**extra):
    """This environment without any launcher's variables (tests may run inside a Slurm job), plus
    extra."""
    env = {k: v for k, v in ENV.items() if not k.startswith("SLURM_") and k not in LAUNCH_VARS}
    return {**env, **extra}


def srun_env(rank, ntasks, job_id, **extra):
    """What srun sets for task `rank` of a one-node step (the variables train.py reads)."""
    step = dict(
        SLURM_JOB_ID=str(job_id),
        SLURM_STEP_ID="0",
        SLURM_JOB_NODELIST="localhost",
        SLURM_STEP_NODELIST="localhost",
        SLURM_PROCID=str(rank),
        SLURM_NTASKS=str(ntasks),
        SLURM_LOCALID=str(rank),
    )
    return clean_env(**{**step, **extra})


def train_cli(args, env):
    return subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *args],
        env=env,
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def communicate(procs, timeout):
    """(returncode, stdout, stderr) of each process; all are killed if any runs past the timeout."""
    deadline, results = time.time() + timeout, []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.time()))
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return results


def wait_for_line(path, pattern, timeout, job=None, cluster=None, proc=None):
    """Poll an output file until a line matches; fail early if its job or process ended first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if re.search(pattern, text, re.M):
            return text
        if (
            cluster is not None
            and cluster.job(job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED")
            or proc is not None
            and proc.poll() is not None
        ):
            pytest.fail(f"{job or proc.args} ended before printing {pattern!r}:\n{text[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no line {pattern!r} in {path} after {timeout}s:\n{text[-3000:]}")


def test_first_host_of_a_slurm_nodelist():
    import launch

    for nodelist, first in [
        ("vm", "vm"),
        ("node7,node3", "node7"),
        ("a-[2-3]b,c", "a-2b"),
        ("gpu[003-010,012],cpu7", "gpu003"),
        ("rack[1-2]-n[01-04]", "rack1-n01"),
    ]:
        assert launch.first_host(nodelist) == first


@pytest.mark.slow
def test_srun_variables_alone_train_like_torchrun(lists, tmp_path):
    # Two processes given only what srun sets; a torchrun run of the same flags beside them. Same
    # weights.
    import torch
    import flags
    import train

    job = random.randrange(10**6)
    args = ["ucf101", *lists, *TINY, "-b", "2", "--epochs", "1", "--ddp"]
    torchrun = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(REPO / "train.py"),
            *args,
            "--output_root",
            str(tmp_path / "torchrun"),
        ],
        env=clean_env(),
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ranks = [
        train_cli([*args, "--output_root", str(tmp_path / "srun")], srun_env(r, 2, job))
        for r in (0, 1)
    ]
    (rc0, out0, err0), (rc1, _, err1), (rc, _, err) = communicate([*ranks, torchrun], timeout=240)
    assert rc0 == rc1 == rc == 0, (err0[-2000:], err1[-2000:], err[-2000:])
    # the port follows the job id
    assert f"rendezvous localhost:{20000 + job % 10000}" in out0, out0
    name = flags.run_dir_name(train.parse_args(args))
    a, b = (
        torch.load(tmp_path / d / name / "checkpoint.pth", weights_only=False)
        for d in ("srun", "torchrun")
    )
    assert a["args"]["world_size"] == 2
    assert_same_weights(a["model"], b["model"])


# what sbatch's shell has: no SLURM_STEP_ID
BATCH_SHELL = dict(
    SLURM_JOB_ID="77",
    SLURM_PROCID="0",
    SLURM_NTASKS="2",
    SLURM_LOCALID="0",
    SLURM_JOB_NODELIST="vm",
)


@pytest.mark.slow
def test_launches_that_would_hang_are_one_line():
    # Each would otherwise wait forever in the rendezvous for ranks that never come.
    cases = [
        (clean_env(), ["--ddp needs one process per GPU", "torchrun or srun", "RANK=unset"]),
        (clean_env(**BATCH_SHELL), ["no SLURM_STEP_ID", "batch shell"]),
        (srun_env(2, 2, 77), ["SLURM_PROCID=2", "SLURM_NTASKS=2"]),
    ]
    procs = [train_cli(["ucf101", "a.txt", "b.txt", *TINY, "--ddp"], env) for env, _ in cases]
    for (_, needles), (rc, _, err) in zip(cases, communicate(procs, timeout=180)):
        assert rc == 2, err
        one_line_error(err, *needles)


@pytest.mark.parametrize(
    "env, ddp, needles",
    [
        (srun_env(0, 2, 77), False, ["SLURM_NTASKS=2", "without --ddp", "same run folder"]),
        (srun_env(0, 2, 77, SLURM_LOCALID=None), True, ["SLURM_PROCID=0", "SLURM_LOCALID=unset"]),
        (clean_env(RANK="0"), True, ["RANK=0", "WORLD_SIZE=unset", "LOCAL_RANK=unset"]),
        (srun_env(0, 2, "x"), True, ["SLURM_JOB_ID=x"]),
    ],
    ids=["srun-without-ddp", "no-localid", "half-torchrun", "bad-job-id"],
)
def test_launch_environments_that_cannot_work_are_one_line(env, ddp, needles, monkeypatch):
    import launch

    monkeypatch.setattr(os, "environ", {k: v for k, v in env.items() if v is not None})
    with pytest.raises(ValueError) as e:
        launch.ranks(ddp, "cpu")
    one_line_error(str(e.value), *needles)


@pytest.mark.slow
def test_more_tasks_on_a_node_than_gpus_is_one_line(monkeypatch):
    import torch
    import launch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(os, "environ", srun_env(1, 2, 77, CUDA_VISIBLE_DEVICES="3"))
    with pytest.raises(ValueError) as e:
        launch.ranks(True, "cuda")
    one_line_error(str(e.value), "SLURM_LOCALID=1", "sees 1 GPU", "CUDA_VISIBLE_DEVICES=3")
    # task 0 fits its GPU, but it must not wait for the task that cannot start: the node's count
    # says so
    for tasks, node, fails in (("2(x2),1", "1", True), ("2,1", "1", False), ("1(x3)", "2", False)):
        monkeypatch.setattr(
            os, "environ", srun_env(0, 5, 77, SLURM_STEP_TASKS_PER_NODE=tasks, SLURM_NODEID=node)
        )
        if fails:
            with pytest.raises(ValueError, match="2 processes on this node"):
                launch.ranks(True, "cuda")
        else:
            assert launch.ranks(True, "cuda") == (0, 5, 0)
    # torchrun --nproc_per_node=2, one GPU
    monkeypatch.setattr(
        os,
        "environ",
        {**clean_env(), "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
    )
    with pytest.raises(ValueError, match="2 processes on this node .LOCAL_RANK=0."):
        launch.ranks(True, "cuda")


@pytest.mark.slow
def test_torchrun_inside_a_slurm_job_wins_and_srun_derives_the_rendezvous(monkeypatch):
    import launch

    env = srun_env(0, 2, 123456, SLURM_STEP_NODELIST="gpu[07-08]")
    # ranks() sets MASTER_* here, not in the real environment
    monkeypatch.setattr(os, "environ", env)
    assert launch.ranks(True, "cpu") == (0, 2, 0)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("gpu07", str(20000 + 123456 % 10000))
    env.update(MASTER_PORT="29999", SLURM_PROCID="1", SLURM_LOCALID="1")  # a port you set is kept
    assert launch.ranks(True, "cpu") == (1, 2, 1) and env["MASTER_PORT"] == "29999"
    # torchrun started by srun (one task per node): its variables win over Slurm's
    env.update(RANK="5", WORLD_SIZE="16", LOCAL_RANK="5", MASTER_ADDR="n1", MASTER_PORT="29500")
    assert launch.ranks(True, "cpu") == (5, 16, 5) and env["MASTER_ADDR"] == "n1"


FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
[ "$2" = "{ok}" ] && exit 0
echo "scontrol: error: Requested operation is presently disabled for job $2" >&2
exit 1
"""


@pytest.mark.slow
def test_sigusr1_saves_and_requeues_the_job_with_scontrol(lists, tmp_path):
    # Without Slurm: `scontrol` is a script that records its arguments; it accepts job 501, refuses
    # 502. Either way the run saves at the step boundary and exits 128 + SIGUSR1; a refusal is one
    # warning line.
    runs = {}
    for job in (501, 502):
        bin_dir = tmp_path / f"bin{job}"
        bin_dir.mkdir()
        (bin_dir / "scontrol").write_text(FAKE_SCONTROL.format(ok=501))
        (bin_dir / "scontrol").chmod(0o755)
        env = clean_env(SLURM_JOB_ID=str(job), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        out, args = tmp_path / f"out{job}", ["ucf101", *lists, *TINY, "-b", "2", "--epochs", "50"]
        with open(out, "w") as f:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "train.py"),
                    *args,
                    "--output_root",
                    str(tmp_path / f"run{job}"),
                ],
                env=env,
                cwd=REPO,
                text=True,
                stdout=f,
                stderr=subprocess.PIPE,
            )
        runs[job] = (proc, out, bin_dir)
    for job, (proc, out, _) in runs.items():
        try:
            wait_for_line(out, STEP_LINE, timeout=120, proc=proc)
        except BaseException:
            proc.kill()
            raise
        proc.send_signal(signal.SIGUSR1)
    for job, (proc, out, bin_dir) in runs.items():
        ((rc, _, err),) = communicate([proc], timeout=120)
        text = out.read_text()
        assert rc == 128 + signal.SIGUSR1, (text[-2000:], err[-2000:])
        assert (bin_dir / "calls").read_text() == f"requeue {job}\n"
        assert re.search(
            r"^SIGUSR1: saved .*checkpoint.pth at epoch \d+ iteration \d+", text, re.M
        ), text
        run = next((tmp_path / f"run{job}").iterdir())
        assert (run / "checkpoint.pth").is_file()
        if job == 501:
            assert f"requeued Slurm job {job}" in text and err.strip() == "", err
        else:
            one_line_error(
                err,
                f"scontrol requeue {job} failed",
                "presently disabled",
                "checkpoint.pth is saved",
            )
        assert "SIGUSR1" in (run / "events.log").read_text()


# ---- a real one-node Slurm -----------------------------------------------------------------------
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


@pytest.mark.slow
def test_cluster_runs_a_two_task_step(cluster, tmp_path):
    script = tmp_path / "hello.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=1\n"
        f"#SBATCH --output={tmp_path}/hello-%j.out\n"
        "srun bash -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS step $SLURM_STEP_ID\"'\n"
    )
    job = cluster.sbatch(script)
    cluster.wait(job, "COMPLETED", timeout=60)
    out = (tmp_path / f"hello-{job}.out").read_text()
    assert sorted(re.findall(r"task (\d) of 2 step 0", out)) == ["0", "1"], out


# TINY on 8 train videos, 2 tasks x batch 1: 4 optimizer steps per epoch, 2 epochs, validation at
# the end.
JOB_FLAGS = [
    *TINY,
    "-b",
    "1",
    "--lr_steps",
    "1",
    "-ef",
    "2",
    "--epochs",
    "2",
    "--ddp",
    "--resume",
    "auto",
]
# Interrupted jobs sleep before each optimizer step (sitecustomize, found through PYTHONPATH): the
# signal, sent when the first step is logged, then lands mid-run however fast the machine. Sleeping
# changes no number.
SLOW_STEPS = """\
import time
import torch
_step = torch.optim.SGD.step
torch.optim.SGD.step = lambda self, *a, **k: time.sleep(0.4) or _step(self, *a, **k)
"""


def batch_script(folder, lists, name):
    """slurm/train.sbatch with this machine's resources (one node, 2 tasks, 1 CPU each, no GPU) and
    a CPU training of its own; everything else (signal, requeue, output, the srun line's shape) as
    shipped."""
    text = (REPO / "slurm" / "train.sbatch").read_text()
    resources = {
        "--nodes": "1",
        "--ntasks-per-node": "2",
        "--cpus-per-task": "1",
        "--output": f"{folder}/{name}-%j.out",
        "--job-name": name,
    }
    lines = []
    for line in text.splitlines():
        m = re.match(r"#SBATCH (--[\w-]+)=(\S+)", line)
        if m and m.group(1) == "--gpus-per-node":
            continue
        if m and m.group(1) in resources:
            line = f"#SBATCH {m.group(1)}={resources[m.group(1)]}"
        if line.startswith("srun "):
            break
        lines.append(line)
    assert lines[-1] == "" or lines[-1].startswith("#"), (
        "slurm/train.sbatch: the srun line should come last"
    )
    command = [
        "srun --kill-on-bad-exit=1",
        sys.executable,
        str(REPO / "train.py"),
        "ucf101",
        *lists,
        *JOB_FLAGS,
        "--output_root",
        str(folder / "runs"),
    ]
    path = folder / f"{name}.sbatch"
    path.write_text("\n".join(lines + [" ".join(command)]) + "\n")
    return path


def submit(cluster, folder, lists, name, slow=False):
    folder.mkdir()
    env = {k: v for k, v in cluster.env.items() if k not in LAUNCH_VARS}
    env["OMP_NUM_THREADS"] = "1"
    if slow:
        (folder / "slow").mkdir()
        (folder / "slow" / "sitecustomize.py").write_text(SLOW_STEPS)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(folder / "slow"), *filter(None, [env.get("PYTHONPATH")])]
        )
    job = cluster.sbatch(batch_script(folder, lists, name), env=env)
    return job, folder / f"{name}-{job}.out"


def finish(cluster, job, out):
    """Wait for the job's end (requeues included); returns (its output, its run folder)."""
    info = cluster.wait(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=150)
    text = out.read_text()
    assert info["JobState"] == "COMPLETED", f"job {job}: {info}\n{text[-4000:]}"
    runs = list((out.parent / "runs").iterdir())
    assert len(runs) == 1, runs
    return text, runs[0]


@pytest.mark.slow
def test_batch_job_survives_requeue_and_time_limit_signal_exactly(cluster, lists, tmp_path):
    """Three jobs at once (the partition shares CPUs): uninterrupted; requeued once its log shows a
    training step (scontrol requeue: SIGTERM, then the job reruns); sent SIGUSR1 (the time limit's
    warning: the job saves and requeues itself)."""
    import torch

    plain = submit(cluster, tmp_path / "plain", lists, "plain")
    requeue = submit(cluster, tmp_path / "requeue", lists, "requeue", slow=True)
    usr1 = submit(cluster, tmp_path / "usr1", lists, "usr1", slow=True)
    for (job, out), command in (
        (requeue, ["scontrol", "requeue"]),
        (usr1, ["scancel", "--signal=USR1"]),
    ):
        wait_for_line(out, STEP_LINE, timeout=120, job=job, cluster=cluster)
        cluster.run(*command, str(job))
    (plain, plain_run), (requeued, requeued_run), (usr1, usr1_run) = (
        finish(cluster, *j) for j in (plain, requeue, usr1)
    )
    assert not re.search(r"^(SIG\w+: saved|resumed from)", plain, re.M), plain[-4000:]
    for text, sig, run in ((requeued, "SIGTERM", requeued_run), (usr1, "SIGUSR1", usr1_run)):
        stop = rf"^{sig}: saved .*checkpoint.pth at epoch \d+ iteration \d+"
        resume = (
            r"^resumed from .*checkpoint.pth at epoch \d+ iteration \d+ \(Slurm job \d+, "
            r"restart 1\)"
        )
        assert re.search(stop, text, re.M) and re.search(resume, text, re.M), text[-4000:]
        events = (run / "events.log").read_text()
        assert sig in events and "restart 1" in events, events
    assert re.search(r"^SIGUSR1: saved .*; requeued Slurm job \d+", usr1, re.M), usr1[-4000:]
    want = torch.load(plain_run / "checkpoint.pth", map_location="cpu", weights_only=False)
    for run in (requeued_run, usr1_run):
        got = torch.load(run / "checkpoint.pth", map_location="cpu", weights_only=False)
        assert got["epoch"] == want["epoch"] == 2
        assert_same_weights(want["model"], got["model"])
        for i, state in want["optimizer"]["state"].items():  # the SGD momentum too
            assert torch.equal(
                state["momentum_buffer"], got["optimizer"]["state"][i]["momentum_buffer"]
            ), i
