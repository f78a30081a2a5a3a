# kill_resume.awk - the copies a kill -9 sent again from before where the
# offset file said the restart resumes (faults_lib.sh, faults_copies).
# Run as: awk -f lsn.awk -f kill_resume.awk MARKS RESUMES PAIRS
#   MARKS    "EPOCH_MS KIND" per fault (faults.marks)
#   RESUMES  "MARK_MS LSN" per kill -9: where the file said to resume
#   PAIRS    "FIRST_MS THIS_MS COMMIT_LSN" per extra copy, by THIS_MS
# Each copy is counted against the mark before it; prints the number of
# copies of a kill -9 whose transaction committed before that kill's
# position, and names the first five on stderr.
FILENAME == ARGV[1] { t[++n] = $1; k[n] = $2; next }
FILENAME == ARGV[2] { at[$1] = lsnnum($2); atx[$1] = $2; next }
{
    for (i = n; i >= 1 && t[i] > $2; i--) ;
    if (i >= 1 && k[i] == "kill9" && (t[i] in at) && lsnnum($3) < at[t[i]]) {
        bad++
        if (bad <= 5)
            printf "copy committed at %s re-sent after the kill at %s, which resumed at %s\n",
                $3, t[i], atx[t[i]] > "/dev/stderr"
    }
}
END { print bad + 0 }
