#!/usr/bin/env bash
# The deployment files in deploy/ are valid, and the outboxd settings they
# carry are ones outboxd accepts:
#
#  - outboxd's settings (mounted ini + OUTBOXD_* variables + the image's
#    own ENV) of the image defaults, docker-compose.yml and the Kubernetes
#    manifests go through `outboxd check --config-only` (the real
#    configuration loader: unknown keys and bad values fail it; a variable
#    that matches no section is warned about, which fails here too). Each
#    check is also shown to fail on a misspelt key.
#  - docker-compose.yml: `docker-compose config` (Debian's docker-compose:
#    schema, interpolation) accepts it and refuses a misspelt key; Postgres
#    runs with wal_level=logical, Kafka in KRaft mode; the one-shot db-init
#    command runs (twice: idempotent) against a real PostgreSQL 15 and
#    leaves the outbox, the publication and a role outboxd that logs in
#    with the compose file's password (scram-sha-256).
#  - deploy/kubernetes/*.yaml: YAML syntax (python3-yaml) and the wiring,
#    checked field by field: one replica, probes on /healthz and /readyz on
#    the port outboxd listens on, the Secret and ConfigMap they name exist,
#    the offset file on the claimed volume, the image's non-root uid. No
#    Kubernetes schema validation: no validator is packaged for Debian 12.
#  - deploy/outboxd.service: `systemd-analyze verify` (no warning at all,
#    unknown keys included) and `systemd-analyze security --offline`
#    exposure at most 2.0.
#  - no deployment file nor the code uses port 9187 (postgres_exporter's).
#  - deploy/prometheus/outboxd-alerts.yml: `promtool check rules`, and
#    `promtool test rules tests/deploy/outboxd-alerts.test.yml`.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init deploy_files

PY=/usr/bin/python3 # Debian's, with python3-yaml (python3 on PATH may lack it)
for tool in docker-compose promtool systemd-analyze jq "$PY"; do
    command -v "$tool" >/dev/null ||
        fail "$tool is not installed (deploy/install-deps.sh installs it)"
done
"$PY" -c 'import yaml' 2>/dev/null || fail "python3-yaml is not installed for $PY"
D=$E2E_SRC_DIR/deploy
OUTBOXD=$OUTBOXD_BUILD_DIR/outboxd

# yaml2json FILE: every document of FILE as one JSON array.
yaml2json() {
    "$PY" -c 'import json, sys, yaml
json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)' "$1"
}

# config_check WHAT INI [NAME=VALUE...]: runs `outboxd check --config-only
# -c INI` with exactly these environment variables (later ones win); sets
# CHECK_OUT (stdout + stderr) and returns its exit status, or 3 when it
# exited 0 but warned about an ignored variable.
config_check() {
    local what=$1 ini=$2 rc=0
    shift 2
    CHECK_OUT=$(env -i PATH="$PATH" "$@" "$OUTBOXD" check --config-only -c "$ini" 2>&1) || rc=$?
    if ((rc == 0)) && grep -q 'ignoring environment variable' <<<"$CHECK_OUT"; then
        rc=3
    fi
    return "$rc"
}
config_ok() {
    local what=$1
    config_check "$@" || fail "$what: outboxd check --config-only: $CHECK_OUT"
    [[ "$CHECK_OUT" == "ok   configuration" ]] || fail "$what: unexpected output: $CHECK_OUT"
    info "ok: $what: outboxd accepts its settings"
}
config_refused() {
    local what=$1
    if config_check "$@"; then
        fail "$what: outboxd check --config-only accepted it: $CHECK_OUT"
    fi
    info "ok: $what: refused ($(head -n 1 <<<"$CHECK_OUT" | cut -c1-160))"
}

# The image's own environment (ENV lines of the Dockerfile).
IMAGE_ENV=()
while read -r _ kv; do
    IMAGE_ENV+=("$kv")
done < <(grep -E '^ENV [A-Z_]+=' "$D/Dockerfile")
[[ " ${IMAGE_ENV[*]} " == *" OUTBOXD_HTTP_LISTEN=0.0.0.0:19187 "* ]] ||
    fail "the Dockerfile does not set OUTBOXD_HTTP_LISTEN=0.0.0.0:19187 (ENV: ${IMAGE_ENV[*]})"
