"""``python -m fastapi_mcp_ctx._stdio APP``: serve an app's ``McpRouter`` on stdin/stdout (:mod:`.serve`)."""

import sys

from .serve import main

sys.exit(main())
