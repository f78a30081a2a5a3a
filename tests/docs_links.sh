#!/usr/bin/env bash
# docs_links.sh - every relative link of every Markdown file of the
# repository resolves (ctest docs.links; no server, about a second).
#
#   bash tests/docs_links.sh [SRC_DIR]
#
# The files are the *.md files git tracks (and new ones not ignored), or,
# outside a git checkout, every *.md under SRC_DIR but build directories.
# For each link [text](target) outside code (fenced blocks and `spans`):
#   - a target with a scheme (https:, mailto:, ...) is not checked;
#   - PATH (relative to the file's directory) must exist, file or directory;
#   - #ANCHOR (alone: this file; after PATH: that .md file) must be the
#     GitHub slug of one of that file's headings: the heading's text in lower
#     case, '-' for each space, every other character but letters, digits,
#     '-' and '_' dropped (bytes above 127 are kept, as GitHub keeps
#     non-ASCII letters); a repeated heading gets -1, -2, ... in order.
# Each broken link is printed as FILE:LINE: LINK: REASON; exit 1 if any,
# 0 otherwise (and a count of links checked).
set -euo pipefail

SRC=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$SRC"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t FILES < <(git ls-files --cached --others --exclude-standard '*.md' |
        while read -r f; do [[ -f $f ]] && echo "$f"; done)
else
    mapfile -t FILES < <(find . -name '*.md' -not -path './build*' \
        -not -path '*/.git/*' | sed 's|^\./||' | sort)
fi
[[ ${#FILES[@]} -gt 0 ]] || { echo "docs_links: no *.md files under $SRC" >&2; exit 1; }

# Pass 1 (pass=1) reads every file's headings into slugs; pass 2 checks
# every link against them.
awk '
function slug(h,    s, out, i, c) {
    s = tolower(h)
    out = ""
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c ~ /[a-z0-9_-]/) out = out c
        else if (c == " ") out = out "-"
        else if (c > "~") out = out c      # a byte of a non-ASCII character
    }
    return out
}
# norm(p): p without "." and "dir/.." parts; "" when it climbs out of SRC.
function norm(p,    n, a, i, k, st, out) {
    n = split(p, a, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (a[i] == "" || a[i] == ".") continue
        if (a[i] == "..") { if (k == 0) return ""; k--; continue }
        st[++k] = a[i]
    }
    out = ""
    for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") st[i]
    return out == "" ? "." : out
}
function exists(p,    r) {
    if (!(p in seen)) {
        r = system("test -e \"" p "\"")
        seen[p] = (r == 0)
    }
    return seen[p]
}
function bad(target, why) {
    printf "%s:%d: %s: %s\n", FILENAME, FNR, target, why
    nbad++
}
FNR == 1 { infence = 0 }
/^ ? ? ?(```|~~~)/ { infence = !infence; next }
infence { next }
pass == 1 && /^#+[ \t]/ {
    h = $0
    sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h); sub(/[ \t]+$/, "", h)
    s = slug(h)
    k = FILENAME SUBSEP s
    if (k in count) { count[k]++; s = s "-" count[k] } else count[k] = 0
    anchor[FILENAME SUBSEP s] = 1
    next
}
pass == 2 {
    line = $0
    gsub(/`[^`]*`/, "", line)            # inline code is not a link
    while (match(line, /\]\([^)]*\)/)) {
        target = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        sub(/[ \t]+"[^"]*"$/, "", target) # an optional "title"
        nlinks++
        if (target ~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/) continue   # https:, mailto:
        if (target == "") { bad("()", "empty link"); continue }
        path = target; frag = ""
        i = index(target, "#")
        if (i > 0) { path = substr(target, 1, i - 1); frag = substr(target, i + 1) }
        if (path == "") file = FILENAME
        else {
            dir = FILENAME; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
            file = norm(path ~ /^\// ? substr(path, 2) : dir "/" path)
            if (file == "") { bad(target, "points outside the repository"); continue }
            if (!exists(file)) { bad(target, "no such file: " file); continue }
        }
        if (frag == "") continue
        if (file !~ /\.md$/) { bad(target, "an anchor into a file that is not Markdown"); continue }
        if (!((file SUBSEP frag) in anchor))
            bad(target, "no heading in " file " has the anchor #" frag)
    }
}
END {
    if (nbad) { printf "docs_links: %d broken link(s) of %d\n", nbad, nlinks; exit 1 }
    printf "docs_links: %d links in %d files, all resolve\n", nlinks, nfiles
}
' nfiles="${#FILES[@]}" pass=1 "${FILES[@]}" pass=2 "${FILES[@]}"
