"""The lab: what benchmarks and tests need and the product never does. Benchmarks
(lab/bench/, ``stashbird bench``), stand-ins for Slack, Discord and an LLM endpoint
(lab/standins/), synthetic loaders (lab/synthetic.py) and probes into the memory core's
tables (lab/probes.py).

It lives apart from the product so that the product (memory/, bot/, connectors/, jobs/)
never imports it: the lab may reach into the core's private modules, the product may
not (tests/architecture/test_public_imports.py). ``stashbird bench`` reaches the benchmarks through
the entry point the lab declares in pyproject.toml.
"""
