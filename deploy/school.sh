#!/usr/bin/env bash
# A school's server without Docker: N replicas of the app on this machine behind Debian's nginx
# (deploy/nginx.conf, sticky by cookie), supervised by supervisord (restarted within seconds when
# one dies), and PostgreSQL for class mode. Run from the repository root as root, with the app's
# virtual environment active (. .venv/bin/activate; pip install -r deploy/requirements-school.txt).
#
#   deploy/school.sh postgres            start Debian's PostgreSQL (no systemd needed), make role
#                                        and database "mha" once, and save MHA_CLASS_DB in the
#                                        settings file. A role "mha" that exists is kept as it is:
#                                        give its password (MHA_DB_PASSWORD, or the saved one), or
#                                        MHA_DB_RESET=1 for a new one. MHA_DB_HOST (127.0.0.1) and
#                                        MHA_DB_PORT (the cluster's own) go into the saved URL
#   deploy/school.sh start N [PORT]      start N replicas and nginx under supervisord (default PORT
#                                        8080), wait until they answer, print the address to type
#   deploy/school.sh status              what supervisord runs, and since when
#   deploy/school.sh restart             after updating the code: the replicas one at a time
#   deploy/school.sh stop                stop everything start started, whatever died meanwhile
#   deploy/school.sh config N [PORT]     print nginx.conf for N replicas (ports 8501..) on PORT
#
# Settings (environment, or the settings file MHA_SCHOOL_ENV, default /etc/mha-explorer.env, read
# by start): MHA_CLASS_DB (class mode's database: with more than one replica it must be
# PostgreSQL; one replica may keep the default SQLite file), MHA_PUBLIC_URL (the address students
# type, e.g. http://10.0.0.5:8080: the teacher view's join link and start's message; default this
# machine's first address), MHA_SCHOOL_DIR (logs, supervisord's files; default /var/lib/mha-school),
# MHA_TRAINING_SLOTS (training runs at once per replica, default 1), MHA_FIRST_PORT (8501).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${MHA_SCHOOL_DIR:-/var/lib/mha-school}"
FIRST="${MHA_FIRST_PORT:-8501}"
SETTINGS="${MHA_SCHOOL_ENV:-/etc/mha-explorer.env}"
CONF="$DIR/supervisord.conf"

config() {  # N LISTEN DIR
  local upstreams=""
  for ((i = 0; i < $1; i++)); do upstreams+="server 127.0.0.1:$((FIRST + i)) max_fails=1 fail_timeout=10s; "; done
  sed -e "s|__LISTEN__|$2|" -e "s|__UPSTREAMS__|${upstreams}|" -e "s|__LOGS__|$3|g" -e "s|__PID__|$3/nginx.pid|" \
    deploy/nginx.conf
}

public_url() {  # PORT
  if [ -n "${MHA_PUBLIC_URL:-}" ]; then echo "$MHA_PUBLIC_URL"; return; fi
  local ip
  ip=$(hostname -I 2>/dev/null | awk '{print $1}')
  echo "http://${ip:-$(hostname)}:$1"
}

ctl() { python -m supervisor.supervisorctl -c "$CONF" "$@"; }

