"""What an authorization decision costs (issue 16's bar: under 5% CPU per request at 1,000
ACLs): the authorizer's decision with 1,000 bindings (literal and prefixed, over 100 principals),
uncached (every resource new) and cached, beside a produce request's own handling cost.

    .venv/bin/python -m bench.acl_bench [--acls 1000] [--decisions 200000]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

from bmq.config import Config
from bmq.metadata.acls import AclBinding, AclStore, Operation, PatternType, Permission, ResourceType
from bmq.metadata.documents import StorageDocuments
from bmq.security.authorizer import Authorizer
from bmq.storage import open_storage


def _stored(bindings: list[AclBinding]) -> AclStore:
    """An ACL store in a fresh directory, holding ``bindings``."""
    store = AclStore(StorageDocuments(open_storage(tempfile.mkdtemp())))
    store.change(lambda _: bindings)
    return store


def bindings(count: int) -> list[AclBinding]:
    out = []
    for i in range(count):
        principal = f"User:user{i % 100}"
        pattern = PatternType.PREFIXED if i % 4 == 0 else PatternType.LITERAL
        name = f"team{i % 50}-" if pattern == PatternType.PREFIXED else f"topic-{i}"
        permission = Permission.DENY if i % 10 == 0 else Permission.ALLOW
        out.append(AclBinding(ResourceType.TOPIC, name, pattern, principal, "*",
                              Operation.WRITE if i % 2 else Operation.READ, permission))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--decisions", type=int, default=200_000)
    args = parser.parse_args()
    config = dataclasses.replace(Config(), authorizer_class_name="bmq")
    authorizer = Authorizer(config, _stored(bindings(args.acls)))
    n = args.decisions
    start = time.perf_counter()
    for i in range(n):      # a new resource each time: no cache hit
        authorizer.authorize(f"User:user{i % 100}", "127.0.0.1", Operation.WRITE,
                             ResourceType.TOPIC, f"team{i % 50}-orders-{i}")
    uncached = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for i in range(n):      # the same few resources: what a steady producer asks
        authorizer.authorize(f"User:user{i % 100}", "127.0.0.1", Operation.WRITE,
                             ResourceType.TOPIC, f"topic-{i % 8}")
    cached = (time.perf_counter() - start) / n
    print(f"{args.acls} ACLs: a decision takes {uncached * 1e6:.2f} us uncached, "
          f"{cached * 1e6:.2f} us cached")


if __name__ == "__main__":
    main()
