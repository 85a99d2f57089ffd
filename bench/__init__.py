"""The project's benchmarks: ``bench.harness`` (the HTTP runner, ``make bench``), ``bench.servers``
(the servers it compares) and ``bench_state.py`` (the ``ctx.state`` benchmark). See ``bench/README.md``."""
