"""`bmq group list` and `bmq group describe` of a share group: members and assignments, and
per share-partition the records in flight and archived, and the lag."""

from __future__ import annotations

import json
from typing import Any

from tests.cli.conftest import Bmq
from tests.groups.wire import RawClient
from tests.share.helpers import create_topic, produce, set_group_configs, unique
from tests.share.test_wire import ACCEPT, acknowledge, acquired, fetch, heartbeat

REJECT = 3


def test_group_list_and_describe_show_a_share_group(share_broker: Any) -> None:
    topic, group = unique("gcli"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, topic, 10)
    bmq = Bmq(share_broker.bootstrap)
    with RawClient(share_broker.bootstrap) as client:
        joined = heartbeat(client, group, "worker-1", 0, [topic])
        topic_id = joined.assignment.topic_partitions[0].topic_id
        assert acquired(fetch(client, group, "worker-1", 0, topic_id)) == [(0, 9, 1)]
        acknowledge(client, group, "worker-1", 1, topic_id, [(0, 3, ACCEPT), (6, 6, REJECT)])
        listed = json.loads(bmq("group", "list", "-o", "json").out)
        # Spelled as the other groups' states are (EMPTY, STABLE).
        assert {"group": group, "state": "STABLE", "type": "share", "protocol": "share"} \
            in listed
        doc = json.loads(bmq("group", "describe", group, "-o", "json").out)
        assert (doc["type"], doc["state"], doc["assignor"]) == ("share", "STABLE", "simple")
        (member,) = doc["members"]
        assert (member["member_id"], member["assignment"]) == ("worker-1", [f"{topic}-0"])
        (partition,) = doc["partitions"]
        # 0-3 accepted, 6 rejected (archived, no dead-letter topic), 4, 5, 7-9 in flight.
        assert {k: partition[k] for k in ("topic", "start_offset", "end_offset",
                                          "high_watermark", "in_flight", "archived", "lag")} \
            == {"topic": topic, "start_offset": 4, "end_offset": 10, "high_watermark": 10,
                "in_flight": 5, "archived": 1, "lag": 5}
        assert (doc["in_flight"], doc["archived"], doc["total_lag"]) == (5, 1, 5)
        text = bmq("group", "describe", group).out
        assert f"Share group {group}: STABLE" in text and "worker-1" in text


def test_group_configs_are_set_described_and_removed_with_bmq_group(share_broker: Any) -> None:
    topic, group = unique("gcfg"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    produce(share_broker.bootstrap, topic, 5)
    bmq = Bmq(share_broker.bootstrap)
    bmq("group", "alter-config", group, "--set", "share.auto.offset.reset=earliest",
        "--set", "share.record.lock.duration.ms=20000")
    doc = json.loads(bmq("group", "describe-config", group, "-o", "json").out)
    configs = {c["name"]: c for c in doc["configs"]}
    assert configs["share.auto.offset.reset"]["value"] == "earliest"
    assert not configs["share.auto.offset.reset"]["default"]
    assert configs["share.record.lock.duration.ms"]["value"] == "20000"
    text = bmq("group", "describe-config", group).out
    assert "share.auto.offset.reset" in text and "earliest" in text
    # The config holds: a new share consumer starts at the records written before it came.
    with RawClient(share_broker.bootstrap) as client:
        joined = heartbeat(client, group, "worker-1", 0, [topic])
        topic_id = joined.assignment.topic_partitions[0].topic_id
        assert acquired(fetch(client, group, "worker-1", 0, topic_id)) == [(0, 4, 1)]
    bmq("group", "alter-config", group, "--delete", "share.auto.offset.reset")
    doc = json.loads(bmq("group", "describe-config", group, "-o", "json").out)
    assert {c["name"]: c["default"] for c in doc["configs"]}["share.auto.offset.reset"]
    refused = bmq("group", "alter-config", group, "--set", "no.such.config=1", check=False)
    assert refused.code == 1 and "no.such.config" in refused.err, refused
