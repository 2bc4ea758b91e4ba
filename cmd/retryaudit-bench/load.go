package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// request is one call the load sends; ok says that there was one to send.
type request func(i int64) (path, body string, ok bool)

// measured is what one load run saw.
type measured struct {
	n        int
	clients  int
	byStatus map[int]int
	lat      []time.Duration // sorted
	elapsed  time.Duration
	// For an open-loop run: answers 503 without Retry-After, and the
	// slowest 503.
	no503RetryAfter int
	slowest503      time.Duration
	transportErrs   int
}

func (m measured) rate() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.byStatus[http.StatusOK]+m.byStatus[http.StatusAccepted]) / m.elapsed.Seconds()
}

func (m measured) pct(p float64) time.Duration {
	if len(m.lat) == 0 {
		return 0
	}
	return m.lat[min(len(m.lat)-1, int(float64(len(m.lat))*p))]
}

func (m measured) others() string {
	var parts []string
	for code, n := range m.byStatus {
		if code != http.StatusOK && code != http.StatusAccepted {
			parts = append(parts, fmt.Sprintf("%d×%d", n, code))
		}
	}
	if m.transportErrs > 0 {
		parts = append(parts, fmt.Sprintf("%d×transport", m.transportErrs))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func newTransport(conns int) *http.Transport {
	return &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: 0,
		IdleConnTimeout: time.Minute, DisableCompression: true}
}

// send makes one call and returns its status, Retry-After and latency.
func send(ctx context.Context, c *http.Client, s *service, path, body string) (int, string, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start), nil
}

// closedLoop runs clients that each send their next call as soon as the last
// one is answered, for d or until next has nothing left.
func closedLoop(ctx context.Context, s *service, clients int, d time.Duration, next request) measured {
	client := &http.Client{Transport: newTransport(clients), Timeout: 60 * time.Second}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	var seq atomic.Int64
	var mu sync.Mutex
	m := measured{byStatus: map[int]int{}}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			codes := map[int]int{}
			errs := 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				path, body, ok := next(seq.Add(1))
				if !ok {
					break
				}
				code, _, took, err := send(ctx, client, s, path, body)
				if err != nil {
					errs++
					continue
				}
				codes[code]++
				lat = append(lat, took)
			}
			mu.Lock()
			defer mu.Unlock()
			m.lat = append(m.lat, lat...)
			for k, v := range codes {
				m.byStatus[k] += v
			}
			m.transportErrs += errs
		}()
	}
	wg.Wait()
	m.elapsed = time.Since(start)
	m.n = len(m.lat)
	slices.Sort(m.lat)
	return m
}

// openLoop offers rate calls a second for d whatever the answers, up to
// maxInFlight at once, as senders and n8n workers do under a burst.
func openLoop(ctx context.Context, s *service, rate float64, d time.Duration, maxInFlight int, next request) measured {
	client := &http.Client{Transport: newTransport(maxInFlight), Timeout: 60 * time.Second}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	var mu sync.Mutex
	m := measured{byStatus: map[int]int{}}
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	var i int64
	for t := start; t.Before(start.Add(d)) && ctx.Err() == nil; t = t.Add(interval) {
		time.Sleep(time.Until(t))
		i++
		path, body, ok := next(i)
		if !ok {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			m.byStatus[-1]++ // the generator itself was saturated: counted, not sent
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			code, retryAfter, took, err := send(ctx, client, s, path, body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				m.transportErrs++
				return
			}
			m.byStatus[code]++
			m.lat = append(m.lat, took)
			if code == http.StatusServiceUnavailable {
				if retryAfter == "" {
					m.no503RetryAfter++
				}
				m.slowest503 = max(m.slowest503, took)
			}
		}()
	}
	wg.Wait()
	m.elapsed = time.Since(start)
	m.n = len(m.lat)
	slices.Sort(m.lat)
	return m
}
