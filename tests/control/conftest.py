"""The control plane in process (the Litestar app on the test's database and Redis prefix): every /v1 resource,
/api/start and /api/register, /inbox, /llms.txt, the MCP catalog, the error envelope, and the database's
migrations and partitions."""
