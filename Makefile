# The two commands the README gives. Both set up everything they need first.
.PHONY: serve hdfs test test-slow lint

# Set up and run a broker on localhost:9092 with data in ./bmq-data; ARGS='...' adds flags of
# `bmq serve` (make serve ARGS='--listen 0.0.0.0:9092').
ARGS ?=
serve:
	./scripts/setup.sh
	.venv/bin/bmq serve $(ARGS)

# A local HDFS for trying BMQ on hdfs://: Hadoop's MiniDFSCluster, a NameNode on
# hdfs://127.0.0.1:8020 and 3 DataNodes, data in ./hdfs-data (wiped at each start); Ctrl-C stops
# it. Needs Java 17+ and Maven. ARGS='...' adds the launcher's flags (scripts/hdfs.sh).
hdfs:
	./scripts/hdfs.sh run $(ARGS)

# Set up and run every check and test: lint, types, unit and real-client integration tests.
test:
	./scripts/setup.sh --tests
	$(MAKE) lint
	.venv/bin/pytest -q -p no:cacheprovider --durations=25

# The slow set too: further fault scenarios (S3 variants, crashes) run before resolving an issue.
test-slow:
	./scripts/setup.sh --tests
	BMQ_SLOW_TESTS=1 .venv/bin/pytest -q -p no:cacheprovider

lint:
	.venv/bin/ruff check bmq tests bench tools
	.venv/bin/mypy
