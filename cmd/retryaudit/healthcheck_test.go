package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestReadyzURL(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"", "http://127.0.0.1:8080/readyz"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/readyz"},
		{":9000", "http://127.0.0.1:9000/readyz"},
		{"[::]:8080", "http://[::1]:8080/readyz"},
		{"10.0.0.5:8080", "http://10.0.0.5:8080/readyz"},
	} {
		if got, err := readyzURL(tc.addr); err != nil || got != tc.want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
	if _, err := readyzURL("8080"); err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_ADDR") {
		t.Errorf("an address without a port: %v", err)
	}
}

func TestHealthcheck(t *testing.T) {
	check := func(t *testing.T, addr string, args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"healthcheck"}, args...), env(map[string]string{"RETRYAUDIT_ADDR": addr}), &out)
		return out.String(), err
	}
	t.Run("a ready service passes", func(t *testing.T) {
		svc := startService(t, nil)
		out, err := check(t, strings.TrimPrefix(svc.URL, "http://"))
		if err != nil || !strings.Contains(out, "ready: "+svc.URL+"/readyz") {
			t.Fatalf("%q, %v", out, err)
		}
	})
	t.Run("a service that is not ready fails with its reason", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"unavailable","reason":"database does not answer"}`))
		}))
		defer srv.Close()
		_, err := check(t, strings.TrimPrefix(srv.URL, "http://"))
		if err == nil || !strings.Contains(err.Error(), "503 unavailable database does not answer") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a 200 that does not say ready fails", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }))
		defer srv.Close()
		if _, err := check(t, strings.TrimPrefix(srv.URL, "http://")); err == nil {
			t.Fatal("another server's 200 passed")
		}
	})
	t.Run("nothing listening fails", func(t *testing.T) {
		if _, err := check(t, freeAddr(t)); err == nil || !strings.Contains(err.Error(), "not ready") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("no answer within the timeout fails", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		defer srv.Close()
		defer close(release)
		start := time.Now()
		_, err := check(t, strings.TrimPrefix(srv.URL, "http://"), "-timeout", "50ms")
		if err == nil {
			t.Fatal("a hung service passed")
		}
		if waited := time.Since(start); waited > 20*time.Second {
			t.Errorf("it waited %s for a 50ms timeout", waited)
		}
	})
}

func TestVersion(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3", "0123456789abcdef"
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, env(nil), &out); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^retryaudit v1\.2\.3\nrevision   0123456789abcdef\ngo         ` +
		regexp.QuoteMeta(runtime.Version()) + ` \w+/\w+\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("version printed:\n%s", out.String())
	}
}
