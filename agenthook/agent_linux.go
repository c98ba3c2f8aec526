package agenthook

import (
	"fmt"
	"os"
	"strings"
)

// agentPID is the agent's process: the hook's parent, above the shell
// that may run the hook's command line.
func agentPID() int {
	pid := os.Getppid()
	for range 4 {
		comm, ppid, ok := procStat(pid)
		if !ok || !shellNames[comm] || ppid <= 1 {
			return pid
		}
		pid = ppid
	}
	return pid
}

var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true}

// procStat is a process's command name and parent, from /proc.
func procStat(pid int) (comm string, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	var state string
	if _, err := fmt.Sscan(s[end+1:], &state, &ppid); err != nil {
		return "", 0, false
	}
	return s[open+1 : end], ppid, true
}
