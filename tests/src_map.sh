#!/usr/bin/env bash
# src_map.sh - src/README.md lists every source file (ctest docs.src_map).
#
#   bash tests/src_map.sh [SRC_DIR]
#
# Every src/NAME.c, and every include/NAME.h without a src/NAME.c, must
# appear in src/README.md as `NAME.c` or `NAME.h`; every `NAME.c` or
# `NAME.h` written there must exist. A new file without an entry, or an
# entry left behind by a removed or renamed file, fails with its name.
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
map=$root/src/README.md
[[ -f $map ]] || {
    echo "src_map: $map is missing" >&2
    exit 1
}

# The names the map mentions in `code spans`.
mapfile -t named < <(grep -o '`[A-Za-z0-9_][A-Za-z0-9_]*\.[ch]`' "$map" | tr -d '`' | sort -u)
declare -A in_map=()
for n in "${named[@]}"; do in_map[$n]=1; done

bad=0
checked=0
mapfile -t files < <(cd "$root" && find src include -name '*.[ch]' | sort)
declare -A exists=()
for f in "${files[@]}"; do exists[$(basename "$f")]=1; done
for f in "${files[@]/#/$root/}"; do
    n=$(basename "$f")
    # A header with its .c is the .c's entry.
    [[ $n == *.h && -n "${exists[${n%.h}.c]:-}" ]] && continue
    checked=$((checked + 1))
    if [[ -z "${in_map[$n]:-}" ]]; then
        echo "src_map: ${f#"$root"/} has no entry in src/README.md" >&2
        bad=1
    fi
done
for n in "${named[@]}"; do
    if [[ -z "${exists[$n]:-}" ]]; then
        echo "src_map: src/README.md names $n, which is neither in src/ nor in include/" >&2
        bad=1
    fi
done
((bad == 0)) || exit 1
echo "src_map: the $checked files of src/ and include/ (headers with a .c counted once) are in src/README.md"
