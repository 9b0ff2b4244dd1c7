#!/usr/bin/env bash
# Makes sure NATS (with JetStream) and PostgreSQL run on loopback, for development and CI
# on Debian 12. Idempotent: when both already run it only checks them (well under a second).
#
#   NATS_URL      default nats://127.0.0.1:4222                      (first server of a list)
#   DATABASE_URL  default postgres://postgres@127.0.0.1:5432/adsagent
#   ENSURE_SERVICES_WAIT_SECONDS  default 30: how long each wait (a started server to listen,
#                 PostgreSQL to answer, a login after a pg_hba.conf change) may take in all;
#                 a deadline, however long a single probe takes (the tests set a few seconds)
#   NATS_SERVER_BIN  default /usr/sbin/nats-server      } the binaries the test suite starts its
#   PG_BIN_DIR       default /usr/lib/postgresql/15/bin } own servers from (test/support/private-*.ts):
#                 only checked, with a warning when missing (the ports may be held by servers
#                 that are not these binaries, e.g. containers)
#
# Only services on 127.0.0.1/localhost are installed or started; other hosts are skipped.
# Installs missing packages with apt-get (as root, or through sudo), starts nats-server with
# start-stop-daemon and the PostgreSQL cluster with pg_ctlcluster, and creates the database
# named in DATABASE_URL plus adsagent_test.
set -euo pipefail

NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}"
DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/adsagent}"
TEST_DATABASE="adsagent_test"
NATS_BIN=/usr/sbin/nats-server
NATS_STORE=/var/lib/nats-server
NATS_LOG=/var/log/nats-server.log
WAIT_SECONDS="${ENSURE_SERVICES_WAIT_SECONDS:-30}"

say() { printf 'ensure-services: %s\n' "$*"; }
die() { printf 'ensure-services: error: %s\n' "$*" >&2; exit 1; }

[[ $WAIT_SECONDS =~ ^[1-9][0-9]*$ ]] || die "ENSURE_SERVICES_WAIT_SECONDS must be a whole number of seconds (1 or more), not '$WAIT_SECONDS'"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo is missing; run as root or start NATS and PostgreSQL yourself"
  SUDO=(sudo)
fi

