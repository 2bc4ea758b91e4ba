package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ: /proc counts CPU time in 1/100 s on
// every Linux this runs on.
const clockTick = 10 * time.Millisecond

// procCPU reads a process's CPU time from /proc/<pid>/stat: its own (user
// and system), and that of its children it has reaped.
func procCPU(pid string) (own, children time.Duration, comm string, ppid string, ok bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, 0, "", "", false
	}
	s := string(raw)
	open, closed := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closed < open {
		return 0, 0, "", "", false
	}
	comm = s[open+1 : closed]
	f := strings.Fields(s[closed+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, "", "", false
	}
	tick := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * clockTick
	}
	// utime, stime, cutime, cstime are fields 14 to 17.
	return tick(11) + tick(12), tick(13) + tick(14), comm, f[1], true
}

// serviceCPU is the service process's CPU time so far.
func (s *service) cpu() time.Duration {
	own, _, _, _, _ := procCPU(strconv.Itoa(s.cmd.Process.Pid))
	return own
}

// postgresCPU is the CPU time of the whole PostgreSQL cluster on this
// machine so far: every postgres process's own time, and the time of the
// backends that ended, which their postmaster reaped. A difference of two
// readings is what PostgreSQL spent between them, whichever client asked.
func postgresCPU() time.Duration {
	dirs, _ := os.ReadDir("/proc")
	pids := map[string]string{} // pid → ppid, postgres processes only
	var total time.Duration
	children := map[string]time.Duration{}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		own, reaped, comm, ppid, ok := procCPU(d.Name())
		if !ok || comm != "postgres" {
			continue
		}
		pids[d.Name()] = ppid
		total += own
		children[d.Name()] = reaped
	}
	for pid, ppid := range pids {
		if _, child := pids[ppid]; !child { // a postmaster: its reaped backends count
			total += children[pid]
		}
	}
	return total
}
