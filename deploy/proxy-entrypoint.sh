#!/bin/sh
# Fill deploy/nginx.conf's placeholders and run nginx in the foreground. UPSTREAMS: the replicas
# (compose's service name "app" resolves to every replica's address, and nginx takes them all).
set -eu
LOGS=/var/log/mha
mkdir -p "$LOGS"
UPSTREAMS="${UPSTREAMS:-server app:8501 max_fails=1 fail_timeout=10s;}"
sed -e "s|__LISTEN__|${LISTEN:-8080}|" -e "s|__UPSTREAMS__|${UPSTREAMS}|" -e "s|__LOGS__|${LOGS}|g" \
    -e "s|__PID__|/run/nginx-mha.pid|" /etc/mha/nginx.conf.in > /etc/mha/nginx.conf
exec nginx -c /etc/mha/nginx.conf -g "daemon off;"
