package main

import (
	"bufio"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// statements is what the service's retryaudit_db_statement_duration_seconds
// said at one moment: per op, how many round trips and their total seconds.
type statements map[string]struct{ n, sum float64 }

// Batch sizes are kept beside them under "batch " and the kind.
var statementLine = regexp.MustCompile(`^retryaudit_(db_statement_duration_seconds|batch_size)_(sum|count)\{(?:op|kind)="([^"]*)"\} (\S+)$`)

// scrapeStatements reads the service's metrics; a failure reads as none.
func (s *service) scrapeStatements() statements {
	out := statements{}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := statementLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[3]
		if m[1] == "batch_size" {
			name = "batch " + name
		}
		v, _ := strconv.ParseFloat(m[4], 64)
		e := out[name]
		if m[2] == "sum" {
			e.sum = v
		} else {
			e.n = v
		}
		out[name] = e
	}
	return out
}

// profile says, per request answered, how many round trips the database
// saw between before and after, how long they took in all, and the five
// that took longest: where a request's time in the database goes. It also
// returns the round trips per batch (0 when the requests were not batched).
func profile(before, after statements, requests int) (string, float64) {
	if requests == 0 {
		return "", 0
	}
	type op struct {
		name   string
		n, sum float64
	}
	var ops []op
	var n, sum float64
	var batches []string
	var batchCount float64
	for name, a := range after {
		b := before[name]
		o := op{name, a.n - b.n, a.sum - b.sum}
		if kind, ok := strings.CutPrefix(name, "batch "); ok && o.n > 0 {
			batches = append(batches, fmt.Sprintf("%s %.1f", kind, o.sum/o.n))
			batchCount += o.n
			continue
		}
		if o.n > 0 {
			ops = append(ops, o)
			n, sum = n+o.n, sum+o.sum
		}
	}
	slices.SortFunc(ops, func(x, y op) int { return -cmpFloat(x.sum, y.sum) })
	var top []string
	for _, o := range ops[:min(5, len(ops))] {
		top = append(top, fmt.Sprintf("%s %.2f×%.2f ms", o.name, o.n/float64(requests), 1000*o.sum/o.n))
	}
	slices.Sort(batches)
	perBatch := 0.0
	if batchCount > 0 {
		perBatch = n / batchCount
	}
	return fmt.Sprintf("mean batch: %s; database per request: %.2f round trips, %.2f ms; per batch: %.1f round trips; longest (per request × mean): %s",
		strings.Join(batches, ", "), n/float64(requests), 1000*sum/float64(requests), perBatch, strings.Join(top, ", ")), perBatch
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var shedLine = regexp.MustCompile(`^retryaudit_http_request_duration_seconds_(bucket|count)\{(.*)\} (\S+)$`)

// shedTimes reads from the service's own histogram how many claims it
// answered 503, and how many of those took it longer than a second: what
// the service did, apart from the time the generator and the kernel added
// on a machine they share.
func (s *service) shedTimes() (total, overOneSecond float64) {
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var within float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := shedLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.Contains(m[2], `route="/v1/claims"`) || !strings.Contains(m[2], `status="503"`) {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		switch {
		case m[1] == "count":
			total = v
		case strings.Contains(m[2], `le="1"`):
			within = v
		}
	}
	return total, total - within
}
