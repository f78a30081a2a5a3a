# lsn.awk - LSNs as numbers, for the awk programs of the tests
# (check_delivery.awk, kill_resume.awk): awk -f lsn.awk -f PROGRAM.
# Exact up to 2^53 (doubles), far beyond any test's WAL.

function hexnum(s,    i, n, c) {
    n = 0
    s = toupper(s)
    for (i = 1; i <= length(s); i++) {
        c = index("0123456789ABCDEF", substr(s, i, 1))
        if (c == 0) return -1
        n = n * 16 + c - 1
    }
    return n
}

function lsnnum(l,    a) {
    split(l, a, "/")
    return hexnum(a[1]) * 4294967296 + hexnum(a[2])
}
