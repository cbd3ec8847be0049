"""die_with_parent.py - the Python side of die_with_parent.h: a daemon a Python test or fixture
starts (sbx-worker, haproxy, an agent of fake_k8s.py) dies with it, even when it is killed by
ctest's timeout (SIGKILL) or crashes and runs no tearDown.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    from die_with_parent import die_with_parent
    subprocess.Popen(argv, preexec_fn=die_with_parent())

The kernel signals the child when the *thread* that started it exits, not the process: start a
daemon from the main thread or from a thread that waits for it, never from a short-lived one.
"""
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent(sig=signal.SIGKILL):
    """A preexec_fn for subprocess.Popen: the child gets sig once its parent's thread exits,
    and exits at once when the parent (this process) is already gone."""
    parent = os.getpid()

    def preexec():
        if _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(127)

    return preexec
