"""Scheduled work: the scheduler decides when, the memory core does the work, and work
items are claimed in Postgres so any number of processes can run the scheduler.

``Scheduler(memory, settings)`` starts with the core's jobs (jobs/work.py); other parts
add theirs with ``register(Job(...))``.
"""

from jobs.job import Job, WorkItem
from jobs.scheduler import ItemResult, Scheduler
from jobs.settings import JobSettings

__all__ = ["ItemResult", "Job", "JobSettings", "Scheduler", "WorkItem"]
