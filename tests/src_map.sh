#!/usr/bin/env bash
# src_map.sh - src/README.md maps every source file by layer, and no file
# includes a header of a higher layer (ctest docs.src_map).
#
#   bash tests/src_map.sh [ROOT]
#
# The layers are the folders of src/ (src/LAYER/*.c, their public headers
# in include/LAYER/, private ones beside the sources in src/LAYER/), in the
# order of src/README.md's headings "## `LAYER/`", bottom first; src/main.c
# is above them all. It fails, naming the file, when:
#   - a folder of src/ or include/ has no heading, or a heading no folder;
#   - a file has no entry (a table row whose first cell is `NAME.c`, or
#     `NAME.h` for a header without a .c) under its folder's heading, or an
#     entry names a file that is not in that folder;
#   - a file of src/ or include/ includes ("NAME.h") a header of a higher
#     layer, a header that is nowhere in the tree, or a private header
#     (NAME_int.h) of another folder.
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
map=$root/src/README.md
[[ -f $map ]] || {
    echo "src_map: $map is missing" >&2
    exit 1
}
bad=0
fail() {
    echo "src_map: $*" >&2
    bad=1
}

# The layers, bottom first, and each entry's heading: "LAYER NAME" lines.
mapfile -t layers < <(sed -n 's/^## `\([a-z0-9_]*\)\/`.*/\1/p' "$map")
declare -A rank=()
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done
rank[main]=${#layers[@]}
mapfile -t entries < <(awk '
    /^## `[a-z0-9_]+\/`/ { l = $2; sub(/^`/, "", l); sub(/\/`.*/, "", l); next }
    /^## / { l = ($0 ~ /`main\.c`/) ? "main" : ""; next }
    l != "" && match($0, /^\| `[A-Za-z0-9_]+\.[ch]` \|/) { print l, substr($0, RSTART + 3, RLENGTH - 6) }
' "$map" | sort -u)
declare -A in_map=()
for e in "${entries[@]}"; do in_map[$e]=1; done

# Every file of the tree with its layer: "LAYER PATH".
declare -A layer_of=() path_of=() nohead=()
mapfile -t files < <(cd "$root" && find src include -name '*.[ch]' | sort)
for f in "${files[@]}"; do
    n=${f##*/}
    case $f in
    src/main.c) l=main ;;
    src/*/*.[ch] | include/*/*.h) l=${f#*/} l=${l%%/*} ;;
    *) fail "$f is not in a layer's folder (src/LAYER/, include/LAYER/)"; continue ;;
    esac
    if [[ -z ${rank[$l]:-} && -z ${nohead[$l]:-} ]]; then
        fail "the folder $l/ ($f, ...) has no heading \"## \`$l/\`\" in src/README.md"
        nohead[$l]=1
    fi
    layer_of[$n]=$l
    path_of[$n]=$f
done
for l in "${layers[@]}"; do
    [[ -d $root/src/$l || -d $root/include/$l ]] || fail "src/README.md has a heading for $l/, which is not a folder"
done

# The map: every file under its folder's heading, every entry a file there.
checked=0
for f in "${files[@]}"; do
    n=${f##*/}
    # A header with its .c is the .c's entry.
    [[ $n == *.h && -n "${path_of[${n%.h}.c]:-}" ]] && continue
    checked=$((checked + 1))
    [[ -n "${in_map["${layer_of[$n]} $n"]:-}" ]] ||
        fail "$f has no entry under ${layer_of[$n]}/ in src/README.md"
done
for e in "${entries[@]}"; do
    l=${e% *} n=${e#* }
    [[ ${layer_of[$n]:-} == "$l" ]] ||
        fail "src/README.md has $n under $l/, which has no such file (${path_of[$n]:-nor has any folder})"
done

# The includes: downwards or level only.
edges=0
for f in "${files[@]}"; do
    n=${f##*/} l=${layer_of[${f##*/}]:-}
    [[ -n $l && -n ${rank[$l]:-} ]] || continue
    while read -r h; do
        edges=$((edges + 1))
        hl=${layer_of[$h]:-}
        if [[ -z $hl ]]; then
            fail "$f includes \"$h\", which is in no folder of src/ or include/"
        elif [[ -z ${rank[$hl]:-} ]]; then
            continue # its folder's missing heading is reported above
        elif ((rank[$hl] > rank[$l])); then
            fail "$f ($l/) includes $h of a higher layer (${path_of[$h]}): layers, bottom first: ${layers[*]}, main.c"
        elif [[ $h == *_int.h && $hl != "$l" ]]; then
            fail "$f includes $h, private to ${hl}/"
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$f")
done

((bad == 0)) || exit 1
echo "src_map: the $checked files of src/ and include/ (headers with a .c counted once) are in src/README.md under their layer;"
echo "src_map: none of their $edges includes goes up (layers, bottom first: ${layers[*]}, main.c)"
