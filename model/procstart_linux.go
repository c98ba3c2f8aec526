package model

import (
	"bytes"
	"os"
	"strconv"
)

// processStart is when process pid started, in clock ticks after boot: field
// 22 of /proc/PID/stat. ok is false if it cannot be read.
func processStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Field 2, the command name, is in parentheses and may hold spaces and
	// parentheses itself: count the fields after its last ')', which is field 3.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 22-2 {
		return 0, false
	}
	start, err := strconv.ParseUint(string(fields[22-3]), 10, 64)
	return start, err == nil && start != 0
}
