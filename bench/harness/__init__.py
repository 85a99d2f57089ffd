"""The HTTP benchmark runner (``make bench``, ``python -m bench.harness --help``).

Modules, in the order data flows: ``workloads`` (requests and response checks), ``servers``
(specs, uvicorn processes), ``environment`` (wrk, the peers' venv), ``capture`` (the project's
``tools/list`` for the ceiling), ``preflight`` (one checked request per workload), ``wrk`` (one
measured run, ``check.lua``), ``report`` (medians, paired ratios, tables), ``cli`` (the run).
"""
