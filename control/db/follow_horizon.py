"""The follow's horizon: the storing position below which no event of this database can appear any more.

``events/wait?after=`` answers a match only once its ``stored_xid`` is below the horizon of the snapshot it was
read in (``control.service.events.follow``). The snapshot's xmin would do, but it is cluster-wide: a long
writing transaction in any database of the server (another app's migration, a psql session left open after an
UPDATE) held every follower until it ended (ADR 0081). The horizon is instead the smallest in-progress xid of
the snapshot (``pg_snapshot_xip``) that could store an event here, or the snapshot's xmax when there is none:
every transaction below it that could have stored one had finished when the snapshot was taken, so its events
are all visible in the same snapshot the match was read from.

Transactions that cannot store an event are identified positively, never guessed: an xip passes when the
backends showing it as ``backend_xid`` are all another database's (``pg_stat_activity.datid``), or of this
database but not hookyard's (an ``application_name`` not starting with ``connection.MARK``, which every
connection hookyard opens carries: ADR 0087), or a prepared transaction of another database
(``pg_prepared_xacts``) has it. A transaction belongs to the one backend and database it began in for its
whole life, and an xid is never reused within the 2^31 transactions around the snapshot, so a positive
match names the right transaction. Only hookyard stores events (the flush, ``control.db.flush``); a
transaction of another client inserting events by hand is unsupported, and one that calls itself hookyard
merely holds followers as before. Anything else holds the horizon: a transaction that ended between the
snapshot and the stats read (no backend shows it any more), a backend the stats cannot show, a backend with
no database or no name (``datid`` or ``application_name`` NULL), a prepared transaction of this database. A
race can only hold a follower one look longer, never let it move past an event its snapshot could not see
yet. ``pg_stat_activity`` shows ``datid``, ``application_name`` and ``backend_xid`` of every backend to every
role (tested on PostgreSQL 15 with a role without ``pg_read_all_stats``: the query text and state are
hidden, those are not); were a server to hide them, they would read NULL and the horizon would fall back to
what xmin gave.

The xip are ``xid8`` and ``backend_xid`` a 32-bit ``xid``: ``xid(xid8)`` keeps the low 32 bits (the epoch
dropped), which is the 32-bit xid the backend shows, across wraparound. A snapshot with no xip at all answers
its xmin: equal to xmax on a primary, or our own xid if the caller's transaction wrote (our own xid is never in
the xip, so it is added to the smallest as well), and right on a standby (a snapshot taken in recovery keeps
its xids in ``subxip``, which ``pg_current_snapshot`` leaves out).

Reading the stats is the dear part: ``pg_stat_get_activity`` copies every backend slot into memory it
allocates afresh in each transaction, about 0.1 ms of server time (a round trip of 130 µs went to 234 µs on a
loaded 2-core machine; ADR 0081), where the rest of a look reads a few index pages. So it is read only when it
can change the answer: a match found at or above xmin (one xmin would hold) with an xip in the snapshot, and
then once per statement (a hashed subplan). A look with no match, or with one below xmin, costs what it did.
With no match the position moves only as far as xmin, as before: that never delays an answer, since the next
match is judged by this horizon.
"""

from __future__ import annotations

from control.db.connection import MARK

__all__ = ("SNAPSHOT", "horizon")

SNAPSHOT = "(SELECT pg_current_snapshot() AS snap) s"
"""The FROM item ``horizon`` reads: the statement's own snapshot, the one its other reads see."""

_XMIN = "pg_snapshot_xmin(s.snap)::text::bigint"
_UNABLE = f"""coalesce(a.datid IS NOT NULL AND a.application_name IS NOT NULL
    AND (a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
         OR a.application_name NOT LIKE '{MARK}%'), false)"""
"""A backend (``pg_stat_activity a``) whose transaction cannot store an event here: another database's, or
one of this database that is not hookyard's. A NULL anywhere (no database, a name the stats hide) is false."""
_OURS = f"""CASE
    WHEN NOT EXISTS (SELECT FROM pg_snapshot_xip(s.snap)) THEN {_XMIN}
    ELSE least(
        coalesce(
            (SELECT min(x.xip::text::bigint) FROM pg_snapshot_xip(s.snap) x(xip)
              WHERE xid(x.xip) NOT IN (
                    SELECT a.backend_xid FROM pg_stat_activity a
                     WHERE a.backend_xid IS NOT NULL
                     GROUP BY a.backend_xid HAVING bool_and({_UNABLE})
                    UNION ALL
                    SELECT p.transaction FROM pg_prepared_xacts p WHERE p.database <> current_database())),
            pg_snapshot_xmax(s.snap)::text::bigint),
        pg_current_xact_id_if_assigned()::text::bigint)
    END"""


def horizon(match_xid: str) -> str:
    """The horizon (bigint) as an expression over ``SNAPSHOT``, for a statement that found a match at
    ``match_xid`` (an SQL bigint expression, NULL for none). xmin when that settles it (no match, or one
    below it); the stats are read only for a match that xmin would hold."""
    return f"CASE WHEN coalesce({match_xid} >= {_XMIN}, false) THEN {_OURS} ELSE {_XMIN} END"
