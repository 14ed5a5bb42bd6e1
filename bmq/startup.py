"""Why a role could not start, as one line and an exit code.

A server that cannot serve (its port is taken, its data directory belongs to another process, a
package it needs is missing, its storage or ZooKeeper cannot be reached) says so in one line on
stderr and exits with the code of the failure's class, so scripts and supervisors can tell
"retry later" from "fix the configuration". The `bmq` command prints a ``StartupError`` raised
anywhere under a role; the codes are documented in the README (Configuration).
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1              # anything not classified below (with its traceback)
    USAGE = 2               # bad flag, setting or configuration file (click's own code)
    ADDRESS_IN_USE = 3      # the Kafka or metrics port cannot be bound
    STORAGE = 4             # data directory or storage unreadable, unwritable or unreachable
    MISSING_PACKAGE = 5     # an optional package (an extra of bmq) is not installed
    DATA_DIR_LOCKED = 6     # another bmq process holds the data directory
    ZOOKEEPER = 7           # ZooKeeper unreachable within the start-up wait


class StartupError(Exception):
    """A role cannot start; ``str(error)`` is the one line to show."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class MissingPackageError(StartupError, ModuleNotFoundError):
    """An optional package is missing. Still a ``ModuleNotFoundError`` (``name`` is the
    package), so library users (``from bmq.spark import ...``) catch it as before."""

    def __init__(self, package: str, extra: str, needed_for: str) -> None:
        super().__init__(f"{needed_for} needs the Python package {package}, which is not "
                         f"installed: pip install 'bmq[{extra}]'", ExitCode.MISSING_PACKAGE)
        self.name = package
        self.extra = extra


def missing_package(error: ModuleNotFoundError, extra: str, needed_for: str,
                    packages: frozenset[str]) -> MissingPackageError | None:
    """The ``MissingPackageError`` to raise instead of ``error`` when the module it failed on
    belongs to one of ``packages`` (those of ``extra``); None when something else is missing
    (a broken installation should keep its own message)."""
    root = (error.name or "").split(".", 1)[0]
    return MissingPackageError(root, extra, needed_for) if root in packages else None
