"""Stand-ins for what Stashbird talks to (Slack, Discord, an LLM endpoint) and drivers of
``stashbird serve`` against them, on loopback: tests and benchmarks run offline on them."""
