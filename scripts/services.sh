#!/usr/bin/env bash
# Local Redis + PostgreSQL for the state-backend tests and benchmarks; nginx for the replica tests.
#
#   scripts/services.sh start [redis|postgres|nginx|redis-cluster|redis-sentinel]
#                                                install when absent, start, wait until ready
#   scripts/services.sh stop  [redis|postgres|redis-cluster|redis-sentinel]   stop (data kept under .services/)
#   scripts/services.sh status                   exit 0 when both answer
#   scripts/services.sh env                      print the MCP_TEST_*_URL exports
#
# nginx is only installed (never started as a system service): the replica tests run their
# own, as the current user, with a generated config under a temporary prefix
# (tests/replicas/topology.py renders deploy/nginx.conf.template).
# Both listen on 127.0.0.1 only, at non-default ports (override with MCP_REDIS_PORT /
# MCP_PG_PORT), with their data under <repo>/.services/ (gitignored). Idempotent: starting
# a running service is a no-op. Meant for a fresh Debian machine run as root (CI=true, no
# stdin); as a non-root user the binaries must already be installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES="$ROOT/.services"
REDIS_PORT="${MCP_REDIS_PORT:-56379}"
PG_PORT="${MCP_PG_PORT:-55432}"
PG_DB="mcp_test"
# Redis Cluster: three masters, one replica each (ports BASE..BASE+5, the masters first);
# Sentinel: a master, its replica (DATA, DATA+1) and three sentinels (SENT..SENT+2), master name 'mcp'.
CLUSTER_BASE="${MCP_REDIS_CLUSTER_PORT:-57001}"
CLUSTER_NODE_TIMEOUT_MS=3000
SENTINEL_DATA_PORT="${MCP_REDIS_SENTINEL_DATA_PORT:-57101}"
SENTINEL_PORT="${MCP_REDIS_SENTINEL_PORT:-57111}"
SENTINEL_MASTER="mcp"
SENTINEL_DOWN_MS=3000
WAIT_SECONDS=30

# Where a service keeps its data: <repo>/.services/<name>, unless the service's own user
# cannot reach that folder (a checkout in root's home is not traversable by 'postgres' or
# 'redis'); then a folder under /var/tmp named after this checkout. Deterministic, so
# start and stop agree.
svc_base() {
    local name="$1" user="$2" inrepo="$SERVICES/$1"
    if is_root && id "$user" >/dev/null 2>&1 && ! runuser -u "$user" -- test -x "$SERVICES" 2>/dev/null \
        && ! runuser -u "$user" -- test -x "$ROOT" 2>/dev/null; then
        printf '/var/tmp/fastapi-mcp-ctx-%s-%s\n' "$(printf '%s' "$ROOT" | sha1sum | cut -c1-10)" "$name"
    else
        printf '%s\n' "$inrepo"
    fi
}

log() { printf '%s\n' "services: $*" >&2; }

