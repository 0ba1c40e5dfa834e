-- Synthetic decisions for the analytics bench: rows {from} .. {from}+{n}-1
-- of {total}, spread evenly over {days} days ending at {end}. A fleet of 20
-- registries (5 of them MCP deployments of 8 servers), 12 models, 4
-- surfaces, 5,000 agents, sessions of 20 calls, 400 tools; classes at
-- realistic rates (85% OK). Call keys are hashes, as hosts' UUIDs are. About
-- 2% of the calls were decided in the call path (API 1.5%, gateway 0.5%);
-- with {pair} = 1 the query returns the stream's decision of those same
-- calls instead, a tenth of them with another class (the TOCTOU view's
-- matter).
INSERT INTO {db}.decisions (event_id, verdict, class, reason, path, coercible, resolved_server, resolved_tool,
    registry_version, drift, seen_digest, current_digest, call_key, analysis_id, resolver_build, policy_version,
    source, action, suggested_tool, registry, agent_id, session_id, model, provider, surface, tool, server,
    emitted_at, decided_at, args_shape, args_hash, args_raw, topic, partition, offset)
WITH
  {total:UInt64} AS N,
  toDateTime64({end:String}, 3, 'UTC') AS t_end,
  toUInt64({days:UInt32}) * 86400000 AS span_ms,
  cityHash64(number, 1) AS h1, cityHash64(number, 2) AS h2, cityHash64(number, 3) AS h3, cityHash64(number, 4) AS h4,
  intDiv(number, 20) AS sess,
  cityHash64(sess, 7) AS hs,
  hs % 20 AS reg_i,
  hs % 12 AS model_i,
  ['OK','H1','H2','H3','H4','H5','M1','M2','M3','M4','M5','MALFORMED'] AS classes,
  arrayCumSum([8500, 300, 300, 300, 100, 50, 100, 80, 50, 100, 50, 70]) AS cum,
  arrayFirstIndex(c -> (h1 % 10000) < c, cum) AS ci,
  -- single registries (reg_i >= 5) decide no M class, MCP deployments no H1
  if(reg_i >= 5 AND ci >= 7 AND ci <= 11, 2, if(reg_i < 5 AND ci = 2, 7, ci)) AS ci2,
  h4 % 1000 < 20 AS call_path,
  if({pair:UInt8} = 1 AND h3 % 10 = 0, if(ci2 = 1, 3, 1), ci2) AS cls_i,
  classes[cls_i] AS cls,
  ['github','gitlab','jira','slack','sqlite','postgres','fs','browser'] AS servers,
  concat('tool_', toString(h2 % 400)) AS real_tool,
  if(reg_i < 5, servers[1 + (h2 % 8)], '') AS srv,
  cls IN ('H1','M1','M2','M3','MALFORMED') AS unresolved
SELECT
  concat('c-', hex(h3)) AS event_id,
  if(cls = 'OK', 'allow', 'reject') AS verdict,
  cls AS class,
  if(cls = 'OK', '', concat('reason of ', cls)) AS reason,
  if(cls IN ('H2','H3'), '/arg', '') AS path,
  cls = 'H3' AND h4 % 3 = 0 AS coercible,
  if(unresolved, '', srv) AS resolved_server,
  if(unresolved, '', real_tool) AS resolved_tool,
  if(cls = 'MALFORMED', '', concat('rv-', toString(reg_i), '-', toString(intDiv(number * 10, N)))) AS registry_version,
  h4 % 200 = 0 AS drift,
  if(cls = 'M4', 'sha256:old', '') AS seen_digest,
  if(unresolved, '', concat('sha256:', toString(h2 % 400))) AS current_digest,
  concat('c-', hex(h3)) AS call_key,
  'live' AS analysis_id, 'bench' AS resolver_build, 'strict/v1' AS policy_version,
  if({pair:UInt8} = 1, 'stream', multiIf(h4 % 1000 < 15, 'api', call_path, 'gateway', 'stream')) AS source,
  if(source = 'stream', '', 'enforced') AS action,
  if(cls IN ('H1','M1') AND h4 % 10 < 7, real_tool, '') AS suggested_tool,
  concat('fleet-', leftPad(toString(reg_i), 2, '0')) AS registry,
  concat('agent-', toString(hs % 5000)) AS agent_id,
  concat('s-', toString(sess)) AS session_id,
  ['gpt-5','gpt-5-mini','claude-opus-4','claude-sonnet-4','gemini-2.5-pro','gemini-2.5-flash','mistral-large-3','llama-4','qwen3','deepseek-v3','command-r','grok-4'][1 + model_i] AS model,
  ['openai','openai','anthropic','anthropic','google','google','bedrock','bedrock','openrouter','openrouter','cohere','xai'][1 + model_i] AS provider,
  ['raw_json','schema_enforced','mcp','raw_json'][1 + (reg_i % 4)] AS surface,
  multiIf(cls IN ('H1','M1') AND h4 % 10 < 7, concat(['functions.','','',''][1 + h4 % 4], real_tool, ['s','','_v2',''][1 + bitShiftRight(h4, 8) % 4]),
          cls IN ('H1','M1'), concat('invented_', toString(h4 % 5000)),
          real_tool) AS tool,
  '' AS server,
  t_end - toIntervalMillisecond(span_ms - intDiv(number * span_ms, N)) AS emitted_at,
  emitted_at + toIntervalMillisecond(if({pair:UInt8} = 1, 4000, 2500)) AS decided_at,
  '{"arg":"string"}' AS args_shape,
  concat('sha256:', hex(h4)) AS args_hash,
  '' AS args_raw,
  if(source = 'stream', 'tool-calls', 'tool-audit') AS topic, toInt32(h3 % 12) AS partition, toInt64(number) AS offset
FROM numbers({from:UInt64}, {n:UInt64})
WHERE {pair:UInt8} = 0 OR call_path
SETTINGS max_insert_threads = 2
