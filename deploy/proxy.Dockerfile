# nginx from Debian in front of the replicas, with deploy/nginx.conf.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nginx && rm -rf /var/lib/apt/lists/*
COPY deploy/nginx.conf /etc/mha/nginx.conf.in
COPY deploy/proxy-entrypoint.sh /usr/local/bin/proxy-entrypoint.sh
EXPOSE 8080
ENTRYPOINT ["sh", "/usr/local/bin/proxy-entrypoint.sh"]
