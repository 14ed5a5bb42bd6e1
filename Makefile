# The two commands the README gives. Both set up everything they need first.
.PHONY: serve test test-slow lint

# Set up and run a broker on localhost:9092 with data in ./bmq-data; ARGS='...' adds flags of
# `bmq serve` (make serve ARGS='--listen 0.0.0.0:9092').
ARGS ?=
serve:
	./scripts/setup.sh
	.venv/bin/bmq serve $(ARGS)

# Set up and run every check and test: lint, types, unit and real-client integration tests.
test:
	./scripts/setup.sh --tests
	$(MAKE) lint
	.venv/bin/pytest -q -p no:cacheprovider

# The slow set too: further fault scenarios (S3 variants, crashes) run before resolving an issue.
test-slow:
	./scripts/setup.sh --tests
	BMQ_SLOW_TESTS=1 .venv/bin/pytest -q -p no:cacheprovider

lint:
	.venv/bin/ruff check bmq tests bench tools
	.venv/bin/mypy