# Port 9187 is postgres_exporter's default, which often runs on the same
# host: outboxd's default is 19187 (deploy/observability.md, "Endpoints"), nowhere 9187
# (but in deploy/observability.md's text, which tells that story).
if grep -rnw --exclude='*.md' 9187 "$D" "$E2E_SRC_DIR/src" "$E2E_SRC_DIR/include" >"$T/port.grep"; then
    fail "port 9187 (postgres_exporter's) is still used: $(cat "$T/port.grep")"
fi
image_uid=$(awk '$1 == "USER" { split($2, a, ":"); print a[1] }' "$D/Dockerfile")
info "image ENV: ${IMAGE_ENV[*]}; USER uid $image_uid"

# ---------------------------------------------------------------- image

step "the image's default configuration"
config_ok "image defaults (deploy/container/outboxd.ini)" "$D/container/outboxd.ini" \
    "${IMAGE_ENV[@]}" OUTBOXD_POSTGRES_CONNINFO="host=db dbname=app user=outboxd" \
    OUTBOXD_KAFKA_BOOTSTRAP_SERVERS=kafka:9092
config_refused "image defaults without a broker" "$D/container/outboxd.ini" \
    "${IMAGE_ENV[@]}" OUTBOXD_POSTGRES_CONNINFO="host=db dbname=app user=outboxd"

# The HEALTHCHECK script says unhealthy when nothing answers or the HTTP
# server is off (its healthy answer is checked in e2e.container).
closed=$(_free_port)
if out=$(OUTBOXD_HTTP_LISTEN=127.0.0.1:$closed bash "$D/container/healthcheck.sh" 2>&1); then
    fail "healthcheck.sh says healthy with nothing on port $closed"
fi
info "ok: healthcheck.sh, nothing listening: $out"
if out=$(OUTBOXD_HTTP_LISTEN= bash "$D/container/healthcheck.sh" 2>&1); then
    fail "healthcheck.sh says healthy with the HTTP server off"
fi
info "ok: healthcheck.sh, HTTP server off: $out"

# ---------------------------------------------------------------- compose

step "docker-compose config"
docker-compose -f "$D/docker-compose.yml" config >"$T/compose.yml" 2>"$T/compose.err" ||
    fail "docker-compose config refused deploy/docker-compose.yml: $(cat "$T/compose.err")"
info "ok: docker-compose $(docker-compose version --short 2>/dev/null) accepts it"
# The validator catches a misspelt key.
mkdir -p "$T/deploy"
sed '0,/^    environment:/s//    enviroment:/' "$D/docker-compose.yml" >"$T/deploy/docker-compose.yml"
if docker-compose -f "$T/deploy/docker-compose.yml" config >/dev/null 2>"$T/compose.bad.err"; then
    fail "docker-compose config accepted 'enviroment:'"
fi
grep -q "enviroment" "$T/compose.bad.err" || fail "docker-compose's error does not name the key: $(cat "$T/compose.bad.err")"
info "ok: a misspelt key is refused: $(grep -m1 enviroment "$T/compose.bad.err")"

yaml2json "$T/compose.yml" | jq '.[0]' >"$T/compose.json"
svc() { jq -r ".services[\"$1\"]$2" "$T/compose.json"; }
[[ "$(svc postgres '.image')" == postgres:15* ]] || fail "postgres image is $(svc postgres .image), not PostgreSQL 15"
svc postgres '.command | join(" ")' | grep -w 'wal_level=logical' >/dev/null ||
    fail "postgres does not run with wal_level=logical: $(svc postgres '.command | join(" ")')"
[[ "$(svc kafka '.image')" == apache/kafka:* ]] || fail "kafka image is $(svc kafka .image)"
[[ "$(svc kafka '.environment.KAFKA_PROCESS_ROLES')" == broker,controller ]] ||
    fail "kafka is not a single KRaft node (KAFKA_PROCESS_ROLES=$(svc kafka '.environment.KAFKA_PROCESS_ROLES'))"
assert_eq service_completed_successfully "$(svc outboxd '.depends_on["db-init"].condition')" \
    "outboxd waits for the db-init one-shot"
