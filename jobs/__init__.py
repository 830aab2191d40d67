"""Scheduled work: the scheduler decides when, the memory core does the work."""
