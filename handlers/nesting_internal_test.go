package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// nested returns n levels of open, each entered by step, closed again
// when closing is set.
func nested(open, step, close string, n int, closing bool) string {
	s := strings.Repeat(open+step, n)
	if closing {
		s += strings.Repeat(close, n)
	}
	return s
}

func TestNestingLimit(t *testing.T) {
	cases := []struct {
		name string
		body string
		deep bool
	}{
		{"64 arrays are read", nested("[", "", "]", MaxNesting, true), false},
		{"65 arrays are refused", nested("[", "", "]", MaxNesting+1, true), true},
		{"64 objects are read", strings.TrimSuffix(nested(`{"a":`, "", "}", MaxNesting, false), `{"a":`) + "1" + strings.Repeat("}", MaxNesting-1), false},
		{"65 objects are refused", nested(`{"a":`, "", "}", MaxNesting+1, false), true},
		{"brackets in a string do not count", `{"a":"` + strings.Repeat("[{", 1000) + `"}`, false},
		{"an escaped quote does not end the string", `{"a":"\"` + strings.Repeat("[", 1000) + `"}`, false},
		{"an escaped backslash does end it", `{"a":"\\","b":` + strings.Repeat("[", 100), true},
		{"deep after a valid prefix", `{"source":"shop","event_id":"e","x":` + strings.Repeat("[", 100), true},
		{"closing and opening again stays shallow", strings.Repeat(nested("[", "", "]", 60, true)+",", 100), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkNesting([]byte(c.body))
			var deep *nestingError
			if got := errors.As(err, &deep); got != c.deep {
				t.Fatalf("checkNesting: %v, want too deep %v", err, c.deep)
			}
			if c.deep && !strings.Contains(jsonProblem(err), "64 levels") {
				t.Errorf("the problem does not name the limit: %s", jsonProblem(err))
			}
			// The error intake's stream reader refuses the same objects,
			// whatever the decoder makes of the rest.
			if c.body[0] != '{' {
				return
			}
			_, err = readErrorBody(strings.NewReader(c.body), 1<<20)
			if got := errors.As(err, &deep); got != c.deep {
				t.Fatalf("readErrorBody: %v, want too deep %v", err, c.deep)
			}
		})
	}
}

// TestNestingReaderPassesWhatCameBefore: the bytes before the bracket too
// deep reach the decoder, then the error, in reads of any size.
func TestNestingReaderPassesWhatCameBefore(t *testing.T) {
	body := `{"a":` + strings.Repeat("[", MaxNesting+10)
	for _, chunk := range []int{1, 7, 64, 4096} {
		r := &nestingReader{r: &chunked{b: []byte(body), n: chunk}}
		var got bytes.Buffer
		_, err := got.ReadFrom(r)
		var deep *nestingError
		if !errors.As(err, &deep) {
			t.Fatalf("chunks of %d: %v", chunk, err)
		}
		if want := body[:5+MaxNesting-1]; got.String() != want || deep.offset != int64(len(want)) {
			t.Fatalf("chunks of %d: passed %d bytes, error at %d; want %d", chunk, got.Len(), deep.offset, len(want))
		}
	}
}

type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, fmt.Errorf("read past the end")
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// hostileShapes are bodies of about size bytes that have cost memory or
// stack out of proportion to their size, made one at a time.
func hostileShapes(size int) map[string]func() []byte {
	fill := func(prefix, unit, suffix string) func() []byte {
		return func() []byte {
			n := (size - len(prefix) - len(suffix)) / len(unit)
			return []byte(prefix + strings.Repeat(unit, n) + suffix)
		}
	}
	return map[string]func() []byte{
		"arrays":                  fill("", "[", ""),
		"objects":                 fill("", `{"a":`, ""),
		"mixed":                   fill("", `[{"a":`, ""),
		"arrays after a prefix":   fill(`{"execution":{"id":"1"},"a":`, "[", ""),
		"numbers at the top":      fill(`{"a":[`, "0,", "0]}"),
		"empty strings":           fill(`{"a":[`, `"",`, `""]}`),
		"empty arrays":            fill(`{"a":[`, `[],`, `[]]}`),
		"many keys":               fill(`{`, `"k":0,`, `"z":0}`),
		"distinct keys":           func() []byte { return distinctKeys(size) },
		"one long string":         fill(`{"a":"`, "x", `"}`),
		"short arrays, deep-ish":  fill(`{"a":[`, nested("[", "", "]", 40, true)+",", "0]}"),
		"nested 63 then wide":     fill(`{"a":`+strings.Repeat("[", 62), "0,", "0"+strings.Repeat("]", 62)+"}"),
		"escaped brackets in str": fill(`{"a":"`, `\"[{`, `"}`),
	}
}

