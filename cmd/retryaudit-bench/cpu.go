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

// backendCPU measures the CPU time of the PostgreSQL backends serving
// database db from now until the returned function is called: every
// backend process whose title names db, sampled every 100 ms so that a
// backend that ends in between (pgbench's, at its exit) keeps what it had
// spent by its last sample. Other databases' backends (other tests on the
// same cluster) and the cluster's shared processes (WAL writer,
// checkpointer) are not counted, for the service and for pgbench alike.
func backendCPU(db string) (stop func() time.Duration) {
	base, last := map[string]time.Duration{}, map[string]time.Duration{}
	first := true
	sample := func() {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			title, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if err != nil || !strings.HasPrefix(string(title), "postgres: ") ||
				!strings.Contains(string(title), " "+db+" ") {
				continue
			}
			own, _, _, _, ok := procCPU(d.Name())
			if !ok {
				continue
			}
			if _, seen := base[d.Name()]; !seen {
				base[d.Name()] = 0
				if first {
					base[d.Name()] = own
				}
			}
			last[d.Name()] = own
		}
		first = false
	}
	sample()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() time.Duration {
		close(done)
		<-finished
		var total time.Duration
		for pid, cpu := range last {
			total += cpu - base[pid]
		}
		return total
	}
}
