"""``stashbird bench`` is a plugin command: bot/cli.py finds it through the entry point
pyproject.toml declares, and a built-in command never looks for one. The metadata read
is pyproject.toml's (tests/plugins.py), not the installed one. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import cli
from bot.cli import build_parser
from tests.plugins import PROJECT, shadow_metadata


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit:
        build_parser(argv).parse_args(argv)
    assert exit.value.code == 0
    return capsys.readouterr().out


@pytest.mark.usefixtures("declared_plugins")
def test_bench_is_found_through_its_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "update", "--json"]
    args = build_parser(argv).parse_args(argv)
    assert args.module.__name__ == PROJECT["entry-points"]["stashbird.commands"]["bench"]
    assert args.bench_module.__name__ == args.module.__name__.replace(".cli", ".update")
    assert args.module.HELP in _help(["--help"], capsys)
    benches = _help(["bench", "--help"], capsys)
    assert all(name in benches for name in args.module.BENCHMARKS)


def test_without_the_entry_point_there_is_no_bench(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shadow_metadata(monkeypatch, tmp_path, {})
    assert "bench" not in _help(["--help"], capsys)
    with pytest.raises(SystemExit) as exit:
        build_parser(["bench"]).parse_args(["bench"])
    assert exit.value.code == 2 and "invalid choice: 'bench'" in capsys.readouterr().err


def test_a_built_in_command_never_looks_for_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "plugins", lambda: pytest.fail("plugins looked up for a built-in command"))
    args = build_parser(["ask", "--conversation", "c", "when?"]).parse_args(["ask", "--conversation", "c", "when?"])
    assert args.module.__name__ == "bot.commands.ask"
