"""What an app registers and how one call of it runs: tools, resources, prompts, completions, the
bridge into FastAPI's dependency solver, result shaping.

Imports ``context``, ``_context``, ``_auth`` and below; imported by ``_server``, ``router`` and ``testing``.
"""
