#!/bin/sh
# A hook for the tests of crates/toolgate/tests/hooks.rs: answers as its first argument says.
# The second argument is a mark of the test's own, which every process this script starts
# carries in its command line, so that the test can look for any left behind.
behaviour="$1"
input=$(cat)
case "$behaviour" in
allow) echo '{"decision": "allow"}' ;;
deny) echo '{"decision": "deny", "reason": "writes wait for the release"}' ;;
ask) echo '{"decision": "ask", "reason": "a.txt is under review"}' ;;
rewrite) echo '{"decision": "allow", "arguments": {"path": "b.txt"}}' ;;
replace) echo '{"decision": "allow", "output": "[replaced by guard]"}' ;;
withhold) echo '{"decision": "deny", "reason": "the output names a secret"}' ;;
crash) kill -SEGV $$ ;;
exit_1_valid) echo '{"decision": "allow"}'; exit 1 ;;
exit_127) exit 127 ;;
sigkill) kill -KILL $$ ;;
timeout) (sleep 30; true) & sleep 30 ;;
flood) head -c 10485760 /dev/zero | tr '\0' x ;;
no_output) ;;
invalid_json) echo '{"decision": "allow"' ;;
two_objects) echo '{"decision": "allow"} {"decision": "allow"}' ;;
no_decision) echo '{"reason": "none"}' ;;
unknown_decision) echo '{"decision": "maybe"}' ;;
bad_arguments) echo '{"decision": "allow", "arguments": {"path": 7}}' ;;
escape)
	# A confined hook may read the workspace, its current directory, and not write it.
	echo escaped >escaped.txt 2>/dev/null
	echo '{"decision": "allow"}'
	;;
*) exit 2 ;;
esac
