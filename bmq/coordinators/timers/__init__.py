"""Scheduled delivery: records held in a per-partition timer log and appended to their
partition at their time (``service.TimerService``; the design is in ``timer``)."""

from bmq.coordinators.timers.service import TimerService
from bmq.coordinators.timers.state import TIMER_LOG_PREFIX

__all__ = ["TIMER_LOG_PREFIX", "TimerService"]
