# Helpers shared by scripts/bench-crawl.sh and scripts/bench-queue.sh (sourced, not run).

# field NAME LINE: the value of NAME=… in a RESULT line (digits, dots, or "na").
field() { sed -n "s/.* $1=\([0-9.na]*\).*/\1/p" <<<"$2"; }

# median N...: the median of the numbers (the lower middle one of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ratio A B: A/B to two decimals, "na" when either is.
ratio() { python3 -c "import sys; a, b = sys.argv[1:]; print('na' if 'na' in (a, b) else f'{float(a)/float(b):.2f}')" "$1" "$2"; }

# checkpoint WHO: a CHECKPOINT on DATABASE_URL before a measured turn, so the write-back and
# full-page images of earlier turns' writes land in none of the next; without the right to
# (superuser or pg_checkpoint) the turn runs anyway and WHO says so on stderr.
checkpoint() {
  psql "$DATABASE_URL" -qXc checkpoint 2>/dev/null ||
    echo "$1: CHECKPOINT refused (needs superuser or pg_checkpoint): this round runs without it" >&2
}
