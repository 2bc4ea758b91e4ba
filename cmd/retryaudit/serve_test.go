package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServe: a request log line per request without the token, metrics on
// their own listener, and a clean stop.
func TestServe(t *testing.T) {
	const token = "s3cr3t-t0ken-never-logged"
	metrics := freeAddr(t)
	svc := startService(t, map[string]string{"RETRYAUDIT_TOKEN": token, "RETRYAUDIT_METRICS_ADDR": metrics})
	if code, body := svc.api(t, "POST", "/v1/claims", `{"source":"shop","event_id":"o-1","execution_id":"1"}`); code != 200 {
		t.Fatalf("claim: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", svc.URL+"/v1/claims", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token+"-wrong")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("metrics listener: %d", resp.StatusCode)
	}
	if resp, err := http.Get(svc.URL + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics is also on the main listener")
		}
	}
	svc.stop()
	out := svc.Output.String()
	if strings.Contains(out, token) {
		t.Errorf("the token is in the output:\n%s", out)
	}
	for _, want := range []string{"route=/v1/claims", "status=200", "decision=claimed", "status=401", "latency=", "stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}
