package handlers_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// TestCredentialCorpusThroughEveryRoute plants every shape of n8ntest's
// corpus, in its context, through every route that keeps text from n8n or
// a workflow: an Error Trigger payload (its message, description, messages,
// stack, node and workflow names), a hook report (its error's message and
// node, the workflow's name, the last node), a claim's workflow_name and
// node, and an outcome's reason. Then it reads everything back — the API
// reads, the pages (unescaped) and every column of every row — and no
// secret may be readable, whole or its first half.
func TestCredentialCorpusThroughEveryRoute(t *testing.T) {
	shapes := n8ntest.CredentialShapes()
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withHookToken, withUI)
		var base map[string]any
		if err := json.Unmarshal(payload(t, "error-01-first-delivery.json"), &base); err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		var answers strings.Builder // what the posts answered, for echoes
		var errorIDs []string
		keep := func(out map[string]any) {
			mu.Lock()
			defer mu.Unlock()
			collectStrings(&answers, out)
			for _, r := range append([]any{out}, resultsOf(out)...) {
				if id, ok := r.(map[string]any)["error_id"].(float64); ok {
					errorIDs = append(errorIDs, fmt.Sprint(int64(id)))
				}
			}
		}
		eachShape(len(shapes), func(i int) {
			sh := shapes[i]
			event, exec := fmt.Sprintf("cred-%d", i), fmt.Sprint(100000+i)
			claim := map[string]any{"source": "shop", "event_id": event, "execution_id": exec,
				"workflow_id": "LabMainWorkflow1", "workflow_name": "Orders " + sh.Text, "node": sh.Text}
			code, out := s.call(t, "POST", "/v1/claims", claim)
			keep(out)
			if code == http.StatusUnprocessableEntity {
				// A name holds no line breaks: refused, nothing kept.
				claim["workflow_name"], claim["node"] = "Orders", "Claim event"
				code, out = s.call(t, "POST", "/v1/claims", claim)
			}
			if code != http.StatusOK {
				t.Errorf("%s: claim answered %d %v", sh.Name, code, out)
				return
			}
			code, out = s.call(t, "POST", "/v1/outcomes", map[string]any{"source": "shop", "event_id": event,
				"execution_id": exec, "workflow_id": "LabMainWorkflow1", "outcome": "unknown", "reason": sh.Text})
			keep(out)
			if code != http.StatusOK {
				t.Errorf("%s: outcome answered %d %v", sh.Name, code, out)
			}

			code, out = s.call(t, "POST", "/v1/n8n/errors", plantedError(base, exec, sh.Text))
			keep(out)
			if code != http.StatusAccepted && code != http.StatusOK {
				t.Errorf("%s: error payload answered %d %v", sh.Name, code, out)
			}

			hook := hookEnd(fmt.Sprint(200000+i), "error")
			hook["workflow_name"], hook["last_node"] = sh.Text, sh.Text
			hook["error"] = map[string]any{"message": sh.Text, "node": sh.Text, "http_code": 401}
			code, out = s.hooks(t, reports(hook))
			keep(out)
			if code == http.StatusUnprocessableEntity {
				hook["workflow_name"], hook["last_node"] = "Orders", "Create CRM order"
				hook["error"] = map[string]any{"message": sh.Text, "node": "Create CRM order", "http_code": 401}
				code, out = s.hooks(t, reports(hook))
				keep(out)
			}
			if code != http.StatusAccepted {
				t.Errorf("%s: hook report answered %d %v", sh.Name, code, out)
			}
		})

		// Everything read back: the API, the pages, the rows.
		var reads strings.Builder
		reads.WriteString(answers.String())
		read := func(path string) {
			code, out := s.call(t, "GET", path, nil)
			if code != http.StatusOK {
				t.Errorf("GET %s: %d", path, code)
			}
			collectStrings(&reads, out)
		}
		page := func(path string) {
			resp, body := s.page(t, "GET", path, "alice:"+alicePassword, nil)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", path, resp.StatusCode)
			}
			reads.WriteString(html.UnescapeString(body))
		}
		read("/v1/events?limit=500")
		read("/v1/stats")
		for _, p := range []string{"/", "/review", "/errors", "/overview"} {
			page(p)
		}
		for i := range shapes {
			read(fmt.Sprintf("/v1/events/shop/cred-%d", i))
			page(fmt.Sprintf("/events/shop/cred-%d", i))
			page(fmt.Sprintf("/executions/%d", 200000+i))
		}
		for _, id := range errorIDs {
			page("/errors/" + id)
		}
		rows := dumpRows(t, s)

		readable := 0
		// A clock time's fraction of a second is no secret, and a
		// six-digit one-time code turns up in one now and then (CI, 11:34
		// UTC): the fractions are dropped before the search.
		noFractions := regexp.MustCompile(`(\d\d:\d\d:\d\d)[.,]\d+`).ReplaceAllString
		texts := map[string]string{"an answer, API read or page": noFractions(reads.String(), "$1"),
			"a row": noFractions(rows, "$1")}
		for _, sh := range shapes {
			for where, text := range texts {
				if secret := sh.Readable(text); secret != "" {
					readable++
					at := strings.Index(text, secret)
					if at < 0 {
						at = strings.Index(text, secret[:len(secret)/2])
					}
					t.Errorf("%s: %q readable in %s: …%s…", sh.Name, secret, where,
						text[max(0, at-80):min(len(text), at+len(secret)+40)])
				}
			}
		}
		t.Logf("%d shapes through 4 routes, %d error records read back on their pages; %d readable",
			len(shapes), len(errorIDs), readable)
	})
}

