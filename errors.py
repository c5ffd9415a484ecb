"""How the trainer says something went wrong: one line on stderr, never a traceback. fail (a user
error: exit 2, or 1 for a fault of the machine), warn, and disk_errors, which turns a failed write
(a full disk, a read-only folder, torch's own write failure) into one line that names the cause
first, the file, the folder and its free space. train.py and the modules it calls report through
these; errors.py imports none of the project's modules.
"""

import contextlib
import errno
import os
import shutil
import sys


def fail(msg, code=2):
    """A user error: one clear line, exit status 2, no traceback."""
    print(f"train.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def warn(msg):
    print(f"train.py: warning: {msg}", file=sys.stderr)  # every rank: stderr is never silenced


FULL_BELOW = 16 * 2**20  # bytes free at the failure: below it, a write error is a full disk
NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))  # a full disk, a full quota


@contextlib.contextmanager
def disk_errors(path, tmp=None):
    """A full disk or an unwritable file while writing `path`: one line naming it, the folder and
    its free space, the temp file removed, the previous `path` left as it was (writes go to `tmp`,
    then a rename). A full disk says so first: the cause a user can act on, not the library's words
    for it."""
    # torch.save reports a failed write (a disk filling mid-save) as RuntimeError "[enforce fail at
    # inline_container.cc] . unexpected pos", with no errno: the free space before the temp file is
    # removed (0 on a full tmpfs or quota) tells it from other failures.
    try:
        yield
    except (OSError, RuntimeError) as e:
        folder = os.path.dirname(os.path.abspath(path))
        full = (e.errno in NO_SPACE) if isinstance(e, OSError) else free_bytes(folder) < FULL_BELOW
        with contextlib.suppress(OSError):
            if tmp:
                os.remove(tmp)
        free = free_bytes(folder) / 2**20
        if full:
            fail(
                f"disk full: could not write {path} ({free:.0f} MiB free in {folder} once the "
                "partial file "
                "is removed); the previous file is intact: free space, then run again",
                code=1,
            )
        why = getattr(e, "strerror", None) or (str(e).splitlines() or [type(e).__name__])[0]
        fail(
            f"could not write {path}: {why} ({free:.0f} MiB free in {folder}); the previous file "
            "is intact",
            code=1,
        )


def free_bytes(folder):
    try:
        return shutil.disk_usage(folder).free
    except OSError:  # the folder itself is gone: nothing can tell
        return FULL_BELOW
