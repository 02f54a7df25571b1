"""The MCP server at /mcp: every /v1 operation as a tool, over the same service functions.

- ``mount``      the Litestar route and lifespan (Streamable HTTP, stateless, Bearer keys and ``hy_tmp_``)
- ``auth``       the mount's middleware over the service's credential check (as /v1's, temporary tokens too)
- ``server``     tools/list and tools/call on the SDK's low-level server; the per-app tool catalog
- ``registry``   ``@tool``: a tool is a thin async adapter with its hints; names, summaries, arguments
- ``arguments``  tool arguments decoded by the /v1 body decoder, with its messages
- ``schemas``    input schemas from the OpenAPI document (or the records), output schemas from the records
- ``errors``     failures as tool errors carrying the /v1 error envelope
- ``tools/``     one module per resource
- ``llms``       GET /llms.txt: how an agent uses this instance, from the OpenAPI document and the tool catalog
"""

from __future__ import annotations

from control.mcp.mount import McpMount

__all__ = ("McpMount",)
