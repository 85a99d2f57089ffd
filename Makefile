# The two commands: `make run` (example MCP server on 127.0.0.1:8000) and `make test` (everything).
.PHONY: run test typecheck services-stop bench conformance-server conformance

run:
	scripts/bootstrap.sh
	.venv/bin/python examples/quickstart.py

test:
	scripts/test.sh

typecheck:
	scripts/bootstrap.sh
	.venv/bin/pyright

conformance-server:
	scripts/bootstrap.sh
	.venv/bin/python examples/conformance_server.py 8931

services-stop:
	scripts/services.sh stop

bench:
	scripts/bootstrap.sh
	BENCH_PROJECT_PY=$(CURDIR)/.venv/bin/python ../shared/bench/run.sh project peer-sdk -- --reps 3

conformance:
	scripts/bootstrap.sh --with-node
	.venv/bin/pytest -q -p no:cacheprovider -rP tests/conformance
