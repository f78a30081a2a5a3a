#!/usr/bin/env bash
# The command line as operators use it (issue 16, CLI and sample
# configuration); no server is started:
#  - every subcommand has its own --help (usage of that subcommand, exit 0);
#  - a configuration error exits 2 in every subcommand (check too);
#  - -c is optional when everything comes from the environment;
#  - `outboxd config` prints each key's value and source (default, file,
#    environment, --set), secrets masked;
#  - durations take units everywhere, the *_ms keys still take bare ms;
#  - deploy/outboxd.ini.example is what `outboxd config --example` prints
#    (from the key table the parser validates against), and is accepted;
#  - the key tables of deploy/configuration.md (the configuration reference) are
#    what `outboxd config --doc-table` prints (tests/e2e/regen_docs.sh
#    rewrites them).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init cli
OUTBOXD=$OUTBOXD_BUILD_DIR/outboxd
SECRET=Cl1S3cret

# run RC NAME CMD...: runs CMD with only PATH in the environment (plus
# what CMD sets with env), which must exit RC; output in $T/NAME.out/.err.
run() {
    local want=$1 name=$2 rc=0
    shift 2
    env -i PATH="$PATH" "$@" >"$T/$name.out" 2>"$T/$name.err" || rc=$?
    if [[ $rc -ne $want ]]; then
        head -n 20 "$T/$name.out" "$T/$name.err" >&2
        fail "$name: exit $rc, expected $want"
    fi
    info "ok: $name: exit $rc"
}
# has NAME REGEX: a line of NAME's stdout matches.
has() {
    grep -Eq -- "$2" "$T/$1.out" || { cat "$T/$1.out" >&2; fail "$1: no line matches /$2/"; }
}

step "each subcommand has its own --help"
for sub in check verify requeue accept-slot repair republish config; do
    run 0 "help_$sub" "$OUTBOXD" "$sub" --help
    head -n 1 "$T/help_$sub.out" | grep "^usage: outboxd $sub " >/dev/null ||
        fail "outboxd $sub --help: first line is \"$(head -n 1 "$T/help_$sub.out")\", not the usage of $sub"
    has "help_$sub" '^  2  needs an operator: bad usage or configuration'
done
run 0 help_daemon "$OUTBOXD" --help
has help_daemon '^usage: outboxd \[-c FILE\]'

step "a configuration error exits 2 in every subcommand"
printf '[postgres]\nconninfo = host=127.0.0.1 port=1\nslto = x\n[kafka]\nbootstrap.servers = 127.0.0.1:1\n' >"$T/typo.ini"
run 2 bad_daemon "$OUTBOXD" -c "$T/typo.ini"
run 2 bad_check "$OUTBOXD" check -c "$T/typo.ini"
has bad_check '^FAIL configuration: .*unknown key "slto" in section \[postgres\]; did you mean "slot"\?'
run 2 bad_check_only "$OUTBOXD" check --config-only -c "$T/typo.ini"
run 2 bad_verify "$OUTBOXD" verify -c "$T/typo.ini"
run 2 bad_requeue "$OUTBOXD" requeue -c "$T/typo.ini" 00000000-0000-0000-0000-000000000000
run 2 bad_accept "$OUTBOXD" accept-slot -c "$T/typo.ini"
run 2 bad_republish "$OUTBOXD" republish -c "$T/typo.ini" --event-id 00000000-0000-0000-0000-000000000000
run 2 republish_nothing "$OUTBOXD" republish -c "$T/typo.ini"
grep -q 'nothing selected: give --event-id, --aggregate or --since' "$T/republish_nothing.err" ||
    fail "republish without a selection does not say what to give"
run 2 bad_config "$OUTBOXD" config -c "$T/typo.ini"
run 2 bad_option "$OUTBOXD" check --bogus
run 2 bad_kafka "$OUTBOXD" check --config-only --set postgres.conninfo=host=x --set kafka.bootstrap.servers=x:1 --set kafka.bootstrap.server=x
has bad_kafka '^FAIL configuration: \[kafka\] bootstrap.server: No such configuration property'

step "-c is optional when everything comes from the environment"
run 0 env_only env OUTBOXD_POSTGRES_CONNINFO="host=127.0.0.1 port=1 dbname=x" \
    OUTBOXD_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 "$OUTBOXD" check --config-only
has env_only '^ok   configuration$'
run 2 env_missing "$OUTBOXD" check --config-only
has env_missing '^FAIL configuration: \[postgres\] conninfo is not set'