func distinctKeys(size int) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	for i := 0; b.Len() < size-20; i++ {
		fmt.Fprintf(&b, `"%x":0,`, i)
	}
	b.WriteString(`"end":0}`)
	return b.Bytes()
}

// heapCost runs f and returns what it allocated in all, the most the heap
// held while it ran (sampled, so a lower bound: logged, not judged) and
// what stayed live after it while its result was kept (exact).
func heapCost(body []byte, f func([]byte) any) (total, peak, kept uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, sampled := make(chan struct{}), make(chan uint64)
	go func() {
		var most uint64
		for {
			select {
			case <-done:
				sampled <- most
				return
			default:
			}
			metrics.Read(sample)
			most = max(most, sample[0].Value.Uint64())
			time.Sleep(100 * time.Microsecond)
		}
	}()
	result := f(body)
	close(done)
	peak = max(<-sampled, before.HeapAlloc) - before.HeapAlloc
	runtime.ReadMemStats(&after)
	total = after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	runtime.KeepAlive(result)
	runtime.KeepAlive(body)
	return total, peak, kept
}

// TestMemoryPerBodyIsBounded: a body of the largest size each reader takes
// keeps at most a small multiple of that size, whatever its shape. What it
// allocated in all and the peak seen are logged: `go test -v -run
// TestMemoryPerBodyIsBounded ./handlers/` prints them.
func TestMemoryPerBodyIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates some hundred MiB")
	}
	const errorCap = 8 << 20 // RETRYAUDIT_MAX_ERROR_BODY's default
	for name, shape := range hostileShapes(errorCap) {
		t.Run("the error intake reads "+name, func(t *testing.T) {
			body := shape()
			total, peak, kept := heapCost(body, func(body []byte) any {
				b, _ := readErrorBody(bytes.NewReader(body), errorCap)
				return b
			})
			t.Logf("%-24s %5.1f MiB: kept %6.1f MiB (%4.1f×), peak seen %6.1f MiB, allocated %7.1f MiB",
				name, mib(len(body)), mib(kept), float64(kept)/float64(len(body)), mib(peak), mib(total))
			if kept > keepBudget+summaryBudget+1<<20 {
				t.Errorf("%d bytes kept for a body of %d", kept, len(body))
			}
		})
	}
	const maxBody = 1 << 20 // RETRYAUDIT_MAX_BODY's default
	for name, shape := range hostileShapes(maxBody) {
		t.Run("a claim body of "+name, func(t *testing.T) {
			body := shape()
			total, peak, kept := heapCost(body, func(body []byte) any {
				var fields map[string]json.RawMessage
				if decodeOne(body, &fields) != nil {
					return nil
				}
				o := &object{fields: fields, errs: audit.FieldErrors{}}
				return []any{o, o.ids("a")}
			})
			t.Logf("%-24s %5.1f MiB: kept %6.1f MiB (%4.1f×), peak seen %6.1f MiB, allocated %7.1f MiB",
				name, mib(len(body)), mib(kept), float64(kept)/float64(len(body)), mib(peak), mib(total))
			if kept > 4*maxBody {
				t.Errorf("%d bytes kept for a body of %d", kept, len(body))
			}
		})
	}
}

func mib[N int | uint64](n N) float64 { return float64(n) / (1 << 20) }
