#!/usr/bin/env python3
"""Generate ``bmq/protocol/messages/`` from Kafka's message JSON specs.

The specs are the ``*.json`` files Apache Kafka ships (``clients/.../common/message``); we read
the copies bundled in the installed ``kafka`` (kafka-python) package.  For every spec with an
``apiKey`` (plus the ``data`` specs ``ConsumerProtocolSubscription``/``Assignment``) we emit one
module with a slotted dataclass per struct and straight-line ``read``/``write`` functions with
``if version ...`` conditionals, like Kafka's Java generator does.  ``__init__.py`` gets the
``REQUEST_TYPES``/``RESPONSE_TYPES`` registries and imports each module on first use.  BMQ's
own internal APIs (proxy <-> broker, api keys from 32000 up), the few Kafka APIs that
kafka-python's copy lacks (ConsumerGroupHeartbeat, ConsumerGroupDescribe), and the keys and
values of Kafka's internal topics that BMQ writes in Kafka's format (``coordinator-key`` specs,
whose api key is the record type written before the key, and ``data`` specs) are specs in the
same format under ``bmq/protocol/specs/``.

Usage::

    python tools/gen_protocol.py           # (re)write bmq/protocol/messages/
    python tools/gen_protocol.py --check   # exit 1 if the committed files are stale

The output is deterministic and formatted the way ``ruff format`` would format it.

The generator is the package ``tools/protocol_gen/``; this is its command.
"""

import sys
from pathlib import Path

# tools/ is no package: put it on the path for protocol_gen when this file is imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from protocol_gen.cli import main

if __name__ == "__main__":
    sys.exit(main())
