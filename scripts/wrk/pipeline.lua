-- Pipelines N requests per write, as TechEmpower's plaintext test does:
--
--   wrk -t1 -c256 -d5s -s scripts/wrk/pipeline.lua http://127.0.0.1:PORT/plaintext -- 16
--
-- The argument after `--` is the depth (default 1: no pipelining). wrk sends the batch,
-- counts every response in it, and sends the next batch once all have arrived.

local batch

init = function(args)
  local depth = tonumber(args[1] or "1")
  if depth == nil or depth < 1 then
    error("pipeline.lua: the depth must be a whole number >= 1, got " .. tostring(args[1]))
  end
  local one = wrk.format(nil, nil, nil, nil)
  batch = string.rep(one, math.floor(depth))
end

request = function()
  return batch
end

-- One line for cargo xtask bench (run/wrk.rs reads it): the responses counted and their
-- latency in µs, which wrk's own summary gives without a p95.
done = function(summary, latency, requests)
  io.write(string.format("ringside: requests %d latency_us p50 %d p95 %d p99 %d max %d\n",
    summary.requests, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max))
end
