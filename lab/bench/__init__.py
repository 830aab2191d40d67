"""Benchmarks behind ``stashbird bench``; each module has configure, run and render."""
