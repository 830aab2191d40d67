"""This distribution's metadata as pyproject.toml declares it, put on the path ahead of the
installed one: the plugin commands ``stashbird`` then finds are this checkout's, not
those the last ``pip install -e`` recorded (entry points are written at install)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def shadow_metadata(monkeypatch: pytest.MonkeyPatch, folder: Path, entry_points: dict[str, dict[str, str]]) -> None:
    """Metadata of this distribution with ``entry_points`` (group -> name -> value) and no
    others, first on ``sys.path`` until the test ends."""
    info = folder / f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {PROJECT['name']}\nVersion: {PROJECT['version']}\n"
    (info / "METADATA").write_text(metadata, encoding="utf-8")
    groups = [
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("".join(groups), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
