"""Folders for embedded servers that the suite starts, outside pytest's rotating temp
folders (which a concurrent pytest run may prune while a server still uses them, and
whose owner-only mode keeps the server's own user out), so removed by the suite itself:
each run used to leave its servers' folders behind, 450 MB apiece."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_folder(prefix: str) -> Path:
    """A new folder, removed when this process exits. Registered before any server
    starts in it, so the removal runs after the server's own stop (``atexit`` runs in
    reverse order); a folder whose server still runs (another process holds it) stays."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(_remove_stopped, folder)
    return folder


def _remove_stopped(folder: Path) -> None:
    if not any(folder.rglob("postmaster.pid")):
        shutil.rmtree(folder, ignore_errors=True)
