#!/usr/bin/env bash
# The test command: makes a fresh machine ready for the tests, then runs them.
#
# It starts Redis (127.0.0.1:6379, keeping nothing on disk), MariaDB
# (127.0.0.1:3306, root without a password) and NATS with JetStream
# (127.0.0.1:4222) when they are not answering,
# installs them with apt-get when they are missing, installs the tools some
# tests drive (redis-cli for cluster set-up, Chromium for the browser tests,
# promtool for the metrics rules), and then runs `go test` with the arguments
# given (default: -race -count=1 -timeout 30m ./..., with -json read by
# internal/testprogress, which prints each package's start and end as they
# come). On a machine that is already prepared, `go test ./...` by hand
# does the same testing.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

apt_updated=""
install_pkgs() {
  if [ -z "$apt_updated" ]; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

wait_for() { # name, check command...
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then echo "test.sh: $name is up"; return 0; fi
    sleep 0.5
  done
  echo "test.sh: $name did not come up" >&2
  return 1
}

# Tools the tests start or drive themselves.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v mysqladmin >/dev/null || missing+=(mariadb-client)
command -v ip >/dev/null || missing+=(iproute2) # the partition tests (network namespaces)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v chromium >/dev/null || missing+=(chromium)
command -v promtool >/dev/null || missing+=(prometheus)
command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  install_pkgs "${missing[@]}"
fi

# Redis on 127.0.0.1:6379, keeping nothing on disk.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi
wait_for redis redis-cli -h 127.0.0.1 -p 6379 ping

# MariaDB on 127.0.0.1:3306, root without a password.
if ! mysqladmin -h 127.0.0.1 -P 3306 -uroot ping >/dev/null 2>&1; then
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
fi
wait_for mariadb mysqladmin -h 127.0.0.1 -P 3306 -uroot ping

# NATS with JetStream on 127.0.0.1:4222 (the events' tests), its store in
# /var/tmp.
nats_up() { timeout 1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/4222 && head -c 4 <&3 | grep -q INFO'; }
if ! nats_up; then
  NATS_SERVER=$(command -v nats-server || echo /usr/sbin/nats-server)
  $SUDO start-stop-daemon --start --oknodo --background --exec "$NATS_SERVER" -- -a 127.0.0.1 -p 4222 -js -sd /var/tmp/flashsale-nats
fi
wait_for nats nats_up

# The suite opens many connections at once (packages run in parallel,
# each test a database of its own): MariaDB's default of 151 is too few.
mysql -h 127.0.0.1 -P 3306 -uroot -e 'SET GLOBAL max_connections = 1000' || true

if [ $# -gt 0 ]; then exec go test "$@"; fi
# The default run prints its progress as it goes (internal/testprogress: a
# line as each package starts and ends, failed tests' output in full, the
# packages still running every minute); the exit status is go test's. The
# two slowest packages are named first so they start first (go test starts
# packages in the order given, two at a time on two cores): ./... then adds
# the rest, the same packages as ./... alone.
progress=$(mktemp -d)
trap 'rm -rf "$progress"' EXIT
go build -o "$progress/testprogress" ./internal/testprogress
set +e
go test -json -race -count=1 -timeout 30m ./cmd/flashsale/ ./async/ ./... | "$progress/testprogress"
status=${PIPESTATUS[0]}
exit "$status"