assert_eq deploy/Dockerfile "$(svc outboxd '.build.dockerfile')" "outboxd's image"

step "outboxd's settings in docker-compose.yml"
mapfile -t compose_env < <(svc outboxd '.environment | to_entries[] | "\(.key)=\(.value)"')
ini=$(svc outboxd '.volumes[] | select(type == "string") | split(":") | select(.[1] == "/etc/outboxd/outboxd.ini") | .[0]')
[[ -n "$ini" && -f "$ini" ]] || fail "outboxd's ini is not mounted from a file at /etc/outboxd/outboxd.ini (got '$ini')"
svc outboxd '.volumes[]' | grep ':/var/lib/outboxd' >/dev/null || fail "no volume on /var/lib/outboxd (the offset file)"
info "ini $ini; environment: ${compose_env[*]%%=*}"
config_ok "docker-compose outboxd" "$ini" "${IMAGE_ENV[@]}" "${compose_env[@]}"
grep -Eq '^file = /var/lib/outboxd/' "$ini" || fail "$ini keeps the offset file outside the volume"
config_refused "docker-compose outboxd with OUTBOXD_POSTGRES_SLTO" "$ini" \
    "${IMAGE_ENV[@]}" "${compose_env[@]}" OUTBOXD_POSTGRES_SLTO=x
config_refused "docker-compose outboxd with OUTBOXD_HTPP_LISTEN" "$ini" \
    "${IMAGE_ENV[@]}" "${compose_env[@]}" OUTBOXD_HTPP_LISTEN=0.0.0.0:1
{ cat "$ini"; printf '[http]\nlisen = 0.0.0.0:19187\n'; } >"$T/misspelt.ini"
config_refused "docker-compose ini with 'lisen'" "$T/misspelt.ini" "${IMAGE_ENV[@]}" "${compose_env[@]}"

step "the db-init one-shot against PostgreSQL 15"
pg_start
psql_q "CREATE DATABASE $(svc db-init .environment.PGDATABASE)"
# Its shell command, with compose's $$ as $ and /sql as the repository's sql/.
svc db-init '.command[2]' | sed -e 's/\$\$/$/g' -e "s|/sql/|$E2E_SRC_DIR/sql/|g" >"$T/db-init.sh"
[[ "$(svc db-init '.command[0:2] | join(" ")')" == "sh -ec" ]] || fail "db-init's command is not sh -ec SCRIPT"
DB_PW=$(svc db-init .environment.OUTBOXD_DB_PASSWORD)
assert_eq "$DB_PW" "$(svc outboxd .environment.PGPASSWORD)" "outboxd's PGPASSWORD is the password db-init sets"
for run in 1 2; do
    env PGHOST=127.0.0.1 PGPORT="$PGPORT" PGUSER=postgres \
        PGDATABASE="$(svc db-init .environment.PGDATABASE)" OUTBOXD_DB_PASSWORD="$DB_PW" \
        sh -e "$T/db-init.sh" >"$T/db-init.$run.log" 2>&1 ||
        { cat "$T/db-init.$run.log" >&2; fail "db-init failed (run $run)"; }
    info "ok: db-init run $run"
done
export PGDATABASE=app
assert_sql "SELECT to_regclass('public.outbox_events') IS NOT NULL" "outbox table in app"
assert_sql "SELECT count(*) = 1 FROM pg_publication WHERE pubname = 'outboxd_pub'" "publication in app"
assert_sql "SELECT rolreplication AND rolcanlogin FROM pg_roles WHERE rolname = 'outboxd'" "role outboxd (LOGIN REPLICATION)"
hba=$T/pgdata/pg_hba.conf
{ echo "host all outboxd 127.0.0.1/32 scram-sha-256"; cat "$hba"; } >"$hba.new"
cat "$hba.new" >"$hba"
rm -f "$hba.new"
pg_reload
if PGPASSWORD="x$DB_PW" psql -XAtq -U outboxd -c "SELECT 1" >/dev/null 2>&1; then
    fail "outboxd logs in with a wrong password: pg_hba.conf not in force"
fi
assert_eq 1 "$(PGPASSWORD=$DB_PW psql -XAtq -U outboxd -c 'SELECT 1')" \
    "the role outboxd logs in with the compose file's password"

