-- wrk script of bench.harness: one fixed POST, and a check of every response.
--
-- Environment (set by bench/harness/wrk.py):
--   BENCH_BODY         file with the request body          BENCH_HEADERS  file of "Name: value" lines
--   BENCH_EXPECT       substring every good body contains  (empty: status only)
--   BENCH_REPEAT       substring a good body contains exactly BENCH_REPEAT_COUNT times (workload p)
--   BENCH_MAX          responses per thread, then the thread stops (the count bound)
--   BENCH_UNIQUE_IDS   "1": a fresh JSON-RPC id per request (requests sharing one session)
-- Output: one line "BENCH_RESULT {json}", and "BENCH_BAD <status> <body start>" for the first bad response.

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

wrk.method = "POST"
wrk.body = slurp(assert(os.getenv("BENCH_BODY"), "BENCH_BODY not set"))
wrk.headers["Content-Type"] = "application/json"
for line in slurp(assert(os.getenv("BENCH_HEADERS"), "BENCH_HEADERS not set")):gmatch("[^\r\n]+") do
  local k, v = line:match("^([^:]+):%s*(.-)%s*$")
  if k then wrk.headers[k] = v end
end

local expect = os.getenv("BENCH_EXPECT") or ""
local repeat_sub = os.getenv("BENCH_REPEAT") or ""
local repeat_count = tonumber(os.getenv("BENCH_REPEAT_COUNT") or "0")
local max = tonumber(os.getenv("BENCH_MAX") or "1000000")

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

if os.getenv("BENCH_UNIQUE_IDS") == "1" then
  local head, tail = wrk.body:match('^(.-"id":)1(,.*)$')
  assert(head, 'the body must hold "id":1')
  local n = 0
  function request()
    n = n + 1
    return wrk.format(nil, nil, nil, head .. tostring((tid or 1) * 1000000000 + n) .. tail)
  end
end

ok, bad, first_bad = 0, 0, ""

local function count(body, sub)
  local n, from = 0, 1
  while true do
    local s, e = body:find(sub, from, true)
    if not s then return n end
    n, from = n + 1, e + 1
  end
end

function response(status, headers, body)
  local good = status == 200 and body ~= nil
    and (expect == "" or body:find(expect, 1, true) ~= nil)
    and (repeat_sub == "" or count(body, repeat_sub) == repeat_count)
  if good then
    ok = ok + 1
  else
    bad = bad + 1
    if first_bad == "" then first_bad = tostring(status) .. " " .. string.sub(body or "", 1, 200) end
  end
  if ok + bad >= max then wrk.thread:stop() end
end

function done(summary, latency, requests)
  local tok, tbad, sample = 0, 0, ""
  for _, t in ipairs(threads) do
    tok = tok + (t:get("ok") or 0)
    tbad = tbad + (t:get("bad") or 0)
    local s = t:get("first_bad")
    if sample == "" and s and s ~= "" then sample = s end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"ok":%d,"bad":%d,' ..
    '"socket_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.duration, summary.requests, summary.bytes, tok, tbad,
    e.connect + e.read + e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
  if sample ~= "" then io.write("BENCH_BAD " .. sample:gsub("[\r\n]", " ") .. "\n") end
end
