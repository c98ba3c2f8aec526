package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serverCPU is the processor time a PostgreSQL server's processes have
// used: its postmaster's, that of the children it has reaped (backends that
// ended) and that of those that run. Other programs' load moves it much
// less than the time a call takes.
func serverCPU(pid int) (time.Duration, bool) {
	if pid == 0 {
		return 0, false
	}
	own, ok := procTicks(strconv.Itoa(pid), -1)
	if !ok {
		return 0, false
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	total := own
	for _, stat := range stats {
		if n, ok := procTicks(filepath.Base(filepath.Dir(stat)), pid); ok {
			total += n
		}
	}
	// USER_HZ: 100 on every Linux ABI.
	return time.Duration(total) * 10 * time.Millisecond, true
}

// procTicks is process id's utime, stime, cutime and cstime in clock ticks,
// if its parent is parent (-1: any).
func procTicks(id string, parent int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + id + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields follow its
	// last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, false
	}
	if ppid, err := strconv.Atoi(f[1]); parent >= 0 && (err != nil || ppid != parent) {
		return 0, false
	}
	var n int64
	for _, field := range f[11:15] { // utime stime cutime cstime
		v, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, false
		}
		n += v
	}
	return n, true
}
