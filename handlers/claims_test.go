package handlers_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

func TestClaim(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)

		t.Run("a new event is claimed and answers every field", func(t *testing.T) {
			out := s.claim(t, claimBody("shop", "order-1042", "4711"))
			want := map[string]any{"process": true, "decision": "claimed", "status": "processing",
				"delivery": "first_delivery", "deliveries": float64(1), "holder_execution_id": "4711",
				"event_url": "http://retryaudit.test/events/shop/order-1042", "fingerprint_mismatch": false}
			for k, v := range want {
				if out[k] != v {
					t.Errorf("%s = %v, want %v", k, out[k], v)
				}
			}
			if key, _ := out["idempotency_key"].(string); len(key) < 20 {
				t.Errorf("idempotency_key = %q", key)
			}
		})

		t.Run("the same event from a second execution is not processed", func(t *testing.T) {
			first := s.claim(t, claimBody("shop", "order-1", "10"))
			second := s.claim(t, claimBody("shop", "order-1", "11"))
			if first["process"] != true || second["process"] != false {
				t.Fatalf("process = %v then %v, want true then false", first["process"], second["process"])
			}
			if second["decision"] != "in_progress" || second["delivery"] != "redelivery" ||
				second["deliveries"] != float64(2) || second["holder_execution_id"] != "10" {
				t.Errorf("second claim = %v", second)
			}
			if first["idempotency_key"] != second["idempotency_key"] {
				t.Errorf("idempotency keys differ: %v, %v", first["idempotency_key"], second["idempotency_key"])
			}
		})

		t.Run("a resend from the same execution is held and still processed", func(t *testing.T) {
			s.claim(t, claimBody("shop", "order-2", "20"))
			again := s.claim(t, claimBody("shop", "order-2", "20"))
			if again["decision"] != "held" || again["process"] != true || again["delivery"] != "same_execution" ||
				again["deliveries"] != float64(1) {
				t.Errorf("resend = %v", again)
			}
		})

		t.Run("execution ids may be JSON numbers", func(t *testing.T) {
			body := claimBody("shop", "order-num", "")
			body["execution_id"], body["run_stamp"] = 4712, stampOf("4712")
			out := s.claim(t, body)
			if out["holder_execution_id"] != "4712" {
				t.Errorf("holder = %v", out["holder_execution_id"])
			}
		})

		t.Run("a new event id and the same id from another source are separate events", func(t *testing.T) {
			s.claim(t, claimBody("shop", "order-3", "30"))
			other := s.claim(t, claimBody("shop", "order-4", "31"))
			source := s.claim(t, claimBody("payments", "order-3", "32"))
			if other["decision"] != "claimed" || source["decision"] != "claimed" {
				t.Errorf("decisions = %v, %v, want claimed twice", other["decision"], source["decision"])
			}
			if source["idempotency_key"] == other["idempotency_key"] {
				t.Error("two events share an idempotency key")
			}
		})

		t.Run("done is terminal", func(t *testing.T) {
			s.claim(t, claimBody("shop", "order-5", "50"))
			code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "order-5", "outcome": "done",
				"execution_id": "50", "crm_ref": "CRM-9"})
			if code != http.StatusOK || out["changed"] != true || out["status"] != "done" {
				t.Fatalf("done: %d %v", code, out)
			}
			dup := s.claim(t, claimBody("shop", "order-5", "51"))
			if dup["decision"] != "duplicate" || dup["process"] != false || dup["status"] != "done" {
				t.Errorf("claim after done = %v", dup)
			}
			retry := claimBody("shop", "order-5", "52")
			retry["retry_of"] = "50"
			// A client's retry_of is no lineage n8n confirmed: a redelivery.
			if out := s.claim(t, retry); out["decision"] != "duplicate" || out["delivery"] != "redelivery" {
				t.Errorf("retry after done = %v", out)
			}
			code, out = s.outcome(t, map[string]any{"source": "shop", "event_id": "order-5", "outcome": "done",
				"execution_id": "50"})
			if code != http.StatusOK || out["changed"] != false || out["status"] != "done" {
				t.Errorf("done again: %d %v", code, out)
			}
			code, out = s.outcome(t, map[string]any{"source": "shop", "event_id": "order-5", "outcome": "failed",
				"execution_id": "50"})
			if e, _ := out["error"].(map[string]any); code != http.StatusConflict || e["status"] != "done" {
				t.Errorf("failed after done: %d %v", code, out)
			}
		})

		t.Run("a failed entry is reclaimed by the next delivery", func(t *testing.T) {
			s.claim(t, claimBody("shop", "order-6", "60"))
			if code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "order-6", "outcome": "failed",
				"execution_id": "60", "reason": "CRM said 422"}); code != http.StatusOK || out["status"] != "failed" {
				t.Fatalf("failed: %d %v", code, out)
			}
			out := s.claim(t, claimBody("shop", "order-6", "61"))
			if out["decision"] != "reclaimed" || out["process"] != true || out["holder_execution_id"] != "61" {
				t.Errorf("reclaim = %v", out)
			}
		})

		t.Run("an unknown outcome keeps the entry processing and asks for review", func(t *testing.T) {
			s.claim(t, claimBody("shop", "order-7", "70"))
			code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "order-7", "outcome": "unknown",
				"execution_id": "70", "reason": "timeout after 30s"})
			if code != http.StatusOK || out["status"] != "processing" || out["needs_review"] != true || out["changed"] != true {
				t.Errorf("unknown: %d %v", code, out)
			}
			if again := s.claim(t, claimBody("shop", "order-7", "71")); again["process"] != false {
				t.Errorf("claim while unknown = %v", again)
			}
		})

		t.Run("an outcome for an unknown key is 404", func(t *testing.T) {
			code, _ := s.outcome(t, map[string]any{"source": "shop", "event_id": "nope", "outcome": "done",
				"execution_id": "1"})
			if code != http.StatusNotFound {
				t.Errorf("status %d, want 404", code)
			}
		})

		t.Run("a different fingerprint on a later delivery is reported", func(t *testing.T) {
			body := claimBody("shop", "order-8", "80")
			body["fingerprint"] = "created:99.00"
			if out := s.claim(t, body); out["fingerprint_mismatch"] != false {
				t.Errorf("first = %v", out)
			}
			body = claimBody("shop", "order-8", "81")
			body["fingerprint"] = "paid:99.00"
			if out := s.claim(t, body); out["fingerprint_mismatch"] != true {
				t.Errorf("second = %v", out)
			}
			body["fingerprint"] = "created:99.00"
			body["execution_id"], body["run_stamp"] = "82", stampOf("82")
			if out := s.claim(t, body); out["fingerprint_mismatch"] != false {
				t.Errorf("matching again = %v", out)
			}
		})
	})
}