# --- parse the URLs (node's URL parser: percent-decoding, defaults) -------------------------
command -v node >/dev/null 2>&1 || die "node is required"
parsed=$(node -e '
  const first = (s) => { s = s.split(",")[0].trim(); return s.includes("://") ? s : "nats://" + s; };
  const n = new URL(first(process.argv[1]));
  const p = new URL(process.argv[2].split(",")[0].trim());
  const host = (u) => u.hostname.replace(/^\[(.*)\]$/, "$1");
  const lines = [
    host(n), n.port || "4222",
    host(p) || "127.0.0.1", p.port || "5432",
    decodeURIComponent(p.username) || "postgres", decodeURIComponent(p.password),
    decodeURIComponent(p.pathname.replace(/^\//, "")) || "adsagent",
  ];
  if (lines.some((l) => l.includes("\n"))) throw new Error("newline in URL");
  process.stdout.write(lines.join("\n") + "\n");
' "$NATS_URL" "$DATABASE_URL" 2>&1) || die "cannot parse NATS_URL/DATABASE_URL: $parsed"
{
  IFS= read -r NATS_HOST; IFS= read -r NATS_PORT
  IFS= read -r PG_HOST; IFS= read -r PG_PORT; IFS= read -r PG_USER; IFS= read -r PG_PASS
  IFS= read -r PG_DB
} <<<"$parsed"

is_local() { [[ $1 == 127.0.0.1 || $1 == localhost ]]; }
# Loopback services are checked on 127.0.0.1 (nats-server is started with -a 127.0.0.1).
probe_host() { if [[ $1 == localhost ]]; then echo 127.0.0.1; else echo "$1"; fi; }
port_open() { (: <>"/dev/tcp/$1/$2") 2>/dev/null; }
port_closed() { ! port_open "$1" "$2"; }
# Runs "$@" until it succeeds; fails once WAIT_SECONDS have passed. The deadline is on the
# clock, not a count of attempts: a probe that itself waits (pg_isready against a listener that
# never answers) must not stretch the wait.
wait_for() {
  local deadline=$((SECONDS + WAIT_SECONDS))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
# What listens on a port: "a process (name, pid N)" when ss can tell (other users' processes
# only as root), else "something".
port_holder() {
  local h=""
  if command -v ss >/dev/null 2>&1; then
    h=$( { ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1, pid \2/p' | head -n 1; } || true)
  fi
  if [[ -n $h ]]; then printf 'a process (%s)' "$h"; else printf 'something'; fi
}

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "$1 is missing and apt-get is not available; install it yourself"
  if [[ $APT_UPDATED -eq 0 ]]; then
    say "apt-get update"
    # DPkg::Lock::Timeout: wait for another apt/dpkg (e.g. unattended-upgrades) to finish.
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=120 update -qq >/dev/null
    APT_UPDATED=1
  fi
  say "installing $1"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq "$1" >/dev/null
}

summary=()

# --- NATS ---------------------------------------------------------------------------------
# The server's first protocol line (INFO {...}) says whether JetStream is enabled: yes/no/unknown.
nats_jetstream() {
  local info
  info=$( (exec 3<>"/dev/tcp/$1/$2" && IFS= read -r -t 3 line <&3 && printf '%s' "$line") 2>/dev/null ) || true
  if [[ $info != INFO* ]]; then echo unknown
  elif [[ $info == *'"jetstream":true'* ]]; then echo yes
  else echo no
  fi
}

ensure_nats() {
  if ! is_local "$NATS_HOST"; then
    say "NATS_URL points at $NATS_HOST:$NATS_PORT, not loopback: skipped"
    summary+=("nats $NATS_HOST:$NATS_PORT skipped")
    return
  fi
  local host; host=$(probe_host "$NATS_HOST")
  if ! port_open "$host" "$NATS_PORT"; then
    if [[ ! -x $NATS_BIN ]]; then
      apt_install nats-server
      [[ -x $NATS_BIN ]] || die "nats-server not found at $NATS_BIN after install"
      # Under systemd the package starts nats-server.service, which has no JetStream.
      if port_open "$host" "$NATS_PORT" && [[ $(nats_jetstream "$host" "$NATS_PORT") == no ]] \
          && command -v systemctl >/dev/null 2>&1; then
        say "disabling the packaged nats-server.service (no JetStream); starting our own server instead"
        "${SUDO[@]}" systemctl disable --now nats-server.service >/dev/null 2>&1 || true
        wait_for port_closed "$host" "$NATS_PORT" || true
      fi
    fi
  fi
  if ! port_open "$host" "$NATS_PORT"; then
    # Two servers must never share a store directory: other ports get their own.
    [[ $NATS_PORT == 4222 ]] || NATS_STORE="$NATS_STORE-$NATS_PORT"
    "${SUDO[@]}" mkdir -p "$NATS_STORE"
    say "starting nats-server on 127.0.0.1:$NATS_PORT with JetStream (store $NATS_STORE, log $NATS_LOG)"
    # The pid file keeps --oknodo from mistaking a nats-server on another port for this one.
    "${SUDO[@]}" start-stop-daemon --start --oknodo --background \
      --pidfile "/run/ads-nats-server-$NATS_PORT.pid" --make-pidfile \
      --exec "$NATS_BIN" -- -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$NATS_STORE" -l "$NATS_LOG" >/dev/null
    if ! wait_for port_open "$host" "$NATS_PORT"; then
      "${SUDO[@]}" tail -n 20 "$NATS_LOG" >&2 2>/dev/null || true
      die "nats-server did not listen on 127.0.0.1:$NATS_PORT within $WAIT_SECONDS s (log: $NATS_LOG)"
    fi
  fi
  case $(nats_jetstream "$host" "$NATS_PORT") in
    yes) ;;
    no)
      die "the NATS server on $host:$NATS_PORT runs without JetStream; restart it with -js
  (Debian's nats-server.service does: 'systemctl disable --now nats-server', then run this script again)" ;;
    *)
      # Something accepts connections there but sent no NATS INFO line: the service would fail
      # with "cannot reach NATS", and this script cannot start nats-server on a taken port.
      die "port $NATS_PORT on $host is held by $(port_holder "$NATS_PORT") that is not a NATS server:
  it accepts connections but sent no NATS INFO line within 3 s. Stop what holds the port and run
  this script again (it then starts nats-server there), or set NATS_URL to a free port." ;;
  esac
  summary+=("nats $host:$NATS_PORT ok")
}

# --- PostgreSQL ---------------------------------------------------------------------------
PG_INSTALLED_NOW=0
pg_server_installed() { command -v pg_ctlcluster >/dev/null 2>&1 && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }
latest_version() { # newest version with a cluster, else newest installed server
  local v
  v=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [[ -n $v ]] || v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
  echo "$v"
}
# "<version> <cluster>" of the cluster configured for the port, else "<latest> main".
pg_cluster() {
  local c
  c=$(pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p { print $1, $2; exit }') || true
  [[ -n $c ]] || c="$(latest_version) main"
  echo "$c"
}
psql_admin() { PGCONNECT_TIMEOUT=3 psql -X -q -w -v ON_ERROR_STOP=1 -h "$PG_PROBE" -p "$PG_PORT" -U "$PG_USER" -d postgres "$@"; }

ensure_postgres() {
  if ! is_local "$PG_HOST"; then
    say "DATABASE_URL points at $PG_HOST:$PG_PORT, not loopback: skipped"
    summary+=("postgres $PG_HOST:$PG_PORT skipped")
    return
  fi
  PG_PROBE=$(probe_host "$PG_HOST")
  if [[ -n $PG_PASS ]]; then export PGPASSWORD="$PG_PASS"; fi
  if ! port_open "$PG_PROBE" "$PG_PORT"; then
    if ! pg_server_installed; then
      apt_install postgresql
      PG_INSTALLED_NOW=1
      pg_server_installed || die "PostgreSQL server not found after installing postgresql"
    fi
    # The package's postinst may already have started the new cluster.
    if ! port_open "$PG_PROBE" "$PG_PORT"; then
      local ver name
      read -r ver name <<<"$(pg_cluster)"
      [[ -n $ver ]] || die "no PostgreSQL version found under /usr/lib/postgresql"
      if [[ -d /etc/postgresql/$ver/$name ]] && ! pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p { f = 1 } END { exit !f }'; then
        die "no PostgreSQL cluster is configured for port $PG_PORT (see pg_lsclusters); use its port in DATABASE_URL"
      fi
      if [[ ! -d /etc/postgresql/$ver/$name ]]; then
        say "creating PostgreSQL cluster $ver/$name on port $PG_PORT"
        "${SUDO[@]}" pg_createcluster -p "$PG_PORT" "$ver" "$name" >/dev/null
      fi
      say "starting PostgreSQL cluster $ver/$name"
      "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start \
        || die "pg_ctlcluster $ver $name start failed (see /var/log/postgresql/postgresql-$ver-$name.log)"
    fi
  fi
  # -t 1: one probe of a listener that never answers must not take pg_isready's default 3 s
  # (libpq makes it 2 s); the deadline of wait_for bounds the whole wait.
  pg_ready() { pg_isready -q -t 1 -h "$PG_PROBE" -p "$PG_PORT"; }
  if ! wait_for pg_ready; then
    die "PostgreSQL on $PG_PROBE:$PG_PORT did not accept connections within $WAIT_SECONDS s; the port is held by $(port_holder "$PG_PORT").
  If that is not PostgreSQL, stop it and run this script again (it then starts PostgreSQL
  there), or set DATABASE_URL to another port; if it is, see its log."
  fi

  local err
  if ! err=$(psql_admin -tAc 'select 1' 2>&1 >/dev/null); then
    if [[ $PG_INSTALLED_NOW -eq 1 && -z $PG_PASS ]]; then
      # A fresh Debian install asks for a password (scram) on TCP; trust loopback instead.
      local ver name hba
      read -r ver name <<<"$(pg_cluster)"
      hba=/etc/postgresql/$ver/$name/pg_hba.conf
      say "adding 'host all all 127.0.0.1/32 trust' and '::1/128 trust' to the top of $hba (development-only setting: any local user may connect as any role)"
      local tmp; tmp=$(mktemp)
      { printf '%s\n' '# added by deploy/ensure-services.sh: development only' \
          'host all all 127.0.0.1/32 trust' 'host all all ::1/128 trust'
        "${SUDO[@]}" cat "$hba"; } >"$tmp"
      "${SUDO[@]}" sh -c 'cat "$1" > "$2"' sh "$tmp" "$hba"   # keeps owner and mode of $hba
      rm -f "$tmp"
      "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload
      pg_login() { err=$(psql_admin -tAc 'select 1' 2>&1 >/dev/null); }
      wait_for pg_login || die "cannot connect to PostgreSQL as $PG_USER on $PG_PROBE:$PG_PORT after the pg_hba change: $err"
    else
      local hint=""
      [[ $err == *password* || $err == *pg_hba* || $err == *authentication* ]] && hint="
  (this script edits pg_hba.conf only on a PostgreSQL it installed itself: allow the connection,
   e.g. 'host all all 127.0.0.1/32 trust' for development, or put the password in DATABASE_URL)"
      die "cannot connect to PostgreSQL as $PG_USER on $PG_PROBE:$PG_PORT: $err$hint"
    fi
  fi

  local db exists
  for db in "$PG_DB" "$TEST_DATABASE"; do
    exists=$(psql_admin -tA -v db="$db" <<<"select 1 from pg_database where datname = :'db'")
    if [[ $exists != 1 ]]; then
      say "creating database $db"
      PGCONNECT_TIMEOUT=3 createdb -w -h "$PG_PROBE" -p "$PG_PORT" -U "$PG_USER" "$db"
    fi
  done
  summary+=("postgres $PG_PROBE:$PG_PORT ok")
}

# openssl makes the private CA of deploy/make-nats-tls.sh (and the TLS tests use it).
ensure_tools() {
  command -v openssl >/dev/null 2>&1 || apt_install openssl
}

# The test suite starts private servers on free ports from these binaries, whoever holds 4222
# and 5432. When the ports are taken (containers, another install) this script installs nothing,
# so a missing binary would only show up as failing tests: say so here.
check_suite_binaries() {
  local nats_bin="${NATS_SERVER_BIN:-/usr/sbin/nats-server}" pg_dir="${PG_BIN_DIR:-/usr/lib/postgresql/15/bin}" pkg
  if [[ ! -x $nats_bin ]]; then
    printf 'ensure-services: warning: %s\n' "$nats_bin is missing: the test suite starts its own nats-servers from it.
  Install it ('apt-get install nats-server') or set NATS_SERVER_BIN to a nats-server binary." >&2
  fi
  if [[ ! -x $pg_dir/postgres || ! -x $pg_dir/initdb ]]; then
    pkg=postgresql
    [[ $pg_dir =~ ^/usr/lib/postgresql/([0-9]+)/bin/?$ ]] && pkg="postgresql-${BASH_REMATCH[1]}"
    printf 'ensure-services: warning: %s\n' "$pg_dir/postgres or $pg_dir/initdb is missing: the test suite starts its own PostgreSQL from them.
  Install them ('apt-get install $pkg') or set PG_BIN_DIR to the directory that holds them." >&2
  fi
}

ensure_tools
ensure_nats
ensure_postgres
check_suite_binaries
joined=$(printf '%s, ' "${summary[@]}")
say "${joined%, }"