# The server on a port may have been started by another checkout of this repository (its data
# in that checkout's folder). A stop records the folder the running server used, keyed by port,
# so the next start brings the same data back instead of an empty folder of this checkout's.
RUNSTATE="${TMPDIR:-/tmp}/fastapi-mcp-ctx-services"
remembered_dir() { [ -s "$RUNSTATE/$1" ] && [ -d "$(cat "$RUNSTATE/$1")" ] && cat "$RUNSTATE/$1"; }
remember_dir() { mkdir -p "$RUNSTATE" && printf '%s\n' "$2" > "$RUNSTATE/$1"; }
die() { log "error: $*"; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

APT_UPDATED=0
apt_install() {
    is_root || die "$1 is not installed and we are not root; install it (apt-get install $1)"
    command -v apt-get >/dev/null || die "$1 is not installed and apt-get is absent"
    export DEBIAN_FRONTEND=noninteractive
    if [ "$APT_UPDATED" = 0 ]; then
        mkdir -p "$SERVICES"
        apt-get update -qq >"$SERVICES/apt.log" 2>&1 </dev/null || die "apt-get update failed (see $SERVICES/apt.log)"
        APT_UPDATED=1
    fi
    apt-get install -y -qq --no-install-recommends "$@" >>"$SERVICES/apt.log" 2>&1 </dev/null \
        || die "apt-get install $* failed (see $SERVICES/apt.log)"
}

# Run a command as the postgres user when we are root (postgres refuses to run as root).
as_pg() {
    if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# ----------------------------------------------------------------------------- redis
redis_cli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
redis_ready() { [ "$(redis_cli ping 2>/dev/null || true)" = "PONG" ]; }

start_redis() {
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || apt_install redis-server
    if redis_ready; then remember_running_redis; return 0; fi
    REDIS_DIR="$(remembered_dir "redis-$REDIS_PORT" || svc_base redis redis)"
    mkdir -p "$REDIS_DIR"
    local user_args=()
    if is_root && id redis >/dev/null 2>&1; then
        chown -R redis: "$REDIS_DIR"
        user_args=(runuser -u redis --)
    fi
    # appendonly + appendfsync always: every acknowledged write is on disk before the reply,
    # so a SHUTDOWN NOSAVE / crash in a failure test loses nothing acknowledged.
    "${user_args[@]}" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" \
        --dir "$REDIS_DIR" --daemonize yes --pidfile "$REDIS_DIR/redis.pid" \
        --logfile "$REDIS_DIR/redis.log" --appendonly yes --appendfsync always \
        --save "" --protected-mode yes </dev/null >/dev/null
    local i
    for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
        redis_ready && return 0
        sleep 0.1
    done
    die "redis did not answer PING on 127.0.0.1:$REDIS_PORT within ${WAIT_SECONDS}s (see $REDIS_DIR/redis.log)"
}

# Record the data folder of the Redis that answers (a crash-stop, SHUTDOWN NOSAVE, then a start
# must find the same append-only file).
remember_running_redis() {
    local dir
    dir="$(redis_cli config get dir 2>/dev/null | sed -n 2p || true)"
    if [ -n "$dir" ]; then remember_dir "redis-$REDIS_PORT" "$dir"; fi
}

stop_redis() {
    command -v redis-cli >/dev/null || return 0
    redis_ready || return 0
    remember_running_redis
    # SHUTDOWN (no NOSAVE) fsyncs the AOF first.
    redis_cli shutdown >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
        redis_ready || return 0
        sleep 0.1
    done
    die "redis on port $REDIS_PORT did not stop"
}

# ------------------------------------------------- redis cluster and sentinel (issue 21)
# Each node is its own redis-server (as the 'redis' user when root), daemonized, its data in
# <base>/<port>/. `start` starts the nodes that do not answer (a node killed by a failover test
# comes back and rejoins as a replica), then forms the cluster / configures the sentinels once.
ping_port() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null || true)" = "PONG" ]; }

start_node() {  # start_node <base dir> <port> <redis-server args...>
    local base="$1" port="$2"; shift 2
    ping_port "$port" && return 0
    local dir="$base/$port" user_args=()
    mkdir -p "$dir"
    if is_root && id redis >/dev/null 2>&1; then
        chown -R redis: "$base"
        user_args=(runuser -u redis --)
    fi
    "${user_args[@]}" redis-server "$@" --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --protected-mode yes </dev/null >/dev/null
}

wait_ports() {  # wait_ports <what> <port>...
    local what="$1" port i; shift
    for port in "$@"; do
        for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
            ping_port "$port" && break
            sleep 0.1
        done
        ping_port "$port" || die "$what on 127.0.0.1:$port did not answer PING within ${WAIT_SECONDS}s"
    done
}

cluster_ports() { local i; for ((i = 0; i < 6; i++)); do printf '%s ' $((CLUSTER_BASE + i)); done; }

start_cluster() {
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || apt_install redis-server
    # the folder of the running cluster (started by any checkout), so a killed node comes back with its data
    local base port; base="$(remembered_dir "redis-cluster-$CLUSTER_BASE" || svc_base redis-cluster redis)"
    remember_dir "redis-cluster-$CLUSTER_BASE" "$base"
    for port in $(cluster_ports); do
        # appendonly: a node killed with kill -9 comes back with what it acknowledged
        # the cluster bus port is the data port - 10000 (port + 10000, the default, is past 65535);
        # require-full-coverage no: a master down with no replica to promote stops its slots only
        start_node "$base" "$port" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port $((port - 10000)) \
            --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" --cluster-require-full-coverage no \
            --appendonly yes --save ""
    done
    # shellcheck disable=SC2046
    wait_ports "redis cluster node" $(cluster_ports)
    local assigned
    assigned="$(redis-cli -h 127.0.0.1 -p "$CLUSTER_BASE" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')"
    if [ "${assigned:-0}" = 0 ]; then
        local nodes=() p
        for p in $(cluster_ports); do nodes+=("127.0.0.1:$p"); done
        redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes </dev/null \
            >"$base/create.log" 2>&1 || die "redis-cli --cluster create failed (see $base/create.log)"
    fi
    local i state=""
    for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
        state="$(redis-cli -h 127.0.0.1 -p "$CLUSTER_BASE" cluster info | tr -d '\r' | sed -n 's/^cluster_state://p')"
        [ "$state" = ok ] && return 0
        sleep 0.1
    done
    die "redis cluster on 127.0.0.1:$CLUSTER_BASE.. is not ok within ${WAIT_SECONDS}s (cluster_state:$state)"
}

stop_ports() {
    local port
    for port in "$@"; do
        ping_port "$port" && redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
    done
}

sentinel_ports() { printf '%s %s %s' "$SENTINEL_PORT" $((SENTINEL_PORT + 1)) $((SENTINEL_PORT + 2)); }

start_sentinel() {
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || apt_install redis-server
    local base; base="$(remembered_dir "redis-sentinel-$SENTINEL_PORT" || svc_base redis-sentinel redis)"
    remember_dir "redis-sentinel-$SENTINEL_PORT" "$base"
    local master="$SENTINEL_DATA_PORT" replica=$((SENTINEL_DATA_PORT + 1)) port
    # Which data node is master now (a failover may have swapped them): the sentinels know.
    local current=""
    for port in $(sentinel_ports); do
        current="$(redis-cli -h 127.0.0.1 -p "$port" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | sed -n 2p || true)"
        [ -n "$current" ] && break
    done
    [ -n "$current" ] || current="$master"
    for port in "$master" "$replica"; do
        if [ "$port" = "$current" ]; then
            start_node "$base" "$port" --appendonly yes --save ""
        else
            start_node "$base" "$port" --appendonly yes --save "" --replicaof 127.0.0.1 "$current"
        fi
    done
    wait_ports "redis (sentinel group)" "$master" "$replica"
    # Debian's redis-server package has no redis-sentinel binary: `redis-server <conf> --sentinel`.
    for port in $(sentinel_ports); do
        local conf="$base/$port/sentinel.conf"
        mkdir -p "$base/$port"
        if [ ! -s "$conf" ]; then
            cat > "$conf" <<CONF
port $port
bind 127.0.0.1
sentinel resolve-hostnames no
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $master 2
sentinel down-after-milliseconds $SENTINEL_MASTER $SENTINEL_DOWN_MS
sentinel failover-timeout $SENTINEL_MASTER 3000
sentinel parallel-syncs $SENTINEL_MASTER 1
CONF
        fi
        if ! ping_port "$port"; then
            local user_args=()
            if is_root && id redis >/dev/null 2>&1; then chown -R redis: "$base"; user_args=(runuser -u redis --); fi
            "${user_args[@]}" redis-server "$conf" --sentinel --daemonize yes --dir "$base/$port" \
                --pidfile "$base/$port/sentinel.pid" --logfile "$base/$port/sentinel.log" </dev/null >/dev/null
        fi
    done
    # shellcheck disable=SC2046
    wait_ports "redis sentinel" $(sentinel_ports)
    local i ok=""
    for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
        ok="$(redis-cli -h 127.0.0.1 -p "$SENTINEL_PORT" sentinel ckquorum "$SENTINEL_MASTER" 2>/dev/null || true)"
        case "$ok" in OK*) return 0 ;; esac
        sleep 0.1
    done
    die "redis sentinel quorum for '$SENTINEL_MASTER' not reached within ${WAIT_SECONDS}s ($ok)"
}

