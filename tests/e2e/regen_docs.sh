#!/usr/bin/env bash
# regen_docs.sh - rewrite the generated documentation from the binary's key
# table (src/config/config.c), after a key was added or changed:
#
#   bash tests/e2e/regen_docs.sh BUILD_DIR
#
#  - deploy/outboxd.ini.example  = `outboxd config --example`;
#  - deploy/configuration.md, between `<!-- keys:WHICH ... -->` and
#    `<!-- /keys:WHICH -->` (WHICH: logical, polling)
#                                = `outboxd config --doc-table WHICH`.
# The files written are those of the repository this script is in. e2e.cli
# fails when they differ from what the binary prints; run this, then review
# the diff (git diff deploy/). Exit 0 when written, 1 on an error (a missing
# binary or marker), nothing changed then.
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 1; }
OUTBOXD=$1/outboxd
[[ -x "$OUTBOXD" ]] || { echo "regen_docs: $OUTBOXD is not an executable (build first)" >&2; exit 1; }
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DOC=$SRC/deploy/configuration.md
EXAMPLE=$SRC/deploy/outboxd.ini.example

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$OUTBOXD" config --example >"$TMP/example"
cp "$DOC" "$TMP/doc"
for which in logical polling; do
    "$OUTBOXD" config --doc-table "$which" >"$TMP/table"
    grep -q "^<!-- keys:$which " "$TMP/doc" && grep -q "^<!-- /keys:$which -->" "$TMP/doc" ||
        { echo "regen_docs: $DOC has no <!-- keys:$which ... --> ... <!-- /keys:$which --> markers" >&2; exit 1; }
    # Keep both marker lines, replace what is between them.
    awk -v b="<!-- keys:$which " -v e="<!-- /keys:$which -->" -v t="$TMP/table" '
        index($0, e) == 1 { while ((getline l < t) > 0) print l; skip = 0 }
        !skip { print }
        index($0, b) == 1 { skip = 1 }' "$TMP/doc" >"$TMP/doc.new"
    mv "$TMP/doc.new" "$TMP/doc"
done
cmp -s "$TMP/example" "$EXAMPLE" || { cp "$TMP/example" "$EXAMPLE"; echo "regen_docs: rewrote $EXAMPLE"; }
cmp -s "$TMP/doc" "$DOC" || { cp "$TMP/doc" "$DOC"; echo "regen_docs: rewrote the key tables of $DOC"; }
echo "regen_docs: deploy/outboxd.ini.example and the key tables of deploy/configuration.md are the binary's"
