# bash with two background jobs writing their own files, waited for by pid; argument: the chain program.
prog=$1
"$prog" leaf 90 > a.txt &
first=$!
"$prog" leaf 70 > b.txt
s=$?
wait $first
echo "jobs $s $?"
exit 4