# -------------------------------------------------------------------------- postgres
PG_BIN=""
find_pg_bin() {
    local d
    # Debian keeps the server binaries in /usr/lib/postgresql/<major>/bin (the ones on PATH
    # may be wrappers or symlinks into it); take the newest major.
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$d" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then PG_BIN="$d"; return 0; fi
    if command -v pg_ctl >/dev/null && command -v initdb >/dev/null; then
        PG_BIN="$(dirname "$(readlink -f "$(command -v pg_ctl)")")"; return 0
    fi
    return 1
}

pg_ready() {
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" >/dev/null 2>&1
}

start_postgres() {
    find_pg_bin || { apt_install postgresql; find_pg_bin || die "initdb/pg_ctl not found after installing postgresql"; }
    PG_BASE="$(svc_base pg postgres)"; PG_DATA="$PG_BASE/data"; PG_SOCK="$PG_BASE/sock"; PG_LOG="$PG_BASE/postgres.log"
    local other
    if other="$(remembered_dir "pg-$PG_PORT")" && [ "$other" != "$PG_DATA" ] && ! pg_ready; then
        PG_DATA="$other"; PG_BASE="$(dirname "$other")"; PG_SOCK="$PG_BASE/sock"; PG_LOG="$PG_BASE/postgres.log"
    fi
    mkdir -p "$PG_BASE"
    if is_root; then
        id postgres >/dev/null 2>&1 || die "user 'postgres' does not exist"
        chown postgres: "$PG_BASE"
    fi
    if ! as_pg test -w "$PG_BASE"; then
        die "user postgres cannot reach $PG_BASE (a parent directory is not world-traversable?)"
    fi
    if [ ! -s "$PG_DATA/PG_VERSION" ]; then
        as_pg mkdir -p "$PG_DATA" "$PG_SOCK"
        as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
            </dev/null >"$PG_BASE/initdb.log" 2>&1 || die "initdb failed (see $PG_BASE/initdb.log)"
        as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null <<CONF
# --- scripts/services.sh
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
max_connections = 200
CONF
    fi
    as_pg mkdir -p "$PG_SOCK"
    if ! pg_ready; then
        if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
            as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$WAIT_SECONDS" start \
                </dev/null >/dev/null 2>&1 || die "postgres did not start (see $PG_LOG)"
        fi
        local i
        for ((i = 0; i < WAIT_SECONDS * 10; i++)); do
            pg_ready && break
            sleep 0.1
        done
        pg_ready || die "postgres not ready on 127.0.0.1:$PG_PORT within ${WAIT_SECONDS}s (see $PG_LOG)"
    fi
    local exists
    exists="$("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'" </dev/null 2>/dev/null || true)"
    if [ "$exists" != "1" ]; then
        "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres "$PG_DB" </dev/null >/dev/null 2>&1 \
            || die "createdb $PG_DB failed"
    fi
}