func TestClaimItems(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		body := claimBody("shop", "order-9", "90")
		body["items"] = []any{"line-2", "line-1", "line-3"}
		first := s.claim(t, body)
		items := first["items"].([]any)
		if len(items) != 3 || first["process"] != true {
			t.Fatalf("first claim = %v", first)
		}
		keys := map[any]bool{}
		for _, it := range items {
			keys[it.(map[string]any)["idempotency_key"]] = true
		}
		if len(keys) != 3 || keys[first["idempotency_key"]] {
			t.Errorf("item keys are not distinct: %v", items)
		}
		// line-1 reached the CRM, line-2 certainly did not, line-3 is unknown.
		for item, outcome := range map[string]string{"line-1": "done", "line-2": "failed", "line-3": "unknown"} {
			if code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "order-9", "item": item,
				"outcome": outcome, "execution_id": "90"}); code != http.StatusOK {
				t.Fatalf("%s %s: %d %v", item, outcome, code, out)
			}
		}
		code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "order-9", "outcome": "done",
			"execution_id": "90"})
		if code != http.StatusUnprocessableEntity {
			t.Errorf("outcome without item: %d %v", code, out)
		}

		body["execution_id"], body["run_stamp"] = "91", stampOf("91")
		retry := s.claim(t, body)
		got := map[string]string{}
		for _, it := range retry["items"].([]any) {
			m := it.(map[string]any)
			got[m["item"].(string)] = m["decision"].(string)
		}
		want := map[string]string{"line-1": "duplicate", "line-2": "reclaimed", "line-3": "in_progress"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("retry: %s = %s, want %s", k, got[k], v)
			}
		}
		if retry["process"] != true || retry["decision"] != "reclaimed" {
			t.Errorf("retry top level = %v", retry)
		}

		s.outcome(t, map[string]any{"source": "shop", "event_id": "order-9", "item": "line-2", "outcome": "done",
			"execution_id": "91"})
		s.outcome(t, map[string]any{"source": "shop", "event_id": "order-9", "item": "line-3", "outcome": "done",
			"execution_id": "90"})
		code, ev := s.call(t, "GET", "/v1/events/shop/order-9", nil)
		if code != http.StatusOK || ev["status"] != "done" {
			t.Errorf("event after every item is done: %d status %v", code, ev["status"])
		}
		if again := s.claim(t, body); again["decision"] != "duplicate" || again["process"] != false {
			t.Errorf("claim after all done = %v", again)
		}

		whole := claimBody("shop", "order-9", "92")
		if code, out := s.call(t, "POST", "/v1/claims", whole); code != http.StatusConflict {
			t.Errorf("claim without items of an item event: %d %v", code, out)
		}
	})
}

