"""The security documents as a node holds them: changes made through this node and those a watch
reports finish on different threads in any order, and an older version never replaces a newer
one; concurrent changes through one node all land."""

from __future__ import annotations

import threading
from pathlib import Path

from bmq.config import Config
from bmq.metadata.acls import AclBinding, AclStore, Operation, PatternType, Permission, ResourceType
from bmq.metadata.documents import StorageDocuments
from bmq.security.authorizer import Authorizer
from bmq.storage.local import LocalStorage


def _acl(name: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, PatternType.LITERAL, "User:alice", "*",
                      Operation.READ, Permission.ALLOW)


def _store(tmp_path: Path) -> AclStore:
    return AclStore(StorageDocuments(LocalStorage(str(tmp_path)))).load()


def test_an_older_version_never_replaces_a_newer_one(tmp_path: Path) -> None:
    store = _store(tmp_path)
    older = store._serialize([_acl("a")])
    newer = store._serialize([_acl("a"), _acl("b")])
    store.reload(newer, 7)
    store.reload(older, 6)          # a slower thread, or a late watch
    assert store.bindings == [_acl("a"), _acl("b")]
    store.reload(older, 8)
    assert store.bindings == [_acl("a")]


def test_concurrent_changes_all_land_and_are_enforced(tmp_path: Path) -> None:
    store = _store(tmp_path)
    authorizer = Authorizer(Config(authorizer_class_name="bmq"), store)
    names = [f"t{i}" for i in range(64)]
    threads = [threading.Thread(target=authorizer.create, args=([_acl(name)],))
               for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.resource_name for a in _store(tmp_path).bindings) == sorted(names)
    assert all(authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, name)
               for name in names)


def test_a_write_cut_short_leaves_no_temporary_file_for_good(tmp_path: Path) -> None:
    (tmp_path / "acls.json.tmp.4242.1.7").write_bytes(b'{"acls": [')   # kill -9 mid-write
    store = _store(tmp_path)
    assert store.bindings == [] and not list(tmp_path.glob("*.tmp.*"))
