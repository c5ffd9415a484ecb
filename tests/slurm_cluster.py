"""A real one-node Slurm for tests: munged, slurmctld and slurmd as root, everything in one temp
folder.

    with SlurmCluster.start(folder) as c:   # raises Unavailable(reason) where Slurm cannot start
        job = c.sbatch(script)
        c.wait(job, "COMPLETED", timeout=60)

Nothing outside the folder is used: munged gets its own key and socket, the daemons their own ports,
state and spool folders, and every client command is pointed at the folder's slurm.conf by
SLURM_CONF. Two clusters (two test runs, or a lead and a worker) can run side by side on one
machine.

Traps handled here:
- slurmstepd (the per-job daemon) is not a child of slurmd and outlives it: teardown finds every
  process by a marker variable in its environment (the daemons' and the jobs' own), not by process
  tree.
- A test killed mid-run leaves its daemons behind; the next start kills those of clusters whose
  owning process is gone (and only those: another run's live cluster is left alone).
- Requeued jobs are held for a while before they may start again (Slurm's requeue back-off);
  `release` makes a pending job eligible at once, so a requeue costs seconds in tests, not minutes.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

# in the environment of every process this module starts, valued by its folder
MARKER = "TEST_SLURM_CLUSTER"


class Unavailable(Exception):
    """Slurm cannot start here; the text says why (the test skips with it)."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_processes(want=None):
    """pid -> folder, for processes carrying MARKER (with value `want` if given)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        for item in env:
            if item.startswith(MARKER.encode() + b"="):
                folder = item.split(b"=", 1)[1].decode(errors="replace")
                if want is None or folder == want:
                    found[int(entry)] = folder
    return found


def alive(pid):
    """Running, not a zombie: a dead child of ours stays in /proc until reaped (see
    SlurmCluster.stop)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_all(pids, grace=1.0):
    """SIGTERM, a short grace, then SIGKILL what is left (slurmstepd and srun outlive a SIGTERM)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.time() + wait
        while time.time() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)
        pids = [p for p in pids if alive(p)]
        if not pids:
            return


def kill_stale():
    """Kill the leftovers of clusters whose owner (the process that started them) has died."""
    stale = []
    for pid, folder in marked_processes().items():
        owner = Path(folder, "owner.pid")
        try:
            owner_pid = int(owner.read_text())
        except (OSError, ValueError):
            owner_pid = None
        if owner_pid is None or not alive(owner_pid):
            stale.append(pid)
    kill_all(stale)


def find_programs():
    """Program name -> path; the daemons live in sbin, which a non-login PATH may lack."""
    if os.geteuid() != 0:
        raise Unavailable(
            "Slurm tests start munged/slurmctld/slurmd as root; this user is not root"
        )
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    found = {
        b: shutil.which(b, path=path)
        for b in ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "scancel")
    }
    missing = [b for b, where in found.items() if where is None]
    if missing:
        raise Unavailable(
            f"Slurm/munge not installed (missing {', '.join(missing)}): "
            "apt-get install slurm-wlm munge"
        )
    return found


SLURM_CONF = """\
ClusterName=testcluster
# Job ids from a random start: the trainer derives its rendezvous port from the job id, and two
# clusters on one machine (two test runs) would otherwise both start at job 1.
FirstJobId={first_job_id}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: proctrack/linuxproc follows a job's processes through /proc (parent links); task/none
# binds nothing. Enough for one node in a container.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/builtin
ReturnToService=2
# Jobs may be requeued (the default, said here because the tests depend on it); a requeued batch job
# reruns its script with SLURM_RESTART_COUNT set.
JobRequeue=1
KillWait=30
InactiveLimit=0
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
# OverSubscribe=FORCE:4: up to 4 jobs share each CPU, so a test can run several small jobs at once
# (the machine's real CPU count stays the node's).
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