# ---------------------------------------------------------------- kubernetes

step "deploy/kubernetes"
for f in "$D"/kubernetes/*.yaml; do
    yaml2json "$f" >"$T/k8s.$(basename "$f" .yaml).json" 2>"$T/yaml.err" ||
        fail "$f is not valid YAML: $(cat "$T/yaml.err")"
done
jq -s 'add | map(select(. != null))' "$T"/k8s.*.json >"$T/k8s.json"
info "ok: YAML: $(jq -r 'map(.kind) | join(", ")' "$T/k8s.json")"
for r in $(jq -r '.[] | select(.kind == "Kustomization") | .resources[]' "$T/k8s.json"); do
    [[ -f "$D/kubernetes/$r" ]] || fail "kustomization.yaml lists $r, which does not exist"
done
k() { jq -r "$1" "$T/k8s.json"; }
sts='.[] | select(.kind == "StatefulSet")'
ctr="$sts | .spec.template.spec.containers[] | select(.name == \"outboxd\")"
assert_eq 1 "$(k "$sts | .spec.replicas")" "StatefulSet replicas"
assert_eq "$(k "$sts | .spec.template.metadata.labels[\"app.kubernetes.io/name\"]")" \
    "$(k "$sts | .spec.selector.matchLabels[\"app.kubernetes.io/name\"]")" "selector matches the pod labels"
assert_eq "$(k "$sts | .spec.serviceName")" "$(k '.[] | select(.kind == "Service") | .metadata.name')" \
    "serviceName is the Service"
mapfile -t pod_env < <(k "$ctr | .env[] | select(has(\"value\")) | \"\(.name)=\(.value)\"")
listen=$(k "$ctr | .env[] | select(.name == \"OUTBOXD_HTTP_LISTEN\") | .value")
[[ -n "$listen" ]] || listen=0.0.0.0:19187 # the image's
port=${listen##*:}
assert_eq "$port" "$(k "$ctr | .ports[] | select(.name == \"http\") | .containerPort")" \
    "container port 'http' = the port outboxd listens on"
assert_eq /healthz "$(k "$ctr | .livenessProbe.httpGet.path")" "liveness probe"
assert_eq /readyz "$(k "$ctr | .readinessProbe.httpGet.path")" "readiness probe"
for p in liveness readiness startup; do
    assert_eq http "$(k "$ctr | .${p}Probe.httpGet.port")" "$p probe port"
done
assert_eq "$port" "$(k '.[] | select(.kind == "Service") | .spec.ports[] | select(.name == "http") | .port')" \
    "Service port"
# The Secret the password comes from exists with that key.
while IFS=$'\t' read -r var name key; do
    [[ "$(k ".[] | select(.kind == \"Secret\" and .metadata.name == \"$name\") | (.stringData // .data) | has(\"$key\")")" == true ]] ||
        fail "$var comes from Secret $name key $key, which deploy/kubernetes does not define"
    info "ok: $var from Secret $name/$key"
done < <(k "$ctr | .env[] | select(.valueFrom.secretKeyRef) | [.name, .valueFrom.secretKeyRef.name, .valueFrom.secretKeyRef.key] | @tsv")
k "$ctr | .env[] | select(.valueFrom.secretKeyRef) | .name" | grep -x PGPASSWORD >/dev/null ||
    fail "the password does not come from a Secret as PGPASSWORD"
# The ConfigMap's ini, mounted where the container reads it.
cm=$(k "$sts | .spec.template.spec.volumes[] | select(.name == \"config\") | .configMap.name")
k ".[] | select(.kind == \"ConfigMap\" and .metadata.name == \"$cm\") | .data[\"outboxd.ini\"]" >"$T/k8s.ini"
[[ -s "$T/k8s.ini" && "$(head -c 4 "$T/k8s.ini")" != null ]] || fail "ConfigMap $cm has no outboxd.ini"
assert_eq /etc/outboxd "$(k "$ctr | .volumeMounts[] | select(.name == \"config\") | .mountPath")" "ConfigMap mount"
assert_eq "-c /etc/outboxd/outboxd.ini" "$(k "$ctr | .args | join(\" \")")" "container args"
assert_eq /var/lib/outboxd "$(k "$ctr | .volumeMounts[] | select(.name == \"state\") | .mountPath")" "state volume mount"
assert_eq state "$(k "$sts | .spec.volumeClaimTemplates[0].metadata.name")" "the state volume is claimed per pod"
grep -Eq '^ *file = /var/lib/outboxd/' "$T/k8s.ini" || fail "the ConfigMap keeps the offset file outside the volume"
assert_eq "$image_uid" "$(k "$sts | .spec.template.spec.securityContext.runAsUser")" "runAsUser = the image's USER"
assert_eq true "$(k "$sts | .spec.template.spec.securityContext.runAsNonRoot")" "runAsNonRoot"
config_ok "Kubernetes ConfigMap + StatefulSet env" "$T/k8s.ini" "${IMAGE_ENV[@]}" "${pod_env[@]}"
config_refused "Kubernetes settings with OUTBOXD_POSTGRES_CONNINF" "$T/k8s.ini" \
    "${IMAGE_ENV[@]}" "${pod_env[@]}" OUTBOXD_POSTGRES_CONNINF=x

# ---------------------------------------------------------------- systemd

step "deploy/outboxd.service"
mkdir -p "$T/unit"
# verify wants ExecStart's binary to exist: point it at the one just built.
sed "s|/usr/local/bin/outboxd|$OUTBOXD|" "$D/outboxd.service" >"$T/unit/outboxd.service"
out=$(systemd-analyze verify "$T/unit/outboxd.service" 2>&1) ||
    fail "systemd-analyze verify: $out"
[[ -z "$out" ]] || fail "systemd-analyze verify warns: $out"
info "ok: systemd-analyze verify: no warning"
sed 's/^ProtectSystem=strict$/ProtectSytem=strict/' "$T/unit/outboxd.service" >"$T/unit/bad.service"
grep -q ProtectSytem "$T/unit/bad.service" || fail "the unit has no ProtectSystem=strict line"
out=$(systemd-analyze verify "$T/unit/bad.service" 2>&1 || true)
grep -q "Unknown key 'ProtectSytem'" <<<"$out" || fail "systemd-analyze verify missed a misspelt key: $out"
info "ok: a misspelt key is reported: $(grep -m1 ProtectSytem <<<"$out")"
systemd-analyze security --offline=true "$T/unit/outboxd.service" >"$T/security.txt" 2>&1 ||
    { cat "$T/security.txt" >&2; fail "systemd-analyze security failed"; }
score=$(grep -o 'Overall exposure level for outboxd.service: [0-9.]*' "$T/security.txt" | awk '{ print $NF }')
[[ -n "$score" ]] || fail "no exposure level in: $(tail -n 3 "$T/security.txt")"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "systemd-analyze security exposure $score > 2.0"
info "ok: systemd-analyze security: exposure $score"
for line in DynamicUser=yes StateDirectory=outboxd ProtectSystem=strict Restart=on-failure \
    RestartPreventExitStatus=2 WorkingDirectory=/var/lib/outboxd; do
    grep -qx "$line" "$D/outboxd.service" || fail "deploy/outboxd.service lacks $line"
done

# ---------------------------------------------------------------- prometheus

step "deploy/prometheus/outboxd-alerts.yml"
promtool check rules "$D/prometheus/outboxd-alerts.yml" >"$T/promtool.out" 2>&1 ||
    { cat "$T/promtool.out" >&2; fail "promtool check rules"; }
info "ok: $(grep -o 'SUCCESS.*' "$T/promtool.out")"
promtool test rules "$E2E_SRC_DIR/tests/deploy/outboxd-alerts.test.yml" >"$T/promtest.out" 2>&1 ||
    { cat "$T/promtest.out" >&2; fail "promtool test rules"; }
info "ok: promtool test rules: every alert fires when it should and not before"
for a in OutboxdSlotLagHigh OutboxdReplicationLagHigh OutboxdEventsDeadLettered OutboxdNotReady; do
    grep -q "alertname: $a\$" "$E2E_SRC_DIR/tests/deploy/outboxd-alerts.test.yml" ||
        fail "alert $a has no test"
done
e2e_pass
