"""What an app registers and how one call of it runs: tools, resources, prompts, completions, the
bridge into FastAPI's dependency solver, result shaping.

Imports ``_transport`` (the subscription registry), ``context``, ``_auth``, the declarations and the leaves;
imported by ``_server``, ``router`` and ``testing``.
"""
