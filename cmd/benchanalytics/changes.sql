-- A registry history for the bench: the five MCP deployments of gen.sql
-- (fleet-00 .. fleet-04), 8 servers each listing 60 tools (neighbours share
-- 15 names: collisions; the last two servers have the lower trust:
-- shadowing), listed an hour before the span starts, then each week a
-- seventh of each server's tools changes.
INSERT INTO {db}.registry_changes (registry, server, tool, observed_at, event_id, change, trust_before, trust_after,
    digest_before, digest_after, props_added, props_removed, props_retyped, required_added, required_removed,
    enum_added, enum_removed, other, summary, recorded_at, deleted)
WITH toDateTime64({end:String}, 3, 'UTC') - toIntervalDay({days:UInt32}) - toIntervalHour(1) AS t0
SELECT
    concat('fleet-0', toString(r)) AS registry,
    ['github','gitlab','jira','slack','sqlite','postgres','fs','browser'][s + 1] AS server,
    concat('tool_', toString((s * 45 + k) % 400)) AS tool,
    t0 + toIntervalDay(w * 7) + toIntervalMinute(s) AS observed_at,
    concat('l-', toString(r), '-', toString(s), '-', toString(w)) AS event_id,
    if(w = 0, 'added', 'changed') AS change,
    if(w = 0, 0, if(s >= 6, 1, 2)) AS trust_before,
    if(s >= 6, 1, 2) AS trust_after,
    if(w = 0, '', concat('sha256:', toString(w - 1), '-', toString(k))) AS digest_before,
    concat('sha256:', toString(w), '-', toString(k)) AS digest_after,
    if(w = 0, ['/a', '/b'], [concat('/x', toString(w))]) AS props_added,
    [] AS props_removed, [] AS props_retyped, [] AS required_added, [] AS required_removed,
    [] AS enum_added, [] AS enum_removed, [] AS other,
    if(w = 0, 'added: +/a +/b', concat('changed: +/x', toString(w))) AS summary,
    now64(3) AS recorded_at,
    0 AS deleted
FROM (SELECT arrayJoin(range(5)) AS r) AS rs
CROSS JOIN (SELECT arrayJoin(range(8)) AS s) AS ss
CROSS JOIN (SELECT arrayJoin(range(60)) AS k) AS ks
CROSS JOIN (SELECT arrayJoin(range(toUInt64(intDiv({days:UInt32}, 7) + 1))) AS w) AS ws
WHERE w = 0 OR k % 7 = w % 7
