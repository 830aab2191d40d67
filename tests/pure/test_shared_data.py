"""tests/shared_data.py: a module needing ../shared data is skipped at collection when
the data is absent (a checkout without the shared folder), and finds it when present."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared_data import shared_file


def test_a_module_needing_shared_data_skips_when_it_is_absent(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="shared/data/locomo/30.json is not beside the checkout"):
        shared_file("locomo/30.json", start=tmp_path / "checkout" / "tests" / "x.py")
    (tmp_path / "shared" / "data" / "locomo").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "locomo" / "30.json").write_text("{}")
    assert shared_file("locomo/30.json", start=tmp_path / "checkout" / "tests" / "x.py").name == "30.json"