stop_postgres() {
    find_pg_bin || return 0
    local running
    running="$("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "SHOW data_directory" </dev/null 2>/dev/null || true)"
    if [ -n "$running" ]; then
        PG_DATA="$running"
        remember_dir "pg-$PG_PORT" "$running"
    fi
    [ -s "$PG_DATA/PG_VERSION" ] || return 0
    if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
        as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t "$WAIT_SECONDS" stop </dev/null >/dev/null 2>&1 \
            || die "postgres did not stop"
    fi
}

# ----------------------------------------------------------------------------- nginx
find_nginx() { command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; }; }

ensure_nginx() {
    find_nginx >/dev/null && return 0
    # Debian's postinst would start nginx as a system service on port 80: a policy-rc.d
    # that denies every start keeps it stopped (removed again afterwards).
    local policy=/usr/sbin/policy-rc.d placed=0
    if is_root && [ ! -e "$policy" ]; then
        printf '#!/usr/bin/env sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && placed=1
    fi
    local rc=0
    ( apt_install nginx ) || rc=$?
    if [ "$placed" = 1 ]; then rm -f "$policy"; fi
    [ "$rc" = 0 ] || exit "$rc"
    find_nginx >/dev/null || die "nginx not found after installing it"
}

print_env() {
    printf 'export MCP_TEST_REDIS_URL=redis://127.0.0.1:%s/0\n' "$REDIS_PORT"
    printf 'export MCP_TEST_REDIS_CLUSTER_URL=redis+cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' \
        "$CLUSTER_BASE" $((CLUSTER_BASE + 1)) $((CLUSTER_BASE + 2))
    printf 'export MCP_TEST_REDIS_SENTINEL_URL=redis+sentinel://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s/%s/0\n' \
        "$SENTINEL_PORT" $((SENTINEL_PORT + 1)) $((SENTINEL_PORT + 2)) "$SENTINEL_MASTER"
    printf 'export MCP_TEST_POSTGRES_URL=postgresql+asyncpg://postgres@127.0.0.1:%s/%s\n' "$PG_PORT" "$PG_DB"
    local nginx
    if nginx="$(find_nginx)"; then printf 'export MCP_TEST_NGINX=%s\n' "$nginx"; fi
}

