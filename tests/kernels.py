"""Kernel managers for the notebooks the tests run with nbclient and papermill.

Their kernels talk over Unix sockets, not TCP ports: a TCP port is picked free, then bound by the kernel a
moment later, and another test worker's server or kernel can take it meanwhile; a kernel that cannot bind
its port never starts. Each kernel's sockets are in a short directory of its own under /tmp (a socket's
path must fit in 107 bytes, and the kernel runs in the notebook's directory, so the path is absolute)."""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref

from jupyter_client.manager import AsyncKernelManager


def ipc_kernel_manager(kernel_name: str = "python3") -> AsyncKernelManager:
    """A kernel manager for one notebook run (``km=`` of nbclient's `NotebookClient` or papermill's
    `execute_notebook`); its directory is removed with it."""
    home = tempfile.mkdtemp(prefix="nbp-k-", dir="/tmp" if os.path.isdir("/tmp") else None)
    km = AsyncKernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(home, "kernel"))
    weakref.finalize(km, shutil.rmtree, home, True)
    return km
