// Package e2e runs retryaudit against a real n8n, as a user wires them
// together by following the README. `make test-n8n` installs n8n 2.41.1 and
// Node.js 24 (pinned by package.json and package-lock.json here) into a cache
// outside the work tree, then runs this package's tests, which are built only
// with the tag n8n:
//
//	make test-n8n
//	RETRYAUDIT_TEST_N8N_HOME=$(e2e/install-n8n) go test -tags n8n -v -run TestRealN8N ./e2e/
//
// The tests start n8n on 127.0.0.1 with a fresh user folder, a fake CRM and
// a fake Slack, import n8n/*.json with only their URLs changed, and drive
// the control run through n8n's webhooks and public API, once with
// retryaudit on its SQLite default and once on PostgreSQL.
package e2e
