package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const healthcheckUsage = `healthcheck asks the service listening on RETRYAUDIT_ADDR (in the image
0.0.0.0:8080, asked at 127.0.0.1:8080) for /readyz and exits 0 when it
answers ready, 1 when it answers anything else or nothing within --timeout.
It follows no redirect (a 3xx is not ready). It reads no other configuration
and touches no database, so that it is cheap enough for Docker's HEALTHCHECK
and a compose healthcheck:

  healthcheck: {test: ["CMD", "retryaudit", "healthcheck"], interval: 30s}`

func healthcheck(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	url, err := readyzURL(getenv("RETRYAUDIT_ADDR"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// A redirect is an unhealthy answer, never followed: what answers
	// elsewhere says nothing of this service.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %s: %w", url, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	if resp.StatusCode != http.StatusOK || body.Status != "ready" {
		return fmt.Errorf("not ready: %s answered %d %s", url, resp.StatusCode, strings.TrimSpace(body.Status+" "+body.Reason))
	}
	fmt.Fprintf(out, "ready: %s\n", url)
	return nil
}

// readyzURL is where the service listening on addr answers /readyz from this
// machine: a listener on every address (0.0.0.0, ::, or no host) is asked
// on loopback.
func readyzURL(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:8080" // serve's default
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("RETRYAUDIT_ADDR: %q is not host:port", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
