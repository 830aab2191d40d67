"""The lab: what benchmarks and tests need and the product never does (synthetic
loaders, probes into the memory core's tables).

It lives apart from the product so that the product (memory/, bot/, connectors/, jobs/)
never imports it: the lab may reach into the core's private modules, the product may
not (tests/test_public_imports.py).
"""
