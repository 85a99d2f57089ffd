-- wrk script of bench/bench_mrtr.py: 2026-07-28 elicitation rounds (first call, then the retry).
--
-- Each connection sends a first call unless a retry is waiting: a first call answered
-- input_required queues its retry (the same call plus inputResponses and the echoed sealed
-- requestState); a retry answered with the tool's result completes a round. Servers are
-- stateless, so any connection may carry any retry.
--
-- Environment (set by bench/bench_mrtr.py):
--   BENCH_BODY     file with the first call's body    BENCH_HEADERS  file of "Name: value" lines
--   BENCH_ANSWER   the JSON answer sent for the one input request
--   BENCH_EXPECT   substring every completed round's result contains
--   BENCH_MAX      responses, then the thread stops (the count bound)
-- Output: "BENCH_RESULT {json}" and "BENCH_BAD <status> <body start>" for the first bad response.

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

wrk.method = "POST"
local first_body = slurp(assert(os.getenv("BENCH_BODY"), "BENCH_BODY not set"))
wrk.headers["Content-Type"] = "application/json"
for line in slurp(assert(os.getenv("BENCH_HEADERS"), "BENCH_HEADERS not set")):gmatch("[^\r\n]+") do
  local k, v = line:match("^([^:]+):%s*(.-)%s*$")
  if k then wrk.headers[k] = v end
end
local answer = assert(os.getenv("BENCH_ANSWER"), "BENCH_ANSWER not set")
local expect = assert(os.getenv("BENCH_EXPECT"), "BENCH_EXPECT not set")
local max = tonumber(os.getenv("BENCH_MAX") or "1000000")
local split = assert(first_body:find('"params":{', 1, true), 'the body must hold "params":{') + #'"params":{' - 1
local head, tail = first_body:sub(1, split), first_body:sub(split + 1)

local first_request = nil
local queue, qhead, qtail = {}, 1, 0
firsts, rounds, bad, first_bad = 0, 0, 0, ""

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function request()
  if qhead <= qtail then
    local body = queue[qhead]
    queue[qhead] = nil
    qhead = qhead + 1
    return wrk.format(nil, nil, nil, body)
  end
  if first_request == nil then first_request = wrk.format(nil, nil, nil, first_body) end
  return first_request
end

local function fail(status, body)
  bad = bad + 1
  if first_bad == "" then first_bad = tostring(status) .. " " .. string.sub(body or "", 1, 300) end
end

function response(status, headers, body)
  if status ~= 200 or body == nil then
    fail(status, body)
  elseif body:find('"resultType":"input_required"', 1, true) then
    local state = body:match('"requestState":"([^"]+)"')
    local key = body:match('"inputRequests":{"([^"]+)"')
    if state and key then
      firsts = firsts + 1
      qtail = qtail + 1
      queue[qtail] = head .. '"inputResponses":{"' .. key .. '":' .. answer .. '},"requestState":"' .. state .. '",' .. tail
    else
      fail(status, body)
    end
  elseif body:find(expect, 1, true) then
    rounds = rounds + 1
  else
    fail(status, body)
  end
  if firsts + rounds + bad >= max then wrk.thread:stop() end
end

function done(summary, latency, requests)
  local tf, tr, tb, sample = 0, 0, 0, ""
  for _, t in ipairs(threads) do
    tf = tf + (t:get("firsts") or 0)
    tr = tr + (t:get("rounds") or 0)
    tb = tb + (t:get("bad") or 0)
    local s = t:get("first_bad")
    if sample == "" and s and s ~= "" then sample = s end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"duration_us":%d,"requests":%d,"firsts":%d,"rounds":%d,"bad":%d,' ..
    '"socket_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.duration, summary.requests, tf, tr, tb,
    e.connect + e.read + e.write, e.timeout, latency:percentile(50), latency:percentile(99)))
  if sample ~= "" then io.write("BENCH_BAD " .. sample:gsub("[\r\n]", " ") .. "\n") end
end
