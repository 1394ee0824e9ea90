package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// bashCompletion completes the commands, their flags, and pod names from
// the running nodelet (nodelet pods -o name).
const bashCompletion = `# bash completion for nodelet: source <(nodelet completion bash)
_nodelet() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "%s version" -- "$cur"))
		return
	fi
	case "$cmd" in
	pods)
		COMPREPLY=($(compgen -W "-o --output -n --namespace --root-dir --socket wide name json yaml" -- "$cur")) ;;
	run)
		if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-f --filename --timeout --root-dir --socket" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi ;;
	completion)
		COMPREPLY=($(compgen -W "bash" -- "$cur")) ;;
	*)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-c --container -n --namespace -f --follow -p --previous --tail --since --timestamps -i --stdin -t --tty --wait --address --root-dir --socket" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(nodelet pods -o name 2>/dev/null)" -- "$cur"))
		fi ;;
	esac
}
complete -F _nodelet nodelet
`

func completionCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "bash" {
		fmt.Fprintln(stderr, "Usage:\n  nodelet completion bash    (source <(nodelet completion bash))")
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	var names []string
	for n := range Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(stdout, bashCompletion, strings.Join(names, " "))
	return 0
}

func init() { Commands["completion"] = completionCommand }
