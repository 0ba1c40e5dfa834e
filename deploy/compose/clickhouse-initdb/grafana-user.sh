#!/bin/bash
# Creates Grafana's read-only ClickHouse user (grafana-user.sql.in) with
# the password of the grafana_clickhouse_password secret. The
# clickhouse-server image runs it once, on an empty data volume
# (/docker-entrypoint-initdb.d); on an existing volume run it by hand:
#   docker compose -f deploy/compose/compose.yaml exec clickhouse /docker-entrypoint-initdb.d/grafana-user.sh
set -euo pipefail
pw=$(cat /run/secrets/grafana_clickhouse_password)
if [[ -z $pw || $pw =~ [^0-9A-Za-z] ]]; then
	echo "grafana-user.sh: TOOLAUDIT_GRAFANA_CLICKHOUSE_PASSWORD must be letters and digits (openssl rand -hex 16)" >&2
	exit 1
fi
sed -e "s/{database}/toolaudit/g" -e "s/{password}/$pw/g" /docker-entrypoint-initdb.d/grafana-user.sql.in |
	clickhouse client --user "$CLICKHOUSE_USER" --password "$CLICKHOUSE_PASSWORD" --multiquery
echo "grafana-user.sh: ClickHouse user grafana (read-only) created"
