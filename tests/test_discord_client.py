"""The Discord connector's shell (connectors/discord/client.py), without a gateway."""

from __future__ import annotations

import subprocess
import sys


def test_the_connector_does_not_import_the_process_settings() -> None:
    """Connectors sit below ``bot/``: the client reads its settings through a protocol."""
    probe = "import sys, connectors.discord.client; print(sorted(m for m in sys.modules if m.split('.')[0] == 'bot'))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
