# The two commands: `make run` (example MCP server on 127.0.0.1:8000) and `make test` (everything).
.PHONY: run test test-loaded typecheck docs services-stop bench conformance-server conformance

run:
	scripts/bootstrap.sh run
	.venv/bin/python examples/quickstart.py

test:
	scripts/test.sh

# `make test-loaded`: the same suite with stress-ng busying every core (no test may need a quiet machine).
test-loaded:
	scripts/test_loaded.sh

typecheck:
	scripts/bootstrap.sh test
	.venv/bin/pyright

# `make docs`: the docs site (mkdocs.yml: MkDocs + Material, the API reference from the docstrings)
# served with live reload on http://127.0.0.1:$(DOCS_PORT) (DOCS_PORT=... for another port).
DOCS_PORT ?= 8001
docs:
	scripts/bootstrap.sh test
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

conformance-server:
	scripts/bootstrap.sh test
	.venv/bin/python examples/conformance_server.py 8931

services-stop:
	scripts/services.sh stop

# `make bench`: project vs official SDK vs FastMCP vs bare FastAPI, workloads a b c cm d, 3 x 3 s (a few
# minutes); options through BENCH_ARGS, e.g. make bench BENCH_ARGS="--all --reps 5" (see bench/README.md).
BENCH_ARGS ?=
bench:
	scripts/bootstrap.sh test
	.venv/bin/python -m bench.harness $(BENCH_ARGS)

conformance:
	scripts/bootstrap.sh test --with-node
	.venv/bin/pytest -q -p no:cacheprovider -rP tests/conformance