class SlurmCluster:
    def __init__(self, root):
        self.root = Path(root).resolve()
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), MARKER: str(self.root)}
        for k in [k for k in self.env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del self.env[k]  # a test run inside a Slurm job must not leak that job's variables
        self.procs = []

    @classmethod
    def start(cls, root, timeout=90):
        programs = find_programs()
        kill_stale()
        c = cls(root)
        dirs = dict.fromkeys(os.path.dirname(p) for p in programs.values())
        # daemons and clients found by name
        c.env["PATH"] = os.pathsep.join([*dirs, c.env.get("PATH", "")])
        try:
            c._start(timeout)
        except BaseException:
            c.stop()
            raise
        return c

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _daemon(self, name, *args):
        # the child keeps its own copy of the descriptor
        with open(self.root / f"{name}.out", "ab") as log:
            p = subprocess.Popen(
                [name, *args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(p)
        return p

    def _start(self, timeout):
        r = self.root
        for sub in ("state", "spool", "munge"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)
        (r / "owner.pid").write_text(str(os.getpid()))
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = r / "munge" / "munge.socket"
        munged = self._daemon(
            "munged",
            "--foreground",
            "--force",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={r}/munge/munged.pid",
            f"--log-file={r}/munge/munged.log",
            f"--seed-file={r}/munge/munged.seed",
            "--num-threads=2",
        )
        self._wait(lambda: sock.exists(), munged, "munged", 20)
        self.conf.write_text(
            SLURM_CONF.format(
                host=self.host,
                ctld_port=free_port(),
                slurmd_port=free_port(),
                munge_socket=sock,
                root=r,
                cpus=os.cpu_count(),
                first_job_id=random.randrange(1000, 1_000_000),
            )
        )
        ctld = self._daemon("slurmctld", "-D", "-i", "-f", str(self.conf))
        self._wait(
            lambda: self.scontrol("ping").returncode == 0 and "UP" in self.scontrol("ping").stdout,
            ctld,
            "slurmctld",
            timeout,
        )
        slurmd = self._daemon("slurmd", "-D", "-f", str(self.conf), "-N", self.host)
        self._wait(
            lambda: self.node_state() in ("IDLE", "MIXED", "ALLOCATED"), slurmd, "slurmd", timeout
        )

    def _wait(self, ready, proc, name, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                raise Unavailable(
                    f"{name} exited with {proc.returncode} at start: {self._tail(name)}"
                )
            if ready():
                return
            time.sleep(0.3)
        raise Unavailable(f"{name} not ready after {timeout}s: {self._tail(name)}")

    def _tail(self, name):
        lines = []
        for f in (
            self.root / f"{name}.out",
            self.root / f"{name}.log",
            self.root / "munge" / f"{name}.log",
        ):
            if f.exists():
                lines += f.read_text(errors="replace").splitlines()[-3:]
        return " | ".join(lines) or "no log"

    def stop(self):
        """End every process of this cluster: the jobs' (found by MARKER: slurmstepd is nobody's
        child we know) and the daemons. A throwaway cluster needs no graceful shutdown: its state
        folder goes too."""
        if any(p.poll() is None for p in self.procs):
            self.run("scancel", "--quiet", "-u", "root", timeout=5, check=False)
        ours = {p.pid for p in self.procs if p.poll() is None}
        kill_all(sorted(set(marked_processes(str(self.root))) | ours))
        for p in self.procs:  # reap our children (an unreaped one stays a zombie)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []

    # ---- clients ---------------------------------------------------------------------------------
    def run(self, *cmd, timeout=30, check=True, env=None):
        try:
            r = subprocess.run(
                cmd, env=env or self.env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            if check:
                raise
            return subprocess.CompletedProcess(cmd, 124, "", "timeout")
        if check and r.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip() or r.stdout.strip()}"
            )
        return r

    def scontrol(self, *args, timeout=15):
        return self.run("scontrol", *args, timeout=timeout, check=False)

    def node_state(self):
        return self.fields("node", self.host).get("State", "").split("+")[0]

    def fields(self, kind, name):
        """`scontrol show -o KIND NAME` as a dict (Key=Value pairs; values have no spaces for our
        jobs)."""
        r = self.scontrol("show", "-o", kind, str(name))
        if r.returncode != 0:
            return {}
        out = {}
        for token in r.stdout.split():
            if "=" in token:
                k, v = token.split("=", 1)
                out.setdefault(k, v)
        return out

    def sbatch(self, script, *args, env=None):
        r = self.run("sbatch", "--parsable", *args, str(script), env=env)
        return int(r.stdout.strip().split(";")[0])

    def job(self, job_id):
        return self.fields("job", job_id)

    def wait(self, job_id, states, timeout, release=True):
        """Wait until the job's state is one of `states`; a pending (e.g. requeued, held back) job
        is made eligible at once. Returns the job's fields."""
        states = {states} if isinstance(states, str) else set(states)
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = self.job(job_id)
            if job.get("JobState") in states:
                return job
            if release and job.get("JobState") == "PENDING":
                self.release(job_id)
            time.sleep(0.5)
        raise TimeoutError(
            f"job {job_id} not {'/'.join(sorted(states))} after {timeout}s: {self.job(job_id)}"
        )

    def release(self, job_id):
        self.scontrol("release", str(job_id))
        self.scontrol("update", f"JobId={job_id}", "StartTime=now")