// plantedError is an Error Trigger payload as n8n 2.41.1 sent it for an
// HTTP Request node's failure, for execution exec, with text where n8n
// puts what a node threw and what it is called.
func plantedError(base map[string]any, exec, text string) map[string]any {
	raw, _ := json.Marshal(base)
	var v map[string]any
	json.Unmarshal(raw, &v)
	execution := v["execution"].(map[string]any)
	execution["id"] = exec
	execution["lastNodeExecuted"] = text
	e := execution["error"].(map[string]any)
	e["message"], e["description"], e["messages"] = text, text, []any{"401 - " + text}
	e["stack"] = "NodeApiError: " + text + "\n    at ExecuteContext.execute (HttpRequestV3.node.ts:892:16)"
	e["node"].(map[string]any)["name"] = text
	v["workflow"].(map[string]any)["name"] = text
	return v
}

// eachShape runs fn for 0…n-1 on four goroutines: the routes' batches
// group the requests as they would group n8n's.
func eachShape(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func resultsOf(out map[string]any) []any {
	rs, _ := out["results"].([]any)
	return rs
}

// collectStrings writes every string of a decoded JSON value, one a line.
func collectStrings(b *strings.Builder, v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			b.WriteString(k + "\n")
			collectStrings(b, val)
		}
	case []any:
		for _, val := range t {
			collectStrings(b, val)
		}
	case string:
		b.WriteString(t + "\n")
	}
}

// dumpRows returns every value of every column of every table of the
// server's database, one a line, and the strings of each that holds JSON.
func dumpRows(t *testing.T, s *server) string {
	t.Helper()
	db := s.store.DB()
	q := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	if s.store.Dialect() == "sqlite" {
		q = `SELECT name FROM sqlite_master WHERE type = 'table'`
	}
	var tables []string
	if err := db.Select(&tables, q); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Queryx(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for rows.Next() {
			vals, err := rows.SliceScan()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				text := fmt.Sprint(v)
				if raw, ok := v.([]byte); ok {
					text = string(raw)
				}
				b.WriteString(text + "\n")
				var doc any
				if json.Unmarshal([]byte(text), &doc) == nil {
					collectStrings(&b, doc)
				}
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() == 0 {
		t.Fatal("no rows read")
	}
	return b.String()
}