REDIS_DIR="$(svc_base redis redis)"
PG_BASE="$(svc_base pg postgres)"
PG_DATA="$PG_BASE/data"
PG_SOCK="$PG_BASE/sock"
PG_LOG="$PG_BASE/postgres.log"

cmd="${1:-}"
what="${2:-all}"
case "$what" in all | redis | postgres | nginx | redis-cluster | redis-sentinel) ;;
    *) die "unknown service '$what' (redis, postgres, nginx, redis-cluster, redis-sentinel)";; esac
case "$cmd" in
    start)
        if [ "$what" = all ] || [ "$what" = redis ]; then start_redis; fi
        if [ "$what" = all ] || [ "$what" = postgres ]; then start_postgres; fi
        if [ "$what" = all ] || [ "$what" = nginx ]; then ensure_nginx; fi
        if [ "$what" = all ] || [ "$what" = redis-cluster ]; then start_cluster; fi
        if [ "$what" = all ] || [ "$what" = redis-sentinel ]; then start_sentinel; fi
        ;;
    stop)
        if [ "$what" = all ] || [ "$what" = redis ]; then stop_redis; fi
        if [ "$what" = all ] || [ "$what" = postgres ]; then stop_postgres; fi
        # shellcheck disable=SC2046
        if [ "$what" = all ] || [ "$what" = redis-cluster ]; then stop_ports $(cluster_ports); fi
        # shellcheck disable=SC2046
        if [ "$what" = all ] || [ "$what" = redis-sentinel ]; then
            stop_ports $(sentinel_ports) "$SENTINEL_DATA_PORT" $((SENTINEL_DATA_PORT + 1))
        fi
        ;;
    status)
        ok=0
        if [ "$what" = all ] || [ "$what" = redis ]; then redis_ready || ok=1; fi
        if [ "$what" = all ] || [ "$what" = postgres ]; then { find_pg_bin && pg_ready; } || ok=1; fi
        if [ "$what" = all ] || [ "$what" = nginx ]; then find_nginx >/dev/null || ok=1; fi
        if [ "$what" = all ] || [ "$what" = redis-cluster ]; then ping_port "$CLUSTER_BASE" || ok=1; fi
        if [ "$what" = all ] || [ "$what" = redis-sentinel ]; then ping_port "$SENTINEL_PORT" || ok=1; fi
        exit "$ok"
        ;;
    env) print_env ;;
    *) die "usage: $0 {start|stop|status|env} [redis|postgres|nginx|redis-cluster|redis-sentinel]" ;;
esac
