"""Benchmarks behind ``stashbird bench`` (cli.py); each module has configure, run and render."""
