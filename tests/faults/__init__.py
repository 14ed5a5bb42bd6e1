"""Network faults, Jepsen-style: a BMQ cluster of real hosts on one machine, faults injected on a
seeded schedule, clients recording a history of operations, and checkers giving a verdict.

- ``hosts``: network namespaces joined by a bridge (one address per host), made and removed here;
- ``nemesis``: the faults (partitions, one-way and random loss, latency through a relay, clock
  jumps, kill -9, SIGSTOP) and seeded schedules of them;
- ``cluster``: ZooKeeper, the controller, brokers, a proxy and SeaweedFS, each on its own host;
- ``history``: the operations clients invoke and complete, with real-time intervals;
- ``workload`` and the workload modules: clients that record a history, and their checkers;
- ``report``: one run's schedule, history and verdicts, written to a directory.
"""
