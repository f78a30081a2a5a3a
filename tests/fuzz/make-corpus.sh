#!/usr/bin/env bash
# make-corpus.sh OUTDIR - seed corpora for the decoder fuzzers from the real
# captured streams in tests/data, written to OUTDIR/pgoutput and
# OUTDIR/wal2json (a build or temp dir: the seeds are not committed).
#
# pgoutput (input format: see fuzz_pgoutput.c, messages framed by an Int32
# length), from tests/data/pgoutput/*.hex (one message per line):
#   - every message alone,
#   - every two consecutive messages (Begin->Relation, Relation->Insert, ...),
#   - each whole capture as one stream.
# wal2json (input format: see fuzz_wal2json.c, 8-byte dataStart then lines),
# from tests/data/wal2json/*.jsonl (one line per change):
#   - every line alone, with the dataStart a Commit needs (its "nextlsn"),
#   - every two consecutive lines,
#   - each whole capture (dataStart: the first Commit's "nextlsn").
# Needs nothing but perl (no CPAN modules).
set -euo pipefail

out=${1:?usage: make-corpus.sh OUTDIR}
data=$(cd "$(dirname "${BASH_SOURCE[0]}")/../data" && pwd)
rm -rf "$out/pgoutput" "$out/wal2json"
mkdir -p "$out/pgoutput" "$out/wal2json"

perl -e '
use strict;
use warnings;
my ($data, $out) = @ARGV;
my (%n, %seen);

# Writes one seed (once per distinct content) as OUTDIR/KIND/seed-NNNN.
sub put {
    my ($kind, $bytes) = @_;
    return if $seen{$kind}{$bytes}++;
    my $f = sprintf("%s/%s/seed-%04d", $out, $kind, ($n{$kind} // 0) + 1);
    open(my $fh, ">:raw", $f) or die "$f: $!";
    print $fh $bytes;
    close($fh) or die "$f: $!";
    $n{$kind}++;
}

sub lines {
    my ($f) = @_;
    open(my $fh, "<", $f) or die "$f: $!";
    my @l = grep { length } map { s/\r?\n\z//r } <$fh>;
    close($fh);
    return @l;
}

# pgoutput: Int32 length + message, repeated.
sub frame { return join "", map { pack("N", length($_)) . $_ } @_ }

for my $f (glob("$data/pgoutput/*.hex")) {
    my @m = map { pack("H*", $_) } lines($f);
    put("pgoutput", frame($_)) for @m;
    put("pgoutput", frame(@m[$_ - 1, $_])) for 1 .. $#m;
    put("pgoutput", frame(@m));
}

# wal2json: 8-byte big-endian dataStart + lines joined by newlines.
sub lsn_bytes {
    my ($lsn) = @_;
    my ($hi, $lo) = $lsn =~ m{^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$} or return undef;
    return pack("NN", hex($hi), hex($lo));
}

sub data_start {
    for (@_) {
        if (/"action":"C"/ && /"nextlsn":"([^"]+)"/) {
            my $b = lsn_bytes($1);
            return $b if defined $b;
        }
    }
    return pack("NN", 0, 0x01000000);
}

for my $f (glob("$data/wal2json/*.jsonl")) {
    my @l = lines($f);
    put("wal2json", data_start($_) . $_) for @l;
    put("wal2json", data_start(@l[$_ - 1, $_]) . join("\n", @l[$_ - 1, $_])) for 1 .. $#l;
    put("wal2json", data_start(@l) . join("\n", @l) . "\n");
}

printf "make-corpus: %d pgoutput and %d wal2json seeds in %s\n",
    $n{pgoutput} // 0, $n{wal2json} // 0, $out;
' "$data" "$out"