step "outboxd config: value and source of every key, secrets masked"
cat >"$T/src.ini" <<INI
[postgres]
conninfo = host=127.0.0.1 port=1 user=u password=$SECRET dbname=x
slot = from_file
retry_min_ms = 700
[kafka]
bootstrap.servers = 127.0.0.1:1
sasl.password = k$SECRET
INI
chmod 600 "$T/src.ini"
run 0 config env OUTBOXD_POSTGRES_PUBLICATION=p_env OUTBOXD_KAFKA_LINGER_MS=7 \
    "$OUTBOXD" config -c "$T/src.ini" --set log.level=debug --set postgres.retry_max_ms=2m \
    --set polling.lease=90s
has config '^slot = from_file  ; file$'
has config '^publication = p_env  ; environment$'
has config '^level = debug  ; --set$'
has config '^listen = [^ ]+  ; default$'
has config '^create_slot = true  ; default$'
has config '^linger.ms = 7  ; environment$'
has config '^bootstrap.servers = 127.0.0.1:1  ; file$'
has config '^conninfo = .*password=.?\*{8}.*  ; file$'
has config '^sasl.password = \*{8}  ; file$'
has config '^queue.buffering.max.messages = 5000  ; default$'
if grep -F -- "$SECRET" "$T/config.out" "$T/config.err" >&2; then
    fail "outboxd config shows a password"
fi
info "ok: no password in outboxd config's output"

step "durations with units; the *_ms keys keep bare milliseconds"
has config '^retry_min_ms = 700  ; file$'           # bare: milliseconds
has config '^retry_max_ms = 120000  ; --set$'       # 2m
has config '^lease = 90s  ; --set$'
run 0 units "$OUTBOXD" config -c "$T/src.ini" --set postgres.status_interval_ms=1500ms \
    --set postgres.monitor_interval_ms=1h --set kafka.message.timeout.ms=5s \
    --set polling.retention=1h --set polling.backoff_min=500ms
has units '^status_interval_ms = 1500  ; --set$'
has units '^monitor_interval_ms = 3600000  ; --set$'
has units '^message.timeout.ms = 5000  ; --set$'
has units '^retention = 1h  ; --set$'
has units '^backoff_min = 500ms  ; --set$'
run 2 unitless_lease "$OUTBOXD" config -c "$T/src.ini" --set polling.lease=30
grep -q 'lease: "30" is not a duration' "$T/unitless_lease.err" || fail "lease = 30: $(cat "$T/unitless_lease.err")"
run 2 bad_unit "$OUTBOXD" check --config-only -c "$T/src.ini" --set postgres.retry_min_ms=5sec

step "deploy/outboxd.ini.example is printed from the key table"
run 0 example "$OUTBOXD" config --example
diff -u "$E2E_SRC_DIR/deploy/outboxd.ini.example" "$T/example.out" >&2 ||
    fail "deploy/outboxd.ini.example differs from \`outboxd config --example\` (regenerate it: outboxd config --example > deploy/outboxd.ini.example)"
info "ok: deploy/outboxd.ini.example is the key table's"
n=$(grep -c '^;\?[a-z_.]* =' "$E2E_SRC_DIR/deploy/outboxd.ini.example")
((n >= 45)) || fail "the sample lists only $n keys"
run 0 example_valid "$OUTBOXD" check --config-only -c "$E2E_SRC_DIR/deploy/outboxd.ini.example"
has example_valid '^ok   configuration$'

step "deploy/configuration.md's key tables are printed from the key table"
# The configuration reference, where the generated key tables live.
KEYDOC=$E2E_SRC_DIR/deploy/configuration.md
# readme_table WHICH [FILE]: the lines between FILE's (default $KEYDOC)
# keys:WHICH markers.
readme_table() {
    awk -v b="<!-- keys:$1 " -v e="<!-- /keys:$1 -->" \
        'index($0, e) == 1 { p = 0 } p { print } index($0, b) == 1 { p = 1 }' "${2:-$KEYDOC}"
}
for which in logical polling; do
    run 0 "table_$which" "$OUTBOXD" config --doc-table "$which"
    readme_table "$which" >"$T/readme_$which.md"
    [[ -s "$T/readme_$which.md" ]] || fail "deploy/configuration.md has no keys:$which table"
    diff -u "$T/readme_$which.md" "$T/table_$which.out" >&2 ||
        fail "deploy/configuration.md's $which key table differs from \`outboxd config --doc-table $which\` (tests/e2e/regen_docs.sh BUILD_DIR rewrites it)"
    info "ok: deploy/configuration.md's $which table ($(wc -l <"$T/readme_$which.md") lines) is the key table's"
done
# The comparison sees a drift (a default changed in the document only).
sed 's/| `outboxd` | logical replication slot |/| `outboxd2` | logical replication slot |/' \
    "$KEYDOC" >"$T/README.drift.md"
readme_table logical "$T/README.drift.md" >"$T/drift.md"
if diff -q "$T/drift.md" "$T/table_logical.out" >/dev/null; then
    fail "a changed default in deploy/configuration.md went unnoticed"
fi
info "ok: a drifted key table is caught"

e2e_pass
