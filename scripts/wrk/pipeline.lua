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

-- One line for cargo xtask bench (xtask/src/run/wrk.rs reads it): the responses counted and
-- their latency in µs. The percentiles are counted here from wrk's histogram, because
-- `latency:percentile` (and wrk's own --latency table) answers 0 above the median once
-- requests are pipelined.
done = function(summary, latency, requests)
  -- Each latency(i) walks the histogram: read it once.
  local values, counts, total = {}, {}, 0
  for i = 1, #latency do
    values[i], counts[i] = latency(i)
    total = total + counts[i]
  end
  local wanted = { 0.50, 0.95, 0.99 }
  local found = {}
  local seen = 0
  for i = 1, #values do
    seen = seen + counts[i]
    for k, p in ipairs(wanted) do
      if found[k] == nil and seen >= p * total then
        found[k] = values[i]
      end
    end
  end
  io.write(string.format("ringside: requests %d latency_us p50 %d p95 %d p99 %d max %d\n",
    summary.requests, found[1] or 0, found[2] or 0, found[3] or 0, latency.max))
end