case "${1:-}" in
  postgres)
    cluster=$(pg_lsclusters -h | awk 'NR == 1 {print $1 " " $2}')
    [ -n "$cluster" ] || { echo "No PostgreSQL cluster: apt-get install -y postgresql" >&2; exit 2; }
    pg_ctlcluster $cluster start >/dev/null 2>&1 || true  # started already, or by systemd: fine
    host="${MHA_DB_HOST:-127.0.0.1}"
    port="${MHA_DB_PORT:-$(pg_lsclusters -h | awk 'NR == 1 {print $3}')}"
    if [[ ! "$host" =~ ^[A-Za-z0-9.-]{1,253}$ || ! "$port" =~ ^[0-9]{1,5}$ ]]; then
      echo "MHA_DB_HOST: a host name or address; MHA_DB_PORT: a port number" >&2
      exit 2
    fi
    for _ in $(seq 30); do pg_isready -q -h "$host" -p "$port" && break; sleep 1; done
    saved=""
    [ -f "$SETTINGS" ] && saved=$(sed -n 's|^MHA_CLASS_DB=postgresql+psycopg://mha:\([^@]*\)@.*|\1|p' "$SETTINGS")
    given="${MHA_DB_PASSWORD:-$saved}"
    exists=$(su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'mha'\"")
    if [ "$exists" = 1 ] && [ "${MHA_DB_RESET:-0}" != 1 ]; then  # a role made before: kept as it is
      if [ -z "$given" ]; then
        echo "A PostgreSQL role mha exists already, and its password is kept as it is: set MHA_DB_PASSWORD" >&2
        echo "to that password (or MHA_DB_RESET=1 to give the role a new one; whatever uses the old one stops)" >&2
        exit 2
      fi
      if [[ ! "$given" =~ ^[A-Za-z0-9_-]{1,128}$ ]] \
        || ! PGPASSWORD="$given" psql -h "$host" -p "$port" -U mha -d postgres -tAc "SELECT 1" >/dev/null 2>&1; then
        echo "That is not the password of the role mha on $host:$port (kept as it is; MHA_DB_RESET=1 gives it a new one)" >&2
        exit 2
      fi
      password="$given"
    else
      password="${given:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')}"
      if [[ ! "$password" =~ ^[A-Za-z0-9_-]{8,128}$ ]]; then  # it goes into SQL and into a URL as it is
        echo "MHA_DB_PASSWORD: 8-128 letters, digits, - and _ only" >&2
        exit 2
      fi
      su postgres -c "psql -p $port -v ON_ERROR_STOP=1 -q" <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mha') THEN CREATE ROLE mha LOGIN; END IF;
