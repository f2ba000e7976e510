# bash runs a statically linked program (outside the computation), then a dynamic one (inside), and
# reports the second one's status; arguments: proctree_static, proctree_chain.
"$1" 3
echo "bash: static exit $?"
"$2" leaf 150
echo "bash: leaf exit $?"
exit 3
