"""The edge's stream writes on a Redis Cluster: each command to the node owning its key's slot.

``edge.resp.RespConnection`` stays the writer (one pipelined connection per node, hiredis parsing; see its
docstring for why not redis-py on this path); only the routing is added here, and the slot map is redis-py's
own (``RedisCluster.nodes_manager``, the client the edge opens for its config reads anyway): this module
discovers nothing itself.

``execute`` takes the same commands as ``RespConnection.execute`` (each one's second element is its key),
sends each node's commands as one pipeline, all nodes at once, and answers the replies in the callers' order.
Redirections are followed the way the cluster protocol says, and neither runs the command on the node
that answered it, so following them can neither lose nor repeat a write:

- ``MOVED slot host:port``: the slot has a new owner. redis-py's ``move_slot`` patches its map with it
  (the same call its own client makes), and the command is sent again to the new owner.
- ``ASK slot host:port``: the slot is being migrated and the key is already on the target. The command is
  sent there once, behind ``ASKING``; the map is left alone until the migration ends in a MOVED.

A node that cannot be reached fails its own commands (their replies are the ``ConnectionError``; the edge
answers those shards' requests 503, nothing of them acknowledged; the other nodes' commands stand) and has
the client reload the whole map, so the next batch goes to whichever node took over the slot.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError

from edge.resp import Command, RespConnection, RespError

__all__ = ("MAX_REDIRECTS", "ClusterRespConnection")

MAX_REDIRECTS = 5
"""Rounds of MOVED/ASK one call follows before its commands fail (a resharding moves a slot once)."""

log = logging.getLogger("hookyard.edge")

Address = tuple[str, int]


class ClusterRespConnection:
    def __init__(self, url: str, cluster: RedisCluster, *, reply_timeout_s: float = 5.0) -> None:
        self._url = url
        self._cluster = cluster
        self._reply_timeout_s = reply_timeout_s
        self._nodes: dict[Address, RespConnection] = {}
        self._slots: dict[bytes, int] = {}
        self._reloading: asyncio.Task[None] | None = None

    def _owner(self, key: bytes) -> Address:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = key_slot(key)
        node = self._cluster.nodes_manager.get_node_from_slot(slot)
        return node.host, int(node.port)

    def _connection(self, address: Address) -> RespConnection:
        connection = self._nodes.get(address)
        if connection is None:
            connection = self._nodes[address] = RespConnection(
                self._url, host=address[0], port=address[1], reply_timeout_s=self._reply_timeout_s
            )
        return connection

    async def execute(self, commands: list[Command]) -> list[Any]:
        """Every command's reply, in order; error replies (a redirection followed too often included) are
        :class:`RespError` values in the list, as from ``RespConnection``, and the commands of a node that
        did not answer have its exception as their reply."""
        replies: list[Any] = [None] * len(commands)
        asking: dict[int, Address] = {}
        todo = list(range(len(commands)))
        for _ in range(MAX_REDIRECTS + 1):
            by_node: dict[Address, list[int]] = {}
            for i in todo:
                by_node.setdefault(asking.get(i) or self._owner(commands[i][1]), []).append(i)
            sent = list(by_node.items())
            sends = [self._send(a, [commands[i] for i in idx], asking=[i in asking for i in idx]) for a, idx in sent]
            results = await asyncio.gather(*sends, return_exceptions=True)
            todo, asking = [], {}
            for (_, idx), result in zip(sent, results, strict=True):
                if isinstance(result, BaseException):
                    if not isinstance(result, Exception):  # cancellation and the like end the call
                        raise result
                    self._reload()
                    for i in idx:
                        replies[i] = result
                    continue
                for i, reply in zip(idx, result, strict=True):
                    replies[i] = reply
                    if isinstance(reply, RespError):
                        text = str(reply)
                        if text.startswith("MOVED "):
                            await self._cluster.nodes_manager.move_slot(MovedError(text[6:]))
                            todo.append(i)
                        elif text.startswith("ASK "):
                            redirect = AskError(text[4:])
                            asking[i] = (redirect.host, int(redirect.port))
                            todo.append(i)
            if not todo:
                return replies
        log.warning("redis cluster: %d command(s) still redirected after %d rounds", len(todo), MAX_REDIRECTS)
        return replies

    async def _send(self, address: Address, commands: list[Command], *, asking: list[bool]) -> list[Any]:
        if not any(asking):
            return await self._connection(address).execute(commands)
        wire: list[Command] = []
        for command, ask in zip(commands, asking, strict=True):
            if ask:
                wire.append((b"ASKING",))
            wire.append(command)
        replies = await self._connection(address).execute(wire)
        out, at = [], 0
        for ask in asking:
            at += ask  # the ASKING reply (+OK) is not the caller's
            out.append(replies[at])
            at += 1
        return out

    def _reload(self) -> None:
        """Has redis-py reload the slot map (one reload at a time), after a node failed to answer."""
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.create_task(self._reload_now())

    async def _reload_now(self) -> None:
        try:
            await self._cluster.nodes_manager.initialize()
        except Exception as exc:  # noqa: BLE001 - the next failure tries again
            log.warning("redis cluster: could not reload the slot map (%s)", exc)

    async def aclose(self) -> None:
        if self._reloading is not None:
            self._reloading.cancel()
        nodes, self._nodes = self._nodes, {}
        for connection in nodes.values():
            await connection.aclose()
