package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// service is a retryaudit serve process under measurement.
type service struct {
	cmd   *exec.Cmd
	url   string
	token string
	dir   string
}

const benchToken = "retryaudit-bench-token-0123456789"

// startService runs the binary on a free loopback port with env added to
// what the benchmark sets, and waits until it is ready.
func startService(ctx context.Context, bin string, env map[string]string) (*service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "retryaudit-bench-")
	if err != nil {
		return nil, err
	}
	s := &service{url: "http://" + addr, token: benchToken, dir: dir}
	vars := map[string]string{"RETRYAUDIT_ADDR": addr, "RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_TOKEN": benchToken,
		"RETRYAUDIT_LOG_LEVEL": "error"}
	for k, v := range env {
		vars[k] = v
	}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = os.Environ()
	for k, v := range vars {
		s.cmd.Env = append(s.cmd.Env, k+"="+v)
	}
	s.cmd.Stderr = os.Stderr // stdout has the generated password: not for the table
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("the service did not become ready at %s", s.url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rss returns the process's resident set now and at its peak, in MiB.
func (s *service) rss() (now, peak float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			now = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return now, peak
}

func (s *service) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}
