"""Apache Kafka's own command-line tools, run as an operator runs them: `scripts/kafka.sh TOOL ARGS`
(Kafka 4.4's jars from tools/kafka, each tool a JVM of its own), against one bootstrap address.

    kafka = KafkaTools(broker.bootstrap)
    kafka("kafka-topics", "--create", "--topic", "t", "--partitions", "3")
    kafka("kafka-topics", "--describe", "--topic", "nope", check=False).code == 1
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.cli.conftest import Result

REPO = Path(__file__).resolve().parents[2]
KAFKA_SCRIPT = REPO / "scripts" / "kafka.sh"
# A JVM start and one admin round trip take about a second on an idle machine; several times
# that while other tests load it.
TOOL_TIMEOUT_S = 120.0


def build() -> None:
    """Resolves Kafka's jars once (Maven's local repository keeps them)."""
    subprocess.run([str(KAFKA_SCRIPT), "build"], check=True, timeout=900)


class KafkaTools:
    """Runs Kafka's tools against one bootstrap address (``--bootstrap-server`` is added)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __call__(self, tool: str, *args: str, stdin: str | None = None, check: bool = True,
                 timeout: float = TOOL_TIMEOUT_S) -> Result:
        # First: kafka-transactions.sh takes it only before its subcommand.
        argv = [str(KAFKA_SCRIPT), tool, "--bootstrap-server", self.bootstrap, *args]
        ran = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                             timeout=timeout, check=False)
        result = Result(ran.returncode, ran.stdout, ran.stderr)
        if check:
            assert result.code == 0, f"{tool} {' '.join(args)} failed: {result}"
        return result


def rows(text: str) -> list[list[str]]:
    """The rows of a table a tool prints (columns split on whitespace), without the header
    lines (those whose first column is upper case: GROUP, TOPIC, TransactionalId ...), the
    tools' sentences ("Warn: ...", "Request succeeded for ...") or blank lines."""
    table = [line.split() for line in text.splitlines() if line.strip()]
    return [row for row in table if not row[0].isupper() and row[0] not in _HEADER_WORDS
            and not row[0].endswith(":") and not row[-1].endswith(".")]


# kafka-transactions.sh heads its tables with camel-case column names.
_HEADER_WORDS = {"TransactionalId", "CoordinatorId", "ProducerId", "Topic"}


def offsets(text: str) -> dict[tuple[str, int], int]:
    """kafka-get-offsets.sh's lines TOPIC:PARTITION:OFFSET."""
    found: dict[tuple[str, int], int] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"(.+):(\d+):(-?\d+)", line.strip())
        if match:
            found[(match.group(1), int(match.group(2)))] = int(match.group(3))
    return found
