#!/usr/bin/env bash
# A school's server without Docker: N replicas of the app on this machine behind Debian's nginx
# (deploy/nginx.conf, sticky by cookie), and PostgreSQL for class mode when asked. Run from the
# repository root, in the virtual environment that has requirements.txt installed.
#
#   deploy/school.sh postgres            make role and database "mha" in the local PostgreSQL
#                                        (as root: apt-get install -y postgresql nginx first) and
#                                        print the MHA_CLASS_DB setting that uses them
#   deploy/school.sh config N [PORT]     print nginx.conf for N replicas (ports 8501..) on PORT
#   deploy/school.sh start N [PORT]      start N replicas and nginx in the background (default
#                                        PORT 8080), wait until they answer, print the address
#   deploy/school.sh stop                stop what start started
#
# Settings (environment): MHA_CLASS_DB (class mode's database: with more than one replica it must
# be PostgreSQL, e.g. postgresql+psycopg://mha:PASSWORD@127.0.0.1/mha; one replica may keep the
# default SQLite file), MHA_SCHOOL_DIR (pid files, logs; default /tmp/mha-school),
# MHA_TRAINING_SLOTS (training runs at once per replica, default 1), MHA_FIRST_PORT (8501).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${MHA_SCHOOL_DIR:-/tmp/mha-school}"
FIRST="${MHA_FIRST_PORT:-8501}"

config() {  # N PORT LOGS
  local upstreams=""
  for ((i = 0; i < $1; i++)); do upstreams+="server 127.0.0.1:$((FIRST + i)) max_fails=1 fail_timeout=10s; "; done
  sed -e "s|__LISTEN__|$2|" -e "s|__UPSTREAMS__|${upstreams}|" -e "s|__LOGS__|$3|g" -e "s|__PID__|$3/nginx.pid|" \
    deploy/nginx.conf
}

case "${1:-}" in
  postgres)
    password="${MHA_DB_PASSWORD:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')}"
    su postgres -c "psql -v ON_ERROR_STOP=1 -q" <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mha') THEN CREATE ROLE mha LOGIN; END IF;
END \$\$;
ALTER ROLE mha PASSWORD '${password}';
SQL
    su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'mha'\"" | grep -q 1 \
      || su postgres -c "createdb -O mha mha"
    echo "MHA_CLASS_DB=postgresql+psycopg://mha:${password}@127.0.0.1:5432/mha"
    ;;
  config)
    config "${2:?number of replicas}" "127.0.0.1:${3:-8080}" "$DIR"
    ;;
  start)
    n="${2:?number of replicas}"
    port="${3:-8080}"
    if [ "$n" -gt 1 ] && [[ "${MHA_CLASS_DB:-sqlite}" != postgresql* ]]; then
      echo "More than one replica: set MHA_CLASS_DB to a PostgreSQL database (deploy/school.sh postgres)" >&2
      exit 2
    fi
    mkdir -p "$DIR"
    chmod 777 "$DIR"  # nginx's workers write temporary files here
    for ((i = 0; i < n; i++)); do
      HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 nohup python -m streamlit run app.py --server.headless true \
        --server.address 127.0.0.1 --server.port $((FIRST + i)) >"$DIR/replica-$i.log" 2>&1 &
      echo $! >"$DIR/replica-$i.pid"
    done
    config "$n" "0.0.0.0:$port" "$DIR" >"$DIR/nginx.conf"
    for ((i = 0; i < n; i++)); do
      for _ in $(seq 120); do
        curl -fs "http://127.0.0.1:$((FIRST + i))/_stcore/health" >/dev/null && break
        sleep 1
      done
    done
    nginx -e "$DIR/error.log" -c "$DIR/nginx.conf"
    echo "serving http://$(hostname -f 2>/dev/null || hostname):$port ($n replicas; logs in $DIR)"
    ;;
  stop)
    [ -f "$DIR/nginx.pid" ] && kill "$(cat "$DIR/nginx.pid")" 2>/dev/null || true
    for pid in "$DIR"/replica-*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null; rm -f "$pid"; done
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