END \$\$;
ALTER ROLE mha PASSWORD '${password}';
SQL
    fi
    su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_database WHERE datname = 'mha'\"" | grep -q 1 \
      || su postgres -c "createdb -p $port -O mha mha"
    touch "$SETTINGS" && chmod 600 "$SETTINGS"
    sed -i '/^MHA_CLASS_DB=/d' "$SETTINGS"
    echo "MHA_CLASS_DB=postgresql+psycopg://mha:${password}@${host}:${port}/mha" >>"$SETTINGS"
    echo "saved MHA_CLASS_DB in $SETTINGS (read by start; readable by root only)"
    ;;
  config)
    config "${2:?number of replicas}" "0.0.0.0:${3:-8080}" "$DIR"
    ;;
  start)
    n="${2:?number of replicas}"
    port="${3:-8080}"
    if [ -f "$SETTINGS" ]; then set -a; . "$SETTINGS"; set +a; fi
    if [ "$n" -gt 1 ] && [[ "${MHA_CLASS_DB:-sqlite}" != postgresql* ]]; then
      echo "More than one replica: set MHA_CLASS_DB to a PostgreSQL database (deploy/school.sh postgres)" >&2
      exit 2
    fi
    python -c "import supervisor" 2>/dev/null || { echo "supervisor not found: pip install -r deploy/requirements-school.txt" >&2; exit 2; }
    if [ -S "$DIR/supervisor.sock" ] && ctl pid >/dev/null 2>&1; then
      echo "Already running (deploy/school.sh status; deploy/school.sh stop first)" >&2
      exit 2
    fi
    mkdir -p "$DIR"
    chmod 711 "$DIR"  # not listable; nginx makes its temporary folders inside for its workers itself
    url=$(public_url "$port")
    config "$n" "0.0.0.0:$port" "$DIR" >"$DIR/nginx.conf"
    python="$(command -v python)"
    {
      echo "[supervisord]"
      echo "umask=027"  # every log (its own, the replicas', nginx's): root and its group only
      echo "logfile=$DIR/supervisord.log"
      echo "pidfile=$DIR/supervisord.pid"
      echo "childlogdir=$DIR"
      echo "[unix_http_server]"
      echo "file=$DIR/supervisor.sock"
      echo "chmod=0700"
      echo "[supervisorctl]"
      echo "serverurl=unix://$DIR/supervisor.sock"
      echo "[rpcinterface:supervisor]"
      echo "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface"
      for ((i = 0; i < n; i++)); do
        echo "[program:replica-$i]"
        echo "command=$python -m ui.launch run app.py --server.headless true --server.address 127.0.0.1 --server.port $((FIRST + i)) --client.showErrorDetails none"
        echo "directory=$PWD"
        # FORWARDED_ALLOW_IPS: uvicorn believes X-Forwarded-For from this nginx only (classroom/limits.py)
        echo "environment=HF_HUB_OFFLINE=\"1\",TRANSFORMERS_OFFLINE=\"1\",FORWARDED_ALLOW_IPS=\"127.0.0.1\",MHA_PUBLIC_URL=\"${url//%/%%}\",MHA_SCHOOL_DIR=\"$DIR\""
        echo "autorestart=true"
        echo "startsecs=3"
        echo "stopasgroup=true"
        echo "killasgroup=true"
        echo "redirect_stderr=true"
        echo "stdout_logfile=$DIR/replica-$i.log"
      done
      echo "[program:nginx]"
      echo "command=$(command -v nginx) -e $DIR/error.log -c $DIR/nginx.conf -g 'daemon off;'"
      echo "autorestart=true"
      echo "redirect_stderr=true"
      echo "stdout_logfile=$DIR/nginx.out"
    } >"$CONF"
    umask 027  # logs readable by root and its group only
    python -m supervisor.supervisord -c "$CONF"
    for ((i = 0; i < n; i++)); do
      for _ in $(seq 120); do
        curl -fs "http://127.0.0.1:$((FIRST + i))/_stcore/health" >/dev/null && break
        sleep 1
      done
    done
    for _ in $(seq 30); do  # past startsecs: RUNNING (supervisorctl status exits 3 while one is not)
      out=$(ctl status 2>&1 || true)
      grep -q STARTING <<<"$out" || break
      sleep 1
    done
    curl -fs "http://127.0.0.1:$port/_stcore/health" >/dev/null || sleep 2
    echo "serving $url ($n replicas under supervisord; logs in $DIR)"
    echo "students type: $url"
    ;;
  status)
    ctl status
    ;;
  restart)  # after updating the code: one replica at a time, so that the other serves meanwhile
    for program in $(ctl status | awk '/^replica-/ {print $1}'); do
      ctl restart "$program" >/dev/null
      port=$((FIRST + ${program#replica-}))
      for _ in $(seq 120); do curl -fs "http://127.0.0.1:$port/_stcore/health" >/dev/null && break; sleep 1; done
      sleep 10  # nginx's fail_timeout: the replica is back in rotation before the next one goes
      echo "restarted $program"
    done
    ;;
  stop)
    if [ -S "$DIR/supervisor.sock" ] && ctl shutdown >/dev/null 2>&1; then
      for _ in $(seq 30); do [ -e "$DIR/supervisord.pid" ] || break; sleep 1; done
    elif [ -f "$DIR/supervisord.pid" ]; then  # supervisord itself died: its pid only if it still is supervisord
      pid=$(cat "$DIR/supervisord.pid")
      if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "supervisord -c $CONF"; then kill "$pid"; fi
    fi
    left=()
    # whatever is left of this server's programs (orphans, after supervisord was killed): a process
    # is this server's only if its command line and its environment say so, never by a pid file
    # that an unrelated process may have inherited
    for p in /proc/[0-9]*; do
      line=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null || true)
      mine=0
      case "$line" in
        *"-c $DIR/nginx.conf"*) mine=1 ;;
        *"ui.launch run app.py"*) tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "MHA_SCHOOL_DIR=$DIR" && mine=1 ;;
      esac
      [ "$mine" = 1 ] && left+=("${p#/proc/}")
    done
    # an orphan whose output went to the dead supervisord may not finish on SIGTERM: SIGKILL after 10 s
    if [ "${#left[@]}" -gt 0 ]; then
      kill "${left[@]}" 2>/dev/null || true
      for _ in $(seq 20); do
        alive=()
        for pid in "${left[@]}"; do  # a zombie (no parent reaps an orphan here) is gone already
          state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)
          [ "$state" != X ] && [ "$state" != Z ] && alive+=("$pid")
        done
        [ "${#alive[@]}" -eq 0 ] && break
        sleep 0.5
      done
      [ "${#alive[@]}" -gt 0 ] && kill -9 "${alive[@]}" 2>/dev/null || true
    fi
    rm -f "$DIR/supervisord.pid" "$DIR/nginx.pid"
    echo "stopped"
    ;;
  *)
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
