# Helpers for the benchmark scripts: timestamps and summaries.
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
minmax() { sort -g | awk 'NR==1{min=$1} {max=$1} END {printf "min %.3f, max %.3f", min, max}'; }
