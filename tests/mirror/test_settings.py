"""A mirror's settings: the [mirror] table, flags over it, and what is refused before it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bmq.mirror.settings import SettingsError, load_settings

REQUIRED = {"name": "east", "source": "east:9092", "target": "localhost:9092"}


def test_flags_override_the_file_and_select_topics_and_groups(tmp_path: Path) -> None:
    path = tmp_path / "mirror.toml"
    path.write_text('[mirror]\nname = "west"\nsource = "w:9092"\ntarget = "t:9092"\n'
                    'topics = ["orders"]\ntopics_regex = "audit\\\\..*"\ngroups_regex = ".*"\n'
                    'fetch_max_bytes = 1048576\n[mirror.source_properties]\n'
                    '"security.protocol" = "SASL_SSL"\n')
    settings = load_settings(str(path), {"name": "east", "topics": (), "groups": None})
    assert settings.name == "east" and settings.fetch_max_bytes == 1 << 20
    assert settings.source_properties == {"security.protocol": "SASL_SSL"}
    assert [settings.topic_selected(topic) for topic in (
        "orders", "audit.eu", "audit", "__consumer_offsets")] == [True, True, False, False]
    # Every group but the mirrors' own (their work-sharing groups on the target).
    assert settings.group_selected("billing") and not settings.group_selected("bmq-mirror.east")


@pytest.mark.parametrize(("change", "error"), [
    ({"source": None}, "source is required"),
    ({"name": "a b"}, "letters, digits"),
    ({"topics": ()}, "needs topics or topics_regex"),
    ({"topics_regex": "("}, "topics_regex"),
    ({"fetch_max_bytes": "64MB"}, "fetch_max_bytes: a whole number"),
    ({"session_timeout_ms": 0}, "session_timeout_ms: a whole number of at least 1"),
    ({"unknown_thing": 1}, "unknown mirror setting"),
])
def test_bad_settings_are_refused(change: dict[str, object], error: str) -> None:
    """(A None or empty flag is an unset one.)"""
    with pytest.raises(SettingsError, match=error):
        load_settings(None, {**REQUIRED, "topics": ("orders",), **change})
