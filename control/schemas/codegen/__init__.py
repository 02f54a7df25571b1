"""Generated code from learned schemas: TypeScript, zod, JSON Schema, and Next.js / Express handlers.

Made on each request from a version's fields, never cached. ``tree`` turns fields back into a tree of
nodes, ``typescript`` writes interfaces and zod schemas, ``jsonschema`` draft 2020-12, ``handlers`` a ready
webhook route verifying the provider's signature scheme.
"""