// TestClaimConcurrent races many executions on one key: exactly one may
// process it, however the requests interleave.
func TestClaimConcurrent(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		const keys, perKey = 20, 50

		t.Run("50 executions per key for 20 keys: one process per key", func(t *testing.T) {
			var mu sync.Mutex
			processed := map[string]int{}
			var wg sync.WaitGroup
			for k := 0; k < keys; k++ {
				for e := 0; e < perKey; e++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						event := fmt.Sprintf("race-%d", k)
						code, out := s.call(t, "POST", "/v1/claims", claimBody("shop", event, fmt.Sprintf("%d-%d", k, e)))
						if code != http.StatusOK {
							t.Errorf("claim: %d %v", code, out)
							return
						}
						if out["process"] == true {
							mu.Lock()
							processed[event]++
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			for k := 0; k < keys; k++ {
				if n := processed[fmt.Sprintf("race-%d", k)]; n != 1 {
					t.Errorf("race-%d processed %d times", k, n)
				}
			}
			code, ev := s.call(t, "GET", "/v1/events/shop/race-0", nil)
			if code != http.StatusOK || ev["deliveries"] != float64(perKey) {
				t.Errorf("race-0 deliveries = %v, want %d", ev["deliveries"], perKey)
			}
		})

		t.Run("one execution resending concurrently: one claim, the rest held", func(t *testing.T) {
			var mu sync.Mutex
			decisions := map[string]int{}
			var wg sync.WaitGroup
			for e := 0; e < perKey; e++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, out := s.call(t, "POST", "/v1/claims", claimBody("shop", "resend", "777"))
					mu.Lock()
					decisions[fmt.Sprint(out["decision"])]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if decisions["claimed"] != 1 || decisions["held"] != perKey-1 {
				t.Errorf("decisions = %v", decisions)
			}
		})

		t.Run("two concurrent reclaims of a failed entry: one wins", func(t *testing.T) {
			for round := 0; round < 10; round++ {
				event := fmt.Sprintf("reclaim-%d", round)
				s.claim(t, claimBody("shop", event, "r0"))
				s.outcome(t, map[string]any{"source": "shop", "event_id": event, "outcome": "failed", "execution_id": "r0"})
				results := make(chan map[string]any, 2)
				var wg sync.WaitGroup
				for i := 1; i <= 2; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						results <- s.claim(t, claimBody("shop", event, fmt.Sprintf("r%d", i)))
					}()
				}
				wg.Wait()
				close(results)
				wins := 0
				for out := range results {
					if out["process"] == true {
						wins++
						if out["decision"] != "reclaimed" {
							t.Errorf("winner decision = %v", out["decision"])
						}
					}
				}
				if wins != 1 {
					t.Errorf("%s: %d winners, want 1", event, wins)
				}
			}
		})
	})
}
